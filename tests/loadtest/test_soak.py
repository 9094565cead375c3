"""The soak benchmark's own machinery, run for a few seconds: drax serve in
kube mode against the API double, pods scheduled and churned, windows and the
verdict filled in. Speed is not asserted (the soak itself is the benchmark)."""

from __future__ import annotations

from loadtest import soak


def test_a_short_soak_schedules_churns_and_reports() -> None:
    doc = soak.run(4.0)
    assert doc["errors"] == 0, doc["first_errors"]
    assert doc["pods"] > 0 and doc["requests"] >= doc["pods"]
    window = doc["windows"][0]
    assert window["rss_mb"] > 0 and window["cpu_ms_per_pod"] > 0
    assert 0 < window["handler_p99_ms"] <= window["filter_p99_ms"]
    assert doc["unplaced"] < doc["pods"]
    assert not doc["passed"]  # one window: nothing measured after the warm-up
    assert "| t (s) | RSS (MB) |" in soak.markdown(doc)


def test_warm_up_lasts_until_the_per_pod_memories_are_full() -> None:
    windows = [soak.Window(started=30.0 * i, pods_before=2_000 * i) for i in range(10)]
    assert soak.warmup_windows(windows) == 3  # a fifth is 2, but 4,000 pods < WARMUP_PODS
    slow = [soak.Window(started=30.0 * i, pods_before=10 * i) for i in range(10)]
    assert soak.warmup_windows(slow) == 9
    fast = [soak.Window(started=30.0 * i, pods_before=20_000 * i) for i in range(10)]
    assert soak.warmup_windows(fast) == 2
