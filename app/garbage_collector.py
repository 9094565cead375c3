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
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_pauses = 0
_restore = False


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


def freeze() -> None:
    """Everything alive now leaves the collector's passes for good."""
    gc.freeze()
