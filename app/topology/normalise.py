"""Normalised topology of every device a node can use: PCIe root, NUMA node.

Drivers publish topology under different names and some publish none: NVIDIA
full GPUs carry `resource.kubernetes.io/pcieRoot` but no NUMA node, while the
NIC behind the same root does. So NUMA is read through the configured alias
table and, where missing, inferred from another device of the same node with
the same PCIe root. A device with neither is neutral: it joins no group and is
never scored against.

The result depends only on the node's devices (in order) and the config, and
objectives are created per pod per node, so it is computed once per node and
kept until one of its devices is replaced: an allocation, which bumps the
node's version and rebuilds its NodeView, keeps the same Device objects and
so reuses it. One entry per node and config, sized well above any cluster
drax serves, so a full pass over the nodes cannot evict what it needs next.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from cachetools import LRUCache

from app.allocator.types import DeviceId, NodeView
from app.model import AttributeValue, Device
from app.topology.config import TopologyConfig

_CACHE_SIZE = 1 << 17


@dataclass(slots=True, frozen=True)
class DeviceTopology:
    pcie_root: str | None
    numa_node: int | None
    numa_inferred: bool = False

    @property
    def known(self) -> bool:
        return self.pcie_root is not None or self.numa_node is not None


NEUTRAL = DeviceTopology(None, None)


@dataclass(slots=True, frozen=True)
class NodeTopology:
    """Per-device topology, and the groups packing counts free blocks in.

    Groups hold units, not devices: a partitionable GPU publishes the full GPU
    and every partition as devices drawing on one counter set, and all of them
    are one piece of hardware. A unit is that counter set (the first one a
    device consumes from) or, for a device without counters, the device.
    `roots`, `numa_nodes` and `placed` (every unit with a topology) list units.
    """

    devices: Mapping[DeviceId, DeviceTopology]
    unit_of: Mapping[DeviceId, str]
    units: Mapping[str, tuple[DeviceId, ...]]
    placed: tuple[str, ...]
    nics: frozenset[DeviceId]
    accelerators: frozenset[DeviceId]
    roots: Mapping[str, tuple[str, ...]]
    numa_nodes: Mapping[int, tuple[str, ...]]

    def of(self, device: Device) -> DeviceTopology:
        return self.devices.get(device.id, NEUTRAL)

    def unit_topology(self, unit: str) -> DeviceTopology:
        return self.devices[self.units[unit][0]]


def _unit(device: Device) -> str:
    if device.consumes_counters:
        return f"{device.driver}/{device.pool}#{device.consumes_counters[0].counter_set}"
    return device.id


def is_nic(device: Device, config: TopologyConfig) -> bool:
    return device.driver in config.nic_drivers or any(
        name in device.attributes for name in config.nic_attributes)


def _first(value: AttributeValue | None) -> object:
    """The scalar, or the first element of a list attribute (for NUMA lists the
    physical node comes first; for root lists any member identifies a root)."""
    if value is None:
        return None
    if isinstance(value.value, tuple):
        return value.value[0] if value.value else None
    return value.value


def _qualified(name: str, driver: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def published_numa(device: Device, config: TopologyConfig) -> int | None:
    for alias in config.numa_attributes:
        raw = _first(device.attributes.get(_qualified(alias, device.driver)))
        if isinstance(raw, bool):
            continue
        if isinstance(raw, str) and raw.strip().lstrip("-").isdigit():
            raw = int(raw)
        if isinstance(raw, int):
            return raw if raw >= 0 else None  # sysfs reports -1 for "no affinity"
    return None


def published_root(device: Device, config: TopologyConfig) -> str | None:
    for name in config.pcie_root_attributes:
        raw = _first(device.attributes.get(_qualified(name, device.driver)))
        if isinstance(raw, str) and raw:
            return raw.lower()
    return None


def build_node_topology(node_view: NodeView, config: TopologyConfig) -> NodeTopology:
    devices = [d for pool in node_view.pools for d in pool.devices]
    published = {d.id: (published_root(d, config), published_numa(d, config)) for d in devices}
    numa_by_root: dict[str, Counter[int]] = {}
    for root, numa in published.values():
        if root is not None and numa is not None:
            numa_by_root.setdefault(root, Counter())[numa] += 1
    topo: dict[DeviceId, DeviceTopology] = {}
    unit_of: dict[DeviceId, str] = {}
    units: dict[str, list[DeviceId]] = {}
    roots: dict[str, dict[str, None]] = {}
    numa_nodes: dict[int, dict[str, None]] = {}
    nics: set[DeviceId] = set()
    accelerators: set[DeviceId] = set()
    for device in devices:
        root, numa = published[device.id]
        inferred = False
        if numa is None and root in numa_by_root:
            # Most common, then lowest: deterministic even if drivers disagree.
            numa = min(numa_by_root[root].items(), key=lambda kv: (-kv[1], kv[0]))[0]
            inferred = True
        topo[device.id] = DeviceTopology(root, numa, inferred) if (
            root is not None or numa is not None) else NEUTRAL
        unit = unit_of[device.id] = _unit(device)
        units.setdefault(unit, []).append(device.id)
        if root is not None:
            roots.setdefault(root, {})[unit] = None
        if numa is not None:
            numa_nodes.setdefault(numa, {})[unit] = None
        if is_nic(device, config):
            nics.add(device.id)
        elif root is not None:
            accelerators.add(device.id)
    return NodeTopology(
        devices=topo, unit_of=unit_of, units={k: tuple(v) for k, v in units.items()},
        placed=tuple(u for u, members in units.items() if topo[members[0]].known),
        nics=frozenset(nics), accelerators=frozenset(accelerators),
        roots={k: tuple(v) for k, v in roots.items()},
        numa_nodes={k: tuple(v) for k, v in numa_nodes.items()})


_cache: LRUCache[tuple[str, TopologyConfig], tuple[tuple[Device, ...], NodeTopology]] = \
    LRUCache(maxsize=_CACHE_SIZE)
_cache_lock = threading.Lock()


def node_topology(node_view: NodeView, config: TopologyConfig) -> NodeTopology:
    """Cached by (node, config) and reused while the node shows the very same
    Device objects (devices are immutable; a changed one is a new object), so
    another inventory or a test with equal names never reads a stale entry."""
    key = (node_view.node.name, config)
    devices = tuple(d for pool in node_view.pools for d in pool.devices)
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None and len(hit[0]) == len(devices) and all(
            a is b for a, b in zip(hit[0], devices, strict=True)):
        return hit[1]
    built = build_node_topology(node_view, config)
    with _cache_lock:
        _cache[key] = (devices, built)
    return built


def describe(device: Device, node_view: NodeView,
             config: TopologyConfig | None = None) -> DeviceTopology:
    """The normalised topology of one device as seen from `node_view` (NUMA may
    be inferred from its neighbours there)."""
    cfg = config or TopologyConfig()
    topo = node_topology(node_view, cfg).devices.get(device.id)
    if topo is not None:
        return topo
    root, numa = published_root(device, cfg), published_numa(device, cfg)
    return DeviceTopology(root, numa) if root is not None or numa is not None else NEUTRAL
