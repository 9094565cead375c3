"""Synthetic GPU/NIC clusters and pod workloads, shared by the benchmarks and `drax simulate`.

Everything here is a pure function returning lists of Kubernetes object dicts in
exactly the shapes real drivers publish (NVIDIA's `gpu.nvidia.com`, dranet's `dra.net`),
so the same objects can be written to files, fed to `drax serve --inventory`, or
applied to an inventory in-process. Output is deterministic for a given seed:
benchmarks compare runs, and a cluster must not change between them.

Cluster layout (per node, defaults in brackets):
- `gpus_per_node` [8] NVIDIA GPUs (`gpu.nvidia.com`, pool = node name) and
  `nics_per_node` [8] dranet RDMA NICs (`dra.net`), spread contiguously over
  `pcie_roots` [4] PCIe root complexes, which are spread over `numa_nodes` [2]
  NUMA nodes. GPUs carry `resource.kubernetes.io/pcieRoot` and no NUMA
  attribute (as the NVIDIA driver publishes them); NICs carry
  `dra.net/numaNode`, `resource.kubernetes.io/numaNode` and pcieRoot.
- Three node kinds, labelled `loadtest.drax.dev/gpu-mode`:
  * `partitionable` (`partitionable_fraction` [0.25] of the nodes, H100 only):
    the DynamicMIG representation — one slice holding only `sharedCounters`
    (one counter set per GPU: `multiprocessors` and `memory-slice-0..7`) and
    device slices holding, per GPU, the full GPU plus the 1g.10gb (7) and
    3g.40gb (2) MIG placements, all consuming that GPU's counters.
  * `shared` (`shared_fraction` [0.125] of the nodes, H100 only): every GPU has
    `allowMultipleAllocations: true` and a `memory` capacity of 80Gi with a
    requestPolicy (default 80Gi = the whole GPU, 1Gi steps), so the
    `shared-gpu` claim (10Gi of memory) lands only there.
  * `full`: one slice with whole GPUs; the model is drawn from `GPU_MODELS`
    (mostly H100/H200, some A100-40GB and L4 so memory selectors reject nodes).
  Which nodes get which kind is drawn from `seed`, in exact proportions.
- Every node is labelled `loadtest.drax.dev/shard` with its index modulo 4
  (`SHARDS`), so `drax serve --node-selector loadtest.drax.dev/shard=0`
  serves a quarter of the cluster (`loadtest.bench_pool`).
- DeviceClasses `gpu.nvidia.com`, `mig.nvidia.com` (NVIDIA Helm chart shape)
  and `rdma.dra.net` (physical RDMA ports, as in `tests/examples/`).

Workloads: `generate_workload` returns Pods and the ResourceClaimTemplates (one
per claim shape, listed first) or per-pod ResourceClaims they use, in order.
`SHAPES` names the claim shapes; `MIXES` names the presets (one per shape,
`default`, and `topology`, which ends with a run of 8-GPU pods).

`python -m loadtest.generator --nodes N --out DIR [--pods P --workload FILE]`
writes the cluster (and the workload) as YAML or JSON files.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson
import yaml

GPU_DRIVER: Final = "gpu.nvidia.com"
NIC_DRIVER: Final = "dra.net"
GPU_CLASS: Final = "gpu.nvidia.com"
MIG_CLASS: Final = "mig.nvidia.com"
NIC_CLASS: Final = "rdma.dra.net"
MODE_LABEL: Final = "loadtest.drax.dev/gpu-mode"
SHARD_LABEL: Final = "loadtest.drax.dev/shard"
SHARDS: Final = 4
PCIE_ROOT: Final = "resource.kubernetes.io/pcieRoot"
STANDARD_NUMA: Final = "resource.kubernetes.io/numaNode"
# API limit for slices whose devices consume counters.
MAX_DEVICES_PER_COUNTER_SLICE: Final = 64


@dataclass(slots=True, frozen=True)
class GpuModel:
    product_name: str
    architecture: str
    compute_capability: str
    memory: str
    weight: float


# productName, architecture and compute capability as the NVIDIA driver publishes them,
# memory as NVML reports it; L4's NVML total is illustrative.
GPU_MODELS: Final = {
    "h100": GpuModel("NVIDIA H100 80GB HBM3", "Hopper", "9.0.0", "81559Mi", 0.6),
    "h200": GpuModel("NVIDIA H200", "Hopper", "9.0.0", "143771Mi", 0.2),
    "a100-40gb": GpuModel("NVIDIA A100-SXM4-40GB", "Ampere", "8.0.0", "40Gi", 0.1),
    "l4": GpuModel("NVIDIA L4", "Ada Lovelace", "8.9.0", "23034Mi", 0.1),
}


@dataclass(slots=True, frozen=True)
class MigProfile:
    name: str
    gi_profile_id: int
    memory_slices: int
    multiprocessors: int
    memory: str
    placements: tuple[int, ...]


# H100 80GB MIG geometry: 8 memory slices, 132 SMs; placements are start slices.
H100_MEMORY_SLICES: Final = 8
H100_MULTIPROCESSORS: Final = 132
H100_MIG_PROFILES: Final = (
    MigProfile("1g.10gb", 19, 1, 16, "10Gi", (0, 1, 2, 3, 4, 5, 6)),
    MigProfile("3g.40gb", 9, 4, 60, "40Gi", (0, 4)),
)
SHARED_GPU_MEMORY: Final = "80Gi"


# --------------------------------------------------------------------------- layout


@dataclass(slots=True, frozen=True)
class PciePlacement:
    """Where one device sits: its root complex, NUMA node and PCI bus."""

    root: str
    numa: int
    bus: int

    @property
    def bus_id(self) -> str:
        return f"0000:{self.bus:02x}:00.0"


def _layout(*, gpus: int, nics: int, numa_nodes: int,
            pcie_roots: int) -> tuple[list[PciePlacement], list[PciePlacement]]:
    """GPU and NIC placements: devices fill roots contiguously, roots fill NUMA
    nodes contiguously, GPUs before NICs on each root's bus range."""
    bus_span = 0xE0 // pcie_roots
    per_root = math.ceil(gpus / pcie_roots) + math.ceil(nics / pcie_roots)
    if per_root >= bus_span:
        raise ValueError(f"{gpus} GPUs + {nics} NICs do not fit on {pcie_roots} PCIe roots")
    used = [0] * pcie_roots

    def place(index: int, total: int) -> PciePlacement:
        root = index * pcie_roots // total
        base = 0x10 + root * bus_span
        used[root] += 1
        return PciePlacement(root=f"pci0000:{base:02x}", numa=root * numa_nodes // pcie_roots,
                             bus=base + used[root])

    gpu_places = [place(i, gpus) for i in range(gpus)]
    nic_places = [place(i, nics) for i in range(nics)]
    return gpu_places, nic_places


