"""The topology-score ceiling that lets a best-only search leave tied nodes unsolved."""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
from typing import Any

from app.allocator.types import AllocatedState, ClaimAllocation
from app.extender.signature import flat_devices
from app.inventory import Nomination
from app.preemption.ceiling import UNBOUNDED, ceiling, intact_share, layout
from app.topology import TopologyConfig, make_objective
from app.topology.normalise import node_topology
from app.topology.score import node_fill, one_root_score
from tests.extender.cluster import GPU_CLASS, NIC_CLASS, ROOT
from tests.inventory.objects import device, exactly, node, resource_slice, template
from tests.preemption.builders import answer, holder, load, preemptor, searcher

NUMA = "resource.kubernetes.io/numaNode"
GPU = "gpu.example.com"
NIC = "nic.example.com"
# Two NUMA nodes of two PCIe roots each, two GPUs and one NIC per root.
ROOTS = {"r0": 0, "r1": 0, "r2": 1, "r3": 1}


def numa_node(name: str, *, numa: bool = True) -> list[dict[str, Any]]:
    def where(root: str) -> dict[str, Any]:
        return {ROOT: root, **({NUMA: ROOTS[root]} if numa else {})}

    gpus = [device(f"gpu-{i}", uuid=f"GPU-{name}-{i}", **where(root))
            for i, root in enumerate(r for r in ROOTS for _ in range(2))]
    nics = [device(f"nic-{i}", mac=f"{name}-{i}", **where(root)) for i, root in enumerate(ROOTS)]
    return [node(name), resource_slice(f"{name}-gpus", node_name=name, pool=name, devices=gpus),
            resource_slice(f"{name}-nics", driver=NIC, node_name=name, pool=name, devices=nics)]


def test_one_root_scores_are_the_objectives_own() -> None:
    # Every held set of a few devices, every allocation of 1-3 free devices in one root.
    for numa in (True, False):
        inv = load(*numa_node("n1", numa=numa))
        state = inv.node_state("n1")
        assert state is not None
        config = TopologyConfig()
        devices = flat_devices(state.view)
        topology = node_topology(state.view, config)
        shape = layout(topology, devices, (1 << len(devices)) - 1)
        assert shape is not None and len(shape.roots) == len(ROOTS)
        sample = [d for d in devices if d.name in ("gpu-0", "gpu-1", "nic-0", "gpu-2", "gpu-5")]
        for size in range(len(sample) + 1):
            for taken in itertools.combinations(sample, size):
                allocated = AllocatedState(devices=frozenset(d.id for d in taken))
                objective = make_objective(node_view=state.view, allocated=allocated,
                                           config=config, mode="allocator")
                used = 0
                for d in taken:
                    used |= 1 << shape.unit[devices.index(d)]
                for root in shape.roots:
                    free = [devices[at] for at in root.positions if devices[at] not in taken]
                    for count in range(1, len(free) + 1):
                        assert one_root_score(config, intact=intact_share(
                            shape, root, used, count), fill=node_fill(
                            used.bit_count(), shape.units)) == objective.score(free[:count])


def test_spread_packing_gives_no_ceiling() -> None:
    inv = load(*numa_node("n1"))
    state = inv.node_state("n1")
    assert state is not None
    devices = flat_devices(state.view)
    config = TopologyConfig(packing="spread")
    shape = layout(node_topology(state.view, config), devices, 1)
    assert ceiling(shape, config, kinds=(1,), wanted=(1,), total=1, taken=0, shared=0,
                   frees={}) == UNBOUNDED
    assert ceiling(shape, TopologyConfig(), kinds=(1,), wanted=(1,), total=1, taken=0,
                   shared=0, frees={}) < UNBOUNDED


