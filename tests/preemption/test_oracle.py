"""A node's victims are those a brute force picks (hypothesis).

One node of `test_part_sharing`'s hardware (GPUs and NICs on three roots; some
variants with shared counters, over their limit or not, or a GPU without a
root) with a few pods holding devices in random claims; the preemptor wants
GPUs (and maybe a NIC) on one root. The brute force tries every set of the
node's pods, smallest first, each on a fresh inventory without those pods
(nor those already going) and the claims only they reserve, where the pod
must fit with no victim. The search must find that smallest size, pick
among the sets of that size one the brute force ranks first (in allocator
mode the best topology score, then the lowest highest priority, then the
lowest sum), and report the devices and score a fresh allocator gives once
its victims are gone.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from app.preemption import NodePreemption
from tests.preemption.builders import load, searcher
from tests.preemption.test_part_sharing import DEVICES, HARDWARE, ROOT_CLAIM, P, build

NODE = "n0"

node_st = st.fixed_dictionaries({
    "pods": st.lists(st.tuples(st.sampled_from([0, 0, 1, 2, 100]),
                               st.sampled_from([False] * 5 + [True])),
                     min_size=3, max_size=5),
    # per device the claim holding it: its root's own claim, or any
    "owner": st.lists(st.sampled_from([ROOT_CLAIM, 0, 1, 2, 3, 4]),
                      min_size=len(DEVICES), max_size=len(DEVICES)),
    "holders": st.lists(st.lists(st.integers(0, 4), min_size=1, max_size=2, unique=True),
                        min_size=5, max_size=5),
})
spec_st = st.fixed_dictionaries({
    "node": node_st, "gpus": st.integers(1, 2), "nic": st.booleans(),
    **HARDWARE, "board": st.sampled_from([None, 3, 3, 4])})


def fitting(objs: list[dict[str, Any]], gone: set[str], mode: str) -> NodePreemption | None:
    """The pod's answer with no victim once the pods `gone` and the claims
    only they reserve are deleted; None when it does not fit."""
    kept = []
    for obj in objs:
        if obj["kind"] == "Pod" and obj["metadata"]["name"] in gone:
            continue
        reservers = [r["name"] for r in obj.get("status", {}).get("reservedFor", [])]
        if obj["kind"] == "ResourceClaim" and reservers and set(reservers) <= gone:
            continue
        kept.append(obj)
    inv = load(*kept)
    _, search = searcher(inv, mode=mode)
    return search.search(inv.pod("default/p"), allowed={NODE: ()}).best


def score(found: NodePreemption) -> float:
    return -1.0 if found.score is None else found.score


def devices(found: NodePreemption) -> list[str]:
    return sorted(r.device_id for ca in found.allocation for r in ca.allocation.results)


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec_st, st.sampled_from(["allocator", "advisor"]))
# GPUs of r0 and r1 over their counters' limit, each held by its own pod:
# r2's pod and any one of them (2), rather than three of r0 and r1
@example({"node": {"pods": [(0, False)] * 5, "owner": [0, 1, 2, 3, 4, 4, None, None, None],
                   "holders": [[0], [3], [2], [4], [1]]},
          "gpus": 2, "nic": False, "board": 3, "rootless": False}, "allocator")
def test_the_victims_are_a_smallest_set_the_brute_force_ranks_first(
        spec: dict[str, Any], mode: str) -> None:
    objs = build({**spec, "nodes": [spec["node"]]})
    pods = [o for o in objs if o["kind"] == "Pod" and o["spec"].get("nodeName") == NODE]
    going = {o["metadata"]["name"] for o in pods if o["metadata"].get("deletionTimestamp")}
    priority = {o["metadata"]["name"]: o["spec"]["priority"] for o in pods}
    eligible = [name for name, prio in priority.items() if name not in going and prio < P]
    smallest: list[tuple[tuple[str, ...], NodePreemption]] = []
    for size in range(len(eligible) + 1):
        for chosen in itertools.combinations(eligible, size):
            found = fitting(objs, going | set(chosen), mode)
            if found is not None:
                smallest.append((chosen, found))
        if smallest:
            break

    inv = load(*objs)
    _, search = searcher(inv, mode=mode)
    plan = search.search(inv.pod("default/p"))
    assert plan.problem is None
    if not smallest:
        assert plan.best is None and NODE in plan.refused
        return
    got = plan.best
    assert got is not None and got.exact, plan.refused
    victims = {v.pod.name for v in got.victims}
    assert len(victims) == len(smallest[0][0])
    if not victims:
        return
    fresh = fitting(objs, going | victims, mode)
    assert fresh is not None
    assert (got.score, devices(got)) == (fresh.score, devices(fresh))

    def rank(chosen: tuple[str, ...] | set[str], found: NodePreemption
             ) -> tuple[float, int, int]:
        priorities = [priority[name] for name in chosen]
        return (0.0 if mode == "advisor" else -score(found), max(priorities), sum(priorities))

    assert rank(victims, got) == min(rank(*option) for option in smallest)
