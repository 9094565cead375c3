"""Builders for allocator tests: raw objects as dicts, parsed with the real model,
and a small stand-in for the inventory's pool gathering (upstream `GatherPools`
rules) that turns slices into the `NodeView` the allocator reads.

The inventory is someone else's; tests must not depend on it, and a NodeView
built from the same rules keeps the allocator tests about the allocator.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from app.allocator import AllocatedState, NodeView, PoolView
from app.model import (
    CounterSet,
    Device,
    DeviceClass,
    Node,
    Quantity,
    ResourceClaim,
    ResourceSlice,
    parse_object,
    qualify,
)

DRIVER = "driver-a"
NODE = "node-1"


# --------------------------------------------------------------------------- raw builders


def attr(value: Any) -> dict[str, Any]:
    """A raw attribute: bool, int, str, ("version", "1.0.0"), or a list of those."""
    if isinstance(value, tuple) and value[0] == "version":
        return {"version": value[1]}
    if isinstance(value, list):
        if value and isinstance(value[0], tuple):
            return {"versions": [v[1] for v in value]}
        kind = ("bools" if isinstance(value[0], bool) else
                "ints" if isinstance(value[0], int) else "strings")
        return {kind: value}
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, dict):
        return value
    return {"string": value}


def dev(name: str, attrs: Mapping[str, Any] | None = None,
        capacity: Mapping[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if attrs:
        out["attributes"] = {k: attr(v) for k, v in attrs.items()}
    if capacity:
        out["capacity"] = {k: v if isinstance(v, dict) else {"value": v}
                           for k, v in capacity.items()}
    out.update(extra)
    return out


def sl(name: str, devices: Sequence[dict[str, Any]] = (), *, pool: str = "pool-1",
       driver: str = DRIVER, node: str | None = NODE, gen: int = 1, count: int = 1,
       all_nodes: bool = False, node_selector: dict[str, Any] | None = None,
       per_device: bool = False, counters: Mapping[str, Mapping[str, str]] | None = None
       ) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": driver,
                            "pool": {"name": pool, "generation": gen, "resourceSliceCount": count}}
    if all_nodes:
        spec["allNodes"] = True
    elif node_selector is not None:
        spec["nodeSelector"] = node_selector
    elif per_device:
        spec["perDeviceNodeSelection"] = True
    elif node is not None:
        spec["nodeName"] = node
    if devices:
        spec["devices"] = list(devices)
    if counters:
        spec["sharedCounters"] = [
            {"name": set_name, "counters": {c: {"value": v} for c, v in values.items()}}
            for set_name, values in counters.items()]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name}, "spec": spec}


def consumes(counter_set: str, **values: str) -> list[dict[str, Any]]:
    return [{"counterSet": counter_set,
             "counters": {k: {"value": v} for k, v in values.items()}}]


def label_selector(key: str, *values: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": key, "operator": "In", "values": list(values)}]}]}


def cls(name: str, *selectors: str, config: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": s}} for s in selectors]}
    if config:
        spec["config"] = list(config)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": name}, "spec": spec}


def exact(device_class: str = "gpu", *, count: int | None = None, mode: str | None = None,
          selectors: Sequence[str] = (), admin: bool | None = None,
          tolerations: Sequence[dict[str, Any]] = (),
          capacity: Mapping[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"deviceClassName": device_class}
    if count is not None:
        out["count"] = count
    if mode is not None:
        out["allocationMode"] = mode
    if selectors:
        out["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if admin is not None:
        out["adminAccess"] = admin
    if tolerations:
        out["tolerations"] = list(tolerations)
    if capacity:
        out["capacity"] = {"requests": dict(capacity)}
    return out


def req(name: str, device_class: str = "gpu", **kwargs: Any) -> dict[str, Any]:
    return {"name": name, "exactly": exact(device_class, **kwargs)}


def sub(name: str, device_class: str = "gpu", **kwargs: Any) -> dict[str, Any]:
    return {"name": name, **exact(device_class, **kwargs)}


def first(name: str, *subs: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "firstAvailable": list(subs)}


def claim(name: str, *requests: dict[str, Any], constraints: Sequence[dict[str, Any]] = (),
          config: Sequence[dict[str, Any]] = (), namespace: str = "default",
          allocation: dict[str, Any] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = list(constraints)
    if config:
        devices["config"] = list(config)
    out: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                           "metadata": {"name": name, "namespace": namespace},
                           "spec": {"devices": devices}}
    if allocation is not None:
        out["status"] = {"allocation": allocation}
    return out


def match(attribute: str, *requests: str) -> dict[str, Any]:
    return {"matchAttribute": attribute, **({"requests": list(requests)} if requests else {})}


def distinct(attribute: str, *requests: str) -> dict[str, Any]:
    return {"distinctAttribute": attribute, **({"requests": list(requests)} if requests else {})}


def opaque(driver: str, **parameters: Any) -> dict[str, Any]:
    return {"opaque": {"driver": driver, "parameters": parameters}}


def allocated_result(request: str, device: str, *, pool: str = "pool-1", driver: str = DRIVER,
                     **extra: Any) -> dict[str, Any]:
    return {"request": request, "driver": driver, "pool": pool, "device": device, **extra}


def node_obj(name: str = NODE, labels: Mapping[str, str] | None = None) -> Node:
    return parse_object("Node", {"metadata": {"name": name, "labels": dict(labels or {})}})


# --------------------------------------------------------------------------- node view


def node_view(raw_slices: Iterable[Mapping[str, Any]], node: Node, *,
              partitionable: bool = True) -> NodeView:
    """Pools relevant to `node`, gathered with upstream's rules."""
    slices = [parse_object("ResourceSlice", s) for s in raw_slices]
    by_pool: dict[tuple[str, str], list[ResourceSlice]] = defaultdict(list)
    for s in slices:
        by_pool[(s.driver, s.pool.name)].append(s)
    views = []
    for (driver, pool_name), members in by_pool.items():
        view = _pool_view(driver, pool_name, members, node, partitionable=partitionable)
        if view is not None:
            views.append(view)
    views.sort(key=lambda p: (p.has_binding_conditions, p.driver, p.name))
    return NodeView(node=node, version=1, pools=tuple(views))


