"""Hand-built devices and NodeViews for the topology tests: a node with
`roots` PCIe roots of `per_root` GPUs + NICs each, roots split evenly over
NUMA nodes, published the way the NVIDIA driver and dranet do (GPUs without
NUMA, NICs with `dra.net/numaNode`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from app.allocator.types import AllocatedState, NodeView, PoolView
from app.model import AttributeValue, Device, Node

GPU = "gpu.nvidia.com"
NIC = "dra.net"
ROOT = "resource.kubernetes.io/pcieRoot"


def device(name: str, *, driver: str = GPU, pool: str = "node-a",
           attributes: dict[str, tuple[str, Any]] | None = None) -> Device:
    return Device(driver=driver, pool=pool, name=name, slice_name=f"{pool}-{driver}",
                  attributes={k: AttributeValue(kind, value)
                              for k, (kind, value) in (attributes or {}).items()})


def gpu(name: str, root: str | None, *, pool: str = "node-a") -> Device:
    attrs = {f"{GPU}/type": ("string", "gpu")}
    if root is not None:
        attrs[ROOT] = ("string", root)
    return device(name, pool=pool, attributes=attrs)


def nic(name: str, root: str, numa: int, *, pool: str = "node-a") -> Device:
    return device(name, driver=NIC, pool=pool, attributes={
        ROOT: ("string", root), f"{NIC}/numaNode": ("int", numa), f"{NIC}/rdma": ("bool", True)})


def view(devices: Iterable[Device], *, node: str = "node-a", version: int = 1) -> NodeView:
    by_pool: dict[tuple[str, str], list[Device]] = {}
    for d in devices:
        by_pool.setdefault((d.driver, d.pool), []).append(d)
    pools = tuple(PoolView(driver=driver, name=name, generation=1, slices=(),
                           devices=tuple(devs), counter_sets={})
                  for (driver, name), devs in sorted(by_pool.items()))
    return NodeView(node=Node(name=node), version=version, pools=pools)


def node(name: str = "node-a", *, roots: int = 4, numa_nodes: int = 2, per_root: int = 2,
         version: int = 1) -> tuple[NodeView, dict[str, Device]]:
    """GPUs `gpu-<i>` and NICs `nic-<i>`, numbered root by root."""
    devices: list[Device] = []
    for r in range(roots):
        root = f"pci0000:{r:02x}"
        numa = r * numa_nodes // roots
        for k in range(per_root):
            i = r * per_root + k
            devices.append(gpu(f"gpu-{i}", root, pool=name))
            devices.append(nic(f"nic-{i}", root, numa, pool=name))
    return view(devices, node=name, version=version), {d.name: d for d in devices}


def allocated(*devices: Device) -> AllocatedState:
    return AllocatedState(devices=frozenset(d.id for d in devices))
