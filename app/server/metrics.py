"""Prometheus metrics of the HTTP edge, on the registry of one runtime.

`ServerMetrics` builds the edge's metrics on a registry it is handed (or a
new one), and every other package of the runtime (the kube source, the
binder, the observers) registers its collectors on that same registry, so
`/metrics` serves them all and two runtimes in one process (tests build
several) count apart. Only what belongs to the process is shared: memory,
CPU and the collector's pauses.
Latency buckets span 100 µs to 5 s: a cached filter answers in well under a
millisecond, and kube-scheduler's default `httpTimeout` is 5 s.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from typing import Any, Final

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    ProcessCollector,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import Metric

from app.observability.reasons import BIND_CAUSES, FILTER_REASONS

LATENCY_BUCKETS: Final = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                          0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
# 256 B (a filter for a few nodes with nodeCacheCapable) .. 16 MiB (max_body_bytes).
SIZE_BUCKETS: Final = tuple(float(4 ** k * 256) for k in range(9))

OUTCOMES: Final = ("ok", "error", "bad_request")
VERBS: Final = ("filter", "prioritize", "bind", "preempt")
SCORES: Final = tuple(str(s) for s in range(11))


class GCPauses:
    """The cyclic collector's pauses, per generation: one per process (the
    collector is), collected on every runtime's registry."""

    def __init__(self) -> None:
        self.histogram = Histogram(
            "drax_gc_pause_seconds",
            "Time the cyclic garbage collector stopped the process, per collection and "
            "generation.", ["generation"], buckets=LATENCY_BUCKETS, registry=None)
        self._by_generation = tuple(self.histogram.labels(generation=str(g)) for g in range(3))
        self._started = 0.0

    def time(self, phase: str, info: dict[str, Any]) -> None:
        # The collector runs inside whatever request allocated last: its pauses
        # are the latency spikes no handler timer explains.
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self._by_generation[info["generation"]].observe(time.perf_counter() - self._started)

    def collect(self) -> Iterator[Metric]:
        yield from self.histogram.collect()


GC_PAUSES: Final = GCPauses()
gc.callbacks.append(GC_PAUSES.time)


class ServerMetrics:
    """The edge's metrics on `registry` (a new one when not given), which also
    gets the process's memory, CPU and collector figures: the inventory's size
    and the GC tuning in `drax serve` show up there first."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(
            auto_describe=True)
        r = self.registry
        ProcessCollector(registry=r)
        GCCollector(registry=r)
        r.register(GC_PAUSES)
        self.request_seconds = Histogram(
            "drax_request_duration_seconds", "Time to answer one extender call, by verb.",
            ["verb"], buckets=LATENCY_BUCKETS, registry=r)
        self.requests = Counter(
            "drax_requests_total",
            "Extender calls by verb and outcome (ok, error: answered with Error or failed "
            "inside, bad_request: rejected with a 4xx).",
            ["verb", "outcome"], registry=r)
        self.filtered_nodes = Counter(
            "drax_filter_nodes_total",
            "Nodes judged by filter: passed, failed (preemption may help), unresolvable.",
            ["result"], registry=r)
        self.in_flight = Gauge(
            "drax_requests_in_flight", "Extender calls being answered now, by verb.",
            ["verb"], registry=r)
        self.request_bytes = Histogram(
            "drax_request_body_bytes", "Size of the request body of an extender call, by verb.",
            ["verb"], buckets=SIZE_BUCKETS, registry=r)
        self.response_bytes = Histogram(
            "drax_response_body_bytes", "Size of drax's answer to an extender call, by verb.",
            ["verb"], buckets=SIZE_BUCKETS, registry=r)
        self.filter_rejections = Counter(
            "drax_filter_node_rejections_total",
            "Nodes filter ruled out, by reason category (docs/metrics.md lists them).",
            ["reason"], registry=r)
        # Children looked up once: `labels()` costs microseconds (validation, a lock).
        self.rejections_by_reason = {reason: self.filter_rejections.labels(reason=reason)
                                     for reason in FILTER_REASONS}
        self.prioritize_scores = Counter(
            "drax_prioritize_node_scores_total",
            "Node scores prioritize answered (0..10; a node left out counts as 0).",
            ["score"], registry=r)
        self.pods_bound = Counter(
            "drax_pods_bound_total",
            "Pods bind placed (claims allocated and reserved, pod bound).", registry=r)
        self.bind_failures = Counter(
            "drax_bind_failures_total", "Bind calls that answered with an error, by cause.",
            ["cause"], registry=r)
        self.bind_wait_seconds = Histogram(
            "drax_filter_bind_wait_seconds",
            "Time a filter waited for the binds of the pods scheduled just before it "
            "(only filters that found a bind on its way).",
            buckets=LATENCY_BUCKETS, registry=r)
        self.ready = Gauge(
            "drax_ready",
            "1 when the inventory has finished its initial sync (/readyz answers 200).",
            registry=r)
        self.answer_cache_hits = Counter(
            "drax_answer_cache_hits_total",
            "Nodes filter or prioritize answered from a kept, current verdict "
            "(misses: drax_answer_cache_misses_total).", registry=r)
        self._prefill()

    def _prefill(self) -> None:
        # Series exist at 0 from the start, so rate() and alerts see them before
        # the first failure.
        for verb in VERBS:
            self.request_seconds.labels(verb=verb)
            for outcome in OUTCOMES:
                self.requests.labels(verb=verb, outcome=outcome)
            self.in_flight.labels(verb=verb)
            self.request_bytes.labels(verb=verb)
            self.response_bytes.labels(verb=verb)
        for result in ("passed", "failed", "unresolvable"):
            self.filtered_nodes.labels(result=result)
        for score in SCORES:
            self.prioritize_scores.labels(score=score)
        for cause in BIND_CAUSES:
            self.bind_failures.labels(cause=cause)

    def exposition(self) -> tuple[bytes, str]:
        """The registry in Prometheus text format and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
