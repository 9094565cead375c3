from loadtest.bench_preemption import document


def row(after: int, total: float, *, before: int = 2, unread: int = 0, removed: int = 3,
        seen: int = 0, read: int = 1) -> dict[str, object]:
    return {"pod": "p", "victims": 2, "decision_s": 0.5, "termination_s": 0.1, "claims_s": 0.1,
            "requeue_s": total - 0.7, "total_s": total, "attempts_after_dealloc": after,
            "attempts_before_dealloc": before, "attempts_unread": unread,
            "filters_after_removed": removed, "filters_after_free": seen,
            "claims_read_freed": read}


BASE = {"bound": False, "victims": 0, "nominated": "", "message": "cannot allocate",
        "waited_s": 30.0, "pods_before": 16}


def test_the_document_judges_the_worst_round_and_shows_the_baseline() -> None:
    doc = document({"rounds": [row(1, 0.8), row(3, 0.9), row(1, 0.7)],
                    "default_scheduler": BASE}, "cmd")
    attempts, total = doc["targets"]
    assert attempts["measured"] == 3 and attempts["met"] is False
    assert total["measured"] == 0.8 and "Pending" in total["beside"]
    assert doc["format"] == "figures" and doc["command"] == "cmd"
    drax_table, baseline = doc["tables"]
    assert drax_table["rows"][-1][0] == "median" and len(drax_table["rows"]) == 4
    assert baseline["rows"][0][1] == "no (Pending)"


def test_the_target_is_judged_on_drax_s_count_not_on_the_filter_requests() -> None:
    """Filter requests from the last victim's removal count the refused
    attempts before the deallocation, and two requests per refused attempt
    of a nominated pod: the target is judged on drax's count of attempts
    after the deallocation, and every cell of the median row is a median."""
    doc = document({"rounds": [row(1, 0.8, removed=4, seen=0, read=2),
                               row(2, 0.9, unread=1, removed=3, seen=1, read=0),
                               row(1, 0.7, before=4, removed=5, seen=0, read=1)],
                    "default_scheduler": BASE}, "cmd")
    attempts = doc["targets"][0]
    assert attempts["measured"] == 2 and attempts["met"] is True
    assert "1, 2, 1 (1 of them" in attempts["note"]
    median = doc["tables"][0]["rows"][-1]
    assert median[0] == "median" and median[-4:] == ["1", "2", "4, 0", "1"]
    assert "3 over all rounds" in doc["notes"][2]