def _uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _attr(kind: str, value: Any) -> dict[str, Any]:
    return {kind: value}


# --------------------------------------------------------------------------- cluster


def device_classes() -> list[dict[str, Any]]:
    def cls(name: str, expression: str) -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": expression}}]}}

    nvidia = f"device.driver == '{GPU_DRIVER}' && device.attributes['{GPU_DRIVER}'].type == "
    rdma = (f'device.driver == "{NIC_DRIVER}" && '
            f'device.attributes["{NIC_DRIVER}"].?rdma.orValue(false) && '
            f'!device.attributes["{NIC_DRIVER}"].?virtual.orValue(false) && '
            f'!device.attributes["{NIC_DRIVER}"].?isSriovVf.orValue(false)')
    gpu = cls(GPU_CLASS, nvidia + "'gpu'")
    gpu["spec"]["extendedResourceName"] = "nvidia.com/gpu"
    return [gpu, cls(MIG_CLASS, nvidia + "'mig'"), cls(NIC_CLASS, rdma)]


def _node(name: str, mode: str, model: GpuModel, index: int, rng: random.Random) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": _uid(rng), "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "topology.kubernetes.io/zone": f"zone-{'abc'[index % 3]}",
                "nvidia.com/gpu.product": model.product_name.replace(" ", "-"),
                MODE_LABEL: mode,
                SHARD_LABEL: str(index % SHARDS),
            }}}


