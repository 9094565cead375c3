"""Normalisation: NUMA aliases, inference from the PCIe root, missing data, caching."""

from __future__ import annotations

from dataclasses import replace

import msgspec
import pytest

from app.model import Device, DeviceCounterConsumption
from app.topology import DeviceTopology, TopologyConfig, describe, node_topology
from tests.topology.topo_builders import GPU, NIC, ROOT, device, gpu, nic, node, view


@pytest.mark.parametrize(("driver", "attribute", "kind", "value"), [
    ("x.example.com", "resource.kubernetes.io/numaNode", "int", 1),
    (NIC, f"{NIC}/numaNode", "int", 1),
    (GPU, f"{GPU}/numa", "int", 1),
    ("amd.com", "amd.com/numaNode", "int", 1),          # "numaNode" of the driver's domain
    ("dra.cpu", "dra.cpu/numaNodeID", "int", 1),
    ("dra.memory", "dra.memory/numaNode", "int", 1),
    ("x.example.com", "resource.kubernetes.io/numaNode", "ints", (1, 0)),  # list: physical first
])
def test_numa_aliases(driver: str, attribute: str, kind: str, value: object) -> None:
    d = device("d", driver=driver, attributes={attribute: (kind, value)})
    assert describe(d, view([d])) == DeviceTopology(None, 1, False)


def test_standard_name_wins_over_driver_alias() -> None:
    d = device("d", driver=NIC, attributes={"resource.kubernetes.io/numaNode": ("int", 0),
                                            f"{NIC}/numaNode": ("int", 1)})
    assert describe(d, view([d])).numa_node == 0


def test_negative_numa_means_none_and_unknown_alias_is_ignored() -> None:
    d = device("d", driver=NIC, attributes={f"{NIC}/numaNode": ("int", -1),
                                            "other.example/numa": ("int", 3)})
    assert describe(d, view([d])) == DeviceTopology(None, None)


def test_custom_alias_table() -> None:
    config = TopologyConfig.from_dict({"numa_attributes": ["other.example/numa"],
                                       "pcie_root_attributes": ["other.example/root"]})
    d = device("d", driver="other.example", attributes={
        "other.example/numa": ("int", 3), "other.example/root": ("string", "PCI0000:AA"),
        ROOT: ("string", "pci0000:00")})
    assert describe(d, view([d]), config) == DeviceTopology("pci0000:aa", 3, False)


def test_gpu_numa_inferred_from_nic_on_same_root() -> None:
    nv, devs = node()
    topo = node_topology(nv, TopologyConfig())
    assert topo.of(devs["gpu-0"]) == DeviceTopology("pci0000:00", 0, True)
    assert topo.of(devs["gpu-7"]) == DeviceTopology("pci0000:03", 1, True)
    assert topo.of(devs["nic-7"]) == DeviceTopology("pci0000:03", 1, False)
    assert topo.accelerators == {devs[f"gpu-{i}"].id for i in range(8)}
    assert topo.nics == {devs[f"nic-{i}"].id for i in range(8)}
    assert set(topo.roots["pci0000:01"]) == {devs[n].id for n in ("gpu-2", "nic-2", "gpu-3",
                                                                  "nic-3")}
    assert set(topo.numa_nodes) == {0, 1}


def test_no_inference_without_a_neighbour_on_the_same_root() -> None:
    lone = gpu("gpu-0", "pci0000:10")
    nv = view([lone, nic("nic-0", "pci0000:20", 0)])
    assert describe(lone, nv) == DeviceTopology("pci0000:10", None, False)


def test_device_without_topology_is_neutral() -> None:
    bare = device("plain", driver="x.example.com")
    nv = view([bare, gpu("gpu-0", None)])
    topo = node_topology(nv, TopologyConfig())
    assert not topo.of(bare).known
    assert topo.roots == {} and topo.numa_nodes == {}
    assert topo.accelerators == frozenset()  # no root: not counted as an accelerator


def test_cache_follows_the_devices_not_the_version() -> None:
    first, _ = node(version=7)
    again = node_topology(first, TopologyConfig())
    assert node_topology(first, TopologyConfig()) is again
    # an allocation rebuilds the view with a new version but the same devices
    rebuilt = replace(first, version=8, pools=tuple(replace(p) for p in first.pools))
    assert node_topology(rebuilt, TopologyConfig()) is again
    other = view([gpu("gpu-0", "pci0000:99")], version=7)  # same name and version
    assert node_topology(other, TopologyConfig()).roots.keys() == {"pci0000:99"}


def test_partitions_of_one_gpu_are_one_unit() -> None:
    def part(name: str, counter_set: str) -> Device:
        d = gpu(name, "pci0000:10")
        return msgspec.structs.replace(
            d, consumes_counters=(DeviceCounterConsumption(counter_set, {}),))

    devices = [part("gpu-0", "gpu-0-counter-set"), part("gpu-0-mig-1g", "gpu-0-counter-set"),
               part("gpu-1", "gpu-1-counter-set"), nic("nic-0", "pci0000:10", 0)]
    topo = node_topology(view(devices), TopologyConfig())
    gpu0 = topo.unit_of[devices[0].id]
    assert topo.unit_of[devices[1].id] == gpu0 != topo.unit_of[devices[2].id]
    assert topo.units[gpu0] == (devices[0].id, devices[1].id)
    assert len(topo.roots["pci0000:10"]) == len(topo.placed) == 3
    assert topo.unit_topology(gpu0) == DeviceTopology("pci0000:10", 0, True)
