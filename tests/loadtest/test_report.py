"""Report building from samples, target evaluation, and the py-spy summary."""

from __future__ import annotations

import orjson
import pytest

from loadtest import profile, report
from loadtest.bench import Run, Sample


def _sample(phase: str, *, shape: str = "1gpu", outcome: str = "bound", filter_ms: float = 2.0,
            prioritize_ms: float | None = 1.0, error: str | None = None) -> Sample:
    return Sample(phase=phase, shape=shape, outcome=outcome, filter_body=b"{}",
                  filter_s=filter_ms / 1000,
                  prioritize_s=None if prioritize_ms is None else prioritize_ms / 1000,
                  bind_s=0.001, passed=3, error=error)


def _run(samples: list[Sample]) -> Run:
    run = Run()
    for s in samples:
        run.add(s, s.cycle_s + (s.bind_s or 0))
    return run


def test_phase_results_count_outcomes_errors_and_ratio():
    drax = _run([_sample("mixed"), _sample("mixed", outcome="bind-error", error="full"),
                 _sample("mixed", outcome="bind-error", error="full"),
                 _sample("target", shape="2gpu-1nic-same-root", filter_ms=4.0)])
    floor = _run([_sample("mixed", filter_ms=1.0, prioritize_ms=0.5)] * 3
                 + [_sample("target", filter_ms=1.0, prioritize_ms=1.0)])
    mixed, target = report.phase_results(drax, floor)
    assert mixed["outcomes"] == {"bound": 1, "bind-error": 2}
    assert mixed["errors"] == ["full"]
    assert mixed["drax"]["cycle"]["p50_ms"] == 3.0
    assert mixed["cycle_ratio"]["p50"] == 2.0
    assert target["shapes"]["2gpu-1nic-same-root"]["cycle"]["max_ms"] == 5.0
    assert report.overall([mixed, target], "drax")["cycles"] == 4


def _doc(*, p99_500: float, p99_5000: float, rss_16_mb: float) -> dict:
    def run(nodes: int, p99: float) -> dict:
        return {"nodes": nodes, "devices": 16 * nodes, "candidates": "all",
                "rss": {"ready_bytes": 10 * report.MB, "after_bytes": 0, "peak_bytes": 0},
                "phases": [{"phase": report.TARGET_SHAPE,
                            "drax": {"cycle": {"p99_ms": p99}}}],
                "drax_overall": {"mean_cycle_ms": 2.0, "cycles_per_s": 500.0},
                "floor_overall": {"mean_cycle_ms": 1.0},
                "churn": {"apply": {"p99_ms": 0.5}, "apply_cpu": {"p99_ms": 0.4}},
                "rss_16": {"devices": 16 * nodes, "ready_bytes": rss_16_mb * report.MB}}
    return {"runs": [run(500, p99_500), run(5000, p99_5000)]}


def test_targets_are_met_or_missed_by_the_measured_figures():
    met = {t["target"]: t["met"] for t in report.evaluate_targets(
        _doc(p99_500=4.9, p99_5000=26.0, rss_16_mb=390))}
    assert met == {
        "2-GPU + 1-NIC same-root cycle p99, 500 nodes": True,
        "2-GPU + 1-NIC same-root cycle p99, 5000 nodes": False,
        "cycle time vs floor, 500 nodes": True,
        "cycles/s, 500 nodes": True,
        "apply one inventory event (p99)": True,
        "RSS holding 5,000 nodes x 16 devices": True,
    }


@pytest.mark.parametrize(("floor_ms", "measured", "met"), [(0.7, 2.86, True), (0.6, 3.33, False)])
def test_cycle_time_against_the_floor_is_met_up_to_three_times(floor_ms, measured, met):
    doc = _doc(p99_500=4.0, p99_5000=20.0, rss_16_mb=300)
    doc["runs"][0]["floor_overall"]["mean_cycle_ms"] = floor_ms  # drax: 2.0 ms
    target = {t["target"]: t for t in report.evaluate_targets(doc)}[
        "cycle time vs floor, 500 nodes"]
    assert (target["measured"], target["met"]) == (measured, met)


def test_profile_summary_charges_samples_to_drax_packages():
    handler = "ExtenderEdge._filter (app/server/app.py:130)"
    text = "\n".join([
        f"main (app/__main__.py:7);run (uvicorn/server.py:1);{handler};"
        "allocate (app/allocator/__init__.py:9);__hash__ (fractions.py:3) 6",
        f"main (app/__main__.py:7);{handler};matches (app/cel/__init__.py:5) 3",
        "main (app/__main__.py:7);run (uvicorn/server.py:1);send (uvicorn/h11.py:2) 1",
        "Thread.run (threading.py:982);_worker (concurrent/futures/thread.py:81) 50",
        "main (app/__main__.py:7);run (uvicorn/server.py:1);EpollSelector.select "
        "(selectors.py:468) 20",
        "garbage line",
    ])
    summary = profile.summarize_collapsed(text)
    assert summary["samples"] == 10
    areas = {a["function"]: a["percent"] for a in summary["by_area"]}
    assert areas == {"app/allocator": 60.0, "app/cel": 30.0, "HTTP stack + asyncio": 10.0}
    assert summary["self"][0] == {"function": "__hash__ (fractions.py)", "samples": 6,
                                  "percent": 60.0}
    inclusive = {i["function"]: i["percent"] for i in summary["inclusive"]}
    assert inclusive["ExtenderEdge._filter (app/server/app.py)"] == 90.0
    assert "main (app/__main__.py)" not in inclusive
    assert "| app/allocator | 60.0 |" in profile.markdown(summary)


