"""Score ordering on hand-built nodes: locality tiers, GPU↔NIC pairing,
packing under binpack and spread, early stop, and the 0..10 mapping."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.allocator.types import AllocatedState
from app.model import Device
from app.topology import (
    NEUTRAL_PRIORITY,
    TopologyConfig,
    TopologyObjective,
    make_objective,
    priority,
)
from tests.topology.topo_builders import allocated, device, gpu, nic, node, view

BINPACK = TopologyConfig()
SPREAD = TopologyConfig(packing="spread")


def objective(nv_devs: tuple, *used: str, config: TopologyConfig = BINPACK,
              mode: str = "allocator") -> TopologyObjective:
    nv, devs = nv_devs
    obj = make_objective(node_view=nv, allocated=allocated(*(devs[n] for n in used)),
                         config=config, mode=mode)
    assert isinstance(obj, TopologyObjective)
    return obj


def picks(nv_devs: tuple, *names: str) -> list[Device]:
    return [nv_devs[1][n] for n in names]


def test_same_root_beats_same_numa_beats_spanning() -> None:
    n = node()
    obj = objective(n)
    root = obj.evaluate(picks(n, "gpu-0", "gpu-1"))
    numa = obj.evaluate(picks(n, "gpu-0", "gpu-2"))
    split = obj.evaluate(picks(n, "gpu-0", "gpu-4"))
    assert (root.tier, numa.tier, split.tier) == (2, 1, 0)
    assert root.score > numa.score > split.score


def test_with_nic_same_root_beats_same_numa_beats_spanning() -> None:
    n = node()
    obj = objective(n)
    scores = [obj.score(picks(n, *names)) for names in (
        ("gpu-0", "gpu-1", "nic-0"), ("gpu-0", "gpu-1", "nic-2"), ("gpu-0", "gpu-1", "nic-4"))]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == 3


def test_tier_comes_first_even_when_packing_weighs_more() -> None:
    n = node()
    obj = objective(n, "gpu-2", config=TopologyConfig(locality_weight=0, packing_weight=1))
    one_root_on_free_root = obj.score(picks(n, "gpu-4", "gpu-5"))
    one_numa_next_to_used = obj.score(picks(n, "gpu-3", "gpu-0"))
    assert one_root_on_free_root > one_numa_next_to_used


def test_each_gpu_paired_with_a_same_root_nic_is_better() -> None:
    n = node()
    obj = objective(n)
    paired = obj.evaluate(picks(n, "gpu-0", "nic-0", "gpu-2", "nic-2"))
    unpaired = obj.evaluate(picks(n, "gpu-0", "gpu-1", "nic-2", "nic-3"))
    assert paired.tier == unpaired.tier == 1
    assert paired.score > unpaired.score
    across_numa_paired = obj.evaluate(picks(n, "gpu-0", "nic-0", "gpu-4", "nic-4"))
    across_numa_unpaired = obj.evaluate(picks(n, "gpu-0", "gpu-1", "nic-4", "nic-5"))
    assert across_numa_paired.score > across_numa_unpaired.score


def test_devices_without_topology_are_neutral() -> None:
    nv, devs = node()
    bare = device("plain", driver="x.example.com")
    obj = make_objective(node_view=nv, allocated=AllocatedState(), config=BINPACK,
                         mode="allocator")
    with_bare = obj.score([devs["gpu-0"], devs["gpu-1"], bare])
    assert with_bare == obj.score([devs["gpu-0"], devs["gpu-1"]])
    assert obj.score([bare]) == obj.score([bare, bare])


def test_packing_takes_from_a_partly_used_root_first() -> None:
    n = node()
    obj = objective(n, "gpu-0")
    next_to_used = obj.evaluate(picks(n, "gpu-1"))
    fresh_root = obj.evaluate(picks(n, "gpu-2"))
    fresh_numa = obj.evaluate(picks(n, "gpu-4"))
    assert next_to_used.packing > fresh_root.packing > fresh_numa.packing
    assert next_to_used.score > fresh_root.score > fresh_numa.score


def test_taking_a_whole_free_root_does_not_break_it() -> None:
    n = node()
    obj = objective(n, "gpu-4")
    whole_root = obj.evaluate(picks(n, "gpu-0", "gpu-1", "nic-0", "nic-1"))
    part_root = obj.evaluate(picks(n, "gpu-0", "gpu-1", "nic-0"))
    assert whole_root.packing > part_root.packing


@pytest.mark.parametrize(("config", "fuller_wins"), [(BINPACK, True), (SPREAD, False)])
def test_binpack_prefers_the_fuller_node_spread_the_emptier(config: TopologyConfig,
                                                             fuller_wins: bool) -> None:
    fuller = node("node-a")
    emptier = node("node-b")
    on_fuller = objective(fuller, "gpu-6", "gpu-7", "nic-6", config=config).score(
        picks(fuller, "gpu-4", "gpu-5"))
    on_emptier = objective(emptier, config=config).score(picks(emptier, "gpu-4", "gpu-5"))
    assert (on_fuller > on_emptier) is fuller_wins
    better, worse = (on_fuller, on_emptier) if fuller_wins else (on_emptier, on_fuller)
    assert priority(better) >= priority(worse)


def test_multi_allocated_devices_count_as_used() -> None:
    nv, devs = node()
    state = AllocatedState(multi_allocated=frozenset({devs["gpu-0"].id}))
    obj = make_objective(node_view=nv, allocated=state, config=BINPACK, mode="allocator")
    assert objective(node(), "gpu-0").score([devs["gpu-1"]]) == obj.score([devs["gpu-1"]])


def test_is_perfect_only_for_the_best_possible_allocation() -> None:
    n = node()
    obj = objective(n, "gpu-0")
    best = obj.score(picks(n, "gpu-1", "nic-0", "nic-1"))  # completes a started root
    assert obj.is_perfect(best)
    assert not obj.is_perfect(obj.score(picks(n, "gpu-2", "nic-2")))
    assert not obj.is_perfect(obj.score(picks(n, "gpu-1", "nic-2")))


def test_modes() -> None:
    n = node()
    assert objective(n, mode="advisor").first_fit
    assert not objective(n, mode="allocator").first_fit
    assert objective(n, mode="advisor").score(picks(n, "gpu-0")) == objective(n).score(
        picks(n, "gpu-0"))
    with pytest.raises(ValueError, match="mode"):
        objective(n, mode="fastest")


def test_priority_bands_and_neutral_value() -> None:
    assert priority(None) == NEUTRAL_PRIORITY == 0
    assert priority(float("nan")) == NEUTRAL_PRIORITY
    assert [priority(s) for s in (0.0, 1 / 3, 2 / 3, 1.0)] == [0, 3, 6, 10]
    assert priority(-1.0) == 0 and priority(2.0) == 10
    grid = [i / 300 for i in range(301)]
    assert [priority(s) for s in grid] == sorted(priority(s) for s in grid)
    n = node()
    obj = objective(n)
    assert priority(obj.score(picks(n, "gpu-0", "gpu-1"))) >= 6
    assert 3 <= priority(obj.score(picks(n, "gpu-0", "gpu-2"))) <= 5
    assert priority(obj.score(picks(n, "gpu-0", "gpu-4"))) <= 2


def test_priority_is_consistent_across_node_sizes() -> None:
    small = node("small", roots=4, per_root=2)
    big = node("big", roots=8, numa_nodes=4, per_root=2)
    # Same shape, same share of the node in use, same answer.
    on_small = objective(small, "gpu-7").score(picks(small, "gpu-6"))
    on_big = objective(big, "gpu-15", "gpu-13").score(picks(big, "gpu-14"))
    assert priority(on_small) == priority(on_big)


def test_first_one_root_pick_on_an_empty_node_is_perfect() -> None:
    n = node()
    obj = objective(n)
    assert obj.is_perfect(obj.score(picks(n, "gpu-0")))
    assert obj.is_perfect(obj.score(picks(n, "gpu-0", "gpu-1")))
    assert not obj.is_perfect(obj.score(picks(n, "gpu-0", "gpu-2")))


@pytest.mark.parametrize("used", [(), ("gpu-0",), ("gpu-0", "nic-3", "gpu-5"),
                                  ("gpu-0", "gpu-1", "nic-0", "nic-1")])
def test_is_perfect_never_claims_less_than_the_best(used: tuple[str, ...]) -> None:
    """Exhaustive check of the early-stop bound: whatever is called perfect
    scores at least as well as every other allocation of the same shape."""
    n = node()
    obj = objective(n, *used)
    free = [name for name in n[1] if name not in used]
    for size in (1, 2, 3, 4):
        by_shape: dict[bool, list[tuple[float, bool]]] = {}
        for combo in itertools.combinations(free, size):
            kinds = {name.split("-")[0] for name in combo}
            score = obj.score(picks(n, *combo))
            by_shape.setdefault(kinds == {"gpu", "nic"}, []).append(
                (score, obj.is_perfect(score)))
        for results in by_shape.values():
            best = max(score for score, _ in results)
            assert all(score == pytest.approx(best) for score, perfect in results if perfect)


def _no_less_than_the_best(obj: TopologyObjective, free: list[Device], size: int) -> None:
    """Every allocation of `size` of `free` that `obj` calls perfect scores at
    least as well as every other of the same shape (devices with a topology,
    on a PCIe root, on a NUMA node, and accelerators beside rooted NICs)."""
    topo = obj.topology
    by_shape: dict[tuple[int, int, int, bool], list[tuple[float, bool]]] = {}
    for combo in itertools.combinations(free, size):
        known = [(d, t) for d in combo if (t := topo.of(d)).known]
        shape = (len(known), sum(1 for _, t in known if t.pcie_root is not None),
                 sum(1 for _, t in known if t.numa_node is not None),
                 any(d.id in topo.accelerators for d, _ in known)
                 and any(d.id in topo.nics and t.pcie_root for d, t in known))
        score = obj.score(list(combo))
        by_shape.setdefault(shape, []).append((score, obj.is_perfect(score)))
    for results in by_shape.values():
        best = max(score for score, _ in results)
        assert all(score == pytest.approx(best) for score, perfect in results if perfect)


def test_is_perfect_on_roots_without_a_numa_node_counts_each_same_root_pair_whole() -> None:
    """GPUs on PCIe roots no device places on a NUMA node: a pair on one root
    counts whole in the score, so four GPUs as 2 + 2 (2 of 6 pairs on a root)
    are not the best when 3 + 1 (3 of 6) fits."""
    devices = [gpu(f"gpu-{r}-{k}", f"pci-{r}") for r, per_root in ((0, 3), (1, 2))
               for k in range(per_root)]
    obj = make_objective(node_view=view(devices), allocated=allocated(), config=SPREAD,
                         mode="allocator")
    two_and_two = obj.score([d for d in devices if d.name != "gpu-0-2"])
    assert two_and_two < obj.score(devices[:4])
    assert not obj.is_perfect(two_and_two)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), spread=st.booleans())
def test_is_perfect_never_claims_less_than_the_best_on_any_topology(
        data: st.DataObject, spread: bool) -> None:
    """The exhaustive check on nodes whose roots may lack a NUMA node, whose
    GPUs may lack a root, and whose NICs may sit on another NUMA node than
    their root's other NICs."""
    devices: list[Device] = []
    for r in range(data.draw(st.integers(1, 3))):
        for k in range(data.draw(st.integers(1, 3))):
            devices.append(gpu(f"gpu-{r}-{k}", data.draw(st.sampled_from(
                (f"pci-{r}", f"pci-{r}", f"pci-{r}", None)))))
        for k in range(data.draw(st.integers(0, 2))):
            devices.append(nic(f"nic-{r}-{k}", f"pci-{r}", data.draw(st.integers(0, 1))))
    used = data.draw(st.sets(st.sampled_from([d.name for d in devices])))
    obj = make_objective(node_view=view(devices),
                         allocated=allocated(*(d for d in devices if d.name in used)),
                         config=SPREAD if spread else BINPACK, mode="allocator")
    free = [d for d in devices if d.name not in used]
    for size in range(2, min(4, len(free)) + 1):
        _no_less_than_the_best(obj, free, size)


