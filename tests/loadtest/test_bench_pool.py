"""The node-pool benchmark's sizing and targets, from a stored result."""

from __future__ import annotations

from typing import Any

from loadtest import bench_pool

MB = 2**20


def result(nodes: int) -> dict[str, Any]:
    def run(source: str, pool: bool, held: int, ready: float, rss_mb: int) -> dict[str, Any]:
        return {"source": source, "pool": bench_pool.POOL if pool else None, "ready_s": ready,
                "rss_bytes": rss_mb * MB, "peak_bytes": rss_mb * MB, "nodes": held,
                "devices": held * 16}

    quarter = nodes // 4
    return {"nodes": nodes, "pool": bench_pool.POOL, "runs": [
        run("api", False, nodes, 40.0, 100 + nodes // 100),
        run("api", True, quarter, 12.0, 100 + quarter // 100)]}


def test_sizing_separates_the_per_node_memory_from_the_empty_process() -> None:
    size = bench_pool.sizing(result(20_000), "api")
    assert size is not None
    assert round(size["rss_per_node_bytes"] * 100 / MB, 6) == 1.0
    assert round(size["rss_base_bytes"] / MB) == 100
    assert size["ready_s_per_10k_nodes"] == 20.0
    assert bench_pool.sizing(result(20_000), "files") is None


def test_targets_are_judged_only_at_their_size_and_extrapolations_say_so() -> None:
    small = bench_pool.targets(result(20_000))
    assert [t["met"] for t in small] == [None, None]
    assert "extrapolation" in small[0]["note"] and "60 s" in small[0]["note"]
    assert "350 MB" in small[1]["note"]
    full = bench_pool.targets(result(100_000))
    assert [t["met"] for t in full] == [True, True]
