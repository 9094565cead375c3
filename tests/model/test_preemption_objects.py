"""What preemption reads of Pods, PodDisruptionBudgets and PriorityClasses."""

from __future__ import annotations

import pytest

from app.model import InvalidObject, parse_object


def test_pod_fields_preemption_reads() -> None:
    pod = parse_object("Pod", {
        "metadata": {"name": "p", "namespace": "ml", "labels": {"app": "x"},
                     "deletionTimestamp": "2026-12-01T00:00:00Z"},
        "spec": {"priority": 1000, "priorityClassName": "high", "nodeName": "n1",
                 "preemptionPolicy": "Never", "schedulerName": "drax"},
        "status": {"phase": "Running", "startTime": "2026-12-01T08:00:00Z"}})
    assert (pod.priority, pod.priority_class_name, pod.preemption_policy) == (1000, "high",
                                                                            "Never")
    assert pod.deleting and pod.phase == "Running" and not pod.terminal
    assert pod.start_time == 1796112000.0 and dict(pod.labels) == {"app": "x"}
    twin = parse_object("Pod", {"metadata": {"name": "q", "labels": {"app": "x"}}})
    assert twin.labels is pod.labels  # one shared map per label set
    assert twin.priority is None and not twin.deleting and twin.start_time is None


@pytest.mark.parametrize(("obj", "fragment"), [
    ({"metadata": {"name": "p"}, "spec": {"preemptionPolicy": "Sometimes"}},
     "spec.preemptionPolicy"),
    ({"metadata": {"name": "p"}, "spec": {"priority": "high"}}, "spec.priority"),
    ({"metadata": {"name": "p"}, "status": {"startTime": "yesterday"}}, "status.startTime"),
])
def test_bad_pods(obj: dict, fragment: str) -> None:
    with pytest.raises(InvalidObject, match=fragment):
        parse_object("Pod", obj)


def test_pdb_selects_like_kube_scheduler() -> None:
    pdb = parse_object("PodDisruptionBudget", {
        "metadata": {"name": "b", "namespace": "ml"},
        "spec": {"selector": {"matchLabels": {"app": "x"}, "matchExpressions": [
            {"key": "tier", "operator": "NotIn", "values": ["dev"]}]}},
        "status": {"disruptionsAllowed": 2, "disruptedPods": {"gone": "2026-12-01T00:00:00Z"}}})
    assert pdb.disruptions_allowed == 2

    def pod(name: str, namespace: str = "ml", **labels: str):
        return parse_object("Pod", {"metadata": {"name": name, "namespace": namespace,
                                                 "labels": labels}})

    assert pdb.selects(pod("a", app="x"))
    assert not pdb.selects(pod("a", app="x", tier="dev"))
    assert not pdb.selects(pod("a", "other", app="x"))
    assert not pdb.selects(pod("gone", app="x"))  # already counted as disrupted
    empty = parse_object("PodDisruptionBudget", {"metadata": {"name": "e"},
                                                 "spec": {"selector": {}}})
    assert not empty.selects(pod("a", "default", app="x"))


@pytest.mark.parametrize(("kind", "obj", "fragment"), [
    ("PodDisruptionBudget", {"metadata": {"name": "b"}, "spec": {"selector": {
        "matchExpressions": [{"key": "a", "operator": "Near"}]}}}, "operator"),
    ("PriorityClass", {"metadata": {"name": "c"}}, "value: required"),
    ("PriorityClass", {"metadata": {"name": "c"}, "value": 1, "preemptionPolicy": "Maybe"},
     "preemptionPolicy"),
])
def test_bad_pdbs_and_classes(kind: str, obj: dict, fragment: str) -> None:
    with pytest.raises(InvalidObject, match=fragment):
        parse_object(kind, obj)


def test_priority_class_defaults() -> None:
    pc = parse_object("PriorityClass", {"metadata": {"name": "c"}, "value": 5,
                                        "globalDefault": True})
    assert (pc.value, pc.preemption_policy, pc.global_default) == (5, "PreemptLowerPriority",
                                                                   True)
