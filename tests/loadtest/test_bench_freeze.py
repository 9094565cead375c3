"""`loadtest.bench_freeze` at a tiny size, and its targets judged on the rounds."""

from __future__ import annotations

import asyncio
from typing import Any

from loadtest import bench_freeze


def _doc(frozen: list[int], rss: list[float], devices: list[int]) -> dict[str, Any]:
    rounds = [{"events": 10 * i, "seconds": 0.1, "frozen": f, "tracked": 1, "rss_mb": r,
               "devices": d} for i, (f, r, d) in enumerate(zip(frozen, rss, devices,
                                                                 strict=True))]
    return {"nodes": 2, "events": 10 * (len(rounds) - 1), "per_round": 10,
            "freeze_after_devices": 128, "freeze_after_events": 512, "rounds": rounds}


def test_growth_is_judged_from_the_warm_up_round_to_the_last() -> None:
    # the lists and the warm-up round may grow as they like
    steady = _doc([10, 1000, 1020, 1040], [50, 100, 101, 104], [8, 8, 8, 8])
    assert [t["met"] for t in bench_freeze.targets(steady)] == [True, True, True]
    growing = _doc([10, 1000, 1030, 1060], [50, 100, 101, 106], [8, 8, 8, 7])
    frozen, rss, devices = bench_freeze.targets(growing)
    assert frozen["met"] is False and frozen["measured"] == "+6.0%"
    assert rss["met"] is False and devices["met"] is False


def test_a_small_soak_applies_every_round_and_keeps_the_devices() -> None:
    doc = asyncio.run(bench_freeze.soak(nodes=4, events=30, per_round=10, seed=0))
    assert [r["events"] for r in doc["rounds"]] == [0, 10, 20, 30]
    assert len({r["devices"] for r in doc["rounds"]}) == 1 and doc["rounds"][0]["devices"] > 0
    assert all(r["frozen"] > 0 and r["rss_mb"] > 0 for r in doc["rounds"])
    assert "| 30 |" in bench_freeze.markdown(doc)
