"""Device topology for drax: normalisation, locality and packing scores, the
allocator objective and the 0..10 priority the extender answers with.

Pure logic, no I/O: the inventory hands in `NodeView`/`AllocatedState`, the
allocator calls the objective, the extender maps scores with `priority`.
"""

from app.topology.config import TopologyConfig
from app.topology.explain import AllocationTopology, explain
from app.topology.normalise import DeviceTopology, NodeTopology, describe, node_topology
from app.topology.score import (
    NEUTRAL_PRIORITY,
    Quality,
    TopologyObjective,
    locality,
    make_objective,
    priority,
)

__all__ = [
    "NEUTRAL_PRIORITY", "AllocationTopology", "DeviceTopology", "NodeTopology", "Quality",
    "TopologyConfig", "TopologyObjective", "describe", "explain", "locality", "make_objective",
    "node_topology", "priority",
]
