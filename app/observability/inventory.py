"""The background walk behind the inventory, fragmentation and capacity gauges.

Walking every node (device states, PCIe roots, how many more pods of each
configured shape fit) costs milliseconds per node for capacity, far too much
for a verb or even a scrape of a large cluster. `InventoryObserver.run` does
it in slices on the event loop between requests, only for nodes whose
version changed since their last visit, and `collect` serves the last
complete snapshot (`gauges`). Capacity uses `app.capacity.count_fits`, the
count `drax capacity` prints, never a second formula, under a smaller search
budget per probe (`CAPACITY_STEP_BUDGET`) so that no step of the walk runs
long.

Nodes that pose the same allocation problem (the extender's `equivalence`,
the key its answers are shared under: same hardware, usage and selector
matches) have the same figures, so a node's are counted once per kind of
node: counting each node alone would make the walk after a restart a large
share of drax's CPU, beside the verbs and ahead of the warming they wait for.

The cluster's totals are running sums (`figures.Totals`): a revisited node
takes its old figures out and puts its new ones in, so finishing a walk costs
the nodes it changed (and the fragmented nodes, for the ten most
fragmented), not the cluster; summing every node's devices at the end of each
walk would be one long step, a verb held up for as long, at every walk of a
churning cluster.

Shared (non-node-local) pools are seen from many nodes; their devices and
pools are counted once, from the first node that sees them. Capacity is per
node, so a shared device may be counted by every node that can reach it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable, Generator, Hashable, Iterator, Mapping, Sequence
from typing import Any, Final

from cachetools import LRUCache
from prometheus_client.registry import Collector

from app.capacity import DEFAULT_SHAPES, CapacityShape, count_fits
from app.extender.signature import RequestKind, request_kinds
from app.features import FeatureGates
from app.inventory import Inventory, NodeState
from app.observability.figures import NodeStats, Snapshot, Totals, node_stats, sees_shared
from app.observability.gauges import TOP_FRAGMENTED, inventory_metrics
from app.timeslice import Progress, run_in_slices
from app.topology import TopologyConfig

_SLICE_SECONDS: Final = 0.002  # one slice of the walk before yielding the loop
_QUIET_POLL_SECONDS: Final = 0.005  # how often a walk waiting for quiet looks again
_SUMMARY_STEP: Final = 1024  # nodes per step of a walk's end
_EQUIVALENT_KINDS: Final = 4096  # figures kept per kind of node (hardware, usage)
# Steps of one capacity probe. A probe that cannot prove a count infeasible runs
# out its budget, and at the allocator's default one node of a filling cluster
# is a step no verb can wait for; at this budget it is a short one. The count
# is then the largest proven (`drax_capacity_inexact_nodes`).
CAPACITY_STEP_BUDGET: Final = 5_000
# (node state, the capacity claims' request kinds) -> a key equal on nodes with
# equal figures
Equivalence = Callable[[NodeState, Sequence[RequestKind]], Hashable]


class InventoryObserver(Collector):
    """Background walk of the inventory (see module doc) and its metrics."""

    def __init__(self, inventory: Inventory, *, config: TopologyConfig,
                 features: FeatureGates, shapes: Sequence[CapacityShape] = DEFAULT_SHAPES,
                 equivalence: Equivalence | None = None) -> None:
        self.inventory = inventory
        self._config = config
        self._features = features
        self._shapes = tuple(shapes)
        self._claims = [s.claim() for s in self._shapes]
        self._kinds = request_kinds(self._claims)
        self._equivalence = equivalence
        self._nodes: dict[str, tuple[int, NodeStats]] = {}  # name -> (version, figures)
        self._by_equivalence: LRUCache[Hashable, NodeStats] = LRUCache(_EQUIVALENT_KINDS)
        self._totals = Totals()
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
        out of the cyclic collector there, as warming does, so no full
        collection walks a first walk's objects inside some request."""
        progress = Progress(on_progress, every_seconds=progress_seconds)
        while True:
            # The first slice of a walk waits for quiet too: one of its steps
            # counts a shape's copies on a node, several searches that can
            # hold the loop for tens of milliseconds in a scheduler's cycle.
            while not quiet():
                await asyncio.sleep(_QUIET_POLL_SECONDS)
            await run_in_slices(self._walk(), slice_seconds=_SLICE_SECONDS, quiet=quiet,
                                quiet_poll_seconds=_QUIET_POLL_SECONDS, progress=progress)
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
        if self._equivalence is not None and not sees_shared(state.view):
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
        yield from inventory_metrics(self.snapshot, shapes=self._shapes, walks=self.walks)
