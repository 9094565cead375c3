from loadtest.bench_preemption import document


def row(attempts: int, total: float, *, seen: int = 0, read: int = 1) -> dict[str, object]:
    return {"pod": "p", "victims": 2, "decision_s": 0.5, "termination_s": 0.1, "claims_s": 0.1,
            "requeue_s": total - 0.7, "total_s": total, "attempts_after_removed": attempts,
            "attempts_after_free": seen, "claims_read_freed": read}


def test_the_document_judges_the_worst_round_and_shows_the_baseline() -> None:
    base = {"bound": False, "victims": 0, "nominated": "", "message": "cannot allocate",
            "waited_s": 30.0, "pods_before": 16}
    doc = document({"rounds": [row(1, 0.8), row(3, 0.9), row(0, 0.7)],
                    "default_scheduler": base}, "cmd")
    attempts, total = doc["targets"]
    assert attempts["measured"] == 3 and attempts["met"] is False
    assert total["measured"] == 0.8 and "Pending" in total["beside"]
    assert doc["format"] == "figures" and doc["command"] == "cmd"
    drax_table, baseline = doc["tables"]
    assert drax_table["rows"][-1][0] == "median" and len(drax_table["rows"]) == 4
    assert baseline["rows"][0][1] == "no (Pending)"


def test_the_target_is_judged_on_the_upper_bound_and_the_median_row_holds_medians() -> None:
    """Filters counted from the poll that sees the claims freed miss the retries
    before that poll: the target is judged on the count from the last victim's
    removal, and every cell of the median row is a median."""
    base = {"bound": False, "victims": 0, "nominated": "", "message": "",
            "waited_s": 30.0, "pods_before": 16}
    doc = document({"rounds": [row(3, 0.8, seen=0, read=2), row(1, 0.9, seen=1, read=0),
                               row(2, 0.7, seen=0, read=1)],
                    "default_scheduler": base}, "cmd")
    attempts = doc["targets"][0]
    assert attempts["measured"] == 3 and attempts["met"] is False
    median = doc["tables"][0]["rows"][-1]
    assert median[0] == "median" and median[-2:] == ["2, 0", "1"]
    assert "3 over all rounds" in doc["notes"][0]
