"""Prometheus metrics of the kube source: what the watches applied, how fresh it is,
and how big the inventory they fill has grown.

The metric objects live on a registry passed in (the server's, in `drax
serve`; a private one in tests), so several sources can coexist in one process
without clashing on names. "Seconds since the last event" is computed at
scrape time from a timestamp, so a stalled watch shows up as a growing number
without any timer; the inventory sizes are read from `Inventory.counts()` at
scrape time for the same reason (no bookkeeping on the event path).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from app.inventory import Inventory

# One event is a fraction of a millisecond to a few (a slice of 64 MIG placements):
# fine buckets around the 1 ms target for applying one event.
APPLY_BUCKETS: Final = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1)


class WatchMetrics:
    def __init__(self, registry: CollectorRegistry, *, kinds: Iterable[str]) -> None:
        self.events = Counter(
            "drax_watch_events_total", "Watch events applied to the inventory.",
            ["kind", "type"], registry=registry)
        self.apply_seconds = Histogram(
            "drax_watch_event_apply_seconds",
            "Time to apply one watch event: decoding its line, parsing the object and "
            "updating the inventory (the event loop serves nothing meanwhile).",
            ["kind"], buckets=APPLY_BUCKETS, registry=registry)
        self.invalid = Counter(
            "drax_watch_invalid_objects_total",
            "Objects from the API server the inventory rejected (logged and skipped).",
            ["kind"], registry=registry)
        self.relists = Counter(
            "drax_watch_relists_total",
            "Full lists after the initial one (410 Gone: resourceVersion expired).",
            ["kind"], registry=registry)
        self.errors = Counter(
            "drax_watch_errors_total",
            "List or watch requests that failed (followed by a backoff).",
            ["kind"], registry=registry)
        self._since = Gauge(
            "drax_watch_seconds_since_last_event",
            "Seconds since the last watch event, bookmark or list of this kind.",
            ["kind"], registry=registry)
        self._last: dict[str, float] = {}
        for kind in kinds:
            # Series exist at 0 from the start, so rate() and alerts see them.
            for event_type in ("ADDED", "MODIFIED", "DELETED"):
                self.events.labels(kind=kind, type=event_type)
            for counter in (self.invalid, self.relists, self.errors):
                counter.labels(kind=kind)
            self.apply_seconds.labels(kind=kind)
            self._last[kind] = time.monotonic()
            self._since.labels(kind=kind).set_function(self._age_of(kind))

    def _age_of(self, kind: str) -> Callable[[], float]:
        return lambda: time.monotonic() - self._last[kind]

    def seen(self, kind: str) -> None:
        self._last[kind] = time.monotonic()


class InventorySizes(Collector):
    """Nodes, devices and allocated devices, as the inventory holds them now."""

    def __init__(self, inventory: Inventory) -> None:
        self._inventory = inventory

    def collect(self) -> Iterator[GaugeMetricFamily]:
        counts = self._inventory.counts()
        yield GaugeMetricFamily("drax_inventory_nodes", "Nodes known to the inventory.",
                                value=counts.nodes)
        yield GaugeMetricFamily("drax_inventory_devices",
                                "Devices published in the newest generation of every pool.",
                                value=counts.devices)
        yield GaugeMetricFamily("drax_inventory_allocated_devices",
                                "Devices held by allocated or assumed claims.",
                                value=counts.allocated_devices)
