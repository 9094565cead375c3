"""Memoised CEL selector results per device: class selectors and request selectors.

Evaluating CEL is by far the most expensive step of an allocation, and the
same (selector, device) pair is asked about for every pod, every node and
every cycle. A result only changes when the device or the expression changes,
so it is computed once and kept, keyed by identity of the immutable objects
involved: a new ResourceSlice or DeviceClass version is a new object, so a
stale entry can never be returned. Entries for replaced devices and classes
are dropped by the store when it replaces them.

Behind the per-device entries, results are shared between devices by what
the expression can read of them (`CompiledSelector.projection`): identical
nodes publish devices that differ only in identity attributes, so a class or
request selector is evaluated once per distinct projection, not once per
device, and the first request of a claim shape over thousands of nodes costs
dictionary lookups. Only true/false is shared: an error names its device.

A CEL error is remembered like a result and raised again on every lookup, so
an allocation that touches the device fails with the same error each time
(upstream treats it as an error for the pod), while the event that brought the
device in is never affected.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Hashable, Iterable
from typing import Final, TypeAlias

from app.bounded_cache import BoundedCache
from app.cel import CelCompileError, CelEvalError, CompiledSelector, compile_selector
from app.model import Device, DeviceClass

_Outcome: TypeAlias = bool | CelCompileError | CelEvalError
# distinct projections kept per expression; one that reads a per-device value
# (a uuid) has as many as there are devices, and is then cleared and refilled
_SHARED_LIMIT: Final = 1 << 16


def _unwrap(outcome: _Outcome) -> bool:
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


class SelectorCache:
    """Class-selector and request-selector results per device (see module doc)."""

    __slots__ = ("_by_class", "_by_expression", "_compiled", "_shared")

    def __init__(self) -> None:
        # class name -> device id -> (class, device, outcome)
        self._by_class: dict[str, dict[str, tuple[DeviceClass, Device, _Outcome]]] = {}
        # expression -> device id -> (device, outcome)
        self._by_expression: dict[str, dict[str, tuple[Device, _Outcome]]] = {}
        # expression -> projection of a device -> result (never stale: the
        # projection holds everything the expression can read)
        self._shared: dict[str, BoundedCache[Hashable, bool]] = {}
        # expression -> compiled form or its compile error; a first touch asks
        # once per device, and the shared LRU behind compile_selector takes a lock
        self._compiled: BoundedCache[str, CompiledSelector | str] = BoundedCache(_SHARED_LIMIT)

    def _evaluate(self, expressions: Iterable[str], device: Device) -> _Outcome:
        try:
            for expression in expressions:
                if not self._one(expression, device):
                    return False
        except (CelCompileError, CelEvalError) as exc:
            return exc
        return True

    def _one(self, expression: str, device: Device) -> bool:
        selector = self._selector(expression)
        key = selector.projection(device)
        if key is None:
            return selector.matches(device)
        return self._shared_result(expression, selector, key, device)

    def _selector(self, expression: str) -> CompiledSelector:
        selector = self._compiled.get(expression)
        if selector is None:
            try:
                selector = self._compiled.put(expression, compile_selector(expression))
            except CelCompileError as exc:
                selector = self._compiled.put(expression, str(exc))
        if isinstance(selector, str):
            raise CelCompileError(selector)
        return selector

    def _shared_result(self, expression: str, selector: CompiledSelector, key: Hashable,
                       device: Device) -> bool:
        shared = self._shared.get(expression)
        if shared is None:
            shared = self._shared[expression] = BoundedCache(_SHARED_LIMIT)
        hit = shared.get(key)
        if hit is None:
            hit = selector.matches(device)
            shared.put(key, hit)
        return hit

    def matches_shared(self, device_class: DeviceClass, selectors: Iterable[str],
                       device: Device, *, class_holds: bool = False) -> bool:
        """The class's selectors (unless the caller knows they hold), then
        `selectors`, on `device`, without keeping a per-device entry where the
        results can be shared by projection: node signatures ask about every
        device of the cluster, and an entry per (class, device) would cost
        gigabytes on a very large cluster. Expressions without a projection go through
        the per-device memo. Raises what `class_matches` and `selector_matches`
        raise."""
        if not class_holds and not self._by_projection(
                device_class.selectors, device,
                lambda: self.class_matches(device_class, device)):
            return False
        for expression in selectors:
            if not self._by_projection((expression,), device, functools.partial(
                    self.selector_matches, expression, device)):
                return False
        return True

    def _by_projection(self, expressions: Iterable[str], device: Device,
                       per_device: Callable[[], bool]) -> bool:
        for expression in expressions:
            selector = self._selector(expression)
            key = selector.projection(device)
            if key is None:
                return per_device()  # the earlier expressions held: same answer
            if not self._shared_result(expression, selector, key, device):
                return False
        return True

    def class_matches(self, device_class: DeviceClass, device: Device) -> bool:
        """The `ClassMatcher` the allocator accepts: all class selectors hold."""
        per_device = self._by_class.get(device_class.name)
        if per_device is None:
            per_device = self._by_class[device_class.name] = {}
        hit = per_device.get(device.id)
        if hit is not None and hit[0] is device_class and hit[1] is device:
            return _unwrap(hit[2])
        outcome = self._evaluate(device_class.selectors, device)
        per_device[sys.intern(device.id)] = (device_class, device, outcome)
        return _unwrap(outcome)

    def selector_matches(self, expression: str, device: Device) -> bool:
        """One request selector on one device."""
        per_device = self._by_expression.setdefault(expression, {})
        hit = per_device.get(device.id)
        if hit is not None and hit[0] is device:
            return _unwrap(hit[1])
        outcome = self._evaluate((expression,), device)
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
