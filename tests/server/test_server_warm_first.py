"""File mode warms before ready for a bounded time only (`warm_first`): a small
cluster starts fully warmed, a big one is ready once loaded plus the budget."""

from __future__ import annotations

from app.inventory import Inventory
from app.runtime import warm_first
from tests.extender.cluster import GPU_CLASS, extender, gpu_node, load
from tests.inventory.objects import claim, exactly, pod


def _cluster() -> Inventory:
    nodes = [gpu_node(f"n{i}") for i in range(6)]
    return load(GPU_CLASS, *nodes, claim("c", requests=[exactly("gpu", "gpu")]),
                pod("p", claims={"c": "c"}))


def test_a_budget_that_fits_warms_everything_before_ready() -> None:
    ext = extender(_cluster(), file_mode=True)
    assert warm_first(ext, budget_seconds=30.0) is False
    assert ext.warm() is False  # nothing left for the background


def test_no_budget_leaves_the_warming_to_the_background() -> None:
    ext = extender(_cluster(), file_mode=True)
    assert warm_first(ext, budget_seconds=0.0) is True
    steps = 0
    while ext.warm(budget_seconds=0):
        steps += 1
    assert steps >= 6  # every node was still to do
