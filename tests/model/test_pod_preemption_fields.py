"""The Pod fields the preemption driver reads: unschedulable, whom a victim
was preempted for, node selection, and the Node taints and cordon a
preemption must respect."""

import pytest

from app.model import InvalidObject, Node, parse_object


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


def test_preempted_for_is_the_uid_drax_s_disruption_target_condition_names() -> None:
    def victim(message: str, reason: str = "PreemptionByScheduler",
               status: str = "True") -> str:
        return parse_object("Pod", {"metadata": {"name": "v", "namespace": "default"},
                                    "status": {"conditions": [
                                        {"type": "Ready", "status": "True"},
                                        {"type": "DisruptionTarget", "status": status,
                                         "reason": reason, "message": message}]}}
                            ).preempted_for

    ours = ("drax: preempting to accommodate a higher priority pod ml/train "
            "(uid 7f3c; devices a, b)")
    assert victim(ours) == "7f3c"
    assert victim(ours.replace("; devices a, b", "")) == "7f3c"
    # A message naming the pod but not its uid names no pod object.
    assert victim("drax: preempting to accommodate a higher priority pod ml/train "
                  "(devices a, b)") == ""
    # kube-scheduler's own words name no pod; another reason or a false condition is no preemption
    assert victim("default-scheduler: preempting to accommodate a higher priority pod") == ""
    assert victim(ours, reason="DeletionByTaintManager") == ""
    assert victim(ours, status="False") == ""
    assert parse_object("Pod", pod()).preempted_for == ""


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


def node(*taints: dict[str, str], unschedulable: bool = False) -> Node:
    spec: dict[str, object] = {"taints": list(taints)}
    if unschedulable:
        spec["unschedulable"] = True
    parsed = parse_object("Node", {"metadata": {"name": "n"}, "spec": spec})
    assert isinstance(parsed, Node)
    return parsed


GPU_TAINT = {"key": "gpu", "value": "h100", "effect": "NoSchedule"}


def test_an_untolerated_taint_refuses_the_node_and_names_the_taint() -> None:
    p = parse_object("Pod", pod())
    assert p.refusal_on(node(GPU_TAINT)) == (
        "node has taint {gpu=h100:NoSchedule} the pod does not tolerate")
    assert p.refusal_on(node({"key": "drain", "effect": "NoExecute"})) == (
        "node has taint {drain:NoExecute} the pod does not tolerate")
    # PreferNoSchedule only weighs on scoring.
    assert p.refusal_on(node({"key": "soft", "effect": "PreferNoSchedule"})) is None
    assert p.refusal_on(node()) is None


def test_tolerations_equal_exists_and_effects() -> None:
    def refusal(*tolerations: dict[str, object]) -> str | None:
        return parse_object("Pod", pod(tolerations=list(tolerations))).refusal_on(
            node(GPU_TAINT, {"key": "drain", "effect": "NoExecute"}))

    equal = {"key": "gpu", "operator": "Equal", "value": "h100", "effect": "NoSchedule"}
    drain = {"key": "drain", "operator": "Exists"}  # no effect: every effect
    assert refusal(equal, drain) is None
    assert refusal({**equal, "operator": None}, drain) is None  # Equal is the default
    assert refusal({**equal, "value": "a100"}, drain) is not None
    assert refusal({**equal, "effect": "NoExecute"}, drain) is not None
    assert refusal(equal) == "node has taint {drain:NoExecute} the pod does not tolerate"
    assert refusal({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}, drain) is None
    # An empty key with Exists tolerates everything.
    assert refusal({"operator": "Exists"}) is None
    assert refusal({"operator": "Exists", "effect": "NoSchedule"}) is not None
    assert refusal({"key": "gpu", "operator": "Gt", "value": "1"}, drain) is not None


def test_an_unschedulable_node_refuses_pods_that_do_not_tolerate_it() -> None:
    cordoned = node(unschedulable=True)
    assert cordoned.unschedulable and not node().unschedulable
    assert parse_object("Pod", pod()).refusal_on(cordoned) == (
        "node is unschedulable (cordoned) and the pod does not tolerate it")
    tolerant = parse_object("Pod", pod(tolerations=[
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
         "effect": "NoSchedule"}]))
    assert tolerant.refusal_on(cordoned) is None


def test_node_selection_refuses_first() -> None:
    p = parse_object("Pod", pod(nodeSelector={"pool": "a"}))
    assert p.refusal_on(node()) == (
        "node does not match the pod's nodeSelector or required node affinity")


def test_equal_toleration_lists_are_one_object_and_bad_ones_are_named() -> None:
    defaults = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                 "effect": "NoExecute", "tolerationSeconds": 300}]
    a = parse_object("Pod", pod(tolerations=defaults))
    b = parse_object("Pod", pod(tolerations=[dict(d) for d in defaults]))
    assert a.tolerations is b.tolerations and a.tolerations[0].toleration_seconds == 300
    bad = [{**defaults[0], "tolerationSeconds": True}]
    with pytest.raises(InvalidObject, match=r"spec.tolerations\[0\].tolerationSeconds"):
        parse_object("Pod", pod(tolerations=bad))
    with pytest.raises(InvalidObject, match=r"spec.taints: expected a list"):
        parse_object("Node", {"metadata": {"name": "n"}, "spec": {"taints": {"key": "x"}}})
    with pytest.raises(InvalidObject, match=r"spec.taints\[0\].key: required"):
        parse_object("Node", {"metadata": {"name": "n"},
                              "spec": {"taints": [{"effect": "NoSchedule"}]}})
