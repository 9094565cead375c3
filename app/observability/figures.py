"""One node's inventory figures, and the cluster's running totals of them.

`node_stats` reads a node's snapshot: its devices' states, its PCIe roots'
stranded and fragmented GPUs, and its capacity counts (given). `Totals` keeps
every visited node's figures summed, so a revisited node takes its old
figures out and puts its new ones in; `Snapshot` is what the gauges serve.
Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from app.allocator.types import AllocatedState, NodeView, PoolView
from app.capacity import FitCount
from app.inventory import NodeState
from app.model import Device
from app.topology import TopologyConfig, node_topology

DEVICE_STATES: Final = ("free", "allocated", "partly_consumed", "tainted")
POOL_STATES: Final = ("valid", "invalid", "incomplete")


@dataclass(slots=True, frozen=True)
class NodeStats:
    """One node's devices' states, roots, capacity per shape. Node-local pools
    are kept as counts (they are the node's alone, and equivalent nodes share one
    NodeStats); pools other nodes see too are kept whole, to be counted once
    across nodes."""

    local_devices: Mapping[tuple[str, str], int]  # (driver, state) -> devices
    local_pools: Mapping[str, int]  # state -> pools
    shared_pools: Mapping[tuple[str, str], tuple[str, Mapping[str, tuple[str, str]]]]
    free: int  # free devices of node-local pools
    stranded: int  # free GPU units whose root has NICs, none of them free
    fragmented: int  # free GPU units on roots that are partly used
    capacity: Mapping[str, int]
    inexact: frozenset[str] = frozenset()  # shapes whose count is a lower bound


@dataclass(slots=True)
class Snapshot:
    devices: Counter[tuple[str, str]] = field(default_factory=Counter)
    pools: Counter[str] = field(default_factory=Counter)
    stranded: int = 0
    free_per_node: Counter[int] = field(default_factory=Counter)  # free devices -> nodes
    fragmented: list[tuple[str, int]] = field(default_factory=list)
    capacity: dict[str, int] = field(default_factory=dict)
    inexact: dict[str, int] = field(default_factory=dict)  # shape -> nodes
    seconds: float = 0.0  # how long the walk that built it took, loop yields included
    complete: bool = False


@dataclass(slots=True)
class Totals:
    """Every visited node's figures summed (shared pools apart, see the module doc)."""

    local_devices: Counter[tuple[str, str]] = field(default_factory=Counter)
    local_pools: Counter[str] = field(default_factory=Counter)
    stranded: int = 0
    free_per_node: Counter[int] = field(default_factory=Counter)
    capacity: Counter[str] = field(default_factory=Counter)
    inexact: Counter[str] = field(default_factory=Counter)
    fragmented: dict[str, int] = field(default_factory=dict)  # only nodes with some
    sharing: set[str] = field(default_factory=set)  # nodes that see a shared pool

    def add(self, name: str, node: NodeStats) -> None:
        self.local_devices.update(node.local_devices)
        self.local_pools.update(node.local_pools)
        self.stranded += node.stranded
        self.free_per_node[node.free] += 1
        self.capacity.update(node.capacity)
        self.inexact.update(node.inexact)
        if node.fragmented:
            self.fragmented[name] = node.fragmented
        if node.shared_pools:
            self.sharing.add(name)

    def remove(self, name: str, node: NodeStats) -> None:
        self.local_devices.subtract(node.local_devices)
        self.local_pools.subtract(node.local_pools)
        self.stranded -= node.stranded
        self.free_per_node[node.free] -= 1
        self.capacity.subtract(node.capacity)
        self.inexact.subtract(node.inexact)
        self.fragmented.pop(name, None)
        self.sharing.discard(name)


def _is_local(pool: PoolView, node_name: str) -> bool:
    return all(s.node_name == node_name for s in pool.slices)


def sees_shared(view: NodeView) -> bool:
    return not all(_is_local(pool, view.node.name) for pool in view.pools)


def _device_state(device: Device, pool: tuple[str, str], allocated: AllocatedState) -> str:
    if device.id in allocated.devices:
        return "allocated"
    if device.id in allocated.multi_allocated or device.id in allocated.consumed_capacity:
        return "partly_consumed"
    # A partition's own piece of hardware is the first counter set it draws
    # on (app.topology's unit); a pool-wide set would mark every device.
    consumed = allocated.consumed_counters.get(pool)
    if consumed and device.consumes_counters:
        own = device.consumes_counters[0].counter_set
        if any(key[0] == own and value for key, value in consumed.items()):
            return "partly_consumed"
    if device.taints:
        return "tainted"
    return "free"


def node_stats(state: NodeState, *, config: TopologyConfig,
               counts: Mapping[str, FitCount]) -> NodeStats:
    """The node's figures, given its capacity `counts` per shape name."""
    view, allocated = state.view, state.allocated
    devices: dict[str, tuple[str, str]] = {}
    local_devices: Counter[tuple[str, str]] = Counter()
    local_pools: Counter[str] = Counter()
    shared_pools: dict[tuple[str, str], tuple[str, dict[str, tuple[str, str]]]] = {}
    free = 0
    for pool in view.pools:
        pool_state = ("incomplete" if not pool.complete else
                      "invalid" if pool.invalid_reason is not None else "valid")
        local = _is_local(pool, view.node.name)
        shared: dict[str, tuple[str, str]] = {}
        for device in pool.devices:
            st = _device_state(device, pool.key, allocated)
            devices[device.id] = (pool.driver, st)
            if local:
                local_devices[pool.driver, st] += 1
                free += st == "free"
            else:
                shared[device.id] = (pool.driver, st)
        if local:
            local_pools[pool_state] += 1
        else:
            shared_pools[pool.key] = (pool_state, shared)
    stranded, fragmented = _roots(view, config, devices)
    return NodeStats(local_devices=local_devices,
                     local_pools=local_pools, shared_pools=shared_pools, free=free,
                     stranded=stranded, fragmented=fragmented,
                     capacity={name: fit.count for name, fit in counts.items()},
                     inexact=frozenset(name for name, fit in counts.items()
                                       if not fit.exact and fit.error is None))


def _roots(view: NodeView, config: TopologyConfig,
           devices: Mapping[str, tuple[str, str]]) -> tuple[int, int]:
    """(stranded, fragmented) free GPU units of the node, counted per PCIe root."""
    topo = node_topology(view, config)
    free_units: dict[str, set[str]] = {}
    used_units: dict[str, set[str]] = {}
    nics: dict[str, list[bool]] = {}
    for device_id, (_, st) in devices.items():
        root = topo.devices[device_id].pcie_root if device_id in topo.devices else None
        if root is None:
            continue
        if device_id in topo.nics:
            nics.setdefault(root, []).append(st == "free")
        elif device_id in topo.accelerators:
            unit = topo.unit_of.get(device_id, device_id)
            (free_units if st == "free" else used_units).setdefault(root, set()).add(unit)
    stranded = fragmented = 0
    for root, units in free_units.items():
        whole = units - used_units.get(root, set())
        root_nics = nics.get(root)
        if root_nics and not any(root_nics):
            stranded += len(whole)
        if root in used_units:
            fragmented += len(whole)
    return stranded, fragmented
