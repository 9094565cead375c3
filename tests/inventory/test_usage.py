"""Every live pod's requests, per node: pods with claims and pods without alike."""

from __future__ import annotations

from app.inventory import Inventory
from app.model.parse import parse_pod, parse_pod_usage
from app.model.requests import Resources


def raw(name: str, node: str, cpu: str, *, claims: bool = False,
        deleting: bool = False) -> dict[str, object]:
    meta: dict[str, object] = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    spec: dict[str, object] = {"nodeName": node, "containers": [
        {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    if claims:
        spec["resourceClaims"] = [{"name": "dev", "resourceClaimName": f"{name}-claim"}]
    return {"metadata": meta, "spec": spec}


def test_sums_follow_puts_deletes_and_terminating_pods() -> None:
    inv = Inventory()
    inv.upsert("Pod", parse_pod_usage(raw("a", "n1", "1")))
    inv.upsert("Pod", parse_pod(raw("b", "n1", "2", claims=True)))
    inv.upsert("Pod", parse_pod_usage(raw("c", "n2", "4")))
    held = inv.usage.on("n1")
    assert held.requested == Resources(milli_cpu=3000) and set(held.pods) == {"ns/a", "ns/b"}
    inv.upsert("Pod", parse_pod_usage(raw("a", "n1", "1", deleting=True)))
    held = inv.usage.on("n1")
    assert (held.requested.milli_cpu, held.going.milli_cpu, held.going_count) == (3000, 1000, 1)
    inv.delete("Pod", "ns/b")
    assert inv.usage.on("n1").requested.milli_cpu == 1000
    assert inv.usage.on("n2").pods["ns/c"].uid == "uid-c"


def test_a_relist_drops_the_pods_it_no_longer_holds() -> None:
    inv = Inventory()
    for name in ("a", "b"):
        inv.upsert("Pod", parse_pod_usage(raw(name, "n1", "1")))
    inv.upsert("Pod", parse_pod(raw("d", "n1", "1", claims=True)))
    for _ in inv.replacing_parsed("Pod", [parse_pod_usage(raw("a", "n1", "1"))]):
        pass
    assert set(inv.usage.on("n1").pods) == {"ns/a"} and inv.pod("ns/d") is None


def test_a_pod_kept_whole_then_seen_without_claims_is_only_counted() -> None:
    inv = Inventory()
    inv.upsert("Pod", parse_pod(raw("a", "n1", "1", claims=True)))
    inv.upsert("Pod", parse_pod_usage(raw("a", "n1", "2")))
    assert inv.pod("ns/a") is None and inv.usage.on("n1").requested.milli_cpu == 2000
