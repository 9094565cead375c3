"""Process-wide interning of what repeats across the objects of a cluster.

Identical attribute values, capacity maps, counter consumptions, qualified
names and label sets repeat on every device or pod: one shared object per
value keeps the parsed model small and lets the parser skip validation on a
hit. The caches live for the process and are bounded, because unique values
(uuids, MACs) never repeat; a full cache starts over (`BoundedCache`) rather than stop
learning, or values that repeat only nearby (a MIG device's parentUUID, once
per partition of its GPU) would miss once the cache had filled.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Final

from app.bounded_cache import BoundedCache
from app.model.objects import AttributeValue, qualify

# Pods of one Deployment or Job carry identical labels: one shared map per
# distinct label set keeps 10,000 pods from holding 10,000 equal dicts.
SHARED_LABELS: BoundedCache[tuple[tuple[str, str], ...], Mapping[str, str]] = BoundedCache(
    1 << 14)
NO_LABELS: Final[Mapping[str, str]] = {}


# Attribute values by value, and single scalar values by (kind, value, type):
# the type is part of the key because `True == 1`.
SHARED_MAX: Final = 1 << 18
SHARED_ATTRIBUTES: BoundedCache[AttributeValue, AttributeValue] = BoundedCache(SHARED_MAX)
UNSUPPORTED: Final = AttributeValue("", None)
SCALARS: BoundedCache[tuple[str, Any, type], AttributeValue] = BoundedCache(SHARED_MAX)


def shared_attribute(attribute: AttributeValue) -> AttributeValue:
    try:
        shared = SHARED_ATTRIBUTES.get(attribute)
    except TypeError:  # a list attribute holding unhashable JSON values
        return attribute
    if shared is not None:
        return shared
    return SHARED_ATTRIBUTES.put(attribute, attribute)


# Capacity maps and counter consumptions repeat across the devices of a cluster
# just like attribute values. They are shared by their raw form (value strings
# included), not by equality: Quantity equality is numeric, and `1Gi` must not
# become `1024Mi` (CEL's isInteger reads the text).
SHARED: BoundedCache[tuple[Any, ...], Any] = BoundedCache(SHARED_MAX)


def simple_values(raw: Mapping[str, Any]) -> tuple[tuple[str, str], ...] | None:
    """`((name, value string), ...)` when every entry is just `{"value": "<str>"}`."""
    out = []
    for name, entry in raw.items():
        if type(entry) is not dict or len(entry) != 1 or type(entry.get("value")) is not str:
            return None
        out.append((name, entry["value"]))
    return tuple(out)


def remember(key: tuple[Any, ...] | None, value: Any) -> None:
    if key is not None:
        SHARED.put(key, value)


QUALIFIED: dict[tuple[Any, str], str] = {}


def qualified_name(name: Any, driver: str) -> str:
    """A qualified attribute/capacity name, interned: every device repeats the same
    few names, and one shared string per name instead of one per device is a
    large saving of the parsed model's memory. Looked up by (name, driver)
    first, since qualifying and interning each name of each device costs more."""
    hit = QUALIFIED.get((name, driver))
    if hit is None:
        hit = sys.intern(qualify(str(name), driver))
        if len(QUALIFIED) < SHARED_MAX:
            QUALIFIED[(name, driver)] = hit
    return hit


# (driver, raw attribute names in order) -> their qualified names, or None when
# two of them qualify to the same name (then the general path keeps the last)
QUALIFIED_LAYOUTS: BoundedCache[tuple[str, tuple[Any, ...]], tuple[str, ...] | None] = (
    BoundedCache(SHARED_MAX))


def qualified_layout(driver: str, names: tuple[Any, ...]) -> tuple[str, ...] | None:
    key = (driver, names)
    if key in QUALIFIED_LAYOUTS:
        return QUALIFIED_LAYOUTS[key]
    qualified = tuple(qualified_name(k, driver) for k in names)
    hit = qualified if len(set(qualified)) == len(qualified) else None
    return QUALIFIED_LAYOUTS.put(key, hit)


