"""Inventory, fragmentation and capacity gauges, computed in the background.

Walking every node (device states, PCIe roots, how many more pods of each
configured shape fit) costs milliseconds per node for capacity, far too much
for a verb or even a scrape at 5,000 nodes. `InventoryObserver.run` does it
in slices on the event loop between requests, only for nodes whose version
changed since their last visit, and `collect` serves the last complete
snapshot. Capacity uses `app.capacity.count_fits`, the count `drax
capacity` prints, never a second formula, under a smaller search budget per
probe (`CAPACITY_STEP_BUDGET`) so that no step of the walk runs long.

Nodes that pose the same allocation problem (the extender's `equivalence`,
the key its answers are shared under: same hardware, usage and selector
matches) have the same figures, so a node's are counted once per kind of
node: at 20,000 nodes the capacity walk was 38 % of drax's CPU in the hour
after a restart, beside the verbs and ahead of the warming they wait for.

The cluster's totals are running sums (`_Totals`): a revisited node takes
its old figures out and puts its new ones in, so finishing a walk costs the
nodes it changed (and the fragmented nodes, for the ten most fragmented), not
the cluster. Summing every node's devices at the end of
each walk was one step of 0.5 s at 20,000 nodes, a verb held up for as long
at every walk of a churning cluster.

Shared (non-node-local) pools are seen from many nodes; their devices and
pools are counted once, from the first node that sees them. Capacity is per
node, so a shared device may be counted by every node that can reach it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections import Counter
from collections.abc import Callable, Generator, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from cachetools import LRUCache
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector

from app.allocator.types import AllocatedState, NodeView, PoolView
from app.capacity import DEFAULT_SHAPES, CapacityShape, FitCount, count_fits
from app.extender.signature import RequestKind, request_kinds
from app.extender.stats import STEP_BUCKETS, SearchStats
from app.features import FeatureGates
from app.inventory import Inventory, NodeState
from app.model import Device
from app.topology import TopologyConfig, node_topology

DEVICE_STATES: Final = ("free", "allocated", "partly_consumed", "tainted")
POOL_STATES: Final = ("valid", "invalid", "incomplete")
FREE_BUCKETS: Final = (0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)
TOP_FRAGMENTED: Final = 10
_SLICE_SECONDS: Final = 0.002  # one slice of the walk before yielding the loop
_SUMMARY_STEP: Final = 1024  # nodes per step of a walk's end
_EQUIVALENT_KINDS: Final = 4096  # figures kept per kind of node (hardware, usage)
# Steps of one capacity probe. A probe that cannot prove a count infeasible runs
# out its budget, and at the allocator's default (200,000) one node of a filling
# cluster took 0.74 s, a step no verb can wait for; at this budget 15 ms. The
# count is then the largest proven (`drax_capacity_inexact_nodes`).
CAPACITY_STEP_BUDGET: Final = 5_000
# (node state, the capacity claims' request kinds) -> a key equal on nodes with
# equal figures
Equivalence = Callable[[NodeState, Sequence[RequestKind]], Hashable]


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
class _Totals:
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


def _sees_shared(view: NodeView) -> bool:
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


class InventoryObserver(Collector):
    """Background walk of the inventory (see module doc) and its metrics."""

    def __init__(self, inventory: Inventory, *, config: TopologyConfig,
                 features: FeatureGates, shapes: Sequence[CapacityShape] = DEFAULT_SHAPES,
                 stats: SearchStats | None = None,
                 equivalence: Equivalence | None = None) -> None:
        self.inventory = inventory
        self._config = config
        self._features = features
        self._shapes = tuple(shapes)
        self._claims = [s.claim() for s in self._shapes]
        self._kinds = request_kinds(self._claims)
        self.stats = stats
        self._equivalence = equivalence
        self._nodes: dict[str, tuple[int, NodeStats]] = {}  # name -> (version, figures)
        self._by_equivalence: LRUCache[Hashable, NodeStats] = LRUCache(_EQUIVALENT_KINDS)
        self._totals = _Totals()
        self._walked_at = -1
        self.snapshot = Snapshot(capacity={s.name: 0 for s in self._shapes})
        self.walks = 0

    def refresh(self) -> None:
        """One whole walk now (tests, and file mode before serving)."""
        for _ in self._walk():
            pass

    async def run(self, *, quiet: Callable[[], bool] = lambda: True,
                  interval_seconds: float = 2.0,
                  on_progress: Callable[[], None] | None = None,
                  progress_seconds: float = 1.0) -> None:
        """Walk whenever the inventory changed, at most every `interval_seconds`;
        a slice of the walk runs only while `quiet()` (no verb just arrived).
        `on_progress` runs after every `progress_seconds` of walking: `drax
        serve` freezes what the walk built (node states, signatures, figures)
        out of the cyclic collector there, as warming does; a full collection
        over a first walk's objects was a step of 0.3-0.56 s at 20,000 nodes."""
        worked = 0.0
        while True:
            started = deadline = time.monotonic()
            deadline += _SLICE_SECONDS
            for _ in self._walk():
                if time.monotonic() >= deadline:
                    worked += time.monotonic() - started
                    if worked >= progress_seconds and on_progress is not None:
                        worked = 0.0
                        on_progress()
                    await asyncio.sleep(0)
                    while not quiet():
                        await asyncio.sleep(0.005)
                    started = time.monotonic()
                    deadline = started + _SLICE_SECONDS
            await asyncio.sleep(interval_seconds)

    def _walk(self) -> Iterator[None]:
        """Revisit the nodes whose version changed: those the inventory names as
        changed since the last walk or, when it cannot (a change every node
        sees, or too long ago), every node, a step each."""
        inv = self.inventory
        if not inv.synced or inv.sequence == self._walked_at:
            return
        started, sequence = time.monotonic(), inv.sequence
        changed = inv.changed_since(self._walked_at) if self._walked_at >= 0 else None
        names = inv.node_names() if changed is None else sorted(changed)
        present = set()
        for name in names:
            present.add(name)
            state = inv.node_state(name)
            cached = self._nodes.get(name)
            if state is None:
                self._forget(name)
            elif cached is None or cached[0] != state.view.version:
                self._forget(name)
                node = yield from self._stats_of(state)
                self._nodes[name] = (state.view.version, node)
                self._totals.add(name, node)
            yield
        if changed is None:
            for i, name in enumerate(list(self._nodes)):
                if name not in present:
                    self._forget(name)
                if i % _SUMMARY_STEP == _SUMMARY_STEP - 1:
                    yield
        self.snapshot = yield from self._summary(started)
        self._walked_at = sequence
        self.walks += 1

    def _stats_of(self, state: NodeState) -> Generator[None, None, NodeStats]:
        """The node's figures, shared with an equivalent node counted before; a
        node seeing a shared pool is counted itself (its figures name devices).
        A step per shape's count."""
        key = None
        if self._equivalence is not None and not _sees_shared(state.view):
            key = self._equivalence(state, self._kinds)
            hit = self._by_equivalence.get(key)
            if hit is not None:
                return hit
        inv = self.inventory
        counts = {}
        for shape, claim in zip(self._shapes, self._claims, strict=True):
            counts[shape.name] = count_fits(
                [claim], state.view, classes=inv.classes, allocated=state.allocated,
                features=self._features, class_matcher=inv.class_matcher,
                selector_matches=inv.selectors.selector_matches,
                step_budget=CAPACITY_STEP_BUDGET)
            yield
        node = node_stats(state, config=self._config, counts=counts)
        if key is not None:
            self._by_equivalence[key] = node
        return node

    def _forget(self, name: str) -> None:
        held = self._nodes.pop(name, None)
        if held is not None:
            self._totals.remove(name, held[1])

    def _summary(self, started: float) -> Generator[None, None, Snapshot]:
        """The snapshot of the running totals, plus the shared pools counted
        once (from the first node seeing each); steps of _SUMMARY_STEP nodes."""
        totals = self._totals
        devices = +totals.local_devices
        pools = +totals.local_pools
        shared: dict[tuple[str, str], tuple[str, Mapping[str, tuple[str, str]]]] = {}
        for i, name in enumerate(list(totals.sharing)):
            for key, pool in self._nodes[name][1].shared_pools.items():
                shared.setdefault(key, pool)
            if i % _SUMMARY_STEP == _SUMMARY_STEP - 1:
                yield
        for pool_state, pool_devices in shared.values():
            pools[pool_state] += 1
            devices.update(pool_devices.values())
        top: list[tuple[int, str]] = []
        fragmented = list(totals.fragmented.items())
        for i in range(0, len(fragmented), _SUMMARY_STEP):
            chunk = ((-count, name) for name, count in fragmented[i:i + _SUMMARY_STEP])
            top = heapq.nsmallest(TOP_FRAGMENTED, [*top, *chunk])
            yield
        if len(top) < TOP_FRAGMENTED:
            # listed with 0 in name order, so the series exists on a healthy
            # cluster: the first of the inventory's sorted names not listed yet
            zeros = itertools.islice(
                (n for n in self.inventory.node_names()
                 if n in self._nodes and n not in totals.fragmented),
                TOP_FRAGMENTED - len(top))
            top += [(0, name) for name in zeros]
        return Snapshot(devices=devices, pools=pools, stranded=totals.stranded,
                        free_per_node=+totals.free_per_node,
                        fragmented=[(name, -count) for count, name in top],
                        capacity={s.name: totals.capacity[s.name] for s in self._shapes},
                        inexact={s.name: totals.inexact[s.name] for s in self._shapes},
                        seconds=time.monotonic() - started, complete=True)

    def collect(self) -> Iterator[Any]:
        snap = self.snapshot
        devices = GaugeMetricFamily(
            "drax_devices", "Devices by driver and state (free, allocated, partly_consumed, "
            "tainted), each device counted once.", labels=["driver", "state"])
        drivers = sorted({driver for driver, _ in snap.devices}) or ["none"]
        for driver in drivers:
            for st in DEVICE_STATES:
                devices.add_metric([driver, st], snap.devices.get((driver, st), 0))
        yield devices
        pools = GaugeMetricFamily("drax_resource_pools",
                                  "Resource pools by state (valid, invalid, incomplete).",
                                  labels=["state"])
        for st in POOL_STATES:
            pools.add_metric([st], snap.pools.get(st, 0))
        yield pools
        yield GaugeMetricFamily(
            "drax_stranded_gpus", "Free GPUs whose PCIe root has NICs but none of them free "
            "(a GPU+NIC pod cannot use them aligned).", value=snap.stranded)
        yield _histogram("drax_node_free_devices",
                         "Free devices of node-local pools, one observation per node.",
                         snap.free_per_node, FREE_BUCKETS)
        frag = GaugeMetricFamily(
            "drax_node_fragmented_gpus",
            f"Free GPUs on partly used PCIe roots, for the {TOP_FRAGMENTED} most fragmented "
            "nodes only (bounded label set; 0 when no node is).", labels=["node"])
        for name, count in snap.fragmented:
            frag.add_metric([name], count)
        yield frag
        capacity = GaugeMetricFamily(
            "drax_capacity_pods", "How many more pods of each capacity.shapes entry fit now "
            "(per node, the largest number of disjoint allocations; summed).",
            labels=["shape"])
        for shape in self._shapes:
            capacity.add_metric([shape.name], snap.capacity.get(shape.name, 0))
        yield capacity
        inexact = GaugeMetricFamily(
            "drax_capacity_inexact_nodes", "Nodes whose drax_capacity_pods count is a "
            "lower bound, the largest proven: a probe ran out of its search budget (or the "
            "count reached 1024).",
            labels=["shape"])
        for shape in self._shapes:
            inexact.add_metric([shape.name], snap.inexact.get(shape.name, 0))
        yield inexact
        yield GaugeMetricFamily("drax_inventory_walk_seconds",
                                "Duration of the last background inventory walk.",
                                value=snap.seconds)
        yield CounterMetricFamily("drax_inventory_walks", "Background inventory walks done.",
                                  value=self.walks)
        if self.stats is not None:
            yield from _search_metrics(self.stats)


