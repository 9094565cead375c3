"""Preemption's metrics, on the registry the runtime hands in.

Counters of what the driver tried and how it ended, the victims and devices
each preemption took, how long a preemptor waited from the preemption to its
bind, and two gauges read from the inventory at scrape time: the devices held
for nominations and how long the oldest nomination has been waiting (the
alert in manifests/prometheus fires on it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from app.inventory import Inventory

# Why a preemption was not carried out (drax_preemptions_refused_total{reason}).
REFUSAL_REASONS: Final = (
    "never",            # the preemptor's preemptionPolicy is Never
    "claims",           # its claims cannot be resolved (missing, allocated elsewhere)
    "no-candidate",     # no node where removing lower-priority pods frees enough
    "victims-pending",  # its earlier victims are still terminating or still hold devices
    "preemptor-gone",   # it was deleted, replaced or bound before drax acted
    "api-error",        # the API server failed past the retries
    "not-leading",      # this replica lost the leader-election Lease meanwhile
)


class PreemptionMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.attempted = Counter(
            "drax_preemptions_attempted_total",
            "Preemptions drax searched victims for (a pending preemptor per attempt).",
            registry=registry)
        self.done = Counter(
            "drax_preemptions_total",
            "Preemptions carried out: victims deleted and devices held for the preemptor.",
            registry=registry)
        self.refused = Counter(
            "drax_preemptions_refused_total",
            "Preemptions not carried out, by reason.", ["reason"], registry=registry)
        self.victims = Histogram(
            "drax_preemption_victims", "Pods deleted per preemption.",
            buckets=(1, 2, 3, 4, 6, 8, 12, 16, 32, 64), registry=registry)
        self.devices_freed = Counter(
            "drax_preemption_devices_freed_total",
            "Devices released by preemptions (held by the victims' claims).",
            registry=registry)
        self.bind_seconds = Histogram(
            "drax_preemptor_bind_seconds",
            "Seconds from a preemption to its preemptor being bound.",
            buckets=(1, 2, 5, 10, 20, 30, 60, 120, 300, 600), registry=registry)
        self._held = Gauge(
            "drax_nominated_devices",
            "Devices held for preemptors whose victims are going (nominations).",
            registry=registry)
        self._waiting = Gauge(
            "drax_preemptor_waiting_seconds",
            "Seconds the oldest nomination has been waiting for its preemptor to bind "
            "(0 when none is).", registry=registry)
        for reason in REFUSAL_REASONS:
            self.refused.labels(reason=reason)

    def observe(self, inventory: Inventory, *,
                clock: Callable[[], float] = time.monotonic) -> None:
        """Read the nomination gauges from `inventory` at each scrape."""
        self._held.set_function(
            lambda: float(sum(len(n.device_ids) for n in inventory.nominations())))

        def oldest() -> float:
            started = [n.started_at for n in inventory.nominations()]
            return max(0.0, clock() - min(started)) if started else 0.0

        self._waiting.set_function(oldest)