def test_a_best_only_search_leaves_out_tied_nodes_whose_score_cannot_win() -> None:
    # Every node ties on victims (two of priority 0). On n1 and n3 half the
    # victims also hold their root's NIC, which then stays out of the fill
    # and the blocks, so the best scores differ: n0 is solved first, n1 beats
    # it, n2 (n0's ceiling) cannot, nor can n3 (n1's score, a later name).
    objs: list[Any] = [GPU_CLASS, NIC_CLASS]
    for n in range(4):
        name = f"n{n}"
        objs.append(numa_node(name))
        for i in range(8):
            held = [f"{GPU}/{name}/gpu-{i}"]
            if n % 2 == 1 and i % 2 == 0:
                held.append(f"{NIC}/{name}/nic-{i // 2}")
            objs += holder(f"{name}-{i}", name, held)
    objs += [template("want", requests=[exactly("gpu", "gpu", count=2)]), preemptor()]
    inv = load(*objs)
    _, search = searcher(inv)
    full = search.search(inv.pod("default/p"))
    assert [n.node for n in full.nodes] == ["n1", "n3", "n0", "n2"]
    assert full.nodes[1].rank_key()[:6] == full.nodes[2].rank_key()[:6]
    _, search = searcher(inv)
    best = search.search(inv.pod("default/p"), best_only=True)
    assert best.best is not None and answer(best.best) == answer(full.best)
    assert search.left_out == 2


def test_a_device_held_for_another_stays_used_in_the_ceiling() -> None:
    # a and b alike: every GPU taken by a pod of priority 0, the even ones
    # together with their root's NIC. On b, nic-0 is held for h (a higher
    # priority) too, so it stays used once b-0 goes: r0 is then not wholly
    # free, and b's answer scores above a's. Read as freed, b's ceiling
    # would be a's score, and b (a later name) left out.
    objs: list[Any] = [GPU_CLASS, NIC_CLASS]
    for name in ("a", "b"):
        objs.append(numa_node(name))
        for i in range(8):
            held = [f"{GPU}/{name}/gpu-{i}"]
            if i % 2 == 0:
                held.append(f"{NIC}/{name}/nic-{i // 2}")
            objs += holder(f"{name}-{i}", name, held)
    objs += [template("want", requests=[exactly("gpu", "gpu", count=2)]), preemptor(),
             preemptor("h", priority=2000)]
    inv = load(*objs)
    allocation = inv.claim("default/b-0-claim").allocation
    assert allocation is not None
    nic = tuple(r for r in allocation.results if r.device == "nic-0")
    inv.nominate(Nomination(
        pod_key="default/h", pod_uid="uid-h", priority=2000, node="b",
        allocations=(ClaimAllocation(claim_key="default/h-claim",
                                     allocation=dataclasses.replace(allocation, results=nic)),),
        victims=(("default/b-0", "uid-b-0"),), victim_claims=("default/b-0-claim",),
        started_at=0.0, expires_at=float("inf")))
    p = inv.pod("default/p")
    _, search = searcher(inv)
    with inv.holds_lifted_for(p):
        full = search.search(p)
    assert [n.node for n in full.nodes] == ["b", "a"]
    assert full.nodes[0].rank_key()[:6] == full.nodes[1].rank_key()[:6]
    assert full.nodes[0].score is not None and full.nodes[1].score is not None
    assert full.nodes[0].score > full.nodes[1].score
    _, search = searcher(inv)
    with inv.holds_lifted_for(p):
        best = search.search(p, best_only=True).best
    assert best is not None and full.best is not None and answer(best) == answer(full.best)


def _plain_root_ceiling(shape: Any, config: TopologyConfig, root: Any, kinds: Any,
                        wanted: Any, total: int, held: Any, used: int, taken_now: int,
                        frees: Any) -> float | None:
    """`_root_ceiling` as its docstring reads: every set of takeable held devices
    that is enough, each scored with what it surely releases."""
    free = 0
    takeable = []
    for at in root.positions:
        if not taken_now >> at & 1:
            free |= 1 << at
        elif at in frees:
            takeable.append(at)
    if len(takeable) > 10:
        return None
    best = -math.inf
    for size in range(len(takeable) + 1):
        for pick in itertools.combinations(takeable, size):
            taken = sum(1 << at for at in pick)
            if any(((mask & free).bit_count() + (mask & taken).bit_count()) < count
                   for mask, count in zip(kinds, wanted, strict=True)):
                continue
            union = 0
            for mask in kinds:
                union |= mask
            if (union & free).bit_count() + taken.bit_count() < total:
                continue
            released = 0
            for at in pick:
                released |= frees[at]
            after = used
            for u, mask in held.items():
                if mask != -1 and not mask & ~released:
                    after &= ~(1 << u)
            best = max(best, one_root_score(config, intact=intact_share(
                shape, root, after, total), fill=node_fill(after.bit_count(), shape.units)))
    return best