def _histogram(name: str, doc: str, observed: Mapping[int, int],
               bounds: Sequence[float]) -> HistogramMetricFamily:
    """`observed`: each value and how many times it was observed."""
    cumulative = []
    for bound in bounds:
        cumulative.append((_le(bound), sum(n for v, n in observed.items() if v <= bound)))
    cumulative.append(("+Inf", sum(observed.values())))
    return HistogramMetricFamily(name, doc, buckets=cumulative,
                                 sum_value=float(sum(v * n for v, n in observed.items())))


def _le(bound: float) -> str:
    return str(float(bound))


def _search_metrics(stats: SearchStats) -> Iterator[Any]:
    running = 0
    buckets = []
    for bound, n in zip(STEP_BUCKETS, stats.steps_buckets, strict=False):
        running += n
        buckets.append((_le(bound), running))
    buckets.append(("+Inf", stats.searches))
    yield HistogramMetricFamily("drax_allocator_search_steps",
                                "Steps of each allocator search drax ran.",
                                buckets=buckets, sum_value=float(stats.steps_sum))
    yield CounterMetricFamily("drax_allocator_searches_cut",
                              "Allocator searches stopped by the step budget.",
                              value=stats.cut_by_budget)
    yield CounterMetricFamily("drax_answer_cache_misses",
                              "Node verdicts computed because no current answer was kept.",
                              value=stats.answers_computed)
    yield GaugeMetricFamily("drax_warming_backlog",
                            "Nodes left in the background warming pass under way.",
                            value=stats.warming_backlog)