def _slice(*, node: str, driver: str, suffix: str, slice_count: int,
           devices: list[dict[str, Any]] | None = None,
           counters: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"driver": driver, "nodeName": node,
                            "pool": {"name": node, "generation": 1,
                                     "resourceSliceCount": slice_count}}
    if devices is not None:
        spec["devices"] = devices
    if counters is not None:
        spec["sharedCounters"] = counters
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{driver}-{suffix}"}, "spec": spec}


def _gpu_attributes(model: GpuModel, place: PciePlacement, *, kind: str) -> dict[str, Any]:
    return {
        "type": _attr("string", kind),
        "productName": _attr("string", model.product_name),
        "brand": _attr("string", "Nvidia"),
        "architecture": _attr("string", model.architecture),
        "cudaComputeCapability": _attr("version", model.compute_capability),
        "driverVersion": _attr("version", "580.126.9"),
        "cudaDriverVersion": _attr("version", "13.0.0"),
        "addressingMode": _attr("string", "HMM"),
        "resource.kubernetes.io/pciBusID": _attr("string", place.bus_id),
        PCIE_ROOT: _attr("string", place.root),
    }


def _full_gpu(index: int, model: GpuModel, place: PciePlacement,
              rng: random.Random) -> dict[str, Any]:
    attributes = _gpu_attributes(model, place, kind="gpu")
    attributes["uuid"] = _attr("string", f"GPU-{_uid(rng)}")
    return {"name": f"gpu-{index}", "attributes": attributes,
            "capacity": {"memory": {"value": model.memory}}}


def _shared_gpu(index: int, model: GpuModel, place: PciePlacement,
                rng: random.Random) -> dict[str, Any]:
    device = _full_gpu(index, model, place, rng)
    device["allowMultipleAllocations"] = True
    device["capacity"] = {"memory": {"value": SHARED_GPU_MEMORY, "requestPolicy": {
        "default": SHARED_GPU_MEMORY,
        "validRange": {"min": "1Gi", "max": SHARED_GPU_MEMORY, "step": "1Gi"}}}}
    return device


def _counter_set_name(index: int) -> str:
    return f"gpu-{index}-counter-set"


def _slice_counters(slices: range) -> dict[str, dict[str, str]]:
    return {f"memory-slice-{s}": {"value": "1"} for s in slices}


def _gpu_counter_set(index: int) -> dict[str, Any]:
    counters = _slice_counters(range(H100_MEMORY_SLICES))
    counters["multiprocessors"] = {"value": str(H100_MULTIPROCESSORS)}
    return {"name": _counter_set_name(index), "counters": counters}


def _partitioned_gpu(index: int, model: GpuModel, place: PciePlacement,
                     rng: random.Random) -> list[dict[str, Any]]:
    """The full GPU and every MIG placement of one partitionable GPU, in the
    driver's order (full GPU first, then MIG devices by name)."""
    full = _full_gpu(index, model, place, rng)
    counters = _slice_counters(range(H100_MEMORY_SLICES))
    counters["multiprocessors"] = {"value": str(H100_MULTIPROCESSORS)}
    full["consumesCounters"] = [{"counterSet": _counter_set_name(index), "counters": counters}]
    devices = [full]
    parent_uuid = full["attributes"]["uuid"]
    for profile in H100_MIG_PROFILES:
        for start in profile.placements:
            attributes = _gpu_attributes(model, place, kind="mig")
            attributes["parentUUID"] = parent_uuid
            attributes["profile"] = _attr("string", profile.name)
            used = _slice_counters(range(start, start + profile.memory_slices))
            used["multiprocessors"] = {"value": str(profile.multiprocessors)}
            compact = profile.name.replace(".", "")
            devices.append({
                "name": f"gpu-{index}-mig-{compact}-{profile.gi_profile_id}-{start}",
                "attributes": attributes,
                "capacity": {"multiprocessors": {"value": str(profile.multiprocessors)},
                             "memory": {"value": profile.memory}},
                "consumesCounters": [{"counterSet": _counter_set_name(index),
                                      "counters": used}],
            })
    return devices


