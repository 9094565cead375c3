"""drax's allocator against upstream's, on generated scenarios (see differential.py).

Needs the upstream oracle binary (`python -m tests.upstream.oracle --build`,
Go from the module proxy; or a built one named by DRAX_ORACLE). Skipped only
when `go` is not installed, or while the oracle module is not in the tree.
The batch size keeps CI bounded; `python -m tests.upstream.differential
--allocator N --seed S` runs more.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.upstream.differential import (
    Oracle,
    compare,
    oracle_binary,
    scenarios,
    verdict_of_upstream,
)

CI_SCENARIOS = 2_000
BATCHES = 4
_GIVEN = bool(os.environ.get("DRAX_ORACLE"))
pytestmark = [
    pytest.mark.skipif(not _GIVEN and shutil.which("go") is None,
                       reason="go is not installed: the upstream oracle cannot be built"),
    pytest.mark.skipif(not _GIVEN and not (Path(__file__).parent / "oracle.py").exists(),
                       reason="the upstream oracle (tests/upstream/oracle.py) is not in this tree"),
]


@pytest.fixture(scope="module")
def oracle() -> Iterator[Oracle]:
    running = Oracle(oracle_binary())
    yield running
    running.close()


@pytest.mark.parametrize("batch", range(BATCHES))
def test_drax_agrees_with_upstream(oracle: Oracle, batch: int) -> None:
    failures = []
    for scenario in scenarios(CI_SCENARIOS // BATCHES, seed=1000 + batch):
        problems = compare(scenario, oracle.ask(scenario.request()))
        if problems:
            failures.append(f"seed {scenario.seed}: {'; '.join(problems)}")
    assert not failures, "\n".join(failures[:10])


def test_the_generator_reaches_every_verdict(oracle: Oracle) -> None:
    seen = {verdict_of_upstream(oracle.ask(s.request())) for s in scenarios(300, seed=7)}
    assert seen == {"feasible", "unschedulable", "error", "invalid-pools"}
