"""Node pools, claim templates and pods for the e2e tests, and the checks on their outcome.

The devices come from loadtest/generator.py (8 GPUs + 8 RDMA NICs per node, 2
NUMA nodes, 4 PCIe roots, a share of partitionable nodes), so the e2e
cluster and the benchmarks describe the same hardware. The harness acts as
the DRA driver: it publishes the ResourceSlices and marks the Nodes Ready.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from loadtest.generator import (
    GPU_DRIVER,
    NIC_DRIVER,
    PCIE_ROOT,
    SHAPES,
    STANDARD_NUMA,
    generate_cluster,
)
from tests.e2e.cluster import make_node_ready
from tests.e2e.kube import Kube, wait_for

POD_CLAIM: Final = "devices"


def pool_objects(*, prefix: str, nodes: int, seed: int = 0) -> list[dict[str, Any]]:
    """The Nodes and ResourceSlices of a generated pool, named `<prefix>-...`."""
    return [_renamed(obj, prefix) for obj in generate_cluster(nodes=nodes, seed=seed)
            if obj["kind"] != "DeviceClass"]


def add_pool(kube: Kube, *, prefix: str, nodes: int, seed: int = 0) -> list[str]:
    """Create `nodes` Ready nodes named `<prefix>-...` with their ResourceSlices."""
    names: list[str] = []
    for obj in pool_objects(prefix=prefix, nodes=nodes, seed=seed):
        kind = obj["kind"]
        if kind == "Node":
            names.append(obj["metadata"]["name"])
            make_node_ready(kube, obj["metadata"]["name"], labels=obj["metadata"]["labels"])
        else:
            obj["metadata"].pop("uid", None)
            kube.create(obj)
    return names


def _renamed(obj: dict[str, Any], prefix: str) -> dict[str, Any]:
    meta = obj["metadata"]
    if obj["kind"] == "Node":
        name = f"{prefix}-{meta['name']}"
        meta["labels"]["kubernetes.io/hostname"] = name
        meta["labels"]["e2e/pool"] = prefix
        return {**obj, "metadata": {**meta, "name": name}}
    spec = obj["spec"]
    node = f"{prefix}-{spec['nodeName']}"
    return {**obj, "metadata": {**meta, "name": f"{prefix}-{meta['name']}"},
            "spec": {**spec, "nodeName": node, "pool": {**spec["pool"], "name": node}}}


def add_templates(kube: Kube, *, prefix: str) -> dict[str, str]:
    """One ResourceClaimTemplate per loadtest shape; shape -> template name."""
    names = {}
    for shape, spec in SHAPES.items():
        name = f"{prefix}-{shape}"
        kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                     "metadata": {"name": name, "namespace": "default"},
                     "spec": {"spec": spec}})
        names[shape] = name
    return names


def claim(name: str, shape: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"}, "spec": SHAPES[shape]}


def pod(name: str, *, scheduler: str, template: str | None = None, claim_name: str | None = None,
        node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    ref = ({"resourceClaimTemplateName": template} if template
           else {"resourceClaimName": claim_name})
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"claims": [{"name": POD_CLAIM}]}}],
        "resourceClaims": [{"name": POD_CLAIM, **ref}],
        "terminationGracePeriodSeconds": 0,
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def wait_bound(kube: Kube, names: Iterable[str], *, timeout: float = 120) -> dict[str, dict]:
    """Wait until every pod has spec.nodeName; return name -> Pod."""
    wanted = set(names)

    def bound() -> dict[str, dict] | None:
        pods = {p["metadata"]["name"]: p for p in kube.list("Pod", "default")
                if p["metadata"]["name"] in wanted}
        if len(pods) == len(wanted) and all(p["spec"].get("nodeName") for p in pods.values()):
            return pods
        return None

    return wait_for(f"pods {sorted(wanted)} bound", bound, timeout=timeout)


def pod_claim(kube: Kube, pod_obj: dict[str, Any]) -> dict[str, Any]:
    """The ResourceClaim behind the pod's one claim (generated from a template or named)."""
    ref = pod_obj["spec"]["resourceClaims"][0]
    if ref.get("resourceClaimName"):
        return kube.get("ResourceClaim", ref["resourceClaimName"], "default")
    name = pod_obj["metadata"]["name"]
    statuses = wait_for(f"claim status of {name}", lambda: kube.get(
        "Pod", name, "default").get("status", {}).get("resourceClaimStatuses"))
    return kube.get("ResourceClaim", statuses[0]["resourceClaimName"], "default")


