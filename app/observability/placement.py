"""Placement quality counted at each bind: locality tier and GPU-NIC pairing.

`PlacementRecorder` wraps the binder the extender writes through, so it sees
exactly the allocations that were bound and nothing else. Its counters live
in a `PlacementMetrics` the runtime hands in and registers on its registry,
so this layer never reaches up to the server's metrics. The rating uses
`app.topology.explain`, the objective the allocator scored with, and runs
after the bind's answer is out (`call_soon`): a bind's latency does not
include its own bookkeeping.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Sequence
from typing import Final

from prometheus_client import Counter
from prometheus_client.metrics_core import Metric

from app.allocator.types import AllocatedState, ClaimAllocation
from app.extender import Binder
from app.extender.extended import ExtendedClaim
from app.inventory import Inventory
from app.model import Pod, ResourceClaim
from app.observability.reasons import claim_shape
from app.topology import TopologyConfig, explain, node_topology

log = logging.getLogger(__name__)

TIER_NAMES: Final = ("spanning", "one_numa", "one_pcie_root")


class PlacementMetrics:
    """The placement counters, collected as one collector on the runtime's registry."""

    def __init__(self) -> None:
        self.placements = Counter(
            "drax_bound_placements_total",
            "Pods bound with devices, by claim shape and the locality tier of all their "
            "devices (one_pcie_root, one_numa, spanning; no_topology when none publishes "
            "a topology).",
            ["shape", "tier"], registry=None)
        self.bound_gpus = Counter(
            "drax_bound_gpus_total",
            "Accelerators bound, by claim shape and NIC pairing: same_root (a NIC of the pod "
            "on its PCIe root), other_root (the pod has NICs, none on its root), no_nic.",
            ["shape", "nic"], registry=None)

    def collect(self) -> Iterator[Metric]:
        yield from self.placements.collect()
        yield from self.bound_gpus.collect()


class PlacementRecorder:
    """A `Binder` that forwards to `target`, then counts what it bound."""

    def __init__(self, target: Binder, *, inventory: Inventory,
                 config: TopologyConfig, metrics: PlacementMetrics) -> None:
        self.target = target
        self.metrics = metrics
        self._inventory = inventory
        self._config = config

    async def bind(self, *, pod: Pod, node: str, allocations: Sequence[ClaimAllocation],
                   reserve: Sequence[ResourceClaim],
                   extended: ExtendedClaim | None = None) -> str | None:
        created = await self.target.bind(pod=pod, node=node, allocations=allocations,
                                         reserve=reserve, extended=extended)
        if allocations:
            asyncio.get_running_loop().call_soon(self._record, pod, node, tuple(allocations),
                                                 tuple(reserve))
        return created

    def _record(self, pod: Pod, node: str, allocations: tuple[ClaimAllocation, ...],
                reserve: tuple[ResourceClaim, ...]) -> None:
        try:
            record(pod=pod, node=node, allocations=allocations, reserve=reserve,
                   inventory=self._inventory, config=self._config, metrics=self.metrics)
        except Exception:
            # A metric must never take the server down; the bind itself succeeded.
            log.exception("could not rate the placement of pod %s", pod.key)


def record(*, pod: Pod, node: str, allocations: Sequence[ClaimAllocation],
           reserve: Sequence[ResourceClaim], inventory: Inventory,
           config: TopologyConfig, metrics: PlacementMetrics) -> None:
    state = inventory.node_state(node)
    if state is None:
        return
    shape = claim_shape(pod, reserve)
    rated = explain(allocations, node_view=state.view, allocated=AllocatedState(),
                    config=config)
    tier = TIER_NAMES[rated.quality.tier] if rated.placed else "no_topology"
    metrics.placements.labels(shape=shape, tier=tier).inc()
    if rated.accelerators:
        paired = rated.accelerators - rated.unpaired
        for nic, n in (("same_root", paired), ("other_root", rated.unpaired)):
            if n:
                metrics.bound_gpus.labels(shape=shape, nic=nic).inc(n)
        return
    accelerators = node_topology(state.view, config).accelerators
    gpus = sum(1 for d, _ in rated.devices if d.id in accelerators)
    if gpus:
        metrics.bound_gpus.labels(shape=shape, nic="no_nic").inc(gpus)
