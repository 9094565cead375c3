"""Who holds what, kept across watch events, equals what is read afresh.

The inventory keeps each pod's `Holder`, each node's `occupancy` and each
node's `Held` between searches, and drops only what an event can change.
After random sequences of watch events (pods coming, changing, terminating
and going, on several nodes or none; claims allocated, reserved, unreserved,
deleted and created again under another UID; claims shared by pods on
different nodes; reservations without a UID, as objects written by hand
have them), every node's kept occupancy holds the very objects a fresh read
finds, and its kept `Held` equals one built from scratch. Two sequences the
generators seldom reach are run as written: a sharer swapped for another
that then changes, and a holder giving way while another claim names it.
"""

from __future__ import annotations

import copy
from dataclasses import fields
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.extender.signature import flat_devices
from app.inventory import Inventory
from app.inventory.occupants import Holder, claim_names, reserved_for
from app.model import Pod
from app.preemption.held import Held, held_index, held_of
from tests.extender.cluster import gpu_node
from tests.inventory.objects import claim, exactly, node, result
from tests.preemption.builders import load

GPU = "gpu.example.com"
NODES = ("n1", "n2")
PODS = ("a", "b", "c", "d")
CLAIMS = ("c0", "c1", "c2", "c3")
DEVICES = tuple(f"{GPU}/{n}/gpu-{i}" for n in NODES for i in range(4))

pod_event = st.fixed_dictionaries({
    "kind": st.just("Pod"),
    "name": st.sampled_from(PODS),
    "gone": st.booleans(),
    "node": st.sampled_from(("n1", "n1", "n2", None)),
    "uid": st.sampled_from(("", "1", "2")),
    "lists": st.lists(st.sampled_from(CLAIMS), max_size=2, unique=True),
    "deleting": st.booleans(),
    "phase": st.sampled_from(("Running", "Running", "Succeeded")),
    "priority": st.integers(0, 3),
})
claim_event = st.fixed_dictionaries({
    "kind": st.just("ResourceClaim"),
    "name": st.sampled_from(CLAIMS),
    "gone": st.booleans(),
    "uid": st.sampled_from(("1", "2")),
    "devices": st.one_of(st.none(), st.lists(st.sampled_from(DEVICES), min_size=1,
                                             max_size=2, unique=True)),
    # each reservation: a pod's name, and its UID as the pod has it, none, or another
    "reserved": st.lists(st.tuples(st.sampled_from(PODS), st.sampled_from(("pod", "pod", "", "x"))),
                         max_size=3, unique_by=lambda r: r[0]),
})

# a node's GPUs published again: fewer, or in another order (positions move)
slice_event = st.fixed_dictionaries({
    "kind": st.just("ResourceSlice"),
    "name": st.sampled_from(NODES),
    "roots": st.sampled_from((("r0", "r0", "r1", "r1"), ("r1", "r0"), ("r0", "r1", "r1"))),
    "reversed": st.booleans(),
})
# an object applied again unchanged (a resync): parsed afresh, equal to the one held
again_event = st.fixed_dictionaries({
    "kind": st.just("again"),
    "name": st.sampled_from(PODS + CLAIMS),
})
# a pod replaced as churn replaces one: it and its claims go, then the same
# claims (new objects) come reserved for a pod of that name with another UID
# and priority
replace_event = st.fixed_dictionaries({
    "kind": st.just("replace"),
    "name": st.sampled_from(PODS),
    "priority": st.integers(0, 3),
})
events = st.lists(st.one_of(pod_event, claim_event, slice_event, again_event, replace_event),
                  min_size=8, max_size=40)


def pod_object(event: dict[str, Any]) -> dict[str, Any]:
    name = event["name"]
    metadata: dict[str, Any] = {"name": name, "namespace": "default",
                                "uid": event["uid"] and f"uid-{name}-{event['uid']}"}
    if event["deleting"]:
        metadata["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    spec: dict[str, Any] = {"priority": event["priority"], "resourceClaims": [
        {"name": f"e{i}", "resourceClaimName": c} for i, c in enumerate(event["lists"])]}
    if event["node"]:
        spec["nodeName"] = event["node"]
    return {"kind": "Pod", "metadata": metadata, "spec": spec,
            "status": {"phase": event["phase"], "startTime": "2026-01-01T00:00:00Z"}}


def claim_object(event: dict[str, Any], uids: dict[str, str]) -> dict[str, Any]:
    name = event["name"]
    reserved = []
    for pod_name, uid in event["reserved"]:
        reserved.append({"resource": "pods", "name": pod_name,
                         "uid": uids.get(pod_name, "") if uid == "pod"
                         else uid and f"uid-{pod_name}-x"})
    devices = event["devices"]
    obj = claim(name, requests=[exactly("gpu", "gpu", count=len(devices or [1]))],
                results=None if devices is None else [result("gpu", d) for d in devices],
                reserved_for=reserved)
    obj["metadata"]["uid"] = f"claim-{name}-{event['uid']}"
    return obj


