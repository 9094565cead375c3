"""The watch benchmark runs end to end on a small burst and ends in the right state."""

from __future__ import annotations

from loadtest.bench_watch import PHASES, bench, burst_slices, markdown


async def test_bench_watch_converges_through_every_phase() -> None:
    slices, _ = burst_slices(12)
    devices = sum(len(s["spec"].get("devices") or []) for s in slices)
    result = await bench(events=12, repeat=1)
    assert list(result["phases"]) == list(PHASES)
    after = {phase: p["devices_after"] for phase, p in result["phases"].items()}
    assert after == {"added": devices, "modified": devices, "relist": devices, "deleted": 0}
    assert "| relist |" in markdown(result)
