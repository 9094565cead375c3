"""Claim constraints (`matchAttribute`, `distinctAttribute`) as incremental checks.

The search adds one device at a time and backtracks, so each constraint keeps
a stack: `add` either accepts the device (and pushes what it needs to check
later devices) or rejects it, `remove` undoes the last accepted `add`.
Constraints are monotonic (a rejected partial set cannot become valid by
adding devices), which is what lets the search prune at the first rejection.

Scalar attributes compare by type and value. With `DRAListTypeAttributes`
every attribute is a set (a scalar is a one-element set): `matchAttribute`
needs a non-empty common intersection, `distinctAttribute` pairwise disjoint
sets.
"""

from __future__ import annotations

from typing import Final

from app.model import AttributeValue, Device, DeviceConstraint, qualify

SCALAR_KINDS: Final = frozenset({"int", "bool", "string", "version"})
_BASE_KIND: Final = {"int": "int", "ints": "int", "bool": "bool", "bools": "bool",
                     "string": "string", "strings": "string", "version": "version",
                     "versions": "version"}

AttributeSet = tuple[str, frozenset[object]]


def lookup_attribute(device: Device, name: str) -> AttributeValue | None:
    """Attribute `name` of the device; a name without a domain is the driver's."""
    return device.attributes.get(name if "/" in name else qualify(name, device.driver))


def as_set(value: AttributeValue) -> AttributeSet | None:
    base = _BASE_KIND.get(value.kind)
    if base is None:
        return None
    items = value.value if value.kind not in SCALAR_KINDS else (value.value,)
    return base, frozenset(items)


class MatchAttribute:
    """All affected devices have the attribute with one common value."""

    __slots__ = ("attribute", "list_types", "stack")

    def __init__(self, attribute: str, *, list_types: bool) -> None:
        self.attribute = attribute
        self.list_types = list_types
        self.stack: list[object] = []

    def describe(self) -> str:
        return f"matchAttribute {self.attribute}"

    def add(self, device: Device) -> bool:
        value = lookup_attribute(device, self.attribute)
        if value is None:
            return False
        if self.list_types:
            new = as_set(value)
            if new is None:
                return False
            if self.stack:
                current = self.stack[-1]
                assert isinstance(current, tuple)
                if current[0] != new[0] or not current[1] & new[1]:
                    return False
                new = (new[0], current[1] & new[1])
            self.stack.append(new)
            return True
        # As upstream: the first device fixes the value whatever its type;
        # later ones must carry the same scalar.
        if self.stack and (value.kind not in SCALAR_KINDS or value != self.stack[0]):
            return False
        self.stack.append(value)
        return True

    def remove(self) -> None:
        self.stack.pop()


class DistinctAttribute:
    """All affected devices have the attribute, with pairwise different values."""

    __slots__ = ("attribute", "list_types", "stack")

    def __init__(self, attribute: str, *, list_types: bool) -> None:
        self.attribute = attribute
        self.list_types = list_types
        self.stack: list[AttributeValue] = []

    def describe(self) -> str:
        return f"distinctAttribute {self.attribute}"

    def add(self, device: Device) -> bool:
        value = lookup_attribute(device, self.attribute)
        if value is None:
            return False
        if self.stack:
            if self.list_types:
                new = as_set(value)
                if new is None:
                    return False
                for seen in self.stack:
                    old = as_set(seen)
                    if old is not None and old[0] == new[0] and old[1] & new[1]:
                        return False
            elif value.kind not in SCALAR_KINDS or value in self.stack:
                return False
        self.stack.append(value)
        return True

    def remove(self) -> None:
        self.stack.pop()


Constraint = MatchAttribute | DistinctAttribute


def build_constraint(spec: DeviceConstraint, *, list_types: bool) -> Constraint | None:
    """The tracker for a constraint, None for a constraint of no known type."""
    if spec.match_attribute:
        return MatchAttribute(spec.match_attribute, list_types=list_types)
    if spec.distinct_attribute:
        return DistinctAttribute(spec.distinct_attribute, list_types=list_types)
    return None


def applies(spec: DeviceConstraint, request: str, subrequest: str | None) -> bool:
    """Whether a constraint covers devices of `request` (or `request/subrequest`)."""
    if not spec.requests:
        return True
    if request in spec.requests:
        return True
    return subrequest is not None and f"{request}/{subrequest}" in spec.requests
