"""Upstream's scheduler_perf DRA test cases through drax: a smoke run, no speeds.

The smallest workload of each DRA test case of k8s.io/kubernetes v1.37.2 (read
from the module cache), under the in-tree scheduler and under drax-allocator
(drax started against the workload's own API server with the manifests'
configuration): every pod upstream's YAML has the workload create is created
and scheduled, none failed. Speeds are
measured by `python -m loadtest.scheduler_perf`, never here.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from loadtest.scheduler_perf import (
    DRAX_LACKS,
    Workload,
    build,
    discover,
    run_workload,
    smallest,
    upstream_root,
)
from tests.e2e.build import go_available

SCHEDULERS = ("in-tree", "drax-allocator")
NO_GO = "scheduler_perf needs Go: `go` is not on PATH"


def _smoke_set() -> list[Workload]:
    return smallest(discover(upstream_root())) if go_available() else []


SMOKE = _smoke_set()
PARAMS = [pytest.param(w, s, id=f"{w.full_name}-{s}") for w in SMOKE for s in SCHEDULERS
          if s == "in-tree" or not w.drax_cannot_run()] or [pytest.param(None, None, id="no-go")]


@pytest.fixture(scope="module")
def binaries() -> Iterator[tuple]:
    if not go_available():
        pytest.skip(NO_GO)
    yield build()


@pytest.mark.parametrize(("workload", "scheduler"), PARAMS)
def test_smallest_workload_schedules_every_pod(workload, scheduler, binaries) -> None:
    binary, etcd_dir = binaries
    out = run_workload(workload, scheduler, binary=binary, etcd_dir=etcd_dir, pods_timeout=180)
    run = out.run
    detail = f"pending {out.pending}\n{out.log}"
    assert out.failed_pods == 0, detail
    assert run["measured_pods"] == workload.pods, detail
    assert run["scheduled"] == workload.pods, detail
    assert out.ok, detail


def test_every_smoke_workload_but_slice_publishing_creates_pods() -> None:
    """The counts the smoke compares against are read from upstream's YAML; a
    reading that found no pods would let a run that created none pass."""
    if not go_available():
        pytest.skip(NO_GO)
    counts = {w.full_name: w.pods for w in SMOKE}
    assert counts.pop("PublishResourceSlices/500nodes") == 0
    assert all(n is not None and n > 0 for n in counts.values()), counts


def test_drax_skips_only_the_features_it_lacks(binaries) -> None:
    skipped = {w.case for w in SMOKE if w.drax_cannot_run()}
    lacking = {w.case for w in SMOKE if any(w.gates.get(g) for g in DRAX_LACKS)}
    assert skipped == lacking == {"CompatibilityGroups", "SharedPodGroupResourceClaim",
                                  "SharedPodGroupResourceClaimTemplate"}
    assert len(SMOKE) >= 14
