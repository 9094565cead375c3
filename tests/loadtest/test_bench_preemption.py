import gc
import json
from pathlib import Path

from app import garbage_collector
from app.extender import Extender
from app.features import FeatureGates
from app.preemption import VictimSearch
from loadtest.bench_preempt import inventory_of
from loadtest.bench_preemption import document, main, room_cluster


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


def test_the_room_search_mode_runs_and_records_a_figure_where_every_node_needs_room(
        tmp_path: Path) -> None:
    """`--search-room`: in-process, no control plane; every node freed takes at
    least one victim for the preemptor's cpu beside its two device victims."""
    objs = room_cluster(nodes=6)
    inv = inventory_of(objs)
    pod = inv.pod("default/preemptor")
    assert pod is not None
    ext = Extender(inv, features=FeatureGates(), file_mode=True)
    plan = VictimSearch.of(ext).search(pod, inv.node_names())
    assert plan.nodes
    for found in plan.nodes:
        assert sum(not v.for_room for v in found.victims) == 2
        assert sum(v.for_room for v in found.victims) >= 1
    out = tmp_path / "victim-search-room.json"
    threshold = gc.get_threshold()
    gc.unfreeze()
    gc.set_threshold(*threshold[:2], 10)
    try:
        assert main(["--search-room", "--nodes", "6", "--runs", "1", "--json", str(out)]) == 0
        # The collector as `loadtest.bench_preempt` (and `drax serve`) sets it.
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold()[2] == garbage_collector.FULL_CAP
    finally:
        gc.set_threshold(*threshold)
    doc = json.loads(out.read_text())
    assert doc["format"] == "figures" and doc["targets"] == []
    calls = [row[0] for row in doc["tables"][0]["rows"]]
    assert calls == ["filter, first", "best node, first", "every node, first"]
