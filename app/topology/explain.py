"""The topology of an allocation as people read it: per device its PCIe root
and NUMA node, plus the tier and score drax gave the whole allocation.

`drax allocate` and `drax simulate` print this next to the devices so a
misaligned choice is visible at a glance; it is computed from the same
objective the allocator used, never from a second formula.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.allocator.types import AllocatedState, ClaimAllocation, NodeView
from app.model import Device
from app.topology.config import TopologyConfig
from app.topology.normalise import NEUTRAL, DeviceTopology, node_topology
from app.topology.score import Quality, make_objective


@dataclass(slots=True, frozen=True)
class AllocationTopology:
    quality: Quality
    devices: tuple[tuple[Device, DeviceTopology], ...]
    accelerators: int  # of a pod that also got NICs; 0 otherwise
    unpaired: int  # of those, without a NIC of the pod behind their root

    @property
    def placed(self) -> int:
        """Devices with some topology (the ones the score looked at)."""
        return sum(1 for _, t in self.devices if t.known)

    def label(self, device_id: str) -> str:
        """`pci0000:15/numa0` (`~` marks an inferred NUMA node, `-` unknown)."""
        topo = next((t for d, t in self.devices if d.id == device_id), NEUTRAL)
        numa = "-" if topo.numa_node is None else f"numa{topo.numa_node}"
        return f"{topo.pcie_root or '-'}/{'~' if topo.numa_inferred else ''}{numa}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "tier": self.quality.tier_name,
            "score": round(self.quality.score, 4),
            "gpusWithoutSameRootNic": self.unpaired,
            "devices": [{"device": d.id, "pcieRoot": t.pcie_root, "numaNode": t.numa_node,
                         "numaInferred": t.numa_inferred} for d, t in self.devices],
        }


def explain(claims: Sequence[ClaimAllocation], *, node_view: NodeView,
            allocated: AllocatedState, config: TopologyConfig) -> AllocationTopology:
    """Rate `claims` (allocated on `node_view.node`, against `allocated` as it
    was before them) the way the objective did."""
    by_id = {d.id: d for pool in node_view.pools for d in pool.devices}
    picks = [by_id[r.device_id] for ca in claims for r in ca.allocation.results
             if r.device_id in by_id]
    topology = node_topology(node_view, config)
    quality = make_objective(node_view=node_view, allocated=allocated, config=config,
                             mode="advisor").evaluate(picks)
    accelerators = [d for d in picks if d.id in topology.accelerators]
    nic_roots = {topology.of(d).pcie_root for d in picks if d.id in topology.nics} - {None}
    return AllocationTopology(
        quality=quality, devices=tuple((d, topology.of(d)) for d in picks),
        accelerators=len(accelerators) if nic_roots else 0,
        unpaired=sum(1 for d in accelerators if topology.of(d).pcie_root not in nic_roots)
        if nic_roots else 0)
