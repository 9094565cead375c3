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

from app.allocator import allocate
from app.extender.verbs import Extender
from app.features import FeatureGates
from app.inventory import KINDS, Inventory
from app.model import ResourceClaim, parse_object
from app.topology import TopologyConfig, make_objective
from loadtest import generator
from tests.allocator.helpers import PlainObjective

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
