"""What sharing allocator runs per part rests on (`app.preemption.parts`).

A part's run is scored with the node's own fill from the units `PartNode`
counts in use, shared only where no search can reach the allocator's step
budget (`steps_bound`), and its early stop (`is_perfect`) ends the search on
every node alike in the part: each of those must agree with what the
allocator and the topology score do.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.allocator.constraints import lookup_attribute
from app.allocator.types import AllocatedState, AllocationOutcome
from app.extender.answers import AnswerBook
from app.extender.signature import flat_devices
from app.preemption.parts import part_layout, part_node, steps_bound
from app.topology.config import TopologyConfig
from app.topology.normalise import node_topology
from app.topology.score import make_objective, node_fill, one_root_score
from tests.extender.cluster import ROOT
from tests.preemption.builders import load, searcher
from tests.preemption.test_oracle import NODE, spec_st
from tests.preemption.test_part_sharing import GPU_ROOTS, NIC_ROOTS, build, hardware

CONFIG = TopologyConfig()


def test_a_part_node_counts_in_use_the_units_the_score_does() -> None:
    # gpu-2 is held shared, gpu-4 has capacity consumed without being held
    # shared: the score reads the first in use, not the second.
    inv = load(*hardware(NODE))
    state = inv.node_state(NODE)
    assert state is not None
    view = state.view
    devices = flat_devices(view)
    position = {d.id: at for at, d in enumerate(devices)}
    gpu = f"gpu.example.com/{NODE}/gpu-"
    allocated = AllocatedState(devices=frozenset({f"{gpu}0"}),
                               multi_allocated=frozenset({f"{gpu}2"}),
                               consumed_capacity={f"{gpu}4": {}})
    layout = part_layout(devices, position, range(len(devices)), lambda at: (
        None if (value := lookup_attribute(devices[at], ROOT)) is None
        else (value.kind, value.value)), node_topology(view, CONFIG))
    assert layout is not None
    node = part_node(layout, allocated, position)
    quality = make_objective(node_view=view, allocated=allocated, config=CONFIG,
                             mode="allocator").evaluate([devices[position[f"{gpu}1"]]])
    assert quality.intact is not None
    assert one_root_score(CONFIG, intact=quality.intact,
                          fill=node_fill(node.used(0), len(layout.units))) == quality.score
    # each unit here is one device: counted by bits, as the units are one by one
    assert layout.single is not None
    for freed in range(1 << len(devices)):
        held = node.held & ~freed
        assert node.used(freed) == sum(1 for unit in layout.units if unit & held)


@contextmanager
def allocations() -> Iterator[list[AllocationOutcome]]:
    """Every allocator outcome of the victim search meanwhile."""
    seen: list[AllocationOutcome] = []
    allocate = AnswerBook.allocate

    def recorded(self: AnswerBook, *args: Any, **kwargs: Any) -> AllocationOutcome:
        outcome = allocate(self, *args, **kwargs)
        seen.append(outcome)
        return outcome

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(AnswerBook, "allocate", recorded)
        yield seen


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec_st, st.sampled_from(["allocator", "advisor"]))
def test_no_search_takes_more_steps_than_its_bound(spec: dict[str, Any], mode: str) -> None:
    # one slot per GPU wanted (every GPU a candidate), one per NIC; 3 roots, 2 NUMA nodes
    slots = [len(GPU_ROOTS)] * spec["gpus"] + [len(NIC_ROOTS)] * spec["nic"]
    inv = load(*build({**spec, "nodes": [spec["node"]]}))
    _, search = searcher(inv, mode=mode)
    with allocations() as seen:
        search.search(inv.pod("default/p"))
    assert seen
    assert max(outcome.steps for outcome in seen) <= steps_bound(slots, 3 + 2)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec_st)
def test_no_allocation_scores_above_one_the_score_calls_perfect(spec: dict[str, Any]) -> None:
    # Every allocation of the preemptor on one root, on the node as it is used
    # (without counters, which only rule allocations out), each asked right
    # after it is scored, as the allocator asks.
    inv = load(*build({**spec, "board": None, "nodes": [spec["node"]]}))
    state = inv.node_state(NODE)
    assert state is not None
    objective = make_objective(node_view=state.view, allocated=state.allocated,
                               config=CONFIG, mode="allocator")
    free = [d for d in flat_devices(state.view) if d.id not in state.allocated.devices]
    scores = []
    perfect = []
    for root in ("r0", "r1", "r2"):
        on_root = [d for d in free if (v := lookup_attribute(d, ROOT)) is not None
                   and v.value == root]
        gpus = [d for d in on_root if d.driver == "gpu.example.com"]
        nics = [d for d in on_root if d.driver != "gpu.example.com"] if spec["nic"] else [None]
        for picked in itertools.combinations(gpus, spec["gpus"]):
            for nic in nics:
                scores.append(objective.score([*picked, *([nic] if nic else [])]))
                if objective.is_perfect(scores[-1]):
                    perfect.append(scores[-1])
    assert all(score >= max(scores) for score in perfect)
