"""What one search shares between its nodes, and what it reads again.

Problems that differ from the others of a search in a part or two are solved
from the parts' smallest sets found already, without their claims being
read; nodes of other hardware whose devices the preemptor's requests match
alike share one problem skeleton; whether an answer found on a node still
holds is read once per node and search, and read again by the next search;
whether the preemptor has room on a node as it is, once per node; pools over
their counters' limit are found whether the counters are whole or not.
"""

from __future__ import annotations

from typing import Any

from app.inventory import Inventory
from app.preemption.fit import NodeFit
from app.preemption.parts import overcommitted
from tests.extender.cluster import GPU_CLASS, gpu_node
from tests.inventory.objects import claim, exactly, result, template
from tests.preemption.builders import holder, load, preemptor, searcher
from tests.preemption.test_fit import gpu_holder, sized
from tests.preemption.test_part_sharing import ROOT_CLAIM, build, each_as_alone, hardware

FREE = None


def alike(*nics: tuple[int | None, int | None]) -> dict[str, Any]:
    """Nodes of three roots, each root's two GPUs held by its own pod (0, 1,
    2), the NICs of roots r0 and r1 per node as `nics` gives them (the root's
    own pod, pod 3 or 4, or free): every node uses the same devices, so the
    nodes differ only in who holds a NIC. The preemptor wants two GPUs and a
    NIC of one root."""
    nodes = [{"pods": [(0, False)] * 5,
              "owner": (*[ROOT_CLAIM] * 6, r0, r1, FREE),
              "holders": [[0], [1], [2], [3], [4]]} for r0, r1 in nics]
    return {"nodes": nodes, "gpus": 2, "nic": True, "board": None, "rootless": False}


def test_a_problem_whose_parts_were_solved_on_other_nodes_reads_no_claims() -> None:
    # n0 = (own, pod 3, free) and n1 = (pod 3, own, free) are solved from their
    # claims; n2 = (own, own, free) and n3 = (pod 3, pod 4, free) are new
    # problems whose every root is one of theirs, on a node used alike.
    spec = alike((ROOT_CLAIM, 3), (3, ROOT_CLAIM), (ROOT_CLAIM, ROOT_CLAIM), (3, 4))
    inv = load(*build(spec))
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert len(plan.nodes) == 4
    assert search.problems == 4 and search.claims_read == 2
    for mode in ("allocator", "advisor"):
        each_as_alone(lambda only: build(spec, only), 4, mode)


def test_a_node_of_a_new_usage_whose_parts_are_known_reads_no_claims() -> None:
    # n2 = (own, free, free) uses NIC r0 alone, as no node before it: its node
    # as it is is read anew, but each of its roots is alike on n0 = (own, own,
    # free) or n1 = (free, free, free), which were solved from their claims.
    spec = alike((ROOT_CLAIM, ROOT_CLAIM), (FREE, FREE), (ROOT_CLAIM, FREE))
    inv = load(*build(spec))
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert len(plan.nodes) == 3
    assert search.problems == 3 and search.claims_read == 2
    each_as_alone(lambda only: build(spec, only), 3, "allocator")


def test_nodes_of_other_hardware_whose_devices_match_alike_share_a_skeleton() -> None:
    spec = alike((ROOT_CLAIM, 3), (ROOT_CLAIM, 3))
    objs = build(spec)
    for obj in objs:  # n1's GPUs are another model: other hardware, matched alike
        if obj["kind"] == "ResourceSlice" and obj["metadata"]["name"] == "n1-gpus":
            for device in obj["spec"]["devices"]:
                device["attributes"]["model"] = {"string": "b"}
    inv = load(*objs)
    assert inv.node_state("n0") is not None and inv.node_state("n1") is not None
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert len(plan.nodes) == 2
    assert search.skeletons == 1 and search.problems == 2
    each_as_alone(lambda only: build(spec, only), 2, "allocator")


def _drop(inv: Inventory, objs: list[dict[str, Any]], name: str) -> None:
    for obj in objs:
        if obj["metadata"]["name"] == name:
            inv.apply(obj["kind"], "DELETED", obj)


def test_a_node_changed_since_the_last_search_is_read_as_changed() -> None:
    # Within a search a node's answers are checked against its version once;
    # the next search checks again, so answers found before the change no
    # longer hold.
    spec = alike((ROOT_CLAIM, 3), (3, ROOT_CLAIM))
    objs = build(spec)
    inv = load(*objs)
    _, search = searcher(inv)
    pod = inv.pod("default/p")
    search.search(pod)
    state = inv.node_state("n0")
    assert state is not None
    solver = search._solver
    assert solver.current(state.view)
    _drop(inv, objs, "n0-p3")
    _drop(inv, objs, "n0-c3")
    assert solver.current(state.view)  # the last search's word, until the next
    plan = search.search(pod)
    assert not solver.current(state.view)
    fresh = searcher(inv)[1].search(pod)
    assert [(n.node, [v.pod.name for v in n.victims]) for n in plan.nodes] == [
        (n.node, [v.pod.name for v in n.victims]) for n in fresh.nodes]


