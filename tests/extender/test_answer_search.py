"""The search the answer book runs is the allocator's search with every part of
the objective it is given: the book builds the topology objective lazily, and
whatever the search asks of an objective must reach the real one."""

from __future__ import annotations

from app.allocator import AllocatedState, allocate
from app.extender.answers import AnswerBook
from app.extender.signature import request_kinds
from app.features import FeatureGates
from app.inventory import KINDS, Inventory
from app.model import parse_object
from app.topology import TopologyConfig, make_objective
from loadtest import generator


def test_the_books_search_looks_inside_a_free_numa_node_first() -> None:
    """4 GPUs + 4 NICs on a generator node with one GPU taken: the only
    allocation on one NUMA node comes last in the search's order. The book's
    search probes the free NUMA node first, as the objective's own search does,
    so every branch that spans both NUMA nodes is ruled out at its first pick."""
    inv = Inventory()
    for obj in generator.generate_cluster(nodes=1, partitionable_fraction=0.0,
                                          shared_fraction=0.0):
        inv.apply(obj["kind"], "ADDED", obj)
    for kind in KINDS:
        inv.mark_synced(kind)
    features = FeatureGates()
    book = AnswerBook(inv, features=features, mode="allocator", topology_config=TopologyConfig())
    state = inv.node_state(generator.node_name(0))
    assert state is not None
    gpu = next(d for pool in state.view.pools for d in pool.devices
               if d.driver == generator.GPU_DRIVER)
    allocated = AllocatedState(devices=frozenset([gpu.id]))
    claims = [parse_object("ResourceClaim", {
        "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "d"},
        "spec": generator.SHAPES["4gpu-4nic"]})]
    book.equivalence(state, request_kinds(claims))  # the node's match columns
    by_book = book.allocate(claims, state, allocated)
    objective = make_objective(node_view=state.view, allocated=allocated,
                               config=TopologyConfig(), mode="allocator")
    direct = allocate(claims, node_view=state.view, classes=inv.classes, allocated=allocated,
                      features=features, objective=objective,
                      class_matcher=inv.class_matcher,
                      selector_matches=inv.selectors.selector_matches,
                      known_matches=book.matches.known(state.view))
    assert [d.id for d in by_book.picks] == [d.id for d in direct.picks]
    assert by_book.score == direct.score
    assert by_book.steps == direct.steps < 100
