"""`loadtest.bench_scale` at a tiny size, end to end (the real `drax serve
--kubeconfig` against the API double), and its pure parts: the new claim
shapes and the watch histogram's p99. A smoke run: it checks that every figure
is there and the run ends in the right state, never how fast."""

from __future__ import annotations

import json

from loadtest import generator
from loadtest.bench_scale import apply_histogram, main, new_shapes


def test_new_shapes_are_distinct_and_unknown_to_the_generator() -> None:
    shapes = new_shapes(12)
    specs = [json.dumps(spec, sort_keys=True) for _, spec in shapes]
    known = {json.dumps(dict(spec), sort_keys=True) for spec in generator.SHAPES.values()}
    assert len(set(specs)) == 12 and not set(specs) & known
    assert len({name for name, _ in shapes}) == 12


def _scrape(buckets: dict[str, float], total: float) -> dict[tuple[str, str], float]:
    name = "drax_watch_event_apply_seconds"
    out = {(f"{name}_bucket", f'{{kind="ResourceSlice",le="{le}"}}'): v
           for le, v in buckets.items()}
    out[(f"{name}_count", '{kind="ResourceSlice"}')] = buckets["+Inf"]
    out[(f"{name}_sum", '{kind="ResourceSlice"}')] = total
    return out


def test_apply_p99_is_interpolated_within_its_bucket_over_the_window() -> None:
    before = _scrape({"0.0005": 10, "0.001": 10, "0.0025": 10, "+Inf": 10}, 0.001)
    # 100 events in the window: 90 under 0.5 ms, 8 up to 1 ms, 2 up to 2.5 ms
    after = _scrape({"0.0005": 100, "0.001": 108, "0.0025": 110, "+Inf": 110}, 0.051)
    got = apply_histogram(before, after, kind="ResourceSlice")
    assert got["events"] == 100 and got["mean_ms"] == 0.5
    assert got["share_under_1ms"] == 0.98
    assert got["p99_ms"] == 1.75  # the 99th of 100 is halfway into (1, 2.5] ms
    assert not got["met"]


def test_bench_scale_runs_end_to_end_at_a_tiny_size(tmp_path, capsys) -> None:
    out = tmp_path / "scale.json"
    assert main(["--nodes", "6", "--pods", "3", "--new-shapes", "2", "--burst", "40",
                 "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert [p["outcomes"] for p in result["steady"]] == [{"bound": 3}]
    assert [r["outcome"] for r in result["first_touch"]["shapes"]] == ["bound", "bound"]
    assert result["burst"]["apply"]["events"] >= 40
    assert set(result["burst"]["windows"]) == {"burst", "relist"}
    assert "| first touch of a new shape (2 shapes)" in capsys.readouterr().out
