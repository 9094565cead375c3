"""Victims per preemption never exceed a brute-force minimum (hypothesis).

Random small full clusters: GPU nodes on two PCIe roots, claims holding one or
two GPUs each, reserved by one or two pods of random priority (some already
terminating). The preemptor wants k GPUs, on one root or anywhere. The test
computes, for every node, the smallest victim set by trying every subset of
the pods and counting free GPUs itself, and compares with the search. Nodes
come in identical copies, so answers shared between nodes (one search per
problem, one allocator run per node state once victims are gone, per-root
enumeration) are checked against the same node searched alone, and the search
for the best node alone (nodes that cannot win left out) against the full one,
also with GPUs held for other pods by nominations.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.allocator.types import ClaimAllocation
from app.inventory import Inventory, Nomination
from app.model import AllocationResult, DeviceRequestAllocationResult
from tests.extender.cluster import GPU_CLASS, ROOT, gpu_node
from tests.inventory.objects import (
    claim,
    device,
    exactly,
    node,
    resource_slice,
    result,
    template,
)
from tests.preemption.builders import answer, load, preemptor, searcher

GPU = "gpu.example.com"
NUMA = "resource.kubernetes.io/numaNode"
P = 50  # the preemptor's priority


def node_strategy(priorities: list[int], roots: tuple[str, ...] | list[str] = ("r0", "r1"),
                  starts: tuple[str | None, ...] = (None, "2026-01-01T00:00:00Z",
                                                    "2026-01-02T00:00:00Z"),
                  going: tuple[bool, ...] = (False, False, False, True)) -> Any:
    return st.fixed_dictionaries({
        "roots": st.lists(st.sampled_from(list(roots)), min_size=2, max_size=5),
        "pods": st.lists(st.tuples(st.sampled_from(priorities),
                                   st.sampled_from(going),
                                   st.sampled_from(starts)),
                         min_size=1, max_size=4),
        # per GPU the claim holding it (mostly held: the cluster is full)
        "owner": st.lists(st.sampled_from([None, 0, 1, 2, 3, 0, 1, 2, 3]), min_size=5,
                          max_size=5),
        # per claim the pods reserving it
        "holders": st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=2, unique=True),
                            min_size=4, max_size=4),
    })


node_st = node_strategy([0, 1, 2, 3, 49, 50, 100])
cluster_st = st.fixed_dictionaries({
    # each node with its number of identical copies (nodes that share one search)
    "nodes": st.lists(st.tuples(node_st, st.integers(1, 3)), min_size=1, max_size=2),
    "count": st.integers(1, 3),
    "same_root": st.booleans(),
})


def build(spec: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The objects, and per node what the brute force needs (`spec["nodes"]`:
    node specs, one node each)."""
    requests = [exactly("gpu", "gpu", count=spec["count"])]
    constraints = ([{"requests": ["gpu"], "matchAttribute": ROOT}]
                   if spec["same_root"] else [])
    objs: list[dict[str, Any]] = [GPU_CLASS, template("want", requests=requests,
                                                      constraints=constraints),
                                  preemptor(priority=P)]
    truth: dict[str, Any] = {}
    for n, ns in enumerate(spec["nodes"]):
        name = f"n{n}"
        roots = ns["roots"]
        objs += [node(name), *(numa_gpu_node(name, roots) if spec.get("numa")
                               else gpu_node(name, roots=tuple(roots)))]
        pods = [(f"{name}-p{i}", prio, going) for i, (prio, going, _) in enumerate(ns["pods"])]
        starts = [start for _, _, start in ns["pods"]]
        claims: list[tuple[list[int], list[str]]] = []
        pod_claims: dict[str, list[str]] = {p[0]: [] for p in pods}
        for c, holders in enumerate(ns["holders"]):
            gpus = [g for g in range(len(roots)) if ns["owner"][g] == c]
            holders = [pods[h][0] for h in holders if h < len(pods)]
            if not gpus or not holders:
                continue
            cname = f"{name}-c{c}"
            objs.append(claim(cname, requests=requests,
                              results=[result("gpu", f"{GPU}/{name}/gpu-{g}") for g in gpus],
                              reserved_for=[{"resource": "pods", "name": h, "uid": f"uid-{h}"}
                                            for h in holders]))
            claims.append((gpus, holders))
            for h in holders:
                pod_claims[h].append(cname)
        for (pname, prio, going), start in zip(pods, starts, strict=True):
            obj: dict[str, Any] = {
                "kind": "Pod", "metadata": {"name": pname, "namespace": "default",
                                            "uid": f"uid-{pname}"},
                "spec": {"nodeName": name, "priority": prio, "resourceClaims": [
                    {"name": f"e{i}", "resourceClaimName": c}
                    for i, c in enumerate(pod_claims[pname])]},
                "status": {"phase": "Running"}}
            if start is not None:
                obj["status"]["startTime"] = start
            if going:
                obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
            objs.append(obj)
        truth[name] = {"roots": roots, "pods": pods, "claims": claims}
    return objs, truth


