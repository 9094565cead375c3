"""The occupants index: who holds which claims on which node, kept current."""

from __future__ import annotations

import copy

from tests.inventory.objects import claim, exactly, result
from tests.preemption.builders import holder, load, pdb

GPU = "gpu.example.com"


def test_occupancy_follows_pods_and_claims() -> None:
    objs = holder("a", "n1", [f"{GPU}/n1/gpu-0"], priority=3)
    inv = load(*objs)
    occ = inv.occupants
    (held,) = occ.occupancy("n1")
    assert held.pod.name == "a" and held.keys == ("default/a-claim",)
    assert held.devices == ((f"{GPU}/n1/gpu-0",),)
    assert held.reservers == ((held.pod,),)
    # The claim is no longer reserved for the pod: it holds nothing.
    released = claim("a-claim", requests=[exactly("gpu", "gpu")],
                     results=[result("gpu", f"{GPU}/n1/gpu-0")], reserved_for=[])
    inv.apply("ResourceClaim", "MODIFIED", released)
    assert occ.occupancy("n1") == ()
    inv.apply("ResourceClaim", "MODIFIED", objs[0])
    assert [h.pod.name for h in occ.occupancy("n1")] == ["a"]
    # The pod starts terminating, then goes.
    going = copy.deepcopy(objs[1])
    going["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    inv.apply("Pod", "MODIFIED", going)
    assert occ.occupancy("n1")[0].pod.deleting
    inv.apply("Pod", "DELETED", going)
    assert occ.occupancy("n1") == () and occ.pod_by_uid("uid-a") is None
    assert list(occ.pods_on("n1")) == []


def test_a_shared_claim_names_every_reserver() -> None:
    objs = [*holder("a", "n1", [f"{GPU}/n1/gpu-0"], sharers=("b",), claim_name="c"),
            *holder("b", "n1", [], claim_name="c")]
    inv = load(*objs)
    occupancy = {h.pod.name: h for h in inv.occupants.occupancy("n1")}
    assert set(occupancy) == {"a", "b"}
    assert [p.name for p in occupancy["b"].reservers[0] if p] == ["a", "b"]


def test_pdbs_and_priority_classes_apply_and_delete() -> None:
    inv = load(pdb("keep", {"app": "x"}, 1),
               {"kind": "PriorityClass", "metadata": {"name": "hi"}, "value": 10})
    occ = inv.occupants
    assert [p.name for p in occ.pdbs("default")] == ["keep"]
    assert occ.priority_class("hi") is not None
    inv.replace("PodDisruptionBudget", [])
    inv.apply("PriorityClass", "DELETED", {"kind": "PriorityClass", "metadata": {"name": "hi"},
                                           "value": 10})
    assert list(occ.pdbs("default")) == [] and occ.priority_class("hi") is None
