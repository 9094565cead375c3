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


def nominated(name: str, node: str, cpu: str, *, deleting: bool = False) -> dict[str, object]:
    pod = raw(name, "", cpu, deleting=deleting)
    pod["status"] = {"nominatedNodeName": node}
    return pod


def test_pods_nominated_to_a_node_are_indexed_there_until_bound_or_deleting() -> None:
    inv = Inventory()
    inv.upsert("Pod", parse_pod_usage(nominated("a", "n1", "1")))
    inv.upsert("Pod", parse_pod(nominated("b", "n1", "2") | {"spec": {
        "resourceClaims": [{"name": "dev", "resourceClaimName": "b-claim"}],
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}))
    held = inv.usage.nominated("n1")
    assert {k: u.requests.milli_cpu for k, u in held.items()} == {"ns/a": 1000, "ns/b": 2000}
    assert inv.usage.on("n1").requested.milli_cpu == 0
    inv.upsert("Pod", parse_pod_usage(raw("a", "n1", "1")))  # bound
    inv.upsert("Pod", parse_pod_usage(nominated("b", "n1", "2", deleting=True)))
    assert not inv.usage.nominated("n1") and inv.usage.on("n1").requested.milli_cpu == 1000
    inv.upsert("Pod", parse_pod_usage(nominated("c", "n2", "1")))
    for _ in inv.replacing_parsed("Pod", [parse_pod_usage(raw("a", "n1", "1"))]):
        pass
    assert not inv.usage.nominated("n2")


def test_a_pending_pod_nominated_nowhere_keeps_nothing_but_its_name() -> None:
    usage = parse_pod_usage(raw("a", "", "1"))
    assert usage.requests.milli_cpu == 0 and usage.priority is None


def test_changes_are_told_per_node_and_for_pods_with_claims_everywhere() -> None:
    inv = Inventory()
    inv.upsert("Pod", parse_pod_usage(raw("a", "n1", "1")))
    start = inv.usage.sequence
    assert not inv.usage.changed_since(start, ["n1", "n2"])
    inv.upsert("Pod", parse_pod_usage(raw("b", "n2", "1")))
    assert inv.usage.changed_since(start, ["n2"]) and not inv.usage.changed_since(start, ["n1"])
    start = inv.usage.sequence
    inv.upsert("Pod", parse_pod_usage(nominated("c", "n3", "1")))
    assert inv.usage.changed_since(start, ["n3"]) and not inv.usage.changed_since(start, ["n1"])
    start = inv.usage.sequence
    inv.upsert("Pod", parse_pod(raw("d", "n4", "1", claims=True)))
    assert inv.usage.changed_since(start, ["n1"])  # a pod with claims: any node's victims
    start = inv.usage.sequence
    inv.delete("Pod", "ns/a")
    assert inv.usage.changed_since(start, ["n1"])


def test_a_bound_pod_keeps_what_choosing_it_as_a_victim_reads() -> None:
    pod = raw("a", "n1", "1")
    pod["metadata"]["labels"] = {"app": "web"}  # type: ignore[index]
    pod["spec"]["priority"] = 7  # type: ignore[index]
    pod["spec"]["priorityClassName"] = "low"  # type: ignore[index]
    pod["status"] = {"startTime": "2026-01-01T00:00:00Z"}
    usage = parse_pod_usage(pod)
    assert (usage.priority, usage.priority_class_name, dict(usage.labels)) == (
        7, "low", {"app": "web"})
    assert usage.start_time is not None
