from loadtest.bench_preemption import document


def row(attempts: int, total: float) -> dict[str, object]:
    return {"pod": "p", "victims": 2, "decision_s": 0.5, "termination_s": 0.1, "claims_s": 0.1,
            "requeue_s": total - 0.7, "total_s": total, "attempts_after_free": attempts}


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
