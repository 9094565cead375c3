"""`loadtest.bench_parse` at a tiny size: every figure is measured, and rendered."""

from loadtest import bench_parse


def test_a_small_run_measures_both_reads_and_the_events() -> None:
    result = bench_parse.measure(nodes=8, repeat=1)
    assert result["devices"] > 8 * 16
    assert result["reference_us_per_device"] > 0 and result["typed_us_per_device"] > 0
    event = result["event"]
    assert event["events"] >= 1 and event["devices_per_event"] >= 32
    assert event["p99_ms"] >= event["p50_ms"] > 0
    text = bench_parse.render(result)
    assert "| typed: JSON straight into the model |" in text and "p99" in text
