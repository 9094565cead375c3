"""The whole `python -m loadtest` at a tiny size, as CI runs it: generator, the
real `drax serve` from files, scheduling over the scheduler's candidate share,
the report. A smoke run: it checks that every pod is placed and every figure
the report needs is there, never how fast (speed is measured in loadtest/)."""

from __future__ import annotations

import json

from loadtest.__main__ import main


def test_benchmark_runs_end_to_end_at_a_tiny_size(tmp_path, capsys) -> None:
    out = tmp_path / "result.json"
    assert main(["--nodes", "8", "--pods", "6", "--target-pods", "3", "--candidates",
                 "scheduler", "--no-churn", "--no-floor", "--json", str(out)]) == 0
    [run] = json.loads(out.read_text())["runs"]
    assert run["nodes"] == 8 and not run["aborted"]
    assert [(p["phase"], p["outcomes"]) for p in run["phases"]] == [
        ("mixed", {"bound": 6}), ("2gpu-1nic-same-root", {"bound": 3})]
    assert run["build_seconds"] > 0 and run["rss"]["ready_bytes"] > 0
    assert "### 8 nodes" in capsys.readouterr().out
