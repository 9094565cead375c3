"""The Pod fields the preemption driver reads: unschedulable, node selection."""

from app.model import Node, parse_object


def pod(**spec: object) -> dict[str, object]:
    return {"metadata": {"name": "p", "namespace": "default"}, "spec": spec,
            "status": {"conditions": [{"type": "PodScheduled", "status": "False",
                                       "reason": "Unschedulable"}]}}


def test_unschedulable_is_podscheduled_false_with_reason_unschedulable() -> None:
    assert parse_object("Pod", pod()).unschedulable
    gated = pod()
    gated["status"] = {"conditions": [{"type": "PodScheduled", "status": "False",
                                       "reason": "SchedulingGated"}]}
    assert not parse_object("Pod", gated).unschedulable
    assert not parse_object("Pod", {"metadata": {"name": "q"}}).unschedulable


def test_node_selector_and_required_affinity_pick_the_nodes() -> None:
    p = parse_object("Pod", pod(
        nodeSelector={"pool": "a"},
        affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["z1", "z2"]}]}]}}}))
    assert p.may_run_on(Node(name="n1", labels={"pool": "a", "zone": "z1"}))
    assert not p.may_run_on(Node(name="n2", labels={"pool": "b", "zone": "z1"}))
    assert not p.may_run_on(Node(name="n3", labels={"pool": "a", "zone": "z3"}))
    assert parse_object("Pod", pod()).may_run_on(Node(name="n4"))
