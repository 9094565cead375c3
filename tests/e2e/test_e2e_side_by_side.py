"""Side by side: the same workload on two identical node pools, pool A through
the `drax` scheduler and pool B through `default-scheduler` (the in-tree
DynamicResources plugin), in the same run on the same control plane.

Both must be correct (every pod bound on its pool, claims allocated on the
pod's node, reserved, constraints met, no device twice); drax must put every
GPU of a GPU+NIC pod behind the PCIe root of one of its NICs. The in-tree
share is only reported: first fit has no notion of locality beyond the
constraints a claim states. The numbers at scale are `python -m loadtest
--real-cluster` (loadtest/RESULTS.md).
"""

from __future__ import annotations

import pytest

from tests.e2e.cluster import Cluster
from tests.e2e.kube import Kube
from tests.e2e.workload import (
    add_pool,
    add_templates,
    check_workload,
    placement_quality,
    published_devices,
    schedule_every_shape,
)

POOLS = {"drax": "sbs-a", "default-scheduler": "sbs-b"}


@pytest.fixture(scope="module")
def pools(cluster: Cluster) -> dict[str, list[str]]:
    kube = cluster.kube()
    try:
        out = {}
        for pool in POOLS.values():
            out[pool] = add_pool(kube, prefix=pool, nodes=8, seed=11)
            add_templates(kube, prefix=pool)
    finally:
        kube.close()
    return out


def test_same_workload_through_drax_and_the_in_tree_scheduler(
        pools: dict[str, list[str]], kube: Kube) -> None:
    devices = published_devices(kube)
    quality = {}
    for scheduler, pool in POOLS.items():
        pods = schedule_every_shape(kube, prefix=pool, scheduler=scheduler, pool=pool)
        claims = check_workload(kube, pods, nodes=pools[pool])
        quality[scheduler] = placement_quality(claims, devices)
    drax, in_tree = quality["drax"], quality["default-scheduler"]
    assert drax.gpu_nic_pods == in_tree.gpu_nic_pods > 0, quality
    assert drax.aligned_share == 1.0, quality
    # Only the two 8-GPU pods must span both NUMA nodes.
    assert drax.single_numa_pods == drax.multi_device_pods - 2, quality
    assert drax.single_numa_pods >= in_tree.single_numa_pods, quality
