"""Prometheus metrics on drax's own registry.

One module-level `REGISTRY` so every package (the kube source, the binder)
registers its collectors next to the HTTP ones and `/metrics` serves them
all, without the default registry's process-wide globals leaking into tests.
Latency buckets span 100 µs to 5 s: a cached filter answers in well under a
millisecond, and kube-scheduler's default `httpTimeout` is 5 s.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import (
    CollectorRegistry,
    Counter,
    GCCollector,
    Histogram,
    ProcessCollector,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

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

OUTCOMES: Final = ("ok", "error", "bad_request")
VERBS: Final = ("filter", "prioritize", "bind", "preempt")


def _prefill() -> None:
    # Series exist at 0 from the start, so rate() and alerts see them before
    # the first failure.
    for verb in VERBS:
        REQUEST_SECONDS.labels(verb=verb)
        for outcome in OUTCOMES:
            REQUESTS.labels(verb=verb, outcome=outcome)
    for result in ("passed", "failed", "unresolvable"):
        FILTERED_NODES.labels(result=result)


_prefill()


def exposition() -> tuple[bytes, str]:
    """The registry in Prometheus text format and its content type."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