def test_room_as_the_node_is_is_read_once_per_node() -> None:
    # "roomy" has room for one more pod whoever goes; "full" takes one pod, so
    # the preemptor has room there only once its victim goes.
    objs: list[Any] = [GPU_CLASS, template("want", requests=[exactly("gpu", "gpu")]),
                       preemptor()]
    for name, pods in (("roomy", "110"), ("full", "1")):
        objs += [sized(name, pods=pods), *gpu_node(name, roots=("r0",)),
                 *gpu_holder(f"{name}-0", name, 0, 1, "1")]
    inv = load(*objs)
    p, roomy0, full0 = (inv.pod(f"default/{n}") for n in ("p", "roomy-0", "full-0"))
    assert p is not None and roomy0 is not None and full0 is not None
    fit = NodeFit(p, inv)
    assert fit.fits("roomy", [roomy0]) and fit.fits("roomy", []) and fit.roomy("roomy")
    assert fit.room_reads == 1
    assert fit.fits("full", [full0]) and not fit.fits("full", []) and not fit.roomy("full")
    assert fit.room_reads == 2


def _counted(limit: str, each: str) -> list[dict[str, Any]]:
    """Node n0 of two GPUs drawing `each` of a counter set of `limit`, both held."""
    node_objs = hardware("n0", board=2)
    for obj in node_objs:
        if obj["kind"] == "ResourceSlice" and obj["metadata"]["name"] == "n0-gpus":
            spec = obj["spec"]
            spec["devices"] = spec["devices"][:2]
            spec["sharedCounters"] = [{"name": "b01", "counters": {"mem": {"value": limit}}}]
            for device in spec["devices"]:
                device["consumesCounters"] = [{"counterSet": "b01",
                                               "counters": {"mem": {"value": each}}}]
    objs: list[Any] = [GPU_CLASS, *node_objs]
    objs += holder("n0-a", "n0", ["gpu.example.com/n0/gpu-0"])
    objs.append(claim("n0-b", requests=[exactly("gpu", "gpu")],
                      results=[result("gpu", "gpu.example.com/n0/gpu-1")],
                      reserved_for=[{"resource": "pods", "name": "n0-a", "uid": "uid-n0-a"}]))
    return objs


def test_counters_over_their_limit_are_found_whole_or_not() -> None:
    for limit, each, over in (("1", "1", True), ("2", "1", False), ("1500m", "800m", True),
                              ("1500m", "750m", False)):
        inv = load(*_counted(limit, each))
        state = inv.node_state("n0")
        assert state is not None
        assert bool(overcommitted(state.allocated, state.view)) is over, (limit, each)


def test_an_answer_of_two_victims_ranks_as_any_other() -> None:
    # (rank_key's two-victim path against the general one: the highest
    # priority, the offset sum, the count, the earliest start among the
    # highest-priority victims)
    from dataclasses import replace

    from app.model.parse import parse_object
    from app.preemption.search import PRIORITY_OFFSET, NodePreemption, Victim

    def pod(name: str, start: str) -> Any:
        return parse_object("Pod", {"metadata": {"name": name, "namespace": "default",
                                                 "uid": f"uid-{name}"},
                                    "spec": {"nodeName": "n0"},
                                    "status": {"phase": "Running", "startTime": start}})

    early, late = pod("a", "2026-01-01T00:00:00Z"), pod("b", "2026-01-02T00:00:00Z")
    base = NodePreemption(node="n0", victims=(), released_claims=(), pdb_violations=1,
                          score=0.5, priority=5)
    for pa, pb in ((3, 3), (4, 3), (3, 4)):
        found = replace(base, victims=(Victim(early, pa, ()), Victim(late, pb, ())))
        top = max(pa, pb)
        first = min(p.start_time for p, prio in ((early, pa), (late, pb)) if prio == top)
        assert found.rank_key() == (1, 1, top, pa + pb + 2 * PRIORITY_OFFSET, 2, -first, -0.5)
        three = replace(found, victims=(*found.victims, Victim(pod("c", "2026-01-03T00:00:00Z"),
                                                               0, ())))
        assert three.rank_key()[2:6] == (top, pa + pb + 3 * PRIORITY_OFFSET, 3, -first)
        again = replace(found)
        assert again == found and again is not found
