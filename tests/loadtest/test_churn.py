"""The churn benchmark runs every event kind through the real inventory and
extender, and its correctness checks hold on a small cluster."""

from __future__ import annotations

from loadtest.churn import EVENT_KINDS, run_churn


def test_churn_applies_every_event_kind_and_finds_no_violation():
    result = run_churn(nodes=12, events=80, pods=40)
    assert result["violations"] == []
    assert set(result["by_kind"]) == set(EVENT_KINDS)
    assert result["events"] >= 80
    assert result["checks_passed"] > 20
    assert result["apply"]["count"] == result["events"]
    assert result["cycle_in_process"]["count"] == result["cycles"] > 0
