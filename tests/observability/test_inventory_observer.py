"""The background observer's cluster totals: kept as running sums across
walks, they must always equal what a walk from nothing finds."""

from __future__ import annotations

from typing import Any

import pytest

from app.extender.verbs import Extender
from app.features import FeatureGates
from app.inventory import Inventory
from app.inventory.store import KINDS
from app.observability import inventory as observed
from app.observability.inventory import TOP_FRAGMENTED, InventoryObserver, Snapshot
from app.topology import TopologyConfig
from loadtest import generator
from tests.inventory.objects import claim, device, resource_slice, result

GPU = "gpu.nvidia.com"


def _inventory(objects: list[dict[str, Any]]) -> Inventory:
    inv = Inventory()
    for kind in KINDS:
        inv.replace(kind, [o for o in objects if o["kind"] == kind])
        inv.mark_synced(kind)
    return inv


def _observer(inv: Inventory, *, shared: bool = False) -> InventoryObserver:
    equivalence = Extender(inv, features=FeatureGates()).equivalence if shared else None
    return InventoryObserver(inv, config=TopologyConfig(), features=FeatureGates(),
                             equivalence=equivalence)


def _figures(snap: Snapshot) -> dict[str, Any]:
    return {"devices": +snap.devices, "pools": +snap.pools, "stranded": snap.stranded,
            "free": +snap.free_per_node, "fragmented": snap.fragmented,
            "capacity": snap.capacity}


def _walked_from_nothing(inv: Inventory) -> dict[str, Any]:
    observer = _observer(inv)
    observer.refresh()
    return _figures(observer.snapshot)


def _network_pool(*names: str) -> dict[str, Any]:
    return resource_slice("fabric", driver="fabric.example.com", allNodes=True,
                          devices=[device(n) for n in names])


def _holding(name: str, *device_ids: str) -> dict[str, Any]:
    return claim(name, results=[result("gpu", d) for d in device_ids])


def test_totals_kept_across_walks_equal_a_walk_from_nothing() -> None:
    objects = [*generator.generate_cluster(nodes=12), _network_pool("port-0", "port-1")]
    inv = _inventory(objects)
    observer = _observer(inv)
    observer.refresh()
    assert _figures(observer.snapshot) == _walked_from_nothing(inv)
    named = {o["metadata"]["name"]: o for o in objects}
    steps = [
        ("ResourceClaim", "ADDED", _holding("a", f"{GPU}/node-00000/gpu-0",
                                            f"{GPU}/node-00001/gpu-3")),
        ("ResourceClaim", "ADDED", _holding("b", "fabric.example.com/fabric/port-1")),
        ("ResourceSlice", "DELETED", named["node-00002-dra.net-nics"]),
        ("ResourceSlice", "DELETED", named["node-00003-gpu.nvidia.com-gpus"]),
        ("ResourceSlice", "MODIFIED", _network_pool("port-0")),
        ("ResourceClaim", "DELETED", _holding("a")),
    ]
    for kind, event, obj in steps:
        before = _figures(observer.snapshot)
        inv.apply(kind, event, obj)
        observer.refresh()
        now = _figures(observer.snapshot)
        assert now == _walked_from_nothing(inv), (kind, event)
        assert now != before, (kind, event)


def test_devices_of_a_shared_pool_are_counted_once_and_the_rest_by_state() -> None:
    inv = _inventory([*generator.generate_cluster(nodes=3), _network_pool("port-0", "port-1"),
                      _holding("a", f"{GPU}/node-00000/gpu-0")])
    observer = _observer(inv)
    observer.refresh()
    snap = observer.snapshot
    assert sum(snap.devices.values()) == inv.counts().devices
    assert snap.devices["fabric.example.com", "free"] == 2
    assert snap.devices[GPU, "allocated"] == 1
    assert sum(snap.pools.values()) == 3 * 2 + 1
    assert sum(snap.free_per_node.values()) == 3


def test_without_fragmented_nodes_the_first_by_name_are_listed_with_zero() -> None:
    inv = _inventory(generator.generate_cluster(nodes=TOP_FRAGMENTED + 3))
    observer = _observer(inv)
    observer.refresh()
    assert observer.snapshot.fragmented == [
        (generator.node_name(i), 0) for i in range(TOP_FRAGMENTED)]


