"""Background work in time slices on the event loop, between requests.

drax's verbs share one event loop with its background work (a relist,
warming answers, the inventory observer's walk). That work is written as
steps (`Iterator[None]`, each a small unit), and runs here in slices of at
most `slice_seconds` before the loop gets a turn, so a verb arriving waits
for at most one slice; with `quiet`, a slice starts only while no verb was
just asked. `Progress` fires a callback after every so much work, where
`drax serve` freezes what the work built out of the cyclic collector
(`app.garbage_collector`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable


class Progress:
    """Calls `on_progress` after every `every_seconds` of work reported to it."""

    __slots__ = ("_worked", "every_seconds", "on_progress")

    def __init__(self, on_progress: Callable[[], None] | None, *,
                 every_seconds: float = 1.0) -> None:
        self.on_progress = on_progress
        self.every_seconds = every_seconds
        self._worked = 0.0

    def worked(self, seconds: float) -> None:
        self._worked += seconds
        if self._worked >= self.every_seconds:
            self._worked = 0.0
            if self.on_progress is not None:
                self.on_progress()


async def run_in_slices(steps: Iterable[object], *, slice_seconds: float,
                        quiet: Callable[[], bool] | None = None,
                        quiet_poll_seconds: float = 0.005,
                        progress: Progress | None = None) -> None:
    """Run `steps`, letting the loop in once a slice has run `slice_seconds`;
    with `quiet`, the next slice waits until `quiet()` holds."""
    started = time.monotonic()
    deadline = started + slice_seconds
    for _ in steps:
        now = time.monotonic()
        if now >= deadline:
            if progress is not None:
                progress.worked(now - started)
            await asyncio.sleep(0)
            if quiet is not None:
                while not quiet():
                    await asyncio.sleep(quiet_poll_seconds)
            started = time.monotonic()
            deadline = started + slice_seconds