def _gpu_slices(node: str, mode: str, model: GpuModel, places: list[PciePlacement],
                rng: random.Random) -> list[dict[str, Any]]:
    if mode == "full":
        devices = [_full_gpu(i, model, p, rng) for i, p in enumerate(places)]
        return [_slice(node=node, driver=GPU_DRIVER, suffix="gpus", slice_count=1,
                       devices=devices)]
    if mode == "shared":
        devices = [_shared_gpu(i, model, p, rng) for i, p in enumerate(places)]
        return [_slice(node=node, driver=GPU_DRIVER, suffix="gpus", slice_count=1,
                       devices=devices)]
    # Since 1.35 a slice holds either counters or devices, and a slice whose
    # devices consume counters holds at most 64 devices; GPUs are split evenly.
    per_gpu = [_partitioned_gpu(i, model, p, rng) for i, p in enumerate(places)]
    gpus_per_slice = max(1, MAX_DEVICES_PER_COUNTER_SLICE // len(per_gpu[0]))
    groups = math.ceil(len(per_gpu) / gpus_per_slice)
    size = math.ceil(len(per_gpu) / groups)
    chunks = [per_gpu[i:i + size] for i in range(0, len(per_gpu), size)]
    count = 1 + len(chunks)
    counter_sets = [_gpu_counter_set(i) for i in range(len(places))]
    slices = [_slice(node=node, driver=GPU_DRIVER, suffix="counters", slice_count=count,
                     counters=counter_sets)]
    for k, chunk in enumerate(chunks):
        slices.append(_slice(node=node, driver=GPU_DRIVER, suffix=f"partitions-{k}",
                             slice_count=count, devices=[d for gpu in chunk for d in gpu]))
    return slices


def _nic(index: int, place: PciePlacement, rng: random.Random) -> dict[str, Any]:
    mac = ":".join(f"{b:02x}" for b in [0xa0, 0x88, 0xc2, *rng.randbytes(3)])
    return {"name": f"pci-0000-{place.bus:02x}-00-0", "attributes": {
        "dra.net/ifName": _attr("string", f"enp{place.bus}s0np0"),
        "dra.net/mac": _attr("string", mac),
        "dra.net/mtu": _attr("int", 9000),
        "dra.net/numaNode": _attr("int", place.numa),
        "dra.net/pciAddress": _attr("string", place.bus_id),
        "dra.net/pciDevice": _attr("string", "MT2910 Family [ConnectX-7]"),
        "dra.net/pciVendor": _attr("string", "Mellanox Technologies"),
        "dra.net/rdma": _attr("bool", True),
        "dra.net/rdmaDevice": _attr("string", f"mlx5_{index}"),
        "dra.net/sriov": _attr("bool", True),
        "dra.net/state": _attr("string", "up"),
        "dra.net/type": _attr("string", "device"),
        "dra.net/virtual": _attr("bool", False),
        STANDARD_NUMA: _attr("int", place.numa),
        PCIE_ROOT: _attr("string", place.root),
    }}


def node_name(index: int) -> str:
    return f"node-{index:05d}"


def _node_modes(nodes: int, *, partitionable_fraction: float, shared_fraction: float,
                rng: random.Random) -> list[str]:
    if not (0 <= partitionable_fraction <= 1 and 0 <= shared_fraction <= 1
            and partitionable_fraction + shared_fraction <= 1):
        raise ValueError("partitionable_fraction and shared_fraction must be in [0, 1] "
                         "and add up to at most 1")
    partitionable = round(nodes * partitionable_fraction)
    shared = min(round(nodes * shared_fraction), nodes - partitionable)
    modes = (["partitionable"] * partitionable + ["shared"] * shared
             + ["full"] * (nodes - partitionable - shared))
    rng.shuffle(modes)
    return modes


def generate_cluster(*, nodes: int, gpus_per_node: int = 8, nics_per_node: int = 8,
                     numa_nodes: int = 2, pcie_roots: int = 4,
                     partitionable_fraction: float = 0.25, shared_fraction: float = 0.125,
                     seed: int = 0) -> list[dict[str, Any]]:
    """DeviceClasses, then per node: the Node, its GPU slice(s), its NIC slice."""
    return list(iter_cluster(nodes=nodes, gpus_per_node=gpus_per_node,
                             nics_per_node=nics_per_node, numa_nodes=numa_nodes,
                             pcie_roots=pcie_roots, partitionable_fraction=partitionable_fraction,
                             shared_fraction=shared_fraction, seed=seed))


def iter_cluster(*, nodes: int, gpus_per_node: int = 8, nics_per_node: int = 8,
                 numa_nodes: int = 2, pcie_roots: int = 4,
                 partitionable_fraction: float = 0.25, shared_fraction: float = 0.125,
                 seed: int = 0) -> Iterator[dict[str, Any]]:
    """The objects of `generate_cluster` one at a time: at 100,000 nodes the raw
    cluster is tens of gigabytes of dicts, more than the benchmark may hold."""
    if nodes < 0 or gpus_per_node < 1 or nics_per_node < 0:
        raise ValueError("nodes >= 0, gpus_per_node >= 1 and nics_per_node >= 0 are required")
    if not 1 <= numa_nodes <= pcie_roots:
        raise ValueError("1 <= numa_nodes <= pcie_roots is required")
    rng = random.Random(seed)
    gpu_places, nic_places = _layout(gpus=gpus_per_node, nics=nics_per_node,
                                     numa_nodes=numa_nodes, pcie_roots=pcie_roots)
    modes = _node_modes(nodes, partitionable_fraction=partitionable_fraction,
                        shared_fraction=shared_fraction, rng=rng)
    names = list(GPU_MODELS)
    weights = [GPU_MODELS[n].weight for n in names]
    yield from device_classes()
    for i, mode in enumerate(modes):
        name = node_name(i)
        model = GPU_MODELS["h100"] if mode != "full" else GPU_MODELS[
            rng.choices(names, weights)[0]]
        yield _node(name, mode, model, i, rng)
        yield from _gpu_slices(name, mode, model, gpu_places, rng)
        if nics_per_node:
            nics = [_nic(j, p, rng) for j, p in enumerate(nic_places)]
            yield _slice(node=name, driver=NIC_DRIVER, suffix="nics", slice_count=1,
                         devices=nics)


# --------------------------------------------------------------------------- workload


def _request(name: str, device_class: str, count: int = 1, *,
             selectors: Sequence[str] = (),
             capacity: Mapping[str, str] | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class, "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if capacity:
        exactly["capacity"] = {"requests": dict(capacity)}
    return {"name": name, "exactly": exactly}


MEMORY_40GI: Final = f'device.capacity["{GPU_DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0'

# Claim shape name -> ResourceClaimSpec (the `spec` of a ResourceClaim).
SHAPES: Final[Mapping[str, Mapping[str, Any]]] = {
    "1gpu": {"devices": {"requests": [_request("gpu", GPU_CLASS)]}},
    "2gpu-40gi": {"devices": {"requests": [
        _request("gpu", GPU_CLASS, 2, selectors=[MEMORY_40GI])]}},
    "2gpu-1nic-same-root": {"devices": {
        "requests": [_request("gpu", GPU_CLASS, 2, selectors=[MEMORY_40GI]),
                     _request("nic", NIC_CLASS)],
        "constraints": [{"requests": ["gpu", "nic"], "matchAttribute": PCIE_ROOT},
                        {"requests": ["gpu"], "matchAttribute": f"{GPU_DRIVER}/productName"}]}},
    "4gpu-4nic": {"devices": {"requests": [_request("gpu", GPU_CLASS, 4),
                                           _request("nic", NIC_CLASS, 4)]}},
    "8gpu": {"devices": {"requests": [_request("gpu", GPU_CLASS, 8)]}},
    "mig-1g": {"devices": {"requests": [_request(
        "mig", MIG_CLASS, selectors=[f'device.attributes["{GPU_DRIVER}"].profile == "1g.10gb"'])]}},
    "shared-gpu": {"devices": {"requests": [_request(
        "gpu", GPU_CLASS, selectors=["device.allowMultipleAllocations"],
        capacity={"memory": "10Gi"})]}},
}

DEFAULT_WEIGHTS: Final = {"1gpu": 25, "2gpu-40gi": 20, "2gpu-1nic-same-root": 20,
                          "4gpu-4nic": 10, "8gpu": 5, "mig-1g": 10, "shared-gpu": 10}

# A mix is a sequence of phases (fraction of the pods, shape weights); pods of
# a phase come in a seeded random order, phases in the order given.
Mix = Sequence[tuple[float, Mapping[str, float]]]
MIXES: Final[Mapping[str, Mix]] = {
    "default": [(1.0, DEFAULT_WEIGHTS)],
    "topology": [(0.75, {k: v for k, v in DEFAULT_WEIGHTS.items() if k != "8gpu"}),
                 (0.25, {"8gpu": 1})],
    **{shape: [(1.0, {shape: 1})] for shape in SHAPES},
}

POD_CLAIM_NAME: Final = "gpus"


def template_name(shape: str) -> str:
    return f"loadtest-{shape}"


def _apportion(total: int, weights: Mapping[str, float]) -> dict[str, int]:
    """Split `total` in proportion to `weights` (largest remainder, ties by order)."""
    weight_sum = sum(weights.values())
    if weight_sum <= 0 or any(w < 0 for w in weights.values()):
        raise ValueError("mix weights must be non-negative with a positive sum")
    exact = {k: total * w / weight_sum for k, w in weights.items()}
    counts = {k: math.floor(v) for k, v in exact.items()}
    order = sorted(weights, key=lambda k: counts[k] - exact[k])
    for k in order[:total - sum(counts.values())]:
        counts[k] += 1
    return counts


def resolve_mix(mix: str | Mapping[str, float] | Mix) -> Mix:
    if isinstance(mix, str):
        if mix not in MIXES:
            raise ValueError(f"unknown mix {mix!r}; known: {', '.join(MIXES)}")
        return MIXES[mix]
    if isinstance(mix, Mapping):
        return [(1.0, mix)]
    return mix


def workload_shapes(*, pods: int, mix: str | Mapping[str, float] | Mix = "default",
                    seed: int = 0) -> list[str]:
    """The claim shape of each pod, in scheduling order."""
    phases = resolve_mix(mix)
    for _, weights in phases:
        unknown = set(weights) - set(SHAPES)
        if unknown:
            raise ValueError(f"unknown claim shapes {sorted(unknown)}; known: {', '.join(SHAPES)}")
    rng = random.Random(seed)
    per_phase = _apportion(pods, {str(i): f for i, (f, _) in enumerate(phases)})
    shapes: list[str] = []
    for i, (_, weights) in enumerate(phases):
        phase = [s for s, n in _apportion(per_phase[str(i)], weights).items() for _ in range(n)]
        rng.shuffle(phase)
        shapes.extend(phase)
    return shapes


def claim_template(shape: str, *, namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": template_name(shape), "namespace": namespace},
            "spec": {"metadata": {"labels": {"app.kubernetes.io/part-of": "loadtest"}},
                     "spec": json.loads(json.dumps(SHAPES[shape]))}}


def _claim(name: str, shape: str, *, namespace: str, rng: random.Random) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace, "uid": _uid(rng)},
            "spec": json.loads(json.dumps(SHAPES[shape]))}


