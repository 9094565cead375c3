"""The room victims over random nodes, against brute force: when `NodeFit.room`
refuses, even every lower-priority pod going leaves the preemptor short; when
it answers, the preemptor fits with the device victims and the room victims
gone, every room victim is a running pod of lower priority, and none of them
could be spared (kube-scheduler's reprieve leaves a minimal set)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.inventory import Inventory
from app.model.parse import parse_pod, parse_pod_usage
from app.model.requests import Resources
from app.preemption.fit import NodeFit, lacking

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
def test_room_victims_fit_and_none_can_be_spared(
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
    extra = {pod.uid for pod, _, _ in found}
    assert extra <= eligible
    assert fits(device_uids | extra)
    for uid in extra:
        assert not fits(device_uids | extra - {uid})
