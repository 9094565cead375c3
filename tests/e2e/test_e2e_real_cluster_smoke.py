"""A small run of `python -m loadtest --real-cluster` (loadtest/real_cluster.py)
on the session's control plane: both schedulers place pods of the same
workload on their pools, the numbers are consistent with each other, and the
report renders. The full run is a benchmark (loadtest/RESULTS.md), not this."""

from __future__ import annotations

from loadtest import real_cluster
from tests.e2e.cluster import Cluster


def test_real_cluster_mode_reports_both_schedulers(cluster: Cluster) -> None:
    doc = real_cluster.measure(cluster, nodes=4, pods=16, mix="default", seed=2, timeout=300)
    runs = {r["scheduler"]: r for r in doc["runs"]}
    assert set(runs) == set(real_cluster.SCHEDULERS)
    for r in runs.values():
        assert r["pods"] == 16
        assert 0 < r["before_first_failure"] <= r["bound"] <= r["pods"], r
        assert r["seconds"] > 0 and r["pods_per_second"] > 0, r
        assert r["timings"]["api_writes_per_pod"]["pods/binding"] == 1.0, r["timings"]
    drax, in_tree = runs["drax"], runs["default-scheduler"]
    assert drax["timings"]["drax_bind_calls"] >= drax["bound"]
    assert in_tree["timings"]["scheduler_prebind_count"] >= in_tree["bound"]
    assert drax["aligned_share"] == 1.0, drax["quality"]
    text = real_cluster.markdown(doc, command="python -m loadtest --real-cluster")
    assert "pods placed before the first failure" in text
