"""Allocator runs shared per part of a node give each node its own answer.

Nodes of one hardware (GPUs and NICs on three PCIe roots, two NUMA nodes)
hold devices in random claims of random pods; the preemptor wants GPUs (and
maybe a NIC) on one root. A part's run is shared by nodes whose part is alike
however the rest of the node is used, so every node's answer in one search
over all of them (node, victims, devices, topology score) must be the one it
gets searched alone: a key that missed what the score reads of the rest of the
node (the fill, a NUMA node or the node left wholly free), or a release that
changes two roots, shows as a different score or allocation. Nodes of
partitions whose shared counters reach across two roots check the same where
parts overlap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.preemption import PreemptionPlan
from tests.extender.cluster import GPU_CLASS, ROOT
from tests.inventory.objects import (
    claim,
    device,
    device_class,
    exactly,
    node,
    resource_slice,
    result,
    template,
)
from tests.preemption.builders import answer, load, preemptor, searcher

NUMA = "resource.kubernetes.io/numaNode"
NIC_DRIVER = "dra.net"
NIC_CLASS = device_class("nic", f"device.driver == '{NIC_DRIVER}'")
GPU_ROOTS = ("r0", "r0", "r1", "r1", "r2", "r2")
NIC_ROOTS = ("r0", "r1", "r2")
P = 50


def hardware(name: str, board: int | None = None, rootless: bool = False
             ) -> list[dict[str, Any]]:
    """GPUs and NICs on three roots; r0 and r1 on NUMA node 0, r2 on 1. With
    `board`, the GPUs of r0 and r1 draw one unit each of a counter `board`
    holds (3: four held are over its limit), those of r2 of another of 2;
    `rootless`: the last GPU has no PCIe root."""
    def numa(root: str) -> int:
        return int(root == "r2")
    gpus = [device(f"gpu-{i}", uuid=f"GPU-{name}-{i}", **{ROOT: root, NUMA: numa(root)})
            for i, root in enumerate(GPU_ROOTS)]
    if rootless:
        del gpus[-1]["attributes"][ROOT]
    counters = None
    if board is not None:
        for i, gpu in enumerate(gpus):
            gpu["consumesCounters"] = [{"counterSet": "b01" if i < 4 else "b2",
                                        "counters": {"mem": {"value": "1"}}}]
        counters = [{"name": "b01", "counters": {"mem": {"value": str(board)}}},
                    {"name": "b2", "counters": {"mem": {"value": "2"}}}]
    nics = [device(f"nic-{i}", mac=f"{name}-{i}", **{ROOT: root, NUMA: numa(root)})
            for i, root in enumerate(NIC_ROOTS)]
    return [node(name),
            resource_slice(f"{name}-gpus", node_name=name, pool=name, devices=gpus,
                           shared_counters=counters),
            resource_slice(f"{name}-nics", driver=NIC_DRIVER, node_name=name, pool=name,
                           devices=nics)]


DEVICES = [f"gpu-{i}" for i in range(len(GPU_ROOTS))] + [f"nic-{i}" for i in range(len(NIC_ROOTS))]
# the claim of the device's own root (claims 0, 1, 2 for roots r0, r1, r2)
ROOT_CLAIM = -1

# The hardware's variants (`hardware`): mostly without counters.
HARDWARE = {"board": st.sampled_from([None, None, 3, 4]), "rootless": st.booleans()}

node_st = st.fixed_dictionaries({
    # per pod: its priority (P and above stay) and whether it is already going
    "pods": st.lists(st.tuples(st.sampled_from([0, 0, 1, 2, 49, 100]),
                               st.sampled_from([False] * 5 + [True])),
                     min_size=5, max_size=6),
    # per device the claim holding it (the changes free some): a GPU mostly its
    # root's own claim, a NIC any
    "owner": st.one_of(*(st.tuples(*[st.sampled_from(gpu)] * len(GPU_ROOTS),
                                    *[st.sampled_from([None, ROOT_CLAIM, 3, 4])] * len(NIC_ROOTS))
                          # claims across roots rare (parts alike) or common
                          for gpu in ([ROOT_CLAIM] * 12 + [3, 4], [ROOT_CLAIM] * 2 + [3, 4]))),
    # per claim the pods reserving it
    "holders": st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=2, unique=True),
                        min_size=5, max_size=5),
})
# Nodes alike but for a few devices (another owner), so that many share a part's
# run while the rest of the node differs.
changes_st = st.lists(st.tuples(st.integers(0, len(DEVICES) - 1),
                                st.sampled_from([ROOT_CLAIM, 3, 4, None])), max_size=2)
cluster_st = st.fixed_dictionaries({
    "base": node_st,
    "changes": st.lists(changes_st, min_size=2, max_size=5),
    "gpus": st.integers(1, 2),
    "nic": st.booleans(),
    **HARDWARE,
})


def nodes_of(spec: dict[str, Any]) -> dict[str, Any]:
    """`spec` with its nodes: the base node with each node's changes."""
    nodes = []
    for changes in spec["changes"]:
        owner = list(spec["base"]["owner"])
        for at, new in changes:
            owner[at] = new
        nodes.append({**spec["base"], "owner": owner})
    return {**spec, "nodes": nodes}


