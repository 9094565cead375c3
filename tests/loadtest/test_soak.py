"""The soak benchmark's own machinery, run for a few seconds: drax serve in
kube mode against the API double, pods scheduled and churned, windows and the
verdict filled in. Speed is not asserted (the soak itself is the benchmark)."""

from __future__ import annotations

from loadtest import soak


def test_a_short_soak_schedules_churns_and_reports() -> None:
    doc = soak.run(4.0)
    assert doc["errors"] == 0, doc["first_errors"]
    assert doc["pods"] > 0 and doc["requests"] >= doc["pods"]
    assert doc["windows"] and doc["windows"][0]["rss_mb"] > 0
    assert doc["unplaced"] < doc["pods"]
    assert "| t (s) | RSS (MB) |" in soak.markdown(doc)
