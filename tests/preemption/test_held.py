"""A node's holdings in canonical order, kept with the inventory and built
again from the previous ones when some of its pods change."""

from __future__ import annotations

import copy
from dataclasses import fields
from typing import Any

import pytest

from app.extender.signature import flat_devices
from app.inventory import Inventory
from app.preemption import held as held_module
from app.preemption.held import Held, held_index, held_of
from tests.extender.cluster import GPU_CLASS, gpu_node
from tests.inventory.objects import exactly, node, template
from tests.preemption.builders import holder, load, preemptor, searcher

GPU = "gpu.example.com"


def four(name: str = "n1") -> list[dict[str, Any]]:
    """A node whose GPU i is held by pod `<name>-<i>` (priority i)."""
    out = [node(name), *gpu_node(name)]
    for i in range(4):
        out += holder(f"{name}-{i}", name, [f"{GPU}/{name}/gpu-{i}"], priority=i)
    return out


def kept(inv: Inventory, name: str = "n1") -> Held:
    view = inv.node_state(name).view  # type: ignore[union-attr]
    return held_index(inv).of(view, inv.occupants.occupancy(name))


def afresh(inv: Inventory, name: str = "n1") -> Held:
    view = inv.node_state(name).view  # type: ignore[union-attr]
    position = {d.id: i for i, d in enumerate(flat_devices(view))}
    return held_of(view, inv.occupants.occupancy(name), position)


def assert_same(a: Held, b: Held) -> None:
    for f in fields(Held):
        if f.name != "picks":
            assert getattr(a, f.name) == getattr(b, f.name), f.name


def counting_spots(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    spot = held_module.spot

    def counted(*args: Any) -> Any:
        calls.append(1)
        return spot(*args)
    monkeypatch.setattr(held_module, "spot", counted)
    return calls


def test_a_pod_replaced_has_only_its_claims_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # As churn replaces a pod: it and its claim go, another pod with a new
    # claim on the same device comes. The node's view is built again (its
    # devices' use changed) but its devices stay where they were, so the
    # previous holdings are taken for the three pods that stayed.
    objs = four()
    inv = load(*objs)
    first = kept(inv)
    position = held_index(inv).devices(inv.node_state("n1").view)[1]  # type: ignore[union-attr]
    inv.apply("Pod", "DELETED", objs[-1])
    inv.apply("ResourceClaim", "DELETED", objs[-2])
    for o in holder("n1-9", "n1", [f"{GPU}/n1/gpu-3"], priority=9):
        inv.apply(o["kind"], "ADDED", o)
    spots = counting_spots(monkeypatch)
    second = kept(inv)
    assert len(spots) == 1  # the new claim's
    assert held_index(inv).devices(inv.node_state("n1").view)[1] is position  # type: ignore
    assert second.view is not first.view
    assert_same(second, afresh(inv))
    assert second.shape is first.shape  # holding alike, as before
    assert [p.name for p in second.pods] == ["n1-0", "n1-1", "n1-2", "n1-9"]
    assert second.priorities == (0, 1, 2, 9)


def test_a_claim_changed_in_place_is_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    objs = four()
    inv = load(*objs)
    first = kept(inv)
    moved = copy.deepcopy(objs[2])  # n1-0's claim, now on gpu-3 (shared with n1-3's)
    moved["status"]["allocation"]["devices"]["results"][0]["device"] = "gpu-3"
    inv.apply("ResourceClaim", "MODIFIED", moved)
    spots = counting_spots(monkeypatch)
    second = kept(inv)
    assert len(spots) == 1
    assert_same(second, afresh(inv))
    assert second.shape != first.shape and second.plain == (None,) * 4


def test_devices_published_in_another_order_are_placed_again() -> None:
    objs = four()
    inv = load(*objs)
    first = kept(inv)
    (gpus,) = gpu_node("n1")
    gpus["spec"]["devices"].reverse()
    inv.apply("ResourceSlice", "MODIFIED", gpus)
    second = kept(inv)
    assert_same(second, afresh(inv))
    # the claims in canonical order (by place) are in reverse
    assert second.keys == tuple(reversed(first.keys)) and second.places == first.places


def test_the_same_holders_on_a_view_built_again_keep_their_holdings() -> None:
    # a device's use changing elsewhere on the node (a claim no pod holds)
    # builds the view again: the holdings stay, with what they keep per order
    objs = four()
    inv = load(*objs)
    first = kept(inv)
    first.picks["mark"] = 1
    lone = copy.deepcopy(objs[2])
    lone["metadata"]["name"] = "lone"
    lone["status"]["allocation"]["devices"]["results"][0]["device"] = "gpu-0"
    lone["status"]["reservedFor"] = []
    inv.apply("ResourceClaim", "ADDED", lone)
    built = held_index(inv).built
    second = kept(inv)
    assert second.view is not first.view and held_index(inv).built == built
    assert second.picks is first.picks
    assert_same(second, afresh(inv))


def test_a_pod_replaced_on_a_device_another_claim_holds_too_is_ordered_by_key() -> None:
    # Two claims hold gpu-0 (data the allocator would not write, but the
    # holdings take what the API server holds): alike in place, they are in
    # key order, which a replacing claim's key may change.
    objs = [node("n1"), *gpu_node("n1"),
            *holder("a", "n1", [f"{GPU}/n1/gpu-0"], claim_name="c-a"),
            *holder("m", "n1", [f"{GPU}/n1/gpu-0"], claim_name="c-m")]
    inv = load(*objs)
    assert kept(inv).keys == ("default/c-a", "default/c-m")
    inv.apply("Pod", "DELETED", objs[3])
    inv.apply("ResourceClaim", "DELETED", objs[2])
    for o in holder("z", "n1", [f"{GPU}/n1/gpu-0"], claim_name="c-z"):
        inv.apply(o["kind"], "ADDED", o)
    second = kept(inv)
    assert second.keys == ("default/c-m", "default/c-z")
    assert_same(second, afresh(inv))


def test_a_pod_without_a_uid_holding_a_claim_reserved_with_one_can_be_evicted() -> None:
    # Objects written by hand (file mode): pod a has no UID, its claim's
    # reservation names it with one. a holds the claim and is its reserver,
    # so evicting a releases it.
    a = holder("a", "n1", [f"{GPU}/n1/gpu-0"], claim_name="c0")
    del a[1]["metadata"]["uid"]
    inv = load(GPU_CLASS, template("want", requests=[exactly("gpu", "gpu")]),
               preemptor("p", priority=10), node("n1"), *gpu_node("n1", roots=("r0",)), *a)
    held = kept(inv)
    assert held.reservers == ((0,),) and [p.name for p in held.pods] == ["a"]
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))  # type: ignore[arg-type]
    assert not plan.refused
    assert [(n.node, [v.pod.name for v in n.victims]) for n in plan.nodes] == [("n1", ["a"])]