def build(spec: dict[str, Any], only: int | None = None) -> list[dict[str, Any]]:
    """The cluster, or with `only` that one node alone (under its own name)."""
    requests = [exactly("gpu", "gpu", count=spec["gpus"])]
    if spec["nic"]:
        requests.append(exactly("nic", "nic"))
    objs: list[dict[str, Any]] = [
        GPU_CLASS, NIC_CLASS,
        template("want", requests=requests,
                 constraints=[{"requests": [r["name"] for r in requests],
                               "matchAttribute": ROOT}]),
        preemptor(priority=P)]
    for n, ns in enumerate(spec["nodes"]):
        if only is not None and n != only:
            continue
        name = f"n{n}"
        objs += hardware(name, spec.get("board"), spec.get("rootless", False))
        pods = [f"{name}-p{i}" for i in range(len(ns["pods"]))]
        held: dict[str, list[str]] = {p: [] for p in pods}
        owners = [int((GPU_ROOTS + NIC_ROOTS)[i][1]) if owner == ROOT_CLAIM else owner
                  for i, owner in enumerate(ns["owner"])]
        for c, holders in enumerate(ns["holders"]):
            devices = [d for d, owner in zip(DEVICES, owners, strict=True) if owner == c]
            reservers = [pods[h] for h in holders if h < len(pods)]
            if not devices or not reservers:
                continue
            cname = f"{name}-c{c}"
            objs.append(claim(
                cname, requests=[exactly("dev", "gpu", count=len(devices))],
                results=[result("dev", f"{NIC_DRIVER if d.startswith('nic') else 'gpu.example.com'}"
                                       f"/{name}/{d}") for d in devices],
                reserved_for=[{"resource": "pods", "name": r, "uid": f"uid-{r}"}
                              for r in reservers]))
            for r in reservers:
                held[r].append(cname)
        for pname, (prio, going) in zip(pods, ns["pods"], strict=True):
            obj: dict[str, Any] = {
                "kind": "Pod", "metadata": {"name": pname, "namespace": "default",
                                            "uid": f"uid-{pname}"},
                "spec": {"nodeName": name, "priority": prio, "resourceClaims": [
                    {"name": f"e{i}", "resourceClaimName": c}
                    for i, c in enumerate(held[pname])]},
                "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}}
            if going:
                obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
            objs.append(obj)
    return objs


def plan_of(objs: list[dict[str, Any]], mode: str) -> PreemptionPlan:
    inv = load(*objs)
    _, search = searcher(inv, mode=mode)
    plan = search.search(inv.pod("default/p"))
    assert plan.problem is None
    return plan


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster_st, st.sampled_from(["allocator", "advisor"]))
def test_every_node_gets_the_answer_it_gets_alone(spec: dict[str, Any], mode: str) -> None:
    spec = nodes_of(spec)
    each_as_alone(lambda only: build(spec, only), len(spec["nodes"]), mode)


def each_as_alone(cluster: Callable[[int | None], list[dict[str, Any]]], nodes: int,
                  mode: str) -> None:
    """Each node's answer in one search over all (`cluster(None)`) is the one
    it gets searched alone (`cluster(n)`)."""
    plan = plan_of(cluster(None), mode)
    found = {n.node: n for n in plan.nodes}
    for n in range(nodes):
        name = f"n{n}"
        alone = plan_of(cluster(n), mode)
        assert (name in found) == bool(alone.nodes), (plan.refused.get(name),
                                                       alone.refused.get(name))
        if alone.best is not None:
            assert answer(found[name]) == answer(alone.best)


def test_a_part_shared_keeps_what_the_score_reads_of_its_root() -> None:
    """Two nodes free the same root by the same victim; on the second, a pod
    that stays holds that root's NIC, which the preemptor does not want: the
    root was wholly free on the first once the victim goes, not on the second,
    so the two allocations score differently."""
    pods = [(1, False), (100, False), (100, False), (100, False)]
    owner = [0, 0, 1, 1, 2, 2, None, None, None]
    spec = {"gpus": 2, "nic": False, "nodes": [
        {"pods": pods, "owner": owner, "holders": [[0], [1], [2], [3], [3]]},
        {"pods": pods, "owner": [*owner[:6], 3, None, None],
         "holders": [[0], [1], [2], [3], [3]]}]}
    found = {n.node: n for n in plan_of(build(spec), "allocator").nodes}
    assert found["n0"].score != found["n1"].score
    for n in range(2):
        alone = plan_of(build(spec, only=n), "allocator").best
        assert alone is not None
        assert answer(found[f"n{n}"]) == answer(alone)