def test_profile_summary_marks_background_warming():
    text = ("main (app/__main__.py:7);run (app/cli/serve.py:80);"
            "Extender.keep_warm (app/extender/verbs.py:372);"
            "class_matches (app/inventory/selectors.py:60) 4\n"
            "main (app/__main__.py:7);run (app/cli/serve.py:80);send (uvicorn/h11.py:2) 1")
    areas = {a["function"]: a["percent"]
             for a in profile.summarize_collapsed(text)["by_area"]}
    assert areas == {"app/inventory (background warming)": 80.0, "HTTP stack + asyncio": 20.0}


def test_results_md_is_what_the_stored_json_renders():
    # RESULTS.md is generated: a benchmark re-run writes its JSON, then
    # `python -m loadtest.report` rewrites the file.
    assert report.RESULTS_MD.read_text() == report.render_results()
    assert report.main(["--check"]) == 0


def test_every_stored_result_has_a_section_and_says_where_it_comes_from():
    names = {s.name for s in report.SECTIONS}
    for path in sorted(report.RESULTS_DIR.glob("*.json")):
        doc = orjson.loads(path.read_bytes())
        assert path.stem in names, path
        assert doc.get("command") or doc.get("commands"), path
        assert doc.get("commit") and doc.get("machine") and doc.get("date"), path


def test_every_stored_command_reproduces_its_section_once_without_scratch_paths():
    for path in sorted(report.RESULTS_DIR.glob("*.json")):
        doc = orjson.loads(path.read_bytes())
        commands = doc.get("commands") or [doc["command"]]
        assert len(commands) == len(set(commands)), path
        for command in commands:
            assert "/tmp/" not in command and not command.startswith("/"), (path, command)


def test_a_result_measured_at_several_commits_names_each():
    doc = {"command": "c", "commit": "b", "commits": ["a", "b"], "date": "2026-12-04"}
    assert "Commits `a`, `b`; machine" in "\n".join(report.provenance_lines(doc))
    assert report.commits({"commit": "b"}) == "`b`" and report.commits({}) == "not recorded"


def test_a_missing_result_says_how_to_measure_it_and_an_unknown_one_is_refused(tmp_path):
    text = report.render_results(tmp_path)
    assert text.count("Not measured yet") == len(report.SECTIONS)
    (tmp_path / "nobody.json").write_text("{}")
    assert report.main(["--results", str(tmp_path), "--out", str(tmp_path / "R.md")]) == 2
    assert not (tmp_path / "R.md").exists()


def test_the_generic_format_renders_targets_commits_tables_and_notes():
    doc = {"format": "figures", "command": "python -m loadtest.x", "commit": "abc1234",
           "machine": {"cores": 2, "python": "3.11.7", "platform": "Linux"}, "date": "2026-12-04",
           "about": "What it measures.",
           "targets": [{"target": "ready", "goal": "<= 60 s", "measured": 61.0, "unit": "s",
                        "met": False, "commit": "def5678"}],
           "tables": [{"caption": "Sizes:", "columns": ["nodes", "ready"],
                       "rows": [[500, "2.4 s"]]}],
           "notes": ["One note."]}
    section = report.Section("x", "X", "python -m loadtest.x --json x.json", report.figures)
    text = "\n".join(report._section(section, doc))
    assert "Commit `abc1234`; machine: 2 cores, Python 3.11.7, Linux; measured 2026-12-04." in text
    assert "| ready | <= 60 s | 61.0 s | **missed** | `def5678` |" in text
    assert "| 500 | 2.4 s |" in text and "- One note." in text


def test_provenance_names_the_command_commit_machine_and_day():
    doc = report.provenance("python -m loadtest --nodes 500")
    assert doc["command"] == "python -m loadtest --nodes 500"
    assert set(doc["machine"]) == {"cores", "python", "platform"}
    assert len(doc["date"]) == 10


def test_the_allocator_differential_records_its_mismatches_as_a_missed_target():
    from tests.upstream.differential import record
    doc = record(command="python -m tests.upstream.differential --allocator 3", count=3, seed=0,
                 mismatches=1, verdicts={"feasible": 2, "error": 1},
                 lines=["seed 2: advisor verdict feasible, upstream error (x)"], seconds=1.0)
    [section] = [s for s in report.SECTIONS if s.name == "allocator-differential"]
    text = "\n".join(report._section(section, doc))
    assert "| scenarios where drax and upstream disagree | 0 | 1 | **missed** |" in text
    assert "| feasible | 2 |" in text and "| error | 1 |" in text
    assert "- mismatch: `seed 2: advisor verdict feasible, upstream error (x)`" in text
    doc = record(command="c", count=3, seed=0, mismatches=0, verdicts={"feasible": 3},
                 lines=[], seconds=1.0)
    assert [t["met"] for t in section.targets(doc)] == [True]
