"""Small clusters for extender tests: an inventory fed through the event API."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from app.extender import Extender
from app.features import FeatureGates
from app.inventory import KINDS, Inventory
from app.model import Pod
from tests.inventory.objects import device, device_class, resource_slice

ROOT = "resource.kubernetes.io/pcieRoot"
GPU_CLASS = device_class("gpu", "device.driver == 'gpu.example.com'")
NIC_CLASS = device_class("nic", "device.driver == 'nic.example.com'")


def gpu_node(name: str, *, roots: Iterable[str] = ("r0", "r0", "r1", "r1"),
             nic_roots: Iterable[str] = ()) -> list[dict[str, Any]]:
    """A node's slices: one GPU per entry of `roots`, one NIC per entry of
    `nic_roots`; names and UUIDs are unique per node, like real hardware."""
    gpus = [device(f"gpu-{i}", uuid=f"GPU-{name}-{i}", index=i, **{ROOT: root})
            for i, root in enumerate(roots)]
    out = [resource_slice(f"{name}-gpus", node_name=name, pool=name, devices=gpus)]
    nics = [device(f"nic-{i}", mac=f"{name}-mac-{i}", **{ROOT: root})
            for i, root in enumerate(nic_roots)]
    if nics:
        out.append(resource_slice(f"{name}-nics", driver="nic.example.com", node_name=name,
                                  pool=name, devices=nics))
    return out


def load(*objs: dict[str, Any] | list[dict[str, Any]], synced: bool = True) -> Inventory:
    inv = Inventory()
    for obj in objs:
        for o in obj if isinstance(obj, list) else [obj]:
            inv.apply(o["kind"], "ADDED", o)
    if synced:
        for kind in KINDS:
            inv.mark_synced(kind)
    return inv


def extender(inv: Inventory, **kwargs: Any) -> Extender:
    kwargs.setdefault("features", FeatureGates())
    return Extender(inv, **kwargs)


def the_pod(inv: Inventory, key: str = "default/p") -> Pod:
    pod = inv.pod(key)
    assert pod is not None
    return pod


MIG_CLASS = {"kind": "DeviceClass", "metadata": {"name": "mig"}, "spec": {"selectors": [
    {"cel": {"expression": "device.driver == 'mig.example.com'"}}]}}
SHARED_CLASS = {"kind": "DeviceClass", "metadata": {"name": "shared"}, "spec": {"selectors": [
    {"cel": {"expression": "device.driver == 'share.example.com'"}}]}}


def mig_node(name: str) -> dict[str, Any]:
    """One GPU's memory (4 units) split into partitions of 1, 2 and 4 units."""
    parts = []
    for size, count in ((1, 4), (2, 2), (4, 1)):
        for i in range(count):
            d = device(f"mig-{size}g-{i}")
            d["consumesCounters"] = [{"counterSet": "gpu-0",
                                      "counters": {"mem": {"value": str(size)}}}]
            parts.append(d)
    return resource_slice(f"{name}-mig", driver="mig.example.com", node_name=name, pool=name,
                          devices=parts, shared_counters=[
                              {"name": "gpu-0", "counters": {"mem": {"value": "4"}}}])


def shared_node(name: str) -> dict[str, Any]:
    d = device("shared-gpu")
    d["allowMultipleAllocations"] = True
    d["capacity"] = {"memory": {"value": "10", "requestPolicy": {
        "default": "2", "validRange": {"min": "1", "max": "10", "step": "1"}}}}
    return resource_slice(f"{name}-share", driver="share.example.com", node_name=name,
                          pool=name, devices=[d])
