"""drax's allocator against upstream's, on generated scenarios (see differential.py).

Uses the session's upstream oracle (conftest.py: built with Go from the
module proxy, skipped only when `go` is missing). The batch size keeps CI
bounded; `python -m tests.upstream.differential --allocator N --seed S`
runs more.
"""

from __future__ import annotations

import pytest

from tests.upstream.differential import compare, scenarios, verdict_of_upstream
from tests.upstream.oracle import Oracle

CI_SCENARIOS = 2_000
BATCHES = 4


@pytest.mark.parametrize("batch", range(BATCHES))
def test_drax_agrees_with_upstream(oracle: Oracle, batch: int) -> None:
    cases = list(scenarios(CI_SCENARIOS // BATCHES, seed=1000 + batch))
    answers = oracle.batch([s.request() for s in cases])
    failures = [f"seed {s.seed}: {'; '.join(problems)}"
                for s, answer in zip(cases, answers, strict=True)
                if (problems := compare(s, answer))]
    assert not failures, "\n".join(failures[:10])


def test_the_generator_reaches_every_verdict(oracle: Oracle) -> None:
    cases = list(scenarios(300, seed=7))
    seen = {verdict_of_upstream(a) for a in oracle.batch([s.request() for s in cases])}
    assert seen == {"feasible", "unschedulable", "error", "invalid-pools"}
