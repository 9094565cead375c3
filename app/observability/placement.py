"""Placement quality counted at each bind: locality tier and GPU-NIC pairing.

`PlacementRecorder` wraps the binder the extender writes through, so it sees
exactly the allocations that were bound and nothing else. The rating uses
`app.topology.explain`, the objective the allocator scored with, and runs
after the bind's answer is out (`call_soon`): a bind's latency does not
include its own bookkeeping.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from app.allocator.types import AllocatedState, ClaimAllocation
from app.extender import Binder
from app.extender.extended import ExtendedClaim
from app.inventory import Inventory
from app.model import Pod, ResourceClaim
from app.observability.reasons import claim_shape
from app.server import metrics
from app.topology import TopologyConfig, explain, node_topology

log = logging.getLogger(__name__)


class PlacementRecorder:
    """A `Binder` that forwards to `target`, then counts what it bound."""

    def __init__(self, target: Binder, *, inventory: Inventory,
                 config: TopologyConfig) -> None:
        self.target = target
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
                   inventory=self._inventory, config=self._config)
        except Exception:
            # A metric must never take the server down; the bind itself succeeded.
            log.exception("could not rate the placement of pod %s", pod.key)


def record(*, pod: Pod, node: str, allocations: Sequence[ClaimAllocation],
           reserve: Sequence[ResourceClaim], inventory: Inventory,
           config: TopologyConfig) -> None:
    state = inventory.node_state(node)
    if state is None:
        return
    shape = claim_shape(pod, reserve)
    rated = explain(allocations, node_view=state.view, allocated=AllocatedState(),
                    config=config)
    tier = metrics.TIER_NAMES[rated.quality.tier] if rated.placed else "no_topology"
    metrics.PLACEMENTS.labels(shape=shape, tier=tier).inc()
    if rated.accelerators:
        paired = rated.accelerators - rated.unpaired
        for nic, n in (("same_root", paired), ("other_root", rated.unpaired)):
            if n:
                metrics.BOUND_GPUS.labels(shape=shape, nic=nic).inc(n)
        return
    accelerators = node_topology(state.view, config).accelerators
    gpus = sum(1 for d, _ in rated.devices if d.id in accelerators)
    if gpus:
        metrics.BOUND_GPUS.labels(shape=shape, nic="no_nic").inc(gpus)
