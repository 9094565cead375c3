"""Node pools, claim templates and pods for the e2e tests, and the checks on their outcome.

The devices come from loadtest/generator.py (8 GPUs + 8 RDMA NICs per node, 2
NUMA nodes, 4 PCIe roots, a share of partitionable nodes), so the e2e
cluster and the benchmarks describe the same hardware. The harness acts as
the DRA driver: it publishes the ResourceSlices and marks the Nodes Ready.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from loadtest.generator import PCIE_ROOT, SHAPES, generate_cluster
from tests.e2e.cluster import make_node_ready
from tests.e2e.kube import Kube, wait_for

POD_CLAIM: Final = "devices"


def add_pool(kube: Kube, *, prefix: str, nodes: int, seed: int = 0) -> list[str]:
    """Create `nodes` Ready nodes named `<prefix>-...` with their ResourceSlices."""
    names: list[str] = []
    for obj in generate_cluster(nodes=nodes, seed=seed):
        kind = obj["kind"]
        if kind == "DeviceClass":
            continue
        obj = _renamed(obj, prefix)
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


__all__ = ["PCIE_ROOT", "add_pool", "add_templates", "check_allocation", "claim",
           "exclusive_devices", "pod", "pod_claim", "published_devices", "wait_bound"]
