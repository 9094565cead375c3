"""Capacity: how many more pods of a shape fit, per node, exactly.

`fits` counts the disjoint copies of a claim shape one node holds next to
what is allocated (the allocator's complete search, not a greedy guess);
`nodes` applies it to every node of an inventory for one pod shape, with its
extended resources; `shapes` is the `capacity:` config of the shapes the
metrics count. `drax capacity` prints these counts and the observer exports
them as gauges.
"""

from app.capacity.fits import (
    GPU_CLASS,
    MAX_COPIES,
    NIC_CLASS,
    ROOT_ATTRIBUTE,
    FitCount,
    count_fits,
    gpu_shape,
    max_fits,
)
from app.capacity.nodes import PodShape, count_nodes, device_plugin_fits, fresh_claim, pod_request
from app.capacity.shapes import DEFAULT_SHAPES, CapacityShape, parse_capacity

__all__ = [
    "DEFAULT_SHAPES", "GPU_CLASS", "MAX_COPIES", "NIC_CLASS", "ROOT_ATTRIBUTE", "CapacityShape",
    "FitCount", "PodShape", "count_fits", "count_nodes", "device_plugin_fits", "fresh_claim",
    "gpu_shape", "max_fits", "parse_capacity", "pod_request",
]