def apply(inv: Inventory, event: dict[str, Any], live: dict[tuple[str, str], Any],
          uids: dict[str, str]) -> None:
    kind, name = event["kind"], event["name"]
    if kind == "ResourceSlice":
        (gpus,) = gpu_node(name, roots=event["roots"])
        if event["reversed"]:
            gpus["spec"]["devices"].reverse()
        inv.apply(kind, "MODIFIED", gpus)
        return
    if kind == "again":
        obj = live.get(("Pod", name)) or live.get(("ResourceClaim", name))
        if obj is not None:
            inv.apply(obj["kind"], "MODIFIED", obj)
        return
    if kind == "replace":
        replace(inv, name, event["priority"], live, uids)
        return
    if event["gone"]:
        obj = live.pop((kind, name), None)
        if obj is not None:
            inv.apply(kind, "DELETED", obj)
            if kind == "Pod":
                uids.pop(name, None)
        return
    obj = pod_object(event) if kind == "Pod" else claim_object(event, uids)
    inv.apply(kind, "MODIFIED" if (kind, name) in live else "ADDED", obj)
    live[(kind, name)] = obj
    if kind == "Pod":
        uids[name] = obj["metadata"]["uid"]


def replace(inv: Inventory, name: str, priority: int, live: dict[tuple[str, str], Any],
            uids: dict[str, str]) -> None:
    pod = live.get(("Pod", name))
    if pod is None:
        return
    inv.apply("Pod", "DELETED", pod)
    listed = [c["resourceClaimName"] for c in pod["spec"]["resourceClaims"]]
    claims = [live[("ResourceClaim", c)] for c in listed if ("ResourceClaim", c) in live]
    for obj in claims:
        inv.apply("ResourceClaim", "DELETED", obj)
    pod = copy.deepcopy(pod)
    uid = pod["metadata"]["uid"] = f"uid-{name}-{priority}-{len(live)}"
    pod["spec"]["priority"] = priority
    for obj in claims:
        obj = copy.deepcopy(obj)
        for ref in obj.get("status", {}).get("reservedFor", []):
            if ref["name"] == name:
                ref["uid"] = uid
        inv.apply("ResourceClaim", "ADDED", obj)
        live[("ResourceClaim", obj["metadata"]["name"])] = obj
    inv.apply("Pod", "ADDED", pod)
    live[("Pod", name)] = pod
    uids[name] = uid


def same_holder(kept: Holder, fresh: Holder) -> bool:
    """Equal, and holding the very objects the inventory holds now."""
    return (kept == fresh and kept.pod is fresh.pod
            and all(a is b for a, b in zip(kept.claims, fresh.claims, strict=True))
            and all(a is b for ra, rb in zip(kept.reservers, fresh.reservers, strict=True)
                    for a, b in zip(ra, rb, strict=True)))


def same_held(kept: Held, fresh: Held) -> bool:
    return all(getattr(kept, f.name) == getattr(fresh, f.name)
               for f in fields(Held) if f.name != "picks") and all(
        a is b for a, b in zip(kept.pods, fresh.pods, strict=True))


def fresh_holder(inv: Inventory, pod: Pod) -> Holder | None:
    """`pod`'s holder as read from the inventory's tables now: the allocated
    claims it lists that are reserved for it, in its order."""
    occupants = inv.occupants
    claims = tuple(c for name in claim_names(pod)
                   if (c := inv.claim(f"{pod.namespace}/{name}")) is not None
                   and c.allocation is not None and reserved_for(c, pod))
    if not claims:
        return None
    return Holder(pod=pod, claims=claims, keys=tuple(c.key for c in claims),
                  reservers=tuple(occupants.reservers(c) for c in claims),
                  devices=tuple(tuple(r.device_id for r in c.allocation.results)
                                for c in claims if c.allocation))


def check(inv: Inventory) -> None:
    occupants, index = inv.occupants, held_index(inv)
    for name in NODES:
        kept = occupants.occupancy(name)
        fresh = [h for p in occupants.pods_on(name) if (h := fresh_holder(inv, p))]
        assert len(kept) == len(fresh)
        assert all(same_holder(a, b) for a, b in zip(kept, fresh, strict=True)), name
        view = inv.node_state(name).view  # type: ignore[union-attr]
        held = index.of(view, kept)
        position = {d.id: i for i, d in enumerate(flat_devices(view))}
        assert same_held(held, held_of(view, kept, position)), name


@settings(max_examples=500, deadline=None)
@given(events)
def test_kept_holdings_equal_a_fresh_read_after_any_events(events: list[dict[str, Any]]) -> None:
    inv = load(*[[node(n), *gpu_node(n)] for n in NODES])
    live: dict[tuple[str, str], Any] = {}
    uids: dict[str, str] = {}
    for event in events:
        apply(inv, event, live, uids)
        check(inv)  # after each event, so that what is kept is then reused or dropped


