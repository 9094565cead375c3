"""The room victims over random nodes, against brute force: when `NodeFit.room`
refuses, even every lower-priority pod going leaves the preemptor short; when
it answers, the room victims are exactly those kube-scheduler's
SelectVictimsOnNode leaves, worked out here on its own terms: every lower-priority
running pod beside the device victims gone, then each put back in turn (those
whose going violates the PodDisruptionBudget first, then the others, each group
most important first) and left back when the preemptor still fits."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.inventory import Inventory
from app.model.parse import parse_pod, parse_pod_usage
from app.model.requests import Resources
from app.preemption.fit import NodeFit, lacking
from tests.preemption.builders import answer, load, searcher
from tests.preemption.test_properties import build, cluster_st

P = 100  # the preemptor's priority

pod_strategy = st.fixed_dictionaries({
    "cpu": st.integers(0, 4), "memory": st.integers(0, 3),
    "priority": st.sampled_from([0, 5, 50, 99, P, 200]),
    "deleting": st.booleans(), "labelled": st.booleans(), "device": st.booleans(),
    "start": st.integers(0, 3)})


def raw_pod(i: int, spec: dict[str, Any], node: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"p{i}", "namespace": "ns", "uid": f"u{i}",
                            "labels": {"app": "x"} if spec["labelled"] else {}}
    if spec["deleting"]:
        meta["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    return {"metadata": meta, "spec": {
        "nodeName": node, "priority": spec["priority"],
        "containers": [{"name": "c", "resources": {"requests": {
            "cpu": str(spec["cpu"]), "memory": f"{spec['memory']}Gi"}}}]},
        "status": {"phase": "Running", "startTime": f"2026-01-01T00:00:0{spec['start']}Z"}}


@settings(max_examples=150, deadline=None)
@given(pods=st.lists(pod_strategy, max_size=7), cpu=st.integers(1, 12),
       memory=st.integers(1, 8), max_pods=st.integers(2, 8), want_cpu=st.integers(0, 6),
       want_memory=st.integers(0, 4), allowed=st.integers(0, 2))
def test_room_victims_are_those_select_victims_on_node_leaves(
        pods: list[dict[str, Any]], cpu: int, memory: int, max_pods: int, want_cpu: int,
        want_memory: int, allowed: int) -> None:
    inv = Inventory()
    inv.apply("Node", "ADDED", {"metadata": {"name": "n1"}, "status": {"allocatable": {
        "cpu": str(cpu), "memory": f"{memory}Gi", "pods": str(max_pods)}}})
    inv.apply("PodDisruptionBudget", "ADDED", {
        "metadata": {"name": "b", "namespace": "ns"},
        "spec": {"selector": {"matchLabels": {"app": "x"}}},
        "status": {"disruptionsAllowed": allowed}})
    parsed = [parse_pod_usage(raw_pod(i, spec, "n1")) for i, spec in enumerate(pods)]
    for usage in parsed:
        inv.upsert("Pod", usage)
    preemptor = parse_pod({"metadata": {"name": "me", "namespace": "ns", "uid": "me"},
                           "spec": {"priority": P, "containers": [{"name": "c", "resources": {
                               "requests": {"cpu": str(want_cpu),
                                            "memory": f"{want_memory}Gi"}}}]}})
    devices = [u for u, spec in zip(parsed, pods, strict=True)
               if spec["device"] and spec["priority"] < P and not spec["deleting"]]
    found = NodeFit(preemptor, inv).room("n1", devices)
    node = inv.node_state("n1")
    assert node is not None and node.view.node.resources is not None
    size = node.view.node.resources

    def fits(gone: set[str]) -> bool:
        staying = [u for u in parsed if not u.deleting and u.uid not in gone]
        used = Resources()
        for u in staying:
            used = used + u.requests
        return lacking(preemptor.requests, size, used, len(staying)) is None

    device_uids = {u.uid for u in devices}
    eligible = {u.uid for u, spec in zip(parsed, pods, strict=True)
                if spec["priority"] < P and not spec["deleting"]} - device_uids
    if isinstance(found, str):
        assert not fits(device_uids | eligible)
        return
    assert {pod.uid for pod, _, _ in found} == select_victims(
        parsed, pods, device_uids, eligible, allowed, fits)


def select_victims(parsed: list[Any], pods: list[dict[str, Any]], device_uids: set[str],
                   eligible: set[str], allowed: int, fits: Any) -> set[str]:
    """SelectVictimsOnNode's reprieve over the pods beside the device victims,
    with the one budget of the test ("app": "x", `allowed` disruptions)."""
    spec_of = {u.uid: spec for u, spec in zip(parsed, pods, strict=True)}

    def importance(u: Any) -> tuple[int, int, str]:
        return (-spec_of[u.uid]["priority"], spec_of[u.uid]["start"], u.key)

    violating = set()
    budget = allowed
    for u in sorted((u for u in parsed if u.uid in device_uids | eligible), key=importance):
        if spec_of[u.uid]["labelled"]:
            budget -= 1
            if budget < 0:
                violating.add(u.uid)
    others = sorted((u for u in parsed if u.uid in eligible), key=importance)
    gone = device_uids | eligible
    for u in [*(u for u in others if u.uid in violating),
              *(u for u in others if u.uid not in violating)]:
        if fits(gone - {u.uid}):
            gone = gone - {u.uid}
    return gone - device_uids


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster_st, st.sampled_from(["allocator", "advisor"]), st.data())
def test_with_room_victims_the_best_node_alone_is_still_the_best_of_every_node(
        spec: dict[str, Any], mode: str, data: st.DataObject) -> None:
    """Random full clusters of the device search's properties, with cpu: every
    node sized, every pod taking some, and lower pods without claims beside
    them. The best node alone (nodes whose floor cannot win left out) is the
    full search's best, and on every node answered the preemptor fits its cpu
    once the victims are gone."""
    objs, _ = build({**spec, "nodes": [ns for ns, copies in spec["nodes"]
                                       for _ in range(copies)]})
    cpus = st.integers(0, 3)
    extra: list[dict[str, Any]] = []
    for obj in objs:
        if obj["kind"] == "Node":
            obj["status"] = {"allocatable": {"cpu": str(data.draw(st.integers(3, 7))),
                                             "pods": "110"}}
            for _ in range(data.draw(st.integers(0, 3))):
                extra.append({"kind": "Pod", **raw_pod(len(extra), {
                    "cpu": data.draw(cpus), "memory": 0, "labelled": False, "deleting": False,
                    "priority": data.draw(st.sampled_from([0, 3, 49, 100])),
                    "start": data.draw(st.integers(0, 3))}, obj["metadata"]["name"])})
        elif obj["kind"] == "Pod":
            wanted = data.draw(st.integers(1, 3) if obj["metadata"]["name"] == "p" else cpus)
            obj["spec"]["containers"] = [{"name": "c", "resources": {"requests": {
                "cpu": str(wanted)}}}]
    inv = load(*objs, *extra)
    pod = inv.pod("default/p")
    assert pod is not None
    _, search = searcher(inv, mode=mode)
    plan = search.search(pod)
    _, best_search = searcher(inv, mode=mode)
    best = best_search.search(pod, best_only=True).best
    assert (best is None) == (plan.best is None)
    if best is not None and plan.best is not None:
        assert answer(best) == answer(plan.best)
    for found in plan.nodes:
        gone = {v.pod.key for v in found.victims}
        held = inv.usage.on(found.node)
        staying = [u for k, u in held.pods.items() if k not in gone and not u.deleting]
        used = Resources()
        for u in staying:
            used = used + u.requests
        state = inv.node_state(found.node)
        assert state is not None and state.view.node.resources is not None
        assert lacking(pod.requests, state.view.node.resources, used, len(staying)) is None
