"""Prometheus metrics on drax's own registry.

One module-level `REGISTRY` so every package (the kube source, the binder)
registers its collectors next to the HTTP ones and `/metrics` serves them
all, without the default registry's process-wide globals leaking into tests.
Latency buckets span 100 µs to 5 s: a cached filter answers in well under a
millisecond, and kube-scheduler's default `httpTimeout` is 5 s.
"""

from __future__ import annotations

import gc
import time
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

from app.observability.reasons import BIND_CAUSES, FILTER_REASONS

REGISTRY: Final = CollectorRegistry(auto_describe=True)
# Memory, CPU and collector activity: the inventory's size and the GC tuning
# in `drax serve` show up here first.
ProcessCollector(registry=REGISTRY)
GCCollector(registry=REGISTRY)

LATENCY_BUCKETS: Final = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                          0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

REQUEST_SECONDS: Final = Histogram(
    "drax_request_duration_seconds", "Time to answer one extender call, by verb.",
    ["verb"], buckets=LATENCY_BUCKETS, registry=REGISTRY)

REQUESTS: Final = Counter(
    "drax_requests_total",
    "Extender calls by verb and outcome (ok, error: answered with Error or failed inside, "
    "bad_request: rejected with a 4xx).",
    ["verb", "outcome"], registry=REGISTRY)

FILTERED_NODES: Final = Counter(
    "drax_filter_nodes_total",
    "Nodes judged by filter: passed, failed (preemption may help), unresolvable.",
    ["result"], registry=REGISTRY)

# 256 B (a filter for a few nodes with nodeCacheCapable) .. 16 MiB (max_body_bytes).
SIZE_BUCKETS: Final = tuple(float(4 ** k * 256) for k in range(9))

IN_FLIGHT: Final = Gauge(
    "drax_requests_in_flight", "Extender calls being answered now, by verb.",
    ["verb"], registry=REGISTRY)

REQUEST_BYTES: Final = Histogram(
    "drax_request_body_bytes", "Size of the request body of an extender call, by verb.",
    ["verb"], buckets=SIZE_BUCKETS, registry=REGISTRY)

RESPONSE_BYTES: Final = Histogram(
    "drax_response_body_bytes", "Size of drax's answer to an extender call, by verb.",
    ["verb"], buckets=SIZE_BUCKETS, registry=REGISTRY)

FILTER_REJECTIONS: Final = Counter(
    "drax_filter_node_rejections_total",
    "Nodes filter ruled out, by reason category (docs/metrics.md lists them).",
    ["reason"], registry=REGISTRY)

# Children looked up once: `labels()` costs microseconds (validation, a lock).
REJECTIONS_BY_REASON: Final = {r: FILTER_REJECTIONS.labels(reason=r) for r in FILTER_REASONS}

PRIORITIZE_SCORES: Final = Counter(
    "drax_prioritize_node_scores_total",
    "Node scores prioritize answered (0..10; a node left out counts as 0).",
    ["score"], registry=REGISTRY)

PODS_BOUND: Final = Counter(
    "drax_pods_bound_total", "Pods bind placed (claims allocated and reserved, pod bound).",
    registry=REGISTRY)

BIND_FAILURES: Final = Counter(
    "drax_bind_failures_total", "Bind calls that answered with an error, by cause.",
    ["cause"], registry=REGISTRY)

BIND_WAIT_SECONDS: Final = Histogram(
    "drax_filter_bind_wait_seconds",
    "Time a filter waited for the binds of the pods scheduled just before it "
    "(only filters that found a bind on its way).",
    buckets=LATENCY_BUCKETS, registry=REGISTRY)

READY: Final = Gauge(
    "drax_ready", "1 when the inventory has finished its initial sync (/readyz answers 200).",
    registry=REGISTRY)

ANSWER_CACHE_HITS: Final = Counter(
    "drax_answer_cache_hits_total",
    "Nodes filter or prioritize answered from a kept, current verdict "
    "(misses: drax_answer_cache_misses_total).", registry=REGISTRY)

GC_PAUSES: Final = Histogram(
    "drax_gc_pause_seconds",
    "Time the cyclic garbage collector stopped the process, per collection and generation.",
    ["generation"], buckets=LATENCY_BUCKETS, registry=REGISTRY)
_GC_BY_GENERATION: Final = tuple(GC_PAUSES.labels(generation=str(g)) for g in range(3))
_gc_started = 0.0


def _time_gc(phase: str, info: dict[str, Any]) -> None:
    # The collector runs inside whatever request allocated last: its pauses
    # are the latency spikes no handler timer explains.
    global _gc_started
    if phase == "start":
        _gc_started = time.perf_counter()
    else:
        _GC_BY_GENERATION[info["generation"]].observe(time.perf_counter() - _gc_started)


gc.callbacks.append(_time_gc)

OUTCOMES: Final = ("ok", "error", "bad_request")
VERBS: Final = ("filter", "prioritize", "bind", "preempt")
SCORES: Final = tuple(str(s) for s in range(11))


def _prefill() -> None:
    # Series exist at 0 from the start, so rate() and alerts see them before
    # the first failure.
    for verb in VERBS:
        REQUEST_SECONDS.labels(verb=verb)
        for outcome in OUTCOMES:
            REQUESTS.labels(verb=verb, outcome=outcome)
    for verb in VERBS:
        IN_FLIGHT.labels(verb=verb)
        REQUEST_BYTES.labels(verb=verb)
        RESPONSE_BYTES.labels(verb=verb)
    for result in ("passed", "failed", "unresolvable"):
        FILTERED_NODES.labels(result=result)
    for reason in FILTER_REASONS:
        FILTER_REJECTIONS.labels(reason=reason)
    for score in SCORES:
        PRIORITIZE_SCORES.labels(score=score)
    for cause in BIND_CAUSES:
        BIND_FAILURES.labels(cause=cause)


_prefill()


def exposition() -> tuple[bytes, str]:
    """The registry in Prometheus text format and its content type."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