def _pod(name: str, *, namespace: str, uid: str, claim_ref: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "spec": {"schedulerName": "drax",
                     "resourceClaims": [{"name": POD_CLAIM_NAME, **claim_ref}],
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"claims": [{"name": POD_CLAIM_NAME}]}}]}}


def generate_workload(*, pods: int, mix: str | Mapping[str, float] | Mix = "default",
                      seed: int = 0, namespace: str = "default",
                      claims: str = "template") -> list[dict[str, Any]]:
    """Pods and the claim objects they use, in order.

    `claims="template"`: one ResourceClaimTemplate per shape used (first), then
    Pods referencing them (`resourceClaimTemplateName`), as a Deployment or Job
    would. `claims="claim"`: per pod, a ResourceClaim `<pod>-gpus` followed by
    the Pod referencing it (`resourceClaimName`)."""
    if claims not in ("template", "claim"):
        raise ValueError("claims must be 'template' or 'claim'")
    shapes = workload_shapes(pods=pods, mix=mix, seed=seed)
    rng = random.Random(seed + 1)
    objects: list[dict[str, Any]] = []
    if claims == "template":
        objects.extend(claim_template(s, namespace=namespace) for s in dict.fromkeys(shapes))
    for i, shape in enumerate(shapes):
        name = f"pod-{i:05d}-{shape}"
        if claims == "template":
            ref = {"resourceClaimTemplateName": template_name(shape)}
        else:
            claim = f"{name}-{POD_CLAIM_NAME}"
            objects.append(_claim(claim, shape, namespace=namespace, rng=rng))
            ref = {"resourceClaimName": claim}
        objects.append(_pod(name, namespace=namespace, uid=_uid(rng), claim_ref=ref))
    return objects


