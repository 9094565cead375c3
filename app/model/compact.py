"""Compact read-only maps for the per-device `attributes` and `capacity`.

A cluster of 100,000 nodes publishes millions of devices, and every device of
one kind carries the same attribute names in the same order. A plain dict per
device stores its own hash table of those names (about 650 bytes for eleven
attributes); `FieldMap` stores only a tuple of values and points at one shared
name -> position table per distinct name layout, so a device's attribute map
costs a fifth of that. It is a full `Mapping`, so readers (CEL views, the
allocator, topology) need not know; `get`, `in` and iteration are overridden
because they run in the hot paths. Layouts are bounded: past the bound a new
layout still works, it is just not shared.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, Mapping
from typing import Final, TypeVar

from app.bounded_cache import BoundedCache

V = TypeVar("V")

_LAYOUTS: dict[tuple[str, ...], dict[str, int]] = {}
_LAYOUTS_MAX: Final = 1 << 14


# id of a shared layout -> (the layout, its names in order): see `names_of`
_NAMES: BoundedCache[int, tuple[dict[str, int], tuple[str, ...]]] = BoundedCache(
    _LAYOUTS_MAX)


def names_of(m: Mapping[str, V]) -> tuple[str, ...]:
    """The keys of `m` in order; for a `FieldMap` one tuple shared by every map
    of its layout, found without building it (node signatures ask per device)."""
    if type(m) is not FieldMap:
        return tuple(m)
    layout = m._layout
    hit = _NAMES.get(id(layout))
    if hit is None or hit[0] is not layout:
        hit = _NAMES.put(id(layout), (layout, tuple(layout)))
    return hit[1]


def shared_layout(names: tuple[str, ...]) -> dict[str, int]:
    """The name -> position table every FieldMap of `names` shares (a decoder
    that builds maps by their slots keeps it instead of looking it up per map)."""
    return _layout(names)


def _layout(names: tuple[str, ...]) -> dict[str, int]:
    layout = _LAYOUTS.get(names)
    if layout is None:
        layout = {name: i for i, name in enumerate(names)}
        if len(_LAYOUTS) < _LAYOUTS_MAX:
            _LAYOUTS[names] = layout
    return layout


class _Items(ItemsView[str, V]):
    __slots__ = ()
    _mapping: FieldMap[V]

    def __iter__(self) -> Iterator[tuple[str, V]]:
        m = self._mapping
        return zip(m._layout, m._values, strict=True)


class FieldMap(Mapping[str, V]):
    """An immutable `str -> V` map whose key table is shared by every map with
    the same keys in the same order."""

    __slots__ = ("_layout", "_values")

    def __init__(self, items: Mapping[str, V]) -> None:
        self._layout = _layout(tuple(items))
        self._values = tuple(items.values())

    @classmethod
    def from_layout(cls, names: tuple[str, ...], values: tuple[V, ...]) -> FieldMap[V]:
        """The map of distinct `names` to `values` (same length), without a dict
        in between (the parser builds one per device)."""
        return cls.on_layout(_layout(names), values)

    @classmethod
    def on_layout(cls, layout: dict[str, int], values: tuple[V, ...]) -> FieldMap[V]:
        """The map of a shared layout (`shared_layout`) to `values` (same
        length), for a decoder that keeps the layout instead of looking it up."""
        m = cls.__new__(cls)
        m._layout = layout
        m._values = values
        return m

    def __getitem__(self, key: str) -> V:
        return self._values[self._layout[key]]

    def get(self, key: str, default: V | None = None) -> V | None:  # type: ignore[override]
        i = self._layout.get(key)
        return default if i is None else self._values[i]

    def __contains__(self, key: object) -> bool:
        return key in self._layout

    def __iter__(self) -> Iterator[str]:
        return iter(self._layout)

    def __len__(self) -> int:
        return len(self._values)

    def items(self) -> _Items[V]:
        return _Items(self)

    def values(self) -> tuple[V, ...]:  # type: ignore[override]
        return self._values

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FieldMap) and self._layout is other._layout:
            return self._values == other._values
        if isinstance(other, Mapping):
            return dict(self.items()) == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"FieldMap({dict(self.items())!r})"
