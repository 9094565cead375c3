"""Latency summaries for the benchmarks: p50 / p99 / max in milliseconds.

Percentiles use the nearest-rank definition (the smallest sample with at least
p% of the samples at or below it), so a reported p99 is a latency that was
actually observed, never an interpolation between two requests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(slots=True, frozen=True)
class Summary:
    count: int
    mean_ms: float
    p50_ms: float
    p99_ms: float
    max_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}


def percentile(ordered: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of an ascending sequence (0 for no samples)."""
    if not ordered:
        return 0.0
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def summarize(seconds: Sequence[float]) -> Summary:
    ordered = sorted(s * 1000 for s in seconds)
    if not ordered:
        return Summary(0, 0.0, 0.0, 0.0, 0.0)
    return Summary(count=len(ordered), mean_ms=sum(ordered) / len(ordered),
                   p50_ms=percentile(ordered, 50), p99_ms=percentile(ordered, 99),
                   max_ms=ordered[-1])