def check_allocation(claim_obj: dict[str, Any], *, pod_obj: dict[str, Any],
                     devices_by_key: dict[tuple[str, str, str], dict[str, Any]]) -> None:
    """The claim is allocated on the pod's node, reserved for it, and meets its constraints."""
    name = claim_obj["metadata"]["name"]
    allocation = claim_obj.get("status", {}).get("allocation")
    assert allocation, f"claim {name} has no status.allocation"
    node = pod_obj["spec"]["nodeName"]
    terms = allocation["nodeSelector"]["nodeSelectorTerms"]
    fields = [f for t in terms for f in t.get("matchFields", [])]
    assert any(f["key"] == "metadata.name" and node in f["values"] for f in fields), (
        f"claim {name} allocated for {terms}, pod on {node}")
    reserved = {r["uid"] for r in claim_obj["status"].get("reservedFor", [])}
    assert pod_obj["metadata"]["uid"] in reserved, f"claim {name} not reserved for its pod"
    results = allocation["devices"]["results"]
    for result in results:
        assert result["pool"] == node, f"claim {name} got {result} from another node"
    for constraint in claim_obj["spec"]["devices"].get("constraints", []):
        attr = constraint.get("matchAttribute")
        members = [r for r in results if r["request"] in constraint.get("requests", [])]
        values = {_attribute(devices_by_key[(r["driver"], r["pool"], r["device"])], attr)
                  for r in members}
        assert len(values) == 1 and None not in values, (
            f"claim {name}: {attr} differs across (or is missing on) {members}: {values}")


def _attribute(device: dict[str, Any], qualified: str) -> Any:
    short = qualified.rpartition("/")[2]
    attrs = device.get("attributes", {})
    value = attrs.get(qualified) or attrs.get(short) or {}
    return next(iter(value.values()), None) if value else None


def published_devices(kube: Kube) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(driver, pool, device) -> device, from every ResourceSlice."""
    out = {}
    for s in kube.list("ResourceSlice"):
        spec = s["spec"]
        for device in spec.get("devices", []):
            out[(spec["driver"], spec["pool"]["name"], device["name"])] = device
    return out


def exclusive_devices(claims: Iterable[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """Every allocated device of claims that are not shared-capacity ones, with repeats."""
    taken = []
    for c in claims:
        for r in c.get("status", {}).get("allocation", {}).get("devices", {}).get("results", []):
            if not r.get("shareID"):
                taken.append((r["driver"], r["pool"], r["device"]))
    return taken


# Waves of shapes, each bound before the next is created. Shared GPUs (1 node in 8)
# and MIG (2 nodes in 8) go first and 8-GPU pods next: an 8-GPU pod on a shared
# or partitionable node takes every full GPU (and the counters of every MIG
# slice) there, and neither drax's score nor first fit keeps it off them, so in
# one wave the outcome would depend on the order the claims were created in.
WAVES: Final = (("shared-gpu", "mig-1g"), ("8gpu",),
                tuple(s for s in SHAPES if s not in ("shared-gpu", "mig-1g", "8gpu")))


def schedule_every_shape(kube: Kube, *, prefix: str, scheduler: str, pool: str
                         ) -> dict[str, dict[str, Any]]:
    """Two pods per loadtest shape through the pool's templates, and one on a named
    ResourceClaim, all kept to `pool` by nodeSelector, in WAVES (the named claim's
    pod with the last). Returns name -> bound Pod."""
    bound: dict[str, dict[str, Any]] = {}
    for shapes in WAVES:
        names = []
        for shape in shapes:
            for i in range(2):
                name = f"{prefix}-{shape}-{i}"
                kube.create(pod(name, scheduler=scheduler, template=f"{pool}-{shape}",
                                node_selector={"e2e/pool": pool}))
                names.append(name)
        if shapes is WAVES[-1]:
            kube.create(claim(f"{prefix}-named", "2gpu-1nic-same-root"))
            kube.create(pod(f"{prefix}-named", scheduler=scheduler,
                            claim_name=f"{prefix}-named", node_selector={"e2e/pool": pool}))
            names.append(f"{prefix}-named")
        bound.update(wait_bound(kube, names))
    return bound


def check_workload(kube: Kube, pods: dict[str, dict[str, Any]], *, nodes: Iterable[str]
                   ) -> list[dict[str, Any]]:
    """Every pod on one of `nodes` with a valid allocation, no device in two claims;
    returns the pods' claims."""
    allowed = set(nodes)
    devices = published_devices(kube)
    claims = []
    for name, pod_obj in pods.items():
        assert pod_obj["spec"]["nodeName"] in allowed, (name, pod_obj["spec"]["nodeName"])
        claim_obj = pod_claim(kube, pod_obj)
        check_allocation(claim_obj, pod_obj=pod_obj, devices_by_key=devices)
        claims.append(claim_obj)
    taken = exclusive_devices(claims)
    assert len(taken) == len(set(taken)), "a device is in two claims"
    return claims