# --------------------------------------------------------------------------- files


def write_objects(path: str | Path, objects: Sequence[Mapping[str, Any]]) -> Path:
    """Write objects as multi-document YAML (`.yaml`) or one JSON `List` (`.json`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".json":
        path.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List",
                                       "items": list(objects)}))
    else:
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        path.write_text(yaml.dump_all(list(objects), Dumper=dumper, sort_keys=False),
                        encoding="utf-8")
    return path


def write_cluster(out: str | Path, objects: Iterable[Mapping[str, Any]], *,
                  fmt: str = "yaml", slices_per_file: int = 2000) -> list[Path]:
    """Split a generated cluster into `deviceclasses`, `nodes` and numbered
    `resourceslices-NNN` files. Several slice files let a loader that works file
    by file keep only a part of a big cluster's raw objects in memory at once."""
    if slices_per_file < 1:
        raise ValueError("slices_per_file must be positive")
    by_kind: dict[str, list[Mapping[str, Any]]] = {"DeviceClass": [], "Node": []}
    out = Path(out)
    written: list[Path] = []
    slices: list[Mapping[str, Any]] = []
    for obj in objects:  # slices are written as they fill a file: `objects` may stream
        if obj["kind"] != "ResourceSlice":
            by_kind[obj["kind"]].append(obj)
            continue
        slices.append(obj)
        if len(slices) == slices_per_file:
            written.append(write_objects(out / f"resourceslices-{len(written):03d}.{fmt}",
                                         slices))
            slices = []
    if slices:
        written.append(write_objects(out / f"resourceslices-{len(written):03d}.{fmt}", slices))
    return [write_objects(out / f"deviceclasses.{fmt}", by_kind["DeviceClass"]),
            write_objects(out / f"nodes.{fmt}", by_kind["Node"]), *written]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loadtest.generator",
        description="Write a synthetic GPU/NIC cluster (and optionally a pod workload).")
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--out", required=True, help="directory for the cluster files")
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--nics-per-node", type=int, default=8)
    parser.add_argument("--numa-nodes", type=int, default=2)
    parser.add_argument("--pcie-roots", type=int, default=4)
    parser.add_argument("--partitionable-fraction", type=float, default=0.25)
    parser.add_argument("--shared-fraction", type=float, default=0.125)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--format", choices=("yaml", "json"), default="yaml")
    parser.add_argument("--pods", type=int, default=0, help="pods in the workload")
    parser.add_argument("--mix", default="default", choices=sorted(MIXES))
    parser.add_argument("--claims", choices=("template", "claim"), default="template")
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--workload", help="file for the workload (.yaml or .json); "
                        "default: <out>-workload.<format> next to the cluster directory")
    args = parser.parse_args(argv)
    try:
        cluster = generate_cluster(
            nodes=args.nodes, gpus_per_node=args.gpus_per_node,
            nics_per_node=args.nics_per_node, numa_nodes=args.numa_nodes,
            pcie_roots=args.pcie_roots, partitionable_fraction=args.partitionable_fraction,
            shared_fraction=args.shared_fraction, seed=args.seed)
        workload = generate_workload(pods=args.pods, mix=args.mix, seed=args.seed,
                                     namespace=args.namespace, claims=args.claims)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    written = write_cluster(args.out, cluster, fmt=args.format)
    if args.pods:
        out = Path(args.out)
        target = args.workload or out.parent / f"{out.name}-workload.{args.format}"
        written.append(write_objects(target, workload))
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