def full_nodes(priorities: list[int], pairs: list[bool]
               ) -> tuple[Inventory, dict[tuple[str, str], Any], dict[str, str]]:
    """n1 and n2 full: pod i holds claim `c<i>` of its own GPUs (two when
    `pairs[i]`), reserved for it alone, as the benchmark's clusters hold."""
    inv = load(*[[node(n), *gpu_node(n)] for n in NODES])
    live: dict[tuple[str, str], Any] = {}
    uids: dict[str, str] = {}
    for i, (name, priority, pair) in enumerate(zip(PODS, priorities, pairs, strict=True)):
        where = NODES[i // 2]
        devices = [f"{GPU}/{where}/gpu-{2 * (i % 2)}"] + (
            [f"{GPU}/{where}/gpu-{2 * (i % 2) + 1}"] if pair else [])
        apply(inv, {"kind": "Pod", "name": name, "gone": False, "node": where, "uid": "1",
                    "lists": [f"c{i}"], "deleting": False, "phase": "Running",
                    "priority": priority}, live, uids)
        apply(inv, {"kind": "ResourceClaim", "name": f"c{i}", "gone": False, "uid": "1",
                    "devices": devices, "reserved": [(name, "pod")]}, live, uids)
    return inv, live, uids


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=4, max_size=4),
       st.lists(st.booleans(), min_size=4, max_size=4),
       st.lists(st.tuples(st.one_of(replace_event, replace_event, replace_event, pod_event,
                                    claim_event, again_event), st.booleans()),
                min_size=1, max_size=20))
def test_kept_holdings_equal_a_fresh_read_under_churn(
        priorities: list[int], pairs: list[bool], events: list[tuple[dict[str, Any], bool]]
) -> None:
    # Full nodes whose pods are mostly replaced (the holdings then built from
    # the previous ones), sometimes changed otherwise; read after some events,
    # so that a read may follow several changes on one node.
    inv, live, uids = full_nodes(priorities, pairs)
    check(inv)
    for event, read in events:
        apply(inv, event, live, uids)
        if read:
            check(inv)
    check(inv)


def pod_at(name: str, where: str | None, lists: list[str], priority: int = 0,
           uid: str = "1") -> dict[str, Any]:
    return {"kind": "Pod", "name": name, "gone": False, "node": where, "uid": uid,
            "lists": lists, "deleting": False, "phase": "Running", "priority": priority}


def claim_of(name: str, devices: list[str], reserved: list[tuple[str, str]]) -> dict[str, Any]:
    return {"kind": "ResourceClaim", "name": name, "gone": False, "uid": "1",
            "devices": devices, "reserved": reserved}


def test_a_sharer_swapped_for_another_then_changed_is_seen_by_the_holders() -> None:
    # a and b share c0; the claim then names d instead of b (as many
    # reservations as before), and d then changes: a's holder sees d's new
    # object, on n1 and from n2.
    inv = load(*[[node(n), *gpu_node(n)] for n in NODES])
    live: dict[tuple[str, str], Any] = {}
    uids: dict[str, str] = {}
    for event in (pod_at("a", "n1", ["c0"]), pod_at("b", "n1", ["c0"]),
                  pod_at("d", "n2", ["c0"]),
                  claim_of("c0", [f"{GPU}/n1/gpu-0"], [("a", "pod"), ("b", "pod")])):
        apply(inv, event, live, uids)
    check(inv)
    apply(inv, claim_of("c0", [f"{GPU}/n1/gpu-0"], [("a", "pod"), ("d", "pod")]), live, uids)
    check(inv)
    apply(inv, pod_at("d", "n2", ["c0"], priority=3), live, uids)  # touched in place
    check(inv)
    (held,) = inv.occupants.occupancy("n1")
    assert held.reservers == ((inv.pod("default/a"), inv.pod("default/d")),)
    assert held.reservers[0][1].priority == 3  # type: ignore[union-attr]


def test_a_holder_giving_way_while_another_claim_names_it_is_read_afresh() -> None:
    # Full nodes; b's claim c1 is reserved for b and for a too. a's claim c0
    # is then reserved for e instead, a pod on n1 that lists it: e holds in
    # a's place, as churn replaces a pod, but c1 still names a, so the node's
    # holdings are not the previous ones with e in a's place.
    inv, live, uids = full_nodes([0, 1, 2, 3], [False] * 4)
    apply(inv, pod_at("e", "n1", ["c0"], priority=5), live, uids)
    apply(inv, claim_of("c1", [f"{GPU}/n1/gpu-2"], [("b", "pod"), ("a", "pod")]), live, uids)
    check(inv)
    apply(inv, claim_of("c0", [f"{GPU}/n1/gpu-0"], [("e", "pod")]), live, uids)
    check(inv)
    holders = {h.pod.name: h for h in inv.occupants.occupancy("n1")}
    assert sorted(holders) == ["b", "e"]
    assert holders["b"].reservers == ((inv.pod("default/b"), inv.pod("default/a")),)