def _numa_layout(config: TopologyConfig) -> tuple[list[Any], Any]:
    """A four-root NUMA node's devices and its layout with every device takeable."""
    inv = load(*numa_node("n1"))
    state = inv.node_state("n1")
    assert state is not None
    devices = flat_devices(state.view)
    return devices, layout(node_topology(state.view, config), devices, (1 << len(devices)) - 1)


def test_the_ceiling_is_the_best_over_every_enough_set(monkeypatch: Any) -> None:
    # Random holdings on a node of four roots: the ceiling equals the one that
    # scores every enough set of takeable devices, and so does the one whose
    # roots' scores are kept across nodes.
    from app.preemption import ceiling as module

    config = TopologyConfig()
    devices, shape = _numa_layout(config)
    gpus = sum(1 << at for at, d in enumerate(devices) if d.name.startswith("gpu"))
    nics = sum(1 << at for at, d in enumerate(devices) if d.name.startswith("nic"))
    rng = random.Random(7)
    bounded = 0
    memo: dict[Any, float | None] = {}  # one for every case: roots alike share it
    for _ in range(400):
        taken = shared = 0
        for at in range(len(devices)):
            if rng.random() < 0.7:
                taken |= 1 << at
                if rng.random() < 0.05:
                    shared |= 1 << at
        frees: dict[int, int] = {}
        for at in range(len(devices)):
            if taken >> at & 1 and rng.random() < 0.8:
                frees[at] = 1 << at
                for other in range(len(devices)):
                    if taken >> other & 1 and rng.random() < 0.15:
                        frees[at] |= 1 << other
        kinds, wanted = rng.choice([((gpus, nics), (2, 1)), ((gpus,), (1,)),
                                    ((gpus | nics,), (3,)), ((gpus, nics), (1, 1))])
        args = dict(kinds=kinds, wanted=wanted, total=sum(wanted), taken=taken,
                    shared=shared, frees=frees)
        fast = ceiling(shape, config, **args)
        kept = ceiling(shape, config, **args, memo=memo)
        with monkeypatch.context() as m:
            m.setattr(module, "_root_ceiling", _plain_root_ceiling)
            plain = ceiling(shape, config, **args)
        assert fast == plain == kept, args
        bounded += fast != UNBOUNDED
    assert bounded > 50
    assert len(memo) < 4 * 400


def test_nodes_alike_but_for_what_goes_on_another_root_share_a_roots_ceiling(
        monkeypatch: Any) -> None:
    # Every device held; two nodes differ only in which pods' going frees root
    # r0's GPUs together. Given the first node's roots, the second works out r0 alone.
    from app.preemption import ceiling as module

    config = TopologyConfig()
    devices, shape = _numa_layout(config)
    assert shape is not None
    at = {d.name: i for i, d in enumerate(devices)}
    gpus = sum(1 << at[f"gpu-{i}"] for i in range(8))
    nics = sum(1 << at[f"nic-{i}"] for i in range(4))
    taken = gpus | nics
    alone = {i: 1 << i for i in range(len(devices))}
    together = dict(alone)
    together[at["gpu-0"]] = together[at["gpu-1"]] = 1 << at["gpu-0"] | 1 << at["gpu-1"]
    calls: list[int] = []
    plain = module._root_ceiling

    def counted(*args: Any) -> Any:
        calls.append(1)
        return plain(*args)

    monkeypatch.setattr(module, "_root_ceiling", counted)
    memo: dict[Any, float | None] = {}
    args = dict(kinds=(gpus, nics), wanted=(2, 1), total=3, taken=taken, shared=0)
    first = ceiling(shape, config, **args, frees=alone, memo=memo)
    assert len(calls) == len(shape.roots)
    calls.clear()
    second = ceiling(shape, config, **args, frees=together, memo=memo)
    assert len(calls) == 1
    assert first == ceiling(shape, config, **args, frees=alone)
    assert second == ceiling(shape, config, **args, frees=together)
    assert first != UNBOUNDED and second != UNBOUNDED