def test_a_part_shared_keeps_which_pods_hold_what() -> None:
    """Two nodes alike in use, two claims on root r0 each: on the first, one pod
    holds both GPUs and another the NIC; on the second, one holds a GPU and
    the other a GPU and the NIC, which alone frees a GPU and the NIC."""
    pods = [(1, False), (2, False), (100, False), (100, False), (100, False), (100, False)]
    spec = {"gpus": 1, "nic": True, "nodes": [
        {"pods": pods, "owner": [0, 0, 1, 1, 2, 2, 3, 1, 2],
         "holders": [[0], [2], [3], [1], [4]]},
        {"pods": pods, "owner": [0, 3, 1, 1, 2, 2, 3, 1, 2],
         "holders": [[0], [2], [3], [1], [4]]}]}
    found = {n.node: n for n in plan_of(build(spec), "allocator").nodes}
    assert len(found["n0"].victims) == 2 and len(found["n1"].victims) == 1
    for n in range(2):
        alone = plan_of(build(spec, only=n), "allocator").best
        assert alone is not None
        assert answer(found[f"n{n}"]) == answer(alone)


def test_nodes_alike_in_one_part_share_its_run_and_keep_their_own_score() -> None:
    """Two nodes free the same root by the same victim; the second also holds a
    NIC on another root, so its fill, and so its score, differ: one allocator
    run serves both, each scored as searched alone."""
    pods = [(1, False), (100, False), (100, False), (100, False)]
    owner = [0, 0, 1, 1, 2, 2, None, None, None]
    spec = {"gpus": 2, "nic": False, "nodes": [
        {"pods": pods, "owner": owner, "holders": [[0], [1], [2], [3], [3]]},
        {"pods": pods, "owner": [*owner[:6], None, None, 3],
         "holders": [[0], [1], [2], [3], [3]]}]}
    inv = load(*build(spec))
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    found = {n.node: n for n in plan.nodes}
    assert sorted(found) == ["n0", "n1"]
    assert search.trials == 1
    assert found["n0"].score != found["n1"].score
    for n in range(2):
        alone = plan_of(build(spec, only=n), "allocator").best
        assert alone is not None
        assert answer(found[f"n{n}"]) == answer(alone)


# Partitions drawing on shared counters, one counter set reaching across two roots:
# (name, root, counter set, memory units); each set holds 4 units.
PARTITIONS = (("p0a", "r0", "c0", 1), ("p0b", "r0", "c0", 2), ("p0c", "r0", "c1", 1),
              ("p1a", "r1", "c1", 1), ("p1b", "r1", "c1", 2),
              ("p2a", "r2", "c2", 1), ("p2b", "r2", "c2", 2), ("p2c", "r2", "c2", 1))
PART_DRIVER = "mig.example.com"
PART_CLASS = device_class("mig", f"device.driver == '{PART_DRIVER}'")

counters_st = st.fixed_dictionaries({
    "base": st.tuples(*[st.sampled_from([None, 0, 1, 2, 3, 4])] * len(PARTITIONS)),
    "changes": st.lists(st.lists(st.tuples(st.integers(0, len(PARTITIONS) - 1),
                                           st.sampled_from([None, 0, 1, 2, 3, 4])),
                                 max_size=2), min_size=2, max_size=4),
    "priorities": st.tuples(*[st.sampled_from([0, 1, 2, 100])] * 5),
    "units": st.sampled_from([1, 2]),
})