def test_a_full_walk_is_a_step_per_node_and_a_change_revisits_its_node_only() -> None:
    inv = _inventory(generator.generate_cluster(nodes=40))
    observer = _observer(inv)
    assert sum(1 for _ in observer._walk()) >= 40
    inv.apply("ResourceClaim", "ADDED", _holding("a", f"{GPU}/node-00000/gpu-0"))
    assert sum(1 for _ in observer._walk()) < 10  # one node: a step per shape
    assert observer.snapshot.devices[GPU, "allocated"] == 1


def test_figures_shared_by_equivalent_nodes_are_those_counted_node_by_node(
        monkeypatch: pytest.MonkeyPatch) -> None:
    objects = generator.generate_cluster(nodes=24)
    inv = _inventory(objects)
    shared, alone = _observer(inv, shared=True), _observer(inv)
    computed: list[int] = []
    real = observed.node_stats
    monkeypatch.setattr(observed, "node_stats",
                        lambda state, **kw: computed.append(1) or real(state, **kw))
    shared.refresh()
    assert 0 < len(computed) < 24  # nodes of one kind counted once
    alone.refresh()
    assert _figures(shared.snapshot) == _figures(alone.snapshot)
    named = {o["metadata"]["name"]: o for o in objects}
    for kind, event, obj in [
            ("ResourceClaim", "ADDED", _holding("a", f"{GPU}/node-00000/gpu-0",
                                                f"{GPU}/node-00001/gpu-3")),
            ("ResourceClaim", "ADDED", _holding("b", f"{GPU}/node-00002/gpu-0")),
            ("ResourceSlice", "DELETED", named["node-00004-dra.net-nics"]),
            ("ResourceSlice", "ADDED", _network_pool("port-0"))]:
        inv.apply(kind, event, obj)
        shared.refresh()
        alone.refresh()
        assert _figures(shared.snapshot) == _figures(alone.snapshot), (kind, event)


def test_a_count_cut_by_its_search_budget_is_a_lower_bound_and_counted_as_such(
        monkeypatch: pytest.MonkeyPatch) -> None:
    inv = _inventory([*generator.generate_cluster(nodes=4),
                      _holding("a", f"{GPU}/node-00000/gpu-0")])
    exact = _observer(inv)
    exact.refresh()
    assert set(exact.snapshot.inexact.values()) == {0}
    monkeypatch.setattr(observed, "CAPACITY_STEP_BUDGET", 1)
    cut = _observer(inv)
    cut.refresh()
    assert sum(cut.snapshot.inexact.values()) > 0
    for shape, count in cut.snapshot.capacity.items():
        assert count <= exact.snapshot.capacity[shape]


async def test_a_long_walk_reports_progress_so_that_what_it_built_can_be_frozen() -> None:
    import asyncio

    inv = _inventory(generator.generate_cluster(nodes=40))
    observer = _observer(inv)
    progress: list[int] = []
    task = asyncio.create_task(observer.run(
        interval_seconds=0.01, progress_seconds=0.001,
        on_progress=lambda: progress.append(observer.walks)))
    for _ in range(500):
        if observer.walks:
            break
        await asyncio.sleep(0.01)
    reported = len(progress)
    await asyncio.sleep(0.05)
    task.cancel()
    assert observer.walks == 1
    assert progress and progress[0] == 0  # during the first walk
    assert len(progress) == reported  # nothing changed since: no walk, no report


async def test_a_walk_starts_only_once_the_verbs_are_quiet(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A walk's steps count shapes on nodes, searches that can hold the loop:
    even its first slice waits while verbs are being asked."""
    import asyncio

    inv = _inventory(generator.generate_cluster(nodes=4))
    observer = _observer(inv)
    loud = True
    counted_loud: list[bool] = []
    real = observed.count_fits
    monkeypatch.setattr(observed, "count_fits", lambda *a, **k: (
        counted_loud.append(loud), real(*a, **k))[1])
    task = asyncio.create_task(observer.run(quiet=lambda: not loud, interval_seconds=0.01))
    await asyncio.sleep(0.05)
    assert observer.walks == 0
    assert counted_loud == []  # not one count while verbs were asked
    loud = False
    for _ in range(500):
        if observer.walks:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    assert observer.walks == 1
    assert counted_loud and not any(counted_loud)
