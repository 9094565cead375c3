"""`BoundedCache`: a dict that starts over when it is full.

drax keeps many process-wide memos (interned attribute values, signatures,
compiled selectors, answers per claim shape). Each is bounded, because some
keys never repeat (uuids, MACs, one-off expressions), and each starts over
when full rather than stop learning: a value that repeats only nearby (a MIG
device's parentUUID, once per partition of its GPU) would otherwise miss
for good once the cache had filled with others. Starting over costs one
rebuild of what is still in use, and needs no bookkeeping per hit, so hits
stay plain dict lookups.
"""

from __future__ import annotations

from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedCache(dict[K, V], Generic[K, V]):
    """At most `limit` entries; `put` on a full cache clears it first."""

    __slots__ = ("limit",)

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def put(self, key: K, value: V) -> V:
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value

    def intern(self, value: V) -> V:
        """The one kept object equal to `value` (`value` itself the first time);
        the cache maps values to themselves."""
        hit = self.get(value)  # type: ignore[arg-type]
        if hit is None:
            return self.put(value, value)  # type: ignore[arg-type]
        return hit
