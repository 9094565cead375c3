"""When drax pauses Python's cyclic garbage collector, and what it freezes.

Loading an inventory, listing a kind, decoding a request body and warming
answers each build a large tree of fresh containers that holds no reference
cycles and mostly stays alive. With the collector on, every few hundred
allocations trigger a young-generation pass over the growing tree, and each
full pass rescans every long-lived object that is not frozen. So:

- `paused()` runs bulk allocation with the collector off and restores the
  state it found once the last overlapping pause ends (the informers' lists
  overlap across awaits, so pauses are counted, not nested);
- `freeze()` moves everything alive into the permanent generation, out of
  every later pass: called once a bulk step has built what is meant to last
  (a load, a list, a slice of warming or of the observer's walk).

Nothing is lost by either: the paused work creates no cycle, and frozen
objects are still freed by reference counting.

A full (oldest-generation) pass still scans whatever survived since the last
freeze, and at a large cluster that takes tens of milliseconds, charged to
whichever verb allocated last. `defer_full_collections()` raises the automatic
trigger to `FULL_CAP` young passes (the default is 10), and `idle_collector()`
runs the full pass itself once no verb has been in flight for a quiet
interval and the server has no request in hand. Each verb is counted with
`verb()`. The cap stays: under traffic
with no quiet interval the automatic pass still runs, so garbage cycles cannot
pile up without bound.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_pauses = 0
_restore = False
_verbs = 0
_last_verb = 0.0
FULL_CAP = 100  # young passes before an automatic full one, idle or not


@contextmanager
def paused(*, then_freeze: bool = False) -> Iterator[None]:
    """The collector off for the body; `then_freeze` freezes what the body built."""
    global _pauses, _restore
    if _pauses == 0:
        _restore = gc.isenabled()
        gc.disable()
    _pauses += 1
    try:
        yield
    finally:
        _pauses -= 1
        if then_freeze:
            gc.freeze()
        if _pauses == 0 and _restore:
            gc.enable()


def collect_young_if_due() -> None:
    """The young pass a pause held back, if the collector is on and it is due:
    what survived a paused computation is scanned once, there, rather than at
    whichever allocation comes next."""
    if gc.isenabled() and gc.get_count()[0] > gc.get_threshold()[0]:
        gc.collect(0)


def freeze() -> None:
    """Everything alive now leaves the collector's passes for good."""
    gc.freeze()


def defer_full_collections(cap: int = FULL_CAP) -> None:
    """Automatic full passes only after `cap` young ones; the idle collector runs them sooner."""
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, cap)


@contextmanager
def verb() -> Iterator[None]:
    """Marks a verb in flight: no idle collection starts until it and a quiet interval end."""
    global _verbs, _last_verb
    _verbs += 1
    try:
        yield
    finally:
        _verbs -= 1
        _last_verb = time.monotonic()


def collect_if_idle(quiet: float) -> bool:
    """A full pass if young passes ran since the last one, no verb is in flight and none
    ended within `quiet` seconds; True if it ran."""
    if gc.get_count()[2] == 0 or not _idle(quiet):
        return False
    gc.collect()
    return True


def _idle(quiet: float) -> bool:
    return not (_verbs or _pauses) and time.monotonic() - _last_verb >= quiet


async def idle_collector(*, quiet: float = 1.0, every: float = 0.5,
                         busy: Callable[[], bool] = lambda: False) -> None:
    """Runs `collect_if_idle` every `every` seconds, for as long as the task lives.

    A full pass at a large cluster holds the process for about 10 ms, and a
    request that reached the socket meanwhile waits for it. So before one, the
    loop turns twice (its sockets are read and the server starts a task per
    request it has the headers of), and `busy` (the server has a request in
    hand) calls it off."""
    while True:
        await asyncio.sleep(every)
        if not _idle(quiet):
            continue
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        if not busy():
            collect_if_idle(quiet)