def numa_gpu_node(name: str, roots: list[str]) -> list[dict[str, Any]]:
    """`gpu_node` with NUMA nodes: roots r0 and r1 on NUMA node 0, r2 on 1."""
    gpus = [device(f"gpu-{i}", uuid=f"GPU-{name}-{i}", **{ROOT: root, NUMA: int(root == "r2")})
            for i, root in enumerate(roots)]
    return [resource_slice(f"{name}-gpus", node_name=name, pool=name, devices=gpus)]


def fits(node_truth: dict[str, Any], gone: set[str], count: int, same_root: bool) -> bool:
    held: set[int] = set()
    for gpus, holders in node_truth["claims"]:
        if not all(h in gone for h in holders):
            held.update(gpus)
    free = [r for g, r in enumerate(node_truth["roots"]) if g not in held]
    if same_root:
        return any(free.count(r) >= count for r in set(free))
    return len(free) >= count


def brute_minimum(node_truth: dict[str, Any], count: int, same_root: bool) -> int | None:
    going = {p for p, _, g in node_truth["pods"] if g}
    eligible = [p for p, prio, g in node_truth["pods"] if not g and prio < P]
    for size in range(len(eligible) + 1):
        for subset in itertools.combinations(eligible, size):
            if fits(node_truth, going | set(subset), count, same_root):
                return size
    return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster_st, st.sampled_from(["allocator", "advisor"]))
def test_victims_never_exceed_the_brute_force_minimum(spec: dict[str, Any], mode: str) -> None:
    flat = [ns for ns, copies in spec["nodes"] for _ in range(copies)]
    objs, truth = build({**spec, "nodes": flat})
    inv = load(*objs)
    _, search = searcher(inv, mode=mode)
    plan = search.search(inv.pod("default/p"))
    assert plan.problem is None
    found = {n.node: n for n in plan.nodes}
    for name, node_truth in truth.items():
        minimum = brute_minimum(node_truth, spec["count"], spec["same_root"])
        if minimum is None:
            assert name in plan.refused and name not in found
            continue
        assert name in found, plan.refused.get(name)
        chosen = found[name]
        assert chosen.exact
        assert len(chosen.victims) == minimum
        pods = {p: (prio, going) for p, prio, going in node_truth["pods"]}
        for victim in chosen.victims:
            prio, going = pods[victim.pod.name]
            assert prio < P and not going and victim.pod.node_name == name
        gone = {p for p, (_, g) in pods.items() if g} | {v.pod.name for v in chosen.victims}
        assert fits(node_truth, gone, spec["count"], spec["same_root"])
        picked = {r.device for ca in chosen.allocation for r in ca.allocation.results}
        assert len(picked) == spec["count"]
        assert all(r.pool == name for ca in chosen.allocation for r in ca.allocation.results)
    # A search for the best node alone picks the same node, victims and devices.
    _, best_search = searcher(inv, mode=mode)
    best = best_search.search(inv.pod("default/p"), best_only=True).best
    assert (best is None) == (plan.best is None)
    if best is not None and plan.best is not None:
        assert answer(best) == answer(plan.best)
    # Each node's answer is the one it gets searched alone, shared or not.
    for n, ns in enumerate(flat):
        alone_objs, _ = build({**spec, "nodes": [ns]})
        alone_inv = load(*alone_objs)
        _, alone_search = searcher(alone_inv, mode=mode)
        alone = alone_search.search(alone_inv.pod("default/p"))
        name = f"n{n}"
        assert (name in found) == bool(alone.nodes)
        if alone.best is not None:
            assert sorted(v.pod.name.removeprefix(f"{name}-") for v in found[name].victims) \
                == sorted(v.pod.name.removeprefix("n0-") for v in alone.best.victims)
            assert found[name].score == alone.best.score
            assert sorted(r.device for ca in found[name].allocation
                          for r in ca.allocation.results) \
                == sorted(r.device for ca in alone.best.allocation for r in ca.allocation.results)


