"""Twin pruning in the best-allocation search changes nothing but the work done.

Devices the objective and every check see as interchangeable are tried once
per slot once a first allocation exists; the chosen devices, the score and
infeasibility reasons must equal those of the exhaustive search. Driven on the
load test's cluster (full, partitioned and shared GPUs, NICs on PCIe roots)
with nodes partly allocated by earlier pods.
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.allocator import AllocatedState, NodeView, allocate
from app.extender.verbs import Extender
from app.features import FeatureGates
from app.inventory import KINDS, Inventory
from app.model import ResourceClaim, parse_object, parse_quantity
from app.topology import TopologyConfig, make_objective
from loadtest import generator
from tests.allocator.helpers import PlainObjective
from tests.allocator.test_bound import CLASSES, known_matches, shared_nodes, shared_pods

SHAPES = ("1gpu", "2gpu-40gi", "2gpu-1nic-same-root", "4gpu-4nic", "8gpu", "mig-1g",
          "shared-gpu")


@pytest.fixture(scope="module")
def cluster() -> tuple[Inventory, list[ResourceClaim]]:
    inv = Inventory()
    work = generator.generate_workload(pods=60, claims="claim", seed=3)
    for obj in [*generator.generate_cluster(nodes=20, seed=3), *work]:
        inv.apply(obj["kind"], "ADDED", obj)
    for kind in KINDS:
        inv.mark_synced(kind)
    ext = Extender(inv, features=FeatureGates(), file_mode=True)
    names = inv.node_names()
    pods = [inv.pod(f"default/{o['metadata']['name']}") for o in work if o["kind"] == "Pod"]
    for i, pod in enumerate(pods):  # fill the nodes unevenly
        assert pod is not None
        passed = ext.filter(pod, names).passed
        if passed:
            asyncio.run(ext.bind(namespace=pod.namespace, name=pod.name, uid=pod.uid,
                                 node=passed[i * 7 % len(passed)]))
    return inv, [_probe(shape) for shape in SHAPES]


def _probe(shape: str) -> ResourceClaim:
    template = generator.claim_template(shape)
    claim: ResourceClaim = parse_object("ResourceClaim", {
        "kind": "ResourceClaim", "metadata": template["metadata"],
        "spec": template["spec"]["spec"]})
    return claim


@pytest.mark.parametrize("shape", SHAPES)
def test_pruned_search_picks_what_the_exhaustive_search_picks(
        cluster: tuple[Inventory, list[ResourceClaim]], shape: str) -> None:
    inv, claims = cluster
    claim = claims[SHAPES.index(shape)]
    steps = [0, 0]
    for name in inv.node_names():
        state = inv.node_state(name)
        assert state is not None
        outcomes = []
        for wrap in (lambda o: o, PlainObjective):
            objective = make_objective(node_view=state.view, allocated=state.allocated,
                                       config=TopologyConfig(), mode="allocator")
            outcomes.append(allocate([claim], node_view=state.view, classes=inv.classes,
                                     allocated=state.allocated, features=FeatureGates(),
                                     class_matcher=inv.class_matcher,
                                     selector_matches=inv.selectors.selector_matches,
                                     objective=wrap(objective)))
        pruned, exhaustive = outcomes
        assert pruned.feasible == exhaustive.feasible
        assert [d.id for d in pruned.picks] == [d.id for d in exhaustive.picks]
        assert pruned.score == exhaustive.score
        assert pruned.reason == exhaustive.reason
        assert pruned.steps <= exhaustive.steps
        steps[0] += pruned.steps
        steps[1] += exhaustive.steps
    if shape == "4gpu-4nic":  # half-full nodes: no perfect allocation ends the search early
        assert steps[0] < steps[1] / 2


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node=shared_nodes(), claims=shared_pods(), spread=st.booleans())
def test_shared_devices_pruned_as_twins_pick_what_the_exhaustive_search_picks(
        node: tuple[NodeView, AllocatedState], claims: list[ResourceClaim],
        spread: bool) -> None:
    """Shared devices in the same state (their shares and memory taken by
    other pods and by the search's own picks) are twins too: the answer is
    the exhaustive search's, with or without known selector results (the
    bound left out: its probes take steps of their own)."""
    view, allocated = node
    config = TopologyConfig(packing="spread" if spread else "binpack")
    for known in (known_matches(view), None):
        outcomes = []
        for keep in (("twin_key",), ()):
            objective = make_objective(node_view=view, allocated=allocated, config=config,
                                       mode="allocator")
            outcomes.append(allocate(claims, node_view=view, classes=CLASSES,
                                     allocated=allocated, features=FeatureGates(),
                                     objective=PlainObjective(objective, *keep),
                                     known_matches=known, step_budget=10**6))
        pruned, exhaustive = outcomes
        assert pruned.feasible == exhaustive.feasible
        assert [d.id for d in pruned.picks] == [d.id for d in exhaustive.picks]
        assert pruned.score == exhaustive.score
        assert (pruned.reason, pruned.error) == (exhaustive.reason, exhaustive.error)
        assert pruned.steps <= exhaustive.steps


def test_free_shared_gpus_on_one_root_are_tried_once_per_slot() -> None:
    """4 GPUs + 4 NICs on a generator node of shared GPUs with one GPU holding
    another pod's share: the free shared GPUs of a root are twins, and a NIC
    request's known selector results make its devices' answers known, so the
    search visits a fraction of the allocations the exhaustive one does."""
    inv = Inventory()
    for obj in generator.generate_cluster(nodes=1, partitionable_fraction=0.0,
                                          shared_fraction=1.0):
        inv.apply(obj["kind"], "ADDED", obj)
    state = inv.node_state(generator.node_name(0))
    assert state is not None
    gpu = next(d for pool in state.view.pools for d in pool.devices
               if d.driver == generator.GPU_DRIVER)
    allocated = AllocatedState(multi_allocated=frozenset([gpu.id]), consumed_capacity={
        gpu.id: {"memory": parse_quantity("10Gi")}})
    pod = [_probe("4gpu-4nic")]
    outcomes = []
    for keep in (("twin_key",), ()):
        objective = make_objective(node_view=state.view, allocated=allocated,
                                   config=TopologyConfig(), mode="allocator")
        outcomes.append(allocate(pod, node_view=state.view, classes=inv.classes,
                                 allocated=allocated, features=FeatureGates(),
                                 class_matcher=inv.class_matcher,
                                 selector_matches=inv.selectors.selector_matches,
                                 objective=PlainObjective(objective, *keep),
                                 known_matches=known_matches(state.view)))
    pruned, exhaustive = outcomes
    assert [d.id for d in pruned.picks] == [d.id for d in exhaustive.picks]
    assert pruned.score == exhaustive.score
    assert pruned.steps * 3 < exhaustive.steps
