"""`loadtest.bench_parse` at a tiny size: every figure is measured, and rendered."""

from loadtest import bench_parse


def test_a_small_run_measures_both_reads_and_the_events() -> None:
    result = bench_parse.measure(nodes=8, repeat=1)
    assert result["devices"] > 8 * 16
    assert result["reference_us_per_device"] > 0 and result["typed_us_per_device"] > 0
    assert result["typed_cold_us_per_device"] > 0
    assert result["typed_unique_names_us_per_device"] > 0
    event = result["event"]
    assert event["events"] >= 1 and event["devices_per_event"] >= 32
    assert event["p99_ms"] >= event["p50_ms"] > 0
    text = bench_parse.render(result)
    assert "| typed: JSON straight into the model |" in text and "p99" in text
    assert "| typed, the decoder's caches emptied first (a process start) |" in text
    assert "| typed, caches emptied first, every device name unique |" in text
    for read in ("named", "unique_names"):
        assert result["memory"][read]["bytes_per_device"] > 0
        assert result["memory"][read]["caches_mb"] >= 0
    assert "| every device name unique |" in text and "bytes |" in text


def test_the_unique_names_read_names_every_device_apart() -> None:
    slices = [o for o in bench_parse.generator.iter_cluster(nodes=2)
              if o["kind"] == "ResourceSlice"]
    names = [d["name"] for body in bench_parse._unique_names(slices)
             for d in bench_parse.orjson.loads(body)["spec"].get("devices") or ()]
    assert len(names) == len(set(names)) == sum(len(s["spec"].get("devices") or ())
                                                for s in slices)


def test_the_targets_are_judged_on_the_figures_with_the_reference_beside() -> None:
    result = {"nodes": 8, "typed_us_per_device": 2.5, "reference_us_per_device": 12.0,
              "typed_over_reference": 0.21,
              "event": {"p99_ms": 1.5, "devices_per_event": 40}}
    typed, event = bench_parse.targets(result)
    assert typed["met"] is True and "reference parse 12.0 us" in typed["beside"]
    assert event["met"] is False
    result["typed_us_per_device"] = 5.9
    assert bench_parse.targets(result)[0]["met"] is False