def partitions_cluster(spec: dict[str, Any], only: int | None = None) -> list[dict[str, Any]]:
    """Nodes of partitions, each partition held by one pod's claim (by index)
    or free; the preemptor wants one partition of `units` on one root."""
    units = spec["units"]
    objs: list[dict[str, Any]] = [
        PART_CLASS,
        template("want", requests=[exactly("mig", "mig", selectors=(
            f"device.attributes['{PART_DRIVER}'].units == {units}",))],
            constraints=[{"requests": ["mig"], "matchAttribute": ROOT}]),
        preemptor(priority=P)]
    for n, changes in enumerate(spec["changes"]):
        if only is not None and n != only:
            continue
        name = f"n{n}"
        owner = list(spec["base"])
        for at, new in changes:
            owner[at] = new
        devices = []
        for pname, root, counter_set, size in PARTITIONS:
            d = device(pname, units=size, **{ROOT: root})
            d["consumesCounters"] = [{"counterSet": counter_set,
                                      "counters": {"mem": {"value": str(size)}}}]
            devices.append(d)
        objs += [node(name), resource_slice(
            f"{name}-mig", driver=PART_DRIVER, node_name=name, pool=name, devices=devices,
            shared_counters=[{"name": c, "counters": {"mem": {"value": "4"}}}
                             for c in ("c0", "c1", "c2")])]
        used: dict[str, int] = {}
        for (pname, _, counter_set, size), pod in zip(PARTITIONS, owner, strict=True):
            # a partition is held only where its counter set has room for it
            if pod is None or used.get(counter_set, 0) + size > 4:
                continue
            used[counter_set] = used.get(counter_set, 0) + size
            objs.append(claim(f"{name}-{pname}", requests=[exactly("mig", "mig")],
                              results=[result("mig", f"{PART_DRIVER}/{name}/{pname}")],
                              reserved_for=[{"resource": "pods", "name": f"{name}-q{pod}",
                                             "uid": f"uid-{name}-q{pod}"}]))
        for pod, prio in enumerate(spec["priorities"]):
            held = [f"{name}-{p}" for (p, _, _, _), o in zip(PARTITIONS, owner, strict=True)
                    if o == pod and any(c["metadata"]["name"] == f"{name}-{p}" for c in objs
                                        if c.get("kind") == "ResourceClaim")]
            objs.append({"kind": "Pod",
                         "metadata": {"name": f"{name}-q{pod}", "namespace": "default",
                                      "uid": f"uid-{name}-q{pod}"},
                         "spec": {"nodeName": name, "priority": prio, "resourceClaims": [
                             {"name": f"e{i}", "resourceClaimName": c}
                             for i, c in enumerate(held)]},
                         "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}})
    return objs


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(counters_st, st.sampled_from(["allocator", "advisor"]))
def test_every_node_of_shared_counters_gets_the_answer_it_gets_alone(
        spec: dict[str, Any], mode: str) -> None:
    each_as_alone(lambda only: partitions_cluster(spec, only), len(spec["changes"]), mode)


def test_nodes_alike_in_use_read_their_counters_and_ground_once() -> None:
    """Two nodes of one hardware with shared counters, used alike, whose pods
    hold what they use differently (one pod holds two roots' claims on the
    second): two problems, and one reading of whether a pool is over its
    counters' limit and of what the node is before any victim goes (its run,
    its parts), each node still getting the answer it gets alone."""
    pods = [(1, False), (2, False), (100, False), (100, False), (100, False)]
    owner = [0, 0, 1, 1, 2, 2, None, None, None]
    spec = {"gpus": 1, "nic": False, "board": 4, "nodes": [
        {"pods": pods, "owner": owner, "holders": [[0], [1], [2], [3], [4]]},
        {"pods": pods, "owner": owner, "holders": [[0], [0], [2], [3], [4]]}]}
    inv = load(*build(spec))
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    found = {n.node: n for n in plan.nodes}
    assert sorted(found) == ["n0", "n1"]
    assert search.problems == 2
    assert search._solver.limit_checks == 1
    assert search._solver.grounds == 1
    for n in range(2):
        alone = plan_of(build(spec, only=n), "allocator").best
        assert alone is not None
        assert answer(found[f"n{n}"]) == answer(alone)


def test_a_reason_found_on_a_node_alike_is_renamed_only_where_it_names_something(
        monkeypatch: Any) -> None:
    """Two nodes of one hardware, used alike, whose pods hold what they use
    differently: two problems, where even every lower-priority pod going is
    not enough (three GPUs on one root, of two). The second problem reads the
    first's allocator run; its reason names nothing of either node, so it is
    not renamed, and each node's reason is the one it gets searched alone."""
    from app.preemption import problem as module
    renamings: list[str] = []
    rename = module.renamed

    def counted(text: str, *args: Any) -> str:
        renamings.append(text)
        return rename(text, *args)

    monkeypatch.setattr(module, "renamed", counted)
    pods = [(1, False), (2, False), (100, False), (100, False), (100, False)]
    owner = [0, 0, 1, 1, 2, 2, None, None, None]
    spec = {"gpus": 3, "nic": False, "nodes": [
        {"pods": pods, "owner": owner, "holders": [[0], [1], [2], [3], [4]]},
        {"pods": pods, "owner": owner, "holders": [[0], [0], [2], [3], [4]]}]}
    inv = load(*build(spec))
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert not plan.nodes and search.problems == 2 and search.trials == 1
    assert renamings == []
    for n in range(2):
        alone = plan_of(build(spec, only=n), "allocator")
        assert plan.refused[f"n{n}"] == alone.refused[f"n{n}"]
