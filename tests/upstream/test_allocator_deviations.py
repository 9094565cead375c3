"""Pins for the differences from upstream's allocator (v0.37.2) that drax keeps
on purpose (docs/decisions.md, "Found by the differential run"). Each test
states drax's side; the differential run shows upstream's."""

from __future__ import annotations

from typing import Any

from app.inventory import Inventory


def _slice(name: str, *, generation: int, zone: str | None = None, node: str | None = None,
           devices: list[str], count: int = 1) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": "gpu.example.com",
                            "pool": {"name": "p", "generation": generation,
                                     "resourceSliceCount": count},
                            "devices": [{"name": d} for d in devices]}
    if node is not None:
        spec["nodeName"] = node
    else:
        spec["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "In", "values": [zone]}]}]}
    return {"kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def _inventory(*slices: dict[str, Any]) -> Inventory:
    inv = Inventory()
    for n, zone in (("node-1", "a"), ("node-2", "b")):
        inv.apply("Node", "ADDED", {"kind": "Node",
                                    "metadata": {"name": n, "labels": {"zone": zone}}})
    for s in slices:
        inv.apply("ResourceSlice", "ADDED", s)
    return inv


def _devices(inv: Inventory, node: str) -> list[str]:
    state = inv.node_state(node)
    assert state is not None
    return [d.name for p in state.view.pools for d in p.devices]


def test_an_older_generation_is_ignored_even_where_the_newer_does_not_reach() -> None:
    # Upstream (GatherPools) takes the newest generation among the slices that
    # reach node-1; the complete generation-1 slice is then allocated from.
    inv = _inventory(_slice("old", generation=1, zone="a", devices=["old-0"]),
                     _slice("new", generation=2, zone="b", devices=["new-0"]))
    assert _devices(inv, "node-1") == []
    assert _devices(inv, "node-2") == ["new-0"]


def test_a_duplicate_device_name_anywhere_in_the_pool_makes_it_invalid() -> None:
    # Upstream checks names only over the slices that reach the node.
    inv = _inventory(_slice("s-a", generation=1, zone="a", devices=["d-0", "d-1"], count=2),
                     _slice("s-b", generation=1, zone="b", devices=["d-0"], count=2))
    state = inv.node_state("node-1")
    assert state is not None
    (pool,) = state.view.pools
    assert pool.invalid_reason is not None and "duplicate device name" in pool.invalid_reason