def test_binpack_keeps_empty_nodes_whole() -> None:
    """A used node wins even where the pod breaks a free root and NUMA node
    there, over an empty node where it could take a whole root: the empty
    node is the block an 8-GPU pod needs later."""
    used = node("node-a")
    empty = node("node-b")
    on_used = objective(used, "gpu-0").score(picks(used, "gpu-4", "nic-4"))
    on_empty = objective(empty).score(picks(empty, "gpu-0", "gpu-1", "nic-0", "nic-1"))
    assert priority(on_used) > priority(on_empty)


NAMES = [f"{kind}-{i}" for i in range(8) for kind in ("gpu", "nic")]


@settings(max_examples=200, deadline=None)
@given(used=st.sets(st.sampled_from(NAMES), max_size=12),
       a=st.sets(st.sampled_from(NAMES), min_size=1, max_size=6),
       b=st.sets(st.sampled_from(NAMES), min_size=1, max_size=6),
       spread=st.booleans())
def test_scores_stay_in_range_and_tiers_order_priorities(used: set[str], a: set[str],
                                                         b: set[str], spread: bool) -> None:
    n = node()
    obj = objective(n, *sorted(used), config=SPREAD if spread else BINPACK)
    qa, qb = obj.evaluate(picks(n, *sorted(a))), obj.evaluate(picks(n, *sorted(b)))
    for q in (qa, qb):
        assert 0.0 <= q.score <= 1.0 and 0 <= priority(q.score) <= 10
        assert 0.0 <= q.packing <= 1.0 and 0.0 <= q.refinement <= 1.0
    if qa.tier > qb.tier:
        assert priority(qa.score) > priority(qb.score) and qa.score > qb.score


def test_a_whole_node_pod_stays_in_its_tier_whatever_the_weights() -> None:
    n = node()
    obj = objective(n, config=TopologyConfig(packing="spread", locality_weight=0))
    whole = obj.evaluate(picks(n, *NAMES))  # every unit: spans NUMA, breaks nothing
    assert whole.tier == 0 and whole.packing == pytest.approx(1.0)
    assert priority(whole.score) == 2
