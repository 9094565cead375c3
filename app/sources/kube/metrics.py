"""Prometheus metrics of the kube source: what the watches applied and how fresh it is.

The metric objects live on a registry passed in (the server's, in `drax
serve`; a private one in tests), so several sources can coexist in one process
without clashing on names. "Seconds since the last event" is computed at
scrape time from a timestamp, so a stalled watch shows up as a growing number
without any timer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge


class WatchMetrics:
    def __init__(self, registry: CollectorRegistry, *, kinds: Iterable[str]) -> None:
        self.events = Counter(
            "drax_watch_events_total", "Watch events applied to the inventory.",
            ["kind", "type"], registry=registry)
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
            self._last[kind] = time.monotonic()
            self._since.labels(kind=kind).set_function(self._age_of(kind))

    def _age_of(self, kind: str) -> Callable[[], float]:
        return lambda: time.monotonic() - self._last[kind]

    def seen(self, kind: str) -> None:
        self._last[kind] = time.monotonic()
