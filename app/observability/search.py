"""The extender's search statistics as Prometheus metrics.

The extender keeps plain counters (`app.extender.stats.SearchStats`) and
never imports the Prometheus client; this collector turns them into metrics
when Prometheus asks.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from app.extender.stats import STEP_BUCKETS, SearchStats
from app.observability.gauges import le


class SearchMetrics(Collector):
    """`stats` collected at every scrape."""

    def __init__(self, stats: SearchStats) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Any]:
        stats = self.stats
        running = 0
        buckets = []
        for bound, n in zip(STEP_BUCKETS, stats.steps_buckets, strict=False):
            running += n
            buckets.append((le(bound), running))
        buckets.append(("+Inf", stats.searches))
        yield HistogramMetricFamily("drax_allocator_search_steps",
                                    "Steps of each allocator search drax ran.",
                                    buckets=buckets, sum_value=float(stats.steps_sum))
        yield CounterMetricFamily("drax_allocator_searches_cut",
                                  "Allocator searches stopped by the step budget.",
                                  value=stats.cut_by_budget)
        yield CounterMetricFamily("drax_answer_cache_misses",
                                  "Node verdicts computed because no current answer was kept.",
                                  value=stats.answers_computed)
        yield GaugeMetricFamily("drax_warming_backlog",
                                "Nodes left in the background warming pass under way.",
                                value=stats.warming_backlog)