# Few priorities (one negative) and start times over several different nodes: nodes tie on
# the first terms of the ranking, so leaving one out wrongly shows; with NUMA nodes or
# without, so they also tie on victims and differ in topology score.
# Some GPUs are held for other pods too (nominations of a higher priority, which stay
# taken once their claims go, or of a lower one, which the preemptor may take).
holds_st = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4), st.sampled_from([10, 1000])),
                    max_size=3)
tied_st = st.fixed_dictionaries({
    "nodes": st.lists(st.tuples(node_strategy([-3, 0, 0, 1, 49], roots=["r0", "r1", "r2"]),
                                st.just(1)), min_size=2, max_size=4),
    "count": st.integers(1, 3),
    "same_root": st.booleans(),
    "numa": st.booleans(),
    "holds": holds_st,
})


def nominate(inv: Inventory, spec: dict[str, Any]) -> None:
    """Hold `spec["holds"]` (node, GPU, priority) for pods of that priority,
    one nomination per node and priority."""
    held: dict[tuple[int, int], set[int]] = {}
    for n, g, prio in spec.get("holds", ()):
        if n < len(spec["nodes"]) and g < len(spec["nodes"][n][0]["roots"]):
            held.setdefault((n, prio), set()).add(g)
    for (n, prio), gpus in sorted(held.items()):
        results = tuple(DeviceRequestAllocationResult(request="gpu", driver=GPU, pool=f"n{n}",
                                                      device=f"gpu-{g}") for g in sorted(gpus))
        key = f"default/h{n}-{prio}"
        inv.nominate(Nomination(pod_key=key, pod_uid=f"uid-{key}", priority=prio, node=f"n{n}",
                                allocations=(ClaimAllocation(claim_key=f"{key}-claim",
                                                             allocation=AllocationResult(
                                                                 results=results)),),
                                victims=(), victim_claims=(), started_at=0.0,
                                expires_at=float("inf")))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tied_st, st.sampled_from(["allocator", "advisor"]))
def test_the_best_node_alone_is_the_best_of_every_node(spec: dict[str, Any], mode: str) -> None:
    objs, _ = build({**spec, "nodes": [ns for ns, _ in spec["nodes"]]})
    inv = load(*objs)
    nominate(inv, spec)
    p = inv.pod("default/p")
    _, search = searcher(inv, mode=mode)
    with inv.holds_lifted_for(p):
        plan = search.search(p)
    _, best_search = searcher(inv, mode=mode)
    with inv.holds_lifted_for(p):
        best = best_search.search(p, best_only=True).best
    assert (best is None) == (plan.best is None)
    if best is not None and plan.best is not None:
        assert answer(best) == answer(plan.best)


# Equal priorities and start times, no pod going: nodes tie on every term but the topology
# score, which the search for the best node bounds per node.
scored_st = st.fixed_dictionaries({
    "nodes": st.lists(st.tuples(node_strategy([0], roots=["r0", "r1", "r2"],
                                              starts=("2026-01-01T00:00:00Z",),
                                              going=(False,)),
                                st.just(1)), min_size=2, max_size=5),
    "count": st.integers(1, 3),
    "same_root": st.booleans(),
    "numa": st.booleans(),
    "holds": holds_st,
})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scored_st, st.sampled_from(["allocator", "advisor"]))
def test_the_best_node_alone_is_the_best_of_nodes_tied_but_for_the_score(
        spec: dict[str, Any], mode: str) -> None:
    test_the_best_node_alone_is_the_best_of_every_node.hypothesis.inner_test(  # type: ignore[attr-defined]
        spec, mode)
