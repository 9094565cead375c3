"""The victim search runs with the cyclic collector paused, and restores it."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from app import garbage_collector
from app.preemption import VictimSearch
from tests.extender.cluster import GPU_CLASS
from tests.preemption.builders import load, preemptor, searcher
from tests.preemption.test_search import gpus, victims, want


@pytest.fixture
def young_passes() -> Iterator[list[int]]:
    """The collector's passes that start while the test runs (their generations)."""
    seen: list[int] = []

    def record(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    was = gc.isenabled()
    gc.enable()
    gc.callbacks.append(record)
    try:
        yield seen
    finally:
        gc.callbacks.remove(record)
        if not was:
            gc.disable()


def test_no_pass_runs_inside_a_search_and_one_young_pass_follows_it(
        young_passes: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    inv = load(GPU_CLASS, gpus("n1", 1, 0, 3, 2), want(2), preemptor())
    _, search = searcher(inv)
    young, _, _ = gc.get_threshold()
    inside: list[bool] = []
    solve = VictimSearch._search
    kept: list[dict[str, int]] = []

    def busy(self: VictimSearch, *args: Any, **kwargs: Any) -> Any:
        inside.append(gc.isenabled())
        # enough surviving containers for several young passes
        kept.extend({"i": i} for i in range(young * 5))
        plan = solve(self, *args, **kwargs)
        inside.append(gc.isenabled())
        return plan

    monkeypatch.setattr(VictimSearch, "_search", busy)
    gc.collect()
    young_passes.clear()
    plan = search.search(inv.pod("default/p"))
    assert victims(plan) == ["n1-0", "n1-1"]
    assert inside == [False, False]
    assert gc.isenabled()
    assert young_passes == [0]  # the one pass the allocations made due, after the search
    assert gc.get_count()[0] < young


def test_the_collector_is_restored_when_the_search_raises(
        young_passes: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    inv = load(GPU_CLASS, gpus("n1", 1, 0, 3, 2), want(2), preemptor())
    _, search = searcher(inv)

    def fail(self: VictimSearch, *args: Any, **kwargs: Any) -> Any:
        assert not gc.isenabled()
        raise RuntimeError("boom")

    monkeypatch.setattr(VictimSearch, "_search", fail)
    with pytest.raises(RuntimeError, match="boom"):
        search.search(inv.pod("default/p"))
    assert gc.isenabled()


def test_a_search_inside_a_pause_leaves_the_collector_paused(young_passes: list[int]) -> None:
    inv = load(GPU_CLASS, gpus("n1", 1, 0, 3, 2), want(2), preemptor())
    _, search = searcher(inv)
    with garbage_collector.paused():
        plan = search.search(inv.pod("default/p"))
        assert not gc.isenabled()
    assert victims(plan) == ["n1-0", "n1-1"]
    assert gc.isenabled()