def create_too_big(kube: Kube, name: str, *, scheduler: str, pool: str) -> None:
    """A claim for 9 GPUs (nodes have 8) and its pod: it can never fit."""
    spec = {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "count": 9}}]}}
    kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": name, "namespace": "default"}, "spec": spec})
    kube.create(pod(name, scheduler=scheduler, claim_name=name, node_selector={"e2e/pool": pool}))


def unschedulable_message(kube: Kube, name: str) -> str | None:
    """The message of the pod's PodScheduled=False condition, None while there is none."""
    conditions = kube.get("Pod", name, "default").get("status", {}).get("conditions", [])
    for c in conditions:
        if c["type"] == "PodScheduled" and c["status"] == "False":
            return str(c.get("message", ""))
    return None


@dataclass(slots=True)
class PlacementQuality:
    """Device locality of placed pods, from their claims' allocations and the slices.

    A GPU is aligned when a NIC of the same pod sits on its PCIe root; GPU+NIC
    pods are the ones that got both. A device's NUMA node is the one it publishes
    or, where it publishes none (NVIDIA full GPUs), that of a device on the same
    node and PCIe root that does."""

    gpu_nic_pods: int = 0
    gpus_in_gpu_nic_pods: int = 0
    aligned_gpus: int = 0
    multi_device_pods: int = 0
    single_numa_pods: int = 0

    @property
    def aligned_share(self) -> float | None:
        return self.aligned_gpus / self.gpus_in_gpu_nic_pods if self.gpus_in_gpu_nic_pods else None

    @property
    def single_numa_share(self) -> float | None:
        return self.single_numa_pods / self.multi_device_pods if self.multi_device_pods else None


def placement_quality(claims: Iterable[dict[str, Any]],
                      devices_by_key: dict[tuple[str, str, str], dict[str, Any]]
                      ) -> PlacementQuality:
    numa_of_root = {(pool, _attribute(d, PCIE_ROOT)): numa
                    for (driver, pool, _), d in devices_by_key.items()
                    if (numa := _numa(d, driver)) is not None}

    def numa_of(key: tuple[str, str, str]) -> Any:
        device = devices_by_key[key]
        own = _numa(device, key[0])
        return own if own is not None else numa_of_root.get((key[1], _attribute(device, PCIE_ROOT)))

    out = PlacementQuality()
    for c in claims:
        results = c.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])
        keys = [(r["driver"], r["pool"], r["device"]) for r in results]
        gpus = [devices_by_key[k] for k in keys if k[0] == GPU_DRIVER]
        nic_roots = {_attribute(devices_by_key[k], PCIE_ROOT) for k in keys if k[0] == NIC_DRIVER}
        if gpus and nic_roots:
            out.gpu_nic_pods += 1
            out.gpus_in_gpu_nic_pods += len(gpus)
            out.aligned_gpus += sum(_attribute(g, PCIE_ROOT) in nic_roots for g in gpus)
        if len(keys) > 1:
            out.multi_device_pods += 1
            numas = {numa_of(k) for k in keys}
            out.single_numa_pods += len(numas) == 1 and None not in numas
    return out


def _numa(device: dict[str, Any], driver: str) -> Any:
    attrs = device.get("attributes", {})
    value = attrs.get(STANDARD_NUMA) or attrs.get(f"{driver}/numaNode") or {}
    return next(iter(value.values()), None) if value else None


__all__ = [
    "PCIE_ROOT",
    "PlacementQuality",
    "add_pool",
    "add_templates",
    "check_allocation",
    "check_workload",
    "claim",
    "create_too_big",
    "exclusive_devices",
    "placement_quality",
    "pod",
    "pod_claim",
    "published_devices",
    "schedule_every_shape",
    "unschedulable_message",
    "wait_bound",
]
