"""The shared cluster/workload generator: objects parse, layout and counts are
right, and output is deterministic by seed."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pytest

from app.model import Pod, ResourceClaim, ResourceClaimTemplate, ResourceSlice, parse_object
from app.sources.files import load_objects
from loadtest import generator
from loadtest.generator import (
    MODE_LABEL,
    SHAPES,
    generate_cluster,
    generate_workload,
    template_name,
    workload_shapes,
)


def _parsed(objects: list[dict[str, Any]]) -> list[Any]:
    return [parse_object(o["kind"], o) for o in objects]


def _slices_by_node(objects: list[dict[str, Any]]) -> dict[str, list[ResourceSlice]]:
    out: dict[str, list[ResourceSlice]] = defaultdict(list)
    for obj in _parsed(objects):
        if isinstance(obj, ResourceSlice):
            out[obj.node_name or ""].append(obj)
    return out


def _modes(objects: list[dict[str, Any]]) -> dict[str, str]:
    return {o["metadata"]["name"]: o["metadata"]["labels"][MODE_LABEL]
            for o in objects if o["kind"] == "Node"}


@pytest.fixture(scope="module")
def cluster() -> list[dict[str, Any]]:
    return generate_cluster(nodes=16)


def test_every_object_parses_and_kinds_are_complete(cluster):
    kinds = Counter(o["kind"] for o in cluster)
    assert kinds["Node"] == 16
    assert {o["metadata"]["name"] for o in cluster if o["kind"] == "DeviceClass"} == {
        "gpu.nvidia.com", "mig.nvidia.com", "rdma.dra.net"}
    _parsed(cluster)


def test_node_kinds_come_in_exact_proportions():
    modes = Counter(_modes(generate_cluster(nodes=40, partitionable_fraction=0.25,
                                            shared_fraction=0.125)).values())
    assert modes == {"partitionable": 10, "shared": 5, "full": 25}


def test_physical_layout_two_gpus_and_two_nics_per_root_two_roots_per_numa(cluster):
    for node, slices in _slices_by_node(cluster).items():
        devices = [d for s in slices for d in s.devices]
        gpus = [d for d in devices if d.driver == "gpu.nvidia.com"
                and d.attributes["gpu.nvidia.com/type"].value == "gpu"]
        nics = [d for d in devices if d.driver == "dra.net"]
        assert len(gpus) == 8 and len(nics) == 8, node
        per_root = Counter(d.attributes["resource.kubernetes.io/pcieRoot"].value
                           for d in gpus + nics)
        assert len(per_root) == 4 and set(per_root.values()) == {4}
        root_numa = {d.attributes["resource.kubernetes.io/pcieRoot"].value:
                     d.attributes["resource.kubernetes.io/numaNode"].value for d in nics}
        assert Counter(root_numa.values()) == {0: 2, 1: 2}
        assert all(d.attributes["dra.net/numaNode"].value == root_numa[
            d.attributes["resource.kubernetes.io/pcieRoot"].value] for d in nics)
        assert not any("resource.kubernetes.io/numaNode" in d.attributes for d in gpus)
        # GPU i sits on root i // 2 like NIC i: the same-root claim fits on every root.
        assert [d.attributes["resource.kubernetes.io/pcieRoot"].value for d in gpus] == [
            d.attributes["resource.kubernetes.io/pcieRoot"].value for d in nics]


def test_pools_are_complete_and_counters_exist(cluster):
    modes = _modes(cluster)
    for node, slices in _slices_by_node(cluster).items():
        by_driver: dict[str, list[ResourceSlice]] = defaultdict(list)
        for s in slices:
            assert s.pool.name == node
            by_driver[s.driver].append(s)
        for pool_slices in by_driver.values():
            assert {s.pool.resource_slice_count for s in pool_slices} == {len(pool_slices)}
        gpu_slices = by_driver["gpu.nvidia.com"]
        counter_sets = {cs.name: cs for s in gpu_slices for cs in s.shared_counters}
        devices = [d for s in gpu_slices for d in s.devices]
        if modes[node] != "partitionable":
            assert len(gpu_slices) == 1 and not counter_sets
            continue
        assert len(counter_sets) == 8 and len(devices) == 80
        assert all(not (s.devices and s.shared_counters) for s in gpu_slices)
        assert all(len(s.devices) <= 64 for s in gpu_slices)
        for d in devices:
            (use,) = d.consumes_counters
            available = counter_sets[use.counter_set].counters
            assert set(use.counters) <= set(available)
            if d.attributes["gpu.nvidia.com/type"].value == "gpu":
                assert use.counters == available


def test_mig_placements_of_one_gpu_partition_its_memory_slices(cluster):
    modes = _modes(cluster)
    node = next(n for n, m in modes.items() if m == "partitionable")
    devices = [d for s in _slices_by_node(cluster)[node] for d in s.devices]
    migs = [d for d in devices if d.name.startswith("gpu-3-mig-")]
    profiles = Counter(d.attributes["gpu.nvidia.com/profile"].value for d in migs)
    assert profiles == {"1g.10gb": 7, "3g.40gb": 2}
    three_g = [d for d in migs if d.attributes["gpu.nvidia.com/profile"].value == "3g.40gb"]
    slices = [{k for k in d.consumes_counters[0].counters if k.startswith("memory-slice")}
              for d in three_g]
    assert slices[0].isdisjoint(slices[1]) and len(slices[0] | slices[1]) == 8


def test_shared_nodes_publish_consumable_gpu_memory(cluster):
    modes = _modes(cluster)
    for node, slices in _slices_by_node(cluster).items():
        gpus = [d for s in slices for d in s.devices if d.driver == "gpu.nvidia.com"]
        shared = modes[node] == "shared"
        assert all(d.allow_multiple_allocations == shared for d in gpus)
        if shared:
            memory = gpus[0].capacity["gpu.nvidia.com/memory"]
            assert memory.request_policy is not None
            assert memory.request_policy.default == memory.value


def test_cluster_is_deterministic_by_seed():
    assert generate_cluster(nodes=6, seed=3) == generate_cluster(nodes=6, seed=3)
    assert generate_cluster(nodes=6, seed=3) != generate_cluster(nodes=6, seed=4)


@pytest.mark.parametrize("kwargs", [
    {"nodes": -1}, {"nodes": 1, "gpus_per_node": 0}, {"nodes": 1, "numa_nodes": 5},
    {"nodes": 1, "partitionable_fraction": 0.9, "shared_fraction": 0.2},
    {"nodes": 1, "gpus_per_node": 400},
])
def test_bad_cluster_parameters_are_rejected(kwargs):
    with pytest.raises(ValueError):
        generate_cluster(**kwargs)


def test_other_layouts_keep_their_shape():
    objs = generate_cluster(nodes=2, gpus_per_node=4, nics_per_node=2, numa_nodes=1,
                            pcie_roots=2, partitionable_fraction=0.5, shared_fraction=0)
    devices = [d for s in _slices_by_node(objs).values() for sl in s for d in sl.devices]
    assert Counter(d.driver for d in devices) == {"gpu.nvidia.com": 4 + 40, "dra.net": 4}
    assert {d.attributes["resource.kubernetes.io/numaNode"].value
            for d in devices if d.driver == "dra.net"} == {0}


def test_workload_templates_first_then_pods_in_exact_proportions():
    objs = generate_workload(pods=100, mix="default")
    parsed = _parsed(objs)
    templates = [o for o in parsed if isinstance(o, ResourceClaimTemplate)]
    pods = [o for o in parsed if isinstance(o, Pod)]
    assert parsed[:len(templates)] == templates and len(pods) == 100
    assert {t.name for t in templates} == {template_name(s) for s in SHAPES}
    names = {t.name for t in templates}
    assert all(p.resource_claims[0].resource_claim_template_name in names for p in pods)
    assert Counter(workload_shapes(pods=100)) == generator.DEFAULT_WEIGHTS
    assert len({p.uid for p in pods}) == 100


def test_topology_mix_ends_with_eight_gpu_pods():
    shapes = workload_shapes(pods=40, mix="topology")
    assert shapes[30:] == ["8gpu"] * 10
    assert "8gpu" not in shapes[:30]


def test_claim_mode_gives_each_pod_its_own_claim():
    parsed = _parsed(generate_workload(pods=5, mix="2gpu-1nic-same-root", claims="claim"))
    claims, pods = parsed[0::2], parsed[1::2]
    assert all(isinstance(c, ResourceClaim) for c in claims)
    for claim, pod in zip(claims, pods, strict=True):
        assert pod.resource_claims[0].resource_claim_name == claim.name
        assert [r.name for r in claim.spec.requests] == ["gpu", "nic"]
        assert claim.spec.constraints[0].match_attribute == "resource.kubernetes.io/pcieRoot"


def test_workload_is_deterministic_and_rejects_unknown_shapes():
    assert generate_workload(pods=30, seed=1) == generate_workload(pods=30, seed=1)
    assert workload_shapes(pods=30, seed=1) != workload_shapes(pods=30, seed=2)
    with pytest.raises(ValueError):
        generate_workload(pods=3, mix={"16gpu": 1})
    with pytest.raises(ValueError):
        generate_workload(pods=3, mix="nonsense")


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_cli_writes_files_the_file_source_reads_back(tmp_path, fmt):
    out = tmp_path / "cluster"
    workload = tmp_path / f"work.{fmt}"
    code = generator.main(["--nodes", "3", "--out", str(out), "--format", fmt,
                           "--pods", "4", "--workload", str(workload), "--seed", "7"])
    assert code == 0
    assert load_objects([out]) == sorted(
        generate_cluster(nodes=3, seed=7),
        key=lambda o: ["DeviceClass", "Node", "ResourceSlice"].index(o["kind"]))
    assert load_objects([workload]) == generate_workload(pods=4, seed=7)


def test_cli_reports_bad_parameters(tmp_path, capsys):
    assert generator.main(["--nodes", "2", "--out", str(tmp_path), "--numa-nodes", "9"]) == 2
    assert "numa_nodes" in capsys.readouterr().err


def test_slices_are_split_over_numbered_files(tmp_path):
    cluster = generate_cluster(nodes=4)
    paths = generator.write_cluster(tmp_path, cluster, fmt="json", slices_per_file=3)
    slices = [o for o in cluster if o["kind"] == "ResourceSlice"]
    assert [p.name for p in paths[2:]] == [
        f"resourceslices-{n:03d}.json" for n in range((len(slices) + 2) // 3)]
    assert [o for o in load_objects([tmp_path]) if o["kind"] == "ResourceSlice"] == slices
