"""Pools as the allocator must see them: newest generation only, completeness,
validity, and which of a pool's devices one node can use.

Kept apart from the mutable store so that the rules (which follow the upstream
structured allocator's pool gathering) are plain functions over immutable
slices: the store recomputes a `PoolInfo` only when a slice of that pool
changes, and derives each node's `PoolView` from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app.allocator.types import PoolKey, PoolView
from app.model import CounterSet, Device, Node, ResourceSlice


@dataclass(slots=True, frozen=True)
class PoolInfo:
    """One pool at its newest generation, independent of any node."""

    driver: str
    name: str
    generation: int
    slices: tuple[ResourceSlice, ...]  # newest generation, sorted by name
    complete: bool
    invalid_reason: str | None
    counter_sets: Mapping[str, CounterSet]
    devices_by_name: Mapping[str, Device]  # every device of the pool at that generation
    has_binding_conditions: bool

    @property
    def key(self) -> PoolKey:
        return (self.driver, self.name)


def build_pool_info(key: PoolKey, slices: Iterable[ResourceSlice]) -> PoolInfo | None:
    """The pool made of `slices` (all known slices of `key`), or None if there are none."""
    all_slices = list(slices)
    if not all_slices:
        return None
    generation = max(s.pool.generation for s in all_slices)
    newest = tuple(sorted((s for s in all_slices if s.pool.generation == generation),
                          key=lambda s: s.name))
    # Every slice of one generation states the same count; the largest one is
    # the safe reading if a driver got that wrong (the pool stays incomplete).
    expected = max(s.pool.resource_slice_count for s in newest)
    counter_sets: dict[str, CounterSet] = {}
    devices_by_name: dict[str, Device] = {}
    problems: list[str] = []
    for s in newest:
        for cs in s.shared_counters:
            if cs.name in counter_sets:
                problems.append(f"duplicate counter set {cs.name!r}")
            counter_sets[cs.name] = cs
        for d in s.devices:
            if d.name in devices_by_name:
                problems.append(f"duplicate device name {d.name!r}")
            devices_by_name[d.name] = d
    for d in devices_by_name.values():
        for use in d.consumes_counters:
            consumed = counter_sets.get(use.counter_set)
            if consumed is None:
                problems.append(f"device {d.name!r} consumes unknown counter set "
                                f"{use.counter_set!r}")
                continue
            missing = sorted(set(use.counters) - set(consumed.counters))
            if missing:
                problems.append(f"device {d.name!r} consumes unknown counter(s) "
                                f"{', '.join(missing)} of counter set {consumed.name!r}")
    return PoolInfo(
        driver=key[0], name=key[1], generation=generation, slices=newest,
        complete=len(newest) == expected,
        invalid_reason="; ".join(problems) if problems else None,
        counter_sets=counter_sets, devices_by_name=devices_by_name,
        has_binding_conditions=any(d.binding_conditions for d in devices_by_name.values()))


def _device_reaches(d: Device, node: Node) -> bool:
    if d.node_name is not None:
        return d.node_name == node.name
    if d.all_nodes:
        return True
    return d.node_selector is not None and d.node_selector.matches(node)


def devices_for_node(s: ResourceSlice, node: Node) -> tuple[Device, ...] | None:
    """The devices of `s` usable from `node`; None when the slice is not relevant."""
    if s.node_name is not None:
        return s.devices if s.node_name == node.name else None
    if s.all_nodes:
        return s.devices
    if s.node_selector is not None:
        return s.devices if s.node_selector.matches(node) else None
    reachable = tuple(d for d in s.devices if _device_reaches(d, node))
    return reachable or None


def pool_view_for_node(info: PoolInfo, node: Node) -> PoolView | None:
    """What `node` sees of the pool, or None when no slice of it reaches the node."""
    devices: list[Device] = []
    relevant = False
    for s in info.slices:
        usable = devices_for_node(s, node)
        if usable is None:
            continue
        relevant = True
        devices.extend(usable)
    if not relevant:
        return None
    return PoolView(driver=info.driver, name=info.name, generation=info.generation,
                    slices=info.slices, devices=tuple(devices),
                    counter_sets=info.counter_sets, complete=info.complete,
                    invalid_reason=info.invalid_reason,
                    has_binding_conditions=info.has_binding_conditions)


def upstream_pool_order(pools: Iterable[PoolView]) -> tuple[PoolView, ...]:
    """Pools by driver then name, those with binding conditions last (upstream's order)."""
    return tuple(sorted(pools, key=lambda p: (p.has_binding_conditions, p.driver, p.name)))
