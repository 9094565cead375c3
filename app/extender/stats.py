"""Plain counters the extender keeps about its own work, read at scrape time.

The extender must not import the Prometheus client (it is pure logic plus
caches); it bumps these integers instead, which costs an attribute add on
paths that already run an allocator search, and `collectors` turns them into
metrics when Prometheus asks.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Final

# Steps of one allocator search: a cached-shape node takes a handful, the
# default budget (app.allocator.DEFAULT_STEP_BUDGET) is the top.
STEP_BUCKETS: Final = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576)


@dataclass(slots=True)
class SearchStats:
    searches: int = 0
    cut_by_budget: int = 0
    steps_sum: int = 0
    # per STEP_BUCKETS bound (non-cumulative), plus one for above the last bound
    steps_buckets: list[int] = field(default_factory=lambda: [0] * (len(STEP_BUCKETS) + 1))
    answers_computed: int = 0  # node verdicts computed (answer-cache misses)
    warming_backlog: int = 0  # nodes left in the warming pass under way

    def searched(self, steps: int, *, cut: bool) -> None:
        self.searches += 1
        self.steps_sum += steps
        self.steps_buckets[bisect.bisect_left(STEP_BUCKETS, steps)] += 1
        if cut:
            self.cut_by_budget += 1