def _relevant(s: ResourceSlice, node: Node) -> bool:
    if s.node_name is not None:
        return s.node_name == node.name
    if s.all_nodes:
        return True
    if s.node_selector is not None:
        return s.node_selector.matches(node)
    return any(_device_on_node(d, node) for d in s.devices)


def _device_on_node(d: Device, node: Node) -> bool:
    if d.node_name:
        return d.node_name == node.name
    if d.all_nodes:
        return True
    return d.node_selector is not None and d.node_selector.matches(node)


def _pool_view(driver: str, pool_name: str, members: list[ResourceSlice], node: Node, *,
               partitionable: bool) -> PoolView | None:
    if not partitionable:
        members = [s for s in members if not s.per_device_node_selection and
                   not s.shared_counters]
    relevant = [s for s in members if _relevant(s, node)]
    if not relevant:
        return None
    generation = max(s.pool.generation for s in relevant)
    if any(s.pool.generation > generation for s in members):
        return None  # obsolete for this node: a newer generation exists elsewhere
    current = sorted((s for s in members if s.pool.generation == generation),
                     key=lambda s: s.name)
    relevant = [s for s in current if _relevant(s, node)]
    if len(current) != current[0].pool.resource_slice_count:
        return PoolView(driver=driver, name=pool_name, generation=generation, slices=(),
                        devices=(), counter_sets={}, complete=False)
    devices = tuple(d for s in relevant if not s.shared_counters for d in s.devices
                    if not s.per_device_node_selection or _device_on_node(d, node))
    counter_sets: dict[str, CounterSet] = {}
    invalid = None
    names = [d.name for s in current if not s.shared_counters for d in s.devices]
    if len(names) != len(set(names)):
        invalid = "duplicate device name"
    for s in current:
        for cs in s.shared_counters:
            if cs.name in counter_sets:
                invalid = f"duplicate counter set name {cs.name}"
            counter_sets[cs.name] = cs
    for s in current if partitionable else ():
        for d in s.devices:
            for c in d.consumes_counters:
                if c.counter_set not in counter_sets:
                    invalid = invalid or f"counter set {c.counter_set} not found"
                elif any(k not in counter_sets[c.counter_set].counters for k in c.counters):
                    invalid = invalid or f"counter not found in counter set {c.counter_set}"
    return PoolView(driver=driver, name=pool_name, generation=generation,
                    slices=tuple(relevant), devices=devices if invalid is None else (),
                    counter_sets=counter_sets, invalid_reason=invalid,
                    has_binding_conditions=any(d.binding_conditions for d in devices))


# --------------------------------------------------------------------------- allocated state


def allocated_state(allocated_claims: Iterable[ResourceClaim],
                    raw_slices: Iterable[Mapping[str, Any]]) -> AllocatedState:
    """What allocated claims hold, computed the way the inventory must."""
    by_id = {d.id: d for s in raw_slices
             for d in parse_object("ResourceSlice", s).devices}
    devices: set[str] = set()
    multi: set[str] = set()
    capacity: dict[str, dict[str, Quantity]] = defaultdict(dict)
    counters: dict[tuple[str, str], dict[tuple[str, str], Quantity]] = defaultdict(dict)
    counted: set[str] = set()
    for c in allocated_claims:
        assert c.allocation is not None
        for r in c.allocation.results:
            device = by_id.get(r.device_id)
            if r.share_id is not None:
                multi.add(r.device_id)
                for name, q in r.consumed_capacity.items():
                    key = qualify(name, r.driver)
                    old = capacity[r.device_id].get(key)
                    capacity[r.device_id][key] = q if old is None else old + q
            elif not r.admin_access:
                devices.add(r.device_id)
            if device is None or r.admin_access or r.device_id in counted:
                continue
            counted.add(r.device_id)
            pool = counters[(r.driver, r.pool)]
            for consumption in device.consumes_counters:
                for name, q in consumption.counters.items():
                    key = (consumption.counter_set, name)
                    pool[key] = q if key not in pool else pool[key] + q
    return AllocatedState(devices=frozenset(devices), consumed_counters=dict(counters),
                          consumed_capacity=dict(capacity), multi_allocated=frozenset(multi))


def parse_classes(raw: Iterable[Mapping[str, Any]]) -> dict[str, DeviceClass]:
    out = {}
    for c in raw:
        parsed = parse_object("DeviceClass", c)
        out[parsed.name] = parsed
    return out


class PlainObjective:
    """`inner` with only the parts every objective has (`first_fit`, `score`,
    `is_perfect`, which never holds here) and the optional ones named in
    `keep`: the search uses none of the others (`bound`, `blocks`,
    `score_class`, `twin_key`), so it never stops early, skips no branch,
    scores every allocation and, without `twin_key`, prunes no twin. The
    exhaustive reference a search using them (and stopping early) must agree
    with."""

    def __init__(self, inner: Any, *keep: str) -> None:
        self._inner = inner
        self.first_fit = inner.first_fit
        for name in keep:
            setattr(self, name, getattr(inner, name))

    def score(self, picks: Sequence[Device]) -> float:
        return float(self._inner.score(picks))

    def is_perfect(self, score: float) -> bool:
        return False
