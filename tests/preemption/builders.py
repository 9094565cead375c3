"""Full clusters for preemption tests: nodes, pods holding devices, a preemptor."""

from __future__ import annotations

from typing import Any

from app.extender import Extender
from app.features import FeatureGates
from app.inventory import KINDS, Inventory
from app.preemption import NodePreemption, VictimSearch
from tests.inventory.objects import claim, exactly, result


def holder(name: str, node: str, devices: list[str], *, priority: int = 0,
           namespace: str = "default", request: str = "gpu", deleting: bool = False,
           phase: str = "Running", labels: dict[str, str] | None = None,
           start: str | None = None, claim_name: str | None = None,
           sharers: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """A running pod `name` on `node` holding one allocated claim of `devices`
    (ids "driver/pool/device"); `sharers`: other pods reserving the same claim
    (created by their own `holder(..., claim_name=...)` call without devices)."""
    cname = claim_name or f"{name}-claim"
    out: list[dict[str, Any]] = []
    if devices:
        reserved = [{"resource": "pods", "name": n, "uid": f"uid-{n}"}
                    for n in (name, *sharers)]
        out.append(claim(cname, namespace=namespace,
                         requests=[exactly(request, request, count=len(devices))],
                         results=[result(request, d) for d in devices],
                         reserved_for=reserved))
    pod: dict[str, Any] = {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                     "labels": labels or {}},
        "spec": {"nodeName": node, "priority": priority,
                 "resourceClaims": [{"name": "dev", "resourceClaimName": cname}]},
        "status": {"phase": phase, "startTime": start or "2026-01-01T00:00:00Z"},
    }
    if deleting:
        pod["metadata"]["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    out.append(pod)
    return out


def preemptor(name: str = "p", *, priority: int = 1000, template: str = "want",
              policy: str | None = None, namespace: str = "default") -> dict[str, Any]:
    spec: dict[str, Any] = {"priority": priority, "schedulerName": "drax",
                            "resourceClaims": [{"name": "dev",
                                                "resourceClaimTemplateName": template}]}
    if policy:
        spec["preemptionPolicy"] = policy
    return {"kind": "Pod", "metadata": {"name": name, "namespace": namespace,
                                        "uid": f"uid-{name}"}, "spec": spec}


def pdb(name: str, labels: dict[str, str], allowed: int,
        namespace: str = "default") -> dict[str, Any]:
    return {"kind": "PodDisruptionBudget", "apiVersion": "policy/v1",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": labels}},
            "status": {"disruptionsAllowed": allowed}}


def load(*objs: dict[str, Any] | list[dict[str, Any]]) -> Inventory:
    inv = Inventory()
    for obj in objs:
        for o in obj if isinstance(obj, list) else [obj]:
            inv.apply(o["kind"], "ADDED", o)
    for kind in KINDS:
        inv.mark_synced(kind)
    return inv


def searcher(inv: Inventory, *, mode: str = "allocator", **kwargs: Any
             ) -> tuple[Extender, VictimSearch]:
    ext = Extender(inv, features=FeatureGates(), mode=mode, file_mode=True)
    return ext, VictimSearch.of(ext, **kwargs)


def answer(found: NodePreemption) -> tuple[Any, ...]:
    """What a node's answer decides: the node, its victims, its topology score
    and the devices the preemptor gets."""
    return (found.node, sorted(v.pod.name for v in found.victims), found.score,
            sorted(r.device_id for ca in found.allocation for r in ca.allocation.results))
