"""The occupants index: who holds which claims on which node, kept current."""

from __future__ import annotations

import copy
from typing import Any

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


def reserved(pod: dict[str, Any], *names: str, uid: bool = True) -> dict[str, Any]:
    """`pod`'s claim, reserved for it and the pods `names` (by UID, or by name alone)."""
    out = copy.deepcopy(pod)
    out["status"]["reservedFor"] = [
        {"resource": "pods", "name": n, "uid": f"uid-{n}" if uid else ""}
        for n in (pod["status"]["reservedFor"][0]["name"], *names)]
    return out


def test_a_sharer_on_another_node_changing_is_seen_by_the_holder() -> None:
    # "b" on n2 shares a's claim: b terminating makes a's holder on n1 see
    # it terminating, and b going leaves an unknown consumer there.
    a = holder("a", "n1", [f"{GPU}/n1/gpu-0"], sharers=("b",), claim_name="c")
    b = holder("b", "n2", [], claim_name="c")
    inv = load(*a, *b)
    occ = inv.occupants
    (held,) = occ.occupancy("n1")
    assert not held.reservers[0][1].deleting  # type: ignore[union-attr]
    going = copy.deepcopy(b[-1])
    going["metadata"]["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    inv.apply("Pod", "MODIFIED", going)
    (held,) = occ.occupancy("n1")
    assert held.reservers[0][1] is inv.pod("default/b") and held.reservers[0][1].deleting
    inv.apply("Pod", "DELETED", going)
    assert occ.occupancy("n1")[0].reservers[0][1] is None


def test_a_reserver_arriving_after_its_claim_is_seen_on_every_node() -> None:
    a = holder("a", "n1", [f"{GPU}/n1/gpu-0"], sharers=("b",), claim_name="c")
    inv = load(*a)
    occ = inv.occupants
    assert occ.occupancy("n1")[0].reservers[0][1] is None
    inv.apply("Pod", "ADDED", holder("b", "n2", [], claim_name="c")[-1])
    assert occ.occupancy("n1")[0].reservers[0][1] is inv.pod("default/b")


def test_a_reservation_without_a_uid_follows_the_pod_of_that_name() -> None:
    # Objects written by hand may leave the UID out: the reserver is found by
    # name, and a new pod of that name (another UID) is seen.
    a = holder("a", "n1", [f"{GPU}/n1/gpu-0"], claim_name="c")
    b = holder("b", "n2", [], claim_name="c")
    inv = load(reserved(a[0], "b", uid=False), a[1], *b)
    occ = inv.occupants
    assert occ.occupancy("n1")[0].reservers[0][1] is inv.pod("default/b")
    again = copy.deepcopy(b[-1])
    again["metadata"]["uid"] = "uid-b-2"
    inv.apply("Pod", "MODIFIED", again)
    assert occ.occupancy("n1")[0].reservers[0][1] is inv.pod("default/b")
    assert inv.pod("default/b").uid == "uid-b-2"  # type: ignore[union-attr]


def test_a_claim_held_by_name_while_reserved_under_another_uid_follows_its_changes() -> None:
    # A pod without a UID holds a claim reserved for its name (whatever UID
    # the reservation carries): the claim changing is seen.
    a = holder("a", "n1", [f"{GPU}/n1/gpu-0"], claim_name="c")
    del a[1]["metadata"]["uid"]
    a[0]["status"]["reservedFor"][0]["uid"] = "uid-other"
    inv = load(*a)
    occ = inv.occupants
    assert occ.occupancy("n1")[0].devices == ((f"{GPU}/n1/gpu-0",),)
    moved = copy.deepcopy(a[0])
    moved["status"]["allocation"]["devices"]["results"][0]["device"] = "gpu-1"
    inv.apply("ResourceClaim", "MODIFIED", moved)
    assert occ.occupancy("n1")[0].devices == ((f"{GPU}/n1/gpu-1",),)


def test_a_claim_newly_reserved_for_a_second_pod_is_seen_by_both() -> None:
    a = holder("a", "n1", [f"{GPU}/n1/gpu-0"], claim_name="c")
    b = holder("b", "n1", [], claim_name="c")
    inv = load(*a, *b)
    occ = inv.occupants
    assert [h.pod.name for h in occ.occupancy("n1")] == ["a"]
    inv.apply("ResourceClaim", "MODIFIED", reserved(a[0], "b"))
    shared = occ.occupancy("n1")
    assert [h.pod.name for h in shared] == ["a", "b"]
    assert all(h.reservers[0] == (inv.pod("default/a"), inv.pod("default/b")) for h in shared)
    inv.apply("ResourceClaim", "MODIFIED", a[0])
    assert [h.reservers for h in occ.occupancy("n1")] == [((inv.pod("default/a"),),)]


def test_a_claim_created_again_under_another_uid_is_read_again() -> None:
    a = holder("a", "n1", [f"{GPU}/n1/gpu-0"], claim_name="c")
    inv = load(*a)
    occ = inv.occupants
    first = occ.occupancy("n1")[0].claims[0]
    inv.apply("ResourceClaim", "DELETED", a[0])
    assert occ.occupancy("n1") == ()
    again = copy.deepcopy(a[0])
    again["metadata"]["uid"] = "claim-2"
    again["status"]["allocation"]["devices"]["results"][0]["device"] = "gpu-3"
    inv.apply("ResourceClaim", "ADDED", again)
    (held,) = occ.occupancy("n1")
    assert held.claims[0] is inv.claim("default/c") is not first
    assert held.devices == ((f"{GPU}/n1/gpu-3",),)


def test_a_node_keeps_its_occupancy_while_its_holders_stay() -> None:
    # Per pod, what it holds is kept: an event elsewhere, or about a pod that
    # holds nothing, keeps the node's tuple; a pod applied again (a new object
    # equal to the old) is read again.
    objs = [*holder("a", "n1", [f"{GPU}/n1/gpu-0"]), *holder("b", "n1", [f"{GPU}/n1/gpu-1"]),
            *holder("idle", "n1", []), *holder("x", "n2", [f"{GPU}/n2/gpu-0"])]
    inv = load(*objs)
    occ = inv.occupants
    kept = occ.occupancy("n1")
    assert [h.pod.name for h in kept] == ["a", "b"]
    inv.apply("Pod", "MODIFIED", copy.deepcopy(objs[-1]))  # x, on n2
    assert occ.occupancy("n1") is kept
    idle = copy.deepcopy(objs[4])
    idle["spec"]["priority"] = 7
    inv.apply("Pod", "MODIFIED", idle)
    assert occ.occupancy("n1") is kept
    inv.apply("Pod", "MODIFIED", copy.deepcopy(objs[3]))  # b again, unchanged
    again = occ.occupancy("n1")
    assert again is not kept and again[0] is kept[0]
    assert again[1].pod is inv.pod("default/b") is not kept[1].pod


def test_a_pod_without_a_uid_is_the_reserver_of_a_reservation_with_one() -> None:
    # Objects written by hand: the pod has no UID, its claim's reservation
    # names it with one. It holds the claim (`reserved_for`), so it is the
    # claim's reserver too, and that reserver follows the pod's changes.
    a = holder("a", "n1", [f"{GPU}/n1/gpu-0"], claim_name="c")
    del a[1]["metadata"]["uid"]
    inv = load(*a)
    occ = inv.occupants
    (held,) = occ.occupancy("n1")
    assert held.pod is inv.pod("default/a") and held.reservers == ((held.pod,),)
    going = copy.deepcopy(a[1])
    going["metadata"]["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    inv.apply("Pod", "MODIFIED", going)
    (held,) = occ.occupancy("n1")
    assert held.reservers[0][0] is inv.pod("default/a") and held.pod.deleting
    # a pod of that name with another UID is not the one the reservation names
    other = copy.deepcopy(a[1])
    other["metadata"]["uid"] = "uid-other"
    inv.apply("Pod", "MODIFIED", other)
    assert occ.occupancy("n1") == ()


def test_a_sharer_without_a_uid_is_seen_when_it_comes_and_changes() -> None:
    # b (no UID) on n2 shares a's claim, whose reservation names b with a UID:
    # a's holder on n1 sees b come and start terminating.
    a = holder("a", "n1", [f"{GPU}/n1/gpu-0"], sharers=("b",), claim_name="c")
    b = holder("b", "n2", [], claim_name="c")[-1]
    del b["metadata"]["uid"]
    inv = load(*a)
    occ = inv.occupants
    assert occ.occupancy("n1")[0].reservers[0][1] is None
    inv.apply("Pod", "ADDED", b)
    assert occ.occupancy("n1")[0].reservers[0][1] is inv.pod("default/b")
    going = copy.deepcopy(b)
    going["metadata"]["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    inv.apply("Pod", "MODIFIED", going)
    sharer = occ.occupancy("n1")[0].reservers[0][1]
    assert sharer is inv.pod("default/b") and sharer.deleting  # type: ignore[union-attr]
    inv.apply("Pod", "DELETED", going)
    assert occ.occupancy("n1")[0].reservers[0][1] is None
