"""The objective inside the real allocator: advisor mode reproduces upstream's
first fit, allocator mode finds the best-aligned allocation, `firstAvailable`
keeps the user's order, and topology never turns a feasible node away."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from app.allocator import AllocatedState, AllocationOutcome, allocate
from app.features import FeatureGates
from app.inventory import Inventory
from app.model import ResourceClaim, parse_object
from app.topology import TopologyConfig, make_objective
from loadtest.generator import generate_cluster

NODE = "node-00000"


@pytest.fixture(scope="module")
def inventory() -> Inventory:
    inv = Inventory()
    for obj in generate_cluster(nodes=1, partitionable_fraction=0, shared_fraction=0):
        inv.apply(obj["kind"], "ADDED", obj)
    return inv


def claim(*requests: dict[str, Any]) -> ResourceClaim:
    return parse_object("ResourceClaim", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {"devices": {"requests": list(requests)}}})


def exactly(name: str, device_class: str, count: int = 1) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": device_class, "count": count}}


GPUS_2 = exactly("gpu", "gpu.nvidia.com", 2)
NIC = exactly("nic", "rdma.dra.net")


def run(inventory: Inventory, claims: Sequence[ResourceClaim], *, used: Sequence[str] = (),
        mode: str | None) -> AllocationOutcome:
    state = inventory.node_state(NODE)
    assert state is not None
    taken = AllocatedState(devices=frozenset(
        f"{'dra.net' if d.startswith('pci') else 'gpu.nvidia.com'}/{NODE}/{d}" for d in used))
    objective = None if mode is None else make_objective(
        node_view=state.view, allocated=taken, config=TopologyConfig(), mode=mode)
    return allocate(claims, node_view=state.view, classes=inventory.classes, allocated=taken,
                    features=FeatureGates(), class_matcher=inventory.class_matcher,
                    objective=objective)


def devices(outcome: AllocationOutcome) -> list[str]:
    assert outcome.feasible, outcome.reason or outcome.error
    return [r.device for ca in outcome.claims for r in ca.allocation.results]


@pytest.mark.parametrize("used", [(), ("gpu-0",), ("gpu-1", "gpu-2"), ("gpu-0", "gpu-3")])
def test_advisor_mode_reproduces_first_fit_and_scores_it(inventory: Inventory,
                                                        used: tuple[str, ...]) -> None:
    claims = [claim(GPUS_2, NIC)]
    upstream = run(inventory, claims, used=used, mode=None)
    advisor = run(inventory, claims, used=used, mode="advisor")
    assert devices(advisor) == devices(upstream)
    assert advisor.score is not None


def test_allocator_mode_aligns_where_first_fit_splits(inventory: Inventory) -> None:
    claims = [claim(GPUS_2)]
    # gpu-0 taken: first fit takes gpu-1 (root 0) and gpu-2 (root 1).
    assert devices(run(inventory, claims, used=["gpu-0"], mode="advisor")) == ["gpu-1", "gpu-2"]
    first_fit = run(inventory, claims, used=["gpu-0"], mode="advisor")
    best = run(inventory, claims, used=["gpu-0"], mode="allocator")
    # One root, in the NUMA node already in use: keeps NUMA node 1 whole.
    assert devices(best) == ["gpu-2", "gpu-3"]
    assert best.score is not None and first_fit.score is not None
    assert best.score > first_fit.score


def test_gpus_get_a_nic_behind_their_own_root(inventory: Inventory) -> None:
    best = devices(run(inventory, [claim(GPUS_2, NIC)], used=["gpu-0"], mode="allocator"))
    gpus, nic = best[:2], best[2]
    assert gpus == ["gpu-2", "gpu-3"]
    assert nic in {"pci-0000-4b-00-0", "pci-0000-4c-00-0"}  # the NICs of root pci0000:48


def test_first_available_keeps_the_users_order(inventory: Inventory) -> None:
    prioritized = claim({"name": "gpu", "firstAvailable": [
        {"name": "two", "deviceClassName": "gpu.nvidia.com", "count": 2},
        {"name": "one", "deviceClassName": "gpu.nvidia.com", "count": 1}]})
    outcome = run(inventory, [prioritized], used=["gpu-0"], mode="allocator")
    assert devices(outcome) == ["gpu-2", "gpu-3"]
    assert {r.request for ca in outcome.claims for r in ca.allocation.results} == {"gpu/two"}


def test_topology_never_fails_a_feasible_node(inventory: Inventory) -> None:
    # Only gpu-3 and gpu-4 are free: they share neither root nor NUMA node.
    used = [f"gpu-{i}" for i in (0, 1, 2, 5, 6, 7)]
    for mode in ("advisor", "allocator"):
        assert devices(run(inventory, [claim(GPUS_2)], used=used, mode=mode)) == [
            "gpu-3", "gpu-4"]
