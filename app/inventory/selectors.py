"""Memoised CEL selector results per device: class selectors and request selectors.

Evaluating CEL is by far the most expensive step of an allocation, and the
same (selector, device) pair is asked about for every pod, every node and
every cycle. A result only changes when the device or the expression changes,
so it is computed once and kept, keyed by identity of the immutable objects
involved: a new ResourceSlice or DeviceClass version is a new object, so a
stale entry can never be returned. Entries for replaced devices and classes
are dropped by the store when it replaces them.

A CEL error is remembered like a result and raised again on every lookup, so
an allocation that touches the device fails with the same error each time
(upstream treats it as an error for the pod), while the event that brought the
device in is never affected.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TypeAlias

from app.cel import CelCompileError, CelEvalError, compile_selector
from app.model import Device, DeviceClass

_Outcome: TypeAlias = bool | CelCompileError | CelEvalError


def _evaluate(expressions: Iterable[str], device: Device) -> _Outcome:
    try:
        for expression in expressions:
            if not compile_selector(expression).matches(device):
                return False
    except (CelCompileError, CelEvalError) as exc:
        return exc
    return True


def _unwrap(outcome: _Outcome) -> bool:
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


class SelectorCache:
    """Class-selector and request-selector results per device (see module doc)."""

    __slots__ = ("_by_class", "_by_expression")

    def __init__(self) -> None:
        # class name -> device id -> (class, device, outcome)
        self._by_class: dict[str, dict[str, tuple[DeviceClass, Device, _Outcome]]] = {}
        # expression -> device id -> (device, outcome)
        self._by_expression: dict[str, dict[str, tuple[Device, _Outcome]]] = {}

    def class_matches(self, device_class: DeviceClass, device: Device) -> bool:
        """The `ClassMatcher` the allocator accepts: all class selectors hold."""
        per_device = self._by_class.get(device_class.name)
        if per_device is None:
            per_device = self._by_class[device_class.name] = {}
        hit = per_device.get(device.id)
        if hit is not None and hit[0] is device_class and hit[1] is device:
            return _unwrap(hit[2])
        outcome = _evaluate(device_class.selectors, device)
        per_device[sys.intern(device.id)] = (device_class, device, outcome)
        return _unwrap(outcome)

    def selector_matches(self, expression: str, device: Device) -> bool:
        """One request selector on one device."""
        per_device = self._by_expression.setdefault(expression, {})
        hit = per_device.get(device.id)
        if hit is not None and hit[0] is device:
            return _unwrap(hit[1])
        outcome = _evaluate((expression,), device)
        per_device[sys.intern(device.id)] = (device, outcome)
        return _unwrap(outcome)

    def forget_class(self, name: str) -> None:
        self._by_class.pop(name, None)

    def forget_devices(self, device_ids: Iterable[str]) -> None:
        ids = list(device_ids)
        for by_device in self._by_class.values():
            for device_id in ids:
                by_device.pop(device_id, None)
        for by_device_only in self._by_expression.values():
            for device_id in ids:
                by_device_only.pop(device_id, None)
