"""The inventory observer's snapshot as Prometheus metric families.

Read at scrape time from the last complete `Snapshot`, so a scrape costs a
few hundred label sets, never a walk (docs/metrics.md lists every metric).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from app.capacity import CapacityShape
from app.observability.figures import DEVICE_STATES, POOL_STATES, Snapshot

FREE_BUCKETS: Final = (0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)
TOP_FRAGMENTED: Final = 10


def inventory_metrics(snap: Snapshot, *, shapes: Sequence[CapacityShape],
                      walks: int) -> Iterator[Any]:
    """The gauges of `snap` for the capacity `shapes`, and the walks done."""
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
    yield histogram("drax_node_free_devices",
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
    for shape in shapes:
        capacity.add_metric([shape.name], snap.capacity.get(shape.name, 0))
    yield capacity
    inexact = GaugeMetricFamily(
        "drax_capacity_inexact_nodes", "Nodes whose drax_capacity_pods count is a "
        "lower bound, the largest proven: a probe ran out of its search budget (or the "
        "count reached 1024).",
        labels=["shape"])
    for shape in shapes:
        inexact.add_metric([shape.name], snap.inexact.get(shape.name, 0))
    yield inexact
    yield GaugeMetricFamily("drax_inventory_walk_seconds",
                            "Duration of the last background inventory walk.",
                            value=snap.seconds)
    yield CounterMetricFamily("drax_inventory_walks", "Background inventory walks done.",
                              value=walks)


def histogram(name: str, doc: str, observed: Mapping[int, int],
               bounds: Sequence[float]) -> HistogramMetricFamily:
    """`observed`: each value and how many times it was observed."""
    cumulative = []
    for bound in bounds:
        cumulative.append((le(bound), sum(n for v, n in observed.items() if v <= bound)))
    cumulative.append(("+Inf", sum(observed.values())))
    return HistogramMetricFamily(name, doc, buckets=cumulative,
                                 sum_value=float(sum(v * n for v, n in observed.items())))


def le(bound: float) -> str:
    return str(float(bound))
