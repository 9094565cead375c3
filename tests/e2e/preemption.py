"""Preemption scenarios on the real control plane, shared by tests/e2e and
loadtest/bench_preemption.py: priority classes, claim templates, a pool
filled with low-priority 1-GPU pods, and the kubelet's part in deletions
(there is no kubelet: a terminating pod of the pool is removed with grace 0,
as a kubelet would once its containers stopped).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import httpx

from loadtest.generator import GPU_CLASS, NIC_CLASS, PCIE_ROOT, SHAPES
from tests.e2e.cluster import Cluster, drax_probe_url
from tests.e2e.kube import ApiError, Kube, wait_for
from tests.e2e.workload import POD_CLAIM, pod_claim, wait_bound

LOW, HIGH, NEVER = "e2e-low", "e2e-high", "e2e-high-never"
TEMPLATES: Final = {
    "one": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": 1}}]}},
    "pair": {"devices": {
        "requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": 2}},
                     {"name": "nic", "exactly": {"deviceClassName": NIC_CLASS, "count": 1}}],
        "constraints": [{"requests": ["gpu", "nic"], "matchAttribute": PCIE_ROOT}]}},
    "two": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": 2}}]}},
    "mig-1g": dict(SHAPES["mig-1g"]),
    "eight": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": 8}}]}},
}


def priority_classes(kube: Kube) -> None:
    for name, value, policy in ((LOW, 100, None), (HIGH, 100000, None),
                                (NEVER, 100000, "Never")):
        body: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                "metadata": {"name": name}, "value": value}
        if policy:
            body["preemptionPolicy"] = policy
        try:
            kube.create(body)
        except ApiError as exc:
            if exc.status != 409:
                raise


def templates(kube: Kube, prefix: str) -> None:
    for shape, spec in TEMPLATES.items():
        kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                     "metadata": {"name": f"{prefix}-{shape}", "namespace": "default"},
                     "spec": {"spec": spec}})


def pod(prefix: str, name: str, shape: str, *, priority_class: str,
        scheduler: str = "drax") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{prefix}-{name}", "namespace": "default",
                         "labels": {"e2e/pool": prefix}},
            "spec": {"schedulerName": scheduler, "priorityClassName": priority_class,
                     "nodeSelector": {"e2e/pool": prefix},
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"claims": [{"name": POD_CLAIM}]}}],
                     "resourceClaims": [{"name": POD_CLAIM,
                                         "resourceClaimTemplateName": f"{prefix}-{shape}"}]}}


@dataclass(slots=True)
class Kubelet:
    """Plays the kubelet of the pool's nodes for deletions, and remembers each
    pod it removed: its node, DisruptionTarget condition and devices."""

    kube: Kube
    prefix: str
    removed: dict[str, dict[str, Any]] = field(default_factory=dict)

    def step(self) -> None:
        for p in self.kube.list("Pod", "default", selector=f"e2e/pool={self.prefix}"):
            meta = p["metadata"]
            if not meta.get("deletionTimestamp") or meta["name"] in self.removed:
                continue
            conditions = {c["type"]: c for c in p.get("status", {}).get("conditions", [])}
            devices = []
            try:
                claim = pod_claim(self.kube, p)
                devices = [(r["driver"], r["pool"], r["device"]) for r in
                           claim["status"]["allocation"]["devices"]["results"]]
            except (ApiError, KeyError, TimeoutError):
                pass
            self.removed[meta["name"]] = {"node": p["spec"].get("nodeName"),
                                          "condition": conditions.get("DisruptionTarget"),
                                          "devices": devices}
            self.kube.delete("Pod", meta["name"], "default", grace_period_seconds=0)

    def until(self, what: str, check: Callable[[], Any], *, timeout: float = 120) -> Any:
        def stepped() -> Any:
            self.step()
            return check()
        return wait_for(what, stepped, timeout=timeout, interval=0.3)


def fill(kube: Kube, prefix: str, nodes: list[str]) -> list[str]:
    names = []
    for i in range(8 * len(nodes)):
        body = pod(prefix, f"low-{i:02d}", "one", priority_class=LOW)
        kube.create(body)
        names.append(body["metadata"]["name"])
    wait_bound(kube, names, timeout=180)
    return names


def bound_node(kube: Kube, name: str) -> str | None:
    try:
        return kube.get("Pod", name, "default")["spec"].get("nodeName")
    except ApiError:
        return None


def alive(kube: Kube, prefix: str) -> list[dict[str, Any]]:
    return [p for p in kube.list("Pod", "default", selector=f"e2e/pool={prefix}")
            if not p["metadata"].get("deletionTimestamp")]


def devices_of(kube: Kube, name: str) -> list[tuple[str, str, str]]:
    claim = pod_claim(kube, kube.get("Pod", name, "default"))
    return [(r["driver"], r["pool"], r["device"])
            for r in claim["status"]["allocation"]["devices"]["results"]]


def root_of(published: dict[tuple[str, str, str], dict[str, Any]],
            device: tuple[str, str, str]) -> Any:
    attrs = published[device].get("attributes", {})
    value = attrs.get(PCIE_ROOT) or attrs.get(PCIE_ROOT.rsplit("/", 1)[-1]) or {}
    return value.get("string")


def drax_metric(cluster: Cluster, name: str, *, replica: int = 0, **labels: str) -> float:
    """Metric `name` with exactly `labels` as replica `replica`'s drax serves it."""
    text = httpx.get(f"{drax_probe_url(cluster, replica)}/metrics", timeout=10).text
    want = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
                   if labels else "")
    for line in text.splitlines():
        if line.startswith(want + " "):
            return float(line.split()[-1])
    return 0.0
