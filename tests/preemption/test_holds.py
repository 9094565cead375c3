"""Nominations: the devices chosen for a preemptor are held while its victims go.

A full 4-GPU node; preemptor p (priority 1000) is nominated for two GPUs whose
holders are then gone. Pods of priority <= 1000 must not be given them by
filter or bind, p and pods of higher priority may; the hold ends when p is
bound, deleted, deleting, replaced, or its time-to-live passes.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.inventory import KINDS, Inventory, Nomination
from app.model.parse import parse_pod_usage
from tests.extender.cluster import GPU_CLASS, gpu_node
from tests.inventory.objects import claim, node, result, template
from tests.inventory.objects import exactly as request
from tests.preemption.builders import holder, load, preemptor, searcher

GPU = "gpu.example.com"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def full_node() -> list[dict[str, Any]]:
    out = [node("n1"), *gpu_node("n1")]
    for i, prio in enumerate((0, 0, 5, 5)):
        out += holder(f"n1-{i}", "n1", [f"{GPU}/n1/gpu-{i}"], priority=prio)
    return out


def pending(name: str, priority: int) -> dict[str, Any]:
    return preemptor(name, priority=priority, template="want")


@pytest.fixture()
def nominated() -> tuple[Inventory, Any, Clock]:
    """p nominated on n1 for GPUs 0-1, whose holders (n1-0, n1-1) are gone."""
    clock = Clock()
    inv = Inventory(clock=clock)
    for obj in [GPU_CLASS, *full_node(), template("want", requests=[request("gpu", "gpu",
                                                                            count=2)]),
                pending("p", 1000), pending("low", 1000), pending("lower", 10),
                pending("high", 2000)]:
        inv.apply(obj["kind"], "ADDED", obj)
    for kind in KINDS:
        inv.mark_synced(kind)
    ext, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    best = plan.best
    assert best is not None and sorted(v.pod.name for v in best.victims) == ["n1-0", "n1-1"]
    inv.nominate(Nomination(
        pod_key="default/p", pod_uid="uid-p", priority=1000, node="n1",
        allocations=best.allocation, victims=tuple((v.pod.key, v.pod.uid) for v in best.victims),
        victim_claims=best.released_claims, started_at=clock.now, expires_at=clock.now + 300))
    for name in ("n1-0", "n1-1"):
        inv.apply("Pod", "DELETED", {"metadata": {"name": name, "namespace": "default"}})
        inv.apply("ResourceClaim", "DELETED", {"metadata": {"name": f"{name}-claim",
                                                            "namespace": "default"}})
    return inv, ext, clock


def passes(ext: Any, inv: Inventory, name: str) -> bool:
    return ext.filter(inv.pod(f"default/{name}"), ["n1"]).passed == ["n1"]


def test_held_devices_go_to_the_preemptor_and_higher_priorities_only(nominated: Any) -> None:
    inv, ext, _ = nominated
    assert passes(ext, inv, "p")
    assert passes(ext, inv, "high")
    assert not passes(ext, inv, "low")  # equal priority
    assert not passes(ext, inv, "lower")
    assert [n.pod_key for n in inv.nominations()] == ["default/p"]


def test_a_priority_from_the_priority_class_alone_counts_for_the_hold(nominated: Any) -> None:
    """Objects from files carry no spec.priority: the hold compares the
    priority the victim search gives the pod, from its PriorityClass."""
    inv, ext, _ = nominated
    for name, value in (("urgent", 2000), ("routine", 10)):
        inv.apply("PriorityClass", "ADDED", {"kind": "PriorityClass",
                                             "metadata": {"name": name}, "value": value})
        pod = pending(name, 0)
        del pod["spec"]["priority"]
        pod["spec"]["priorityClassName"] = name
        inv.apply("Pod", "ADDED", pod)
    assert passes(ext, inv, "urgent")
    assert not passes(ext, inv, "routine")


async def test_bind_gives_the_preemptor_its_held_devices_and_refuses_a_lower_pod(
        nominated: Any) -> None:
    inv, ext, _ = nominated
    assert passes(ext, inv, "lower") is False
    refused = await ext.bind(namespace="default", name="lower", uid="uid-lower", node="n1")
    assert refused is not None and "can no longer hold" in refused.message
    assert passes(ext, inv, "p")
    assert await ext.bind(namespace="default", name="p", uid="uid-p", node="n1") is None


def test_the_hold_ends_when_the_preemptor_is_bound_or_goes(nominated: Any) -> None:
    inv, ext, _ = nominated
    low = inv.pod("default/lower")
    p = dict(pending("p", 1000))
    p["metadata"] = {**p["metadata"], "deletionTimestamp": "2026-01-03T00:00:00Z"}
    inv.apply("Pod", "MODIFIED", p)
    assert inv.nominations() == []
    assert ext.filter(low, ["n1"]).passed == ["n1"]


def test_the_preemptors_nominated_node_coming_back_keeps_the_hold(nominated: Any) -> None:
    inv, ext, _ = nominated
    p = pending("p", 1000)
    p["status"] = {"nominatedNodeName": "n1"}
    inv.apply("Pod", "MODIFIED", p)
    assert inv.nomination("default/p") is not None
    assert not passes(ext, inv, "lower")


@pytest.mark.parametrize("change", ["bound", "deleted", "replaced", "replaced-without-claims"])
def test_every_end_of_the_nomination(nominated: Any, change: str) -> None:
    inv, ext, _ = nominated
    p = pending("p", 1000)
    if change == "bound":
        p["spec"] = {**p["spec"], "nodeName": "n2"}
        inv.apply("Pod", "MODIFIED", p)
    elif change.startswith("replaced"):
        p["metadata"] = {**p["metadata"], "uid": "uid-p-2"}
        if change == "replaced-without-claims":  # kept as its usage, as the source does
            p["spec"] = {k: v for k, v in p["spec"].items() if k != "resourceClaims"}
            inv.upsert("Pod", parse_pod_usage(p))
        else:
            inv.apply("Pod", "MODIFIED", p)
    else:
        inv.apply("Pod", "DELETED", p)
    assert inv.nomination("default/p") is None
    assert passes(ext, inv, "lower")


def test_the_hold_expires(nominated: Any) -> None:
    inv, ext, clock = nominated
    clock.now += 299
    assert not passes(ext, inv, "lower")
    clock.now += 2
    assert inv.nominations() == []
    assert passes(ext, inv, "lower")


def alike_but_held(hold: str = "nominated") -> Inventory:
    """n1 and n2 alike: 4 GPUs taken by priority-0 pods, those on gpu-0 going;
    n1's gpu-0 is held for h (priority 2000), nominated there or assumed
    (`hold`), and therefore stays taken once n1-0 is gone."""
    objs = [GPU_CLASS, template("want", requests=[request("gpu", "gpu")])]
    for n in ("n1", "n2"):
        objs += [node(n), *gpu_node(n)]
        for i in range(4):
            objs += holder(f"{n}-{i}", n, [f"{GPU}/{n}/gpu-{i}"], priority=0,
                           deleting=(i == 0), start="2026-01-01T00:00:00Z")
    inv = Inventory(clock=Clock())
    for obj in [*objs, pending("h", 2000), pending("p", 1000)]:
        inv.apply(obj["kind"], "ADDED", obj)
    for kind in KINDS:
        inv.mark_synced(kind)
    _, search = searcher(inv)
    h = search.search(inv.pod("default/h"), ["n1"]).best
    assert h is not None and not h.victims
    if hold == "assumed":
        inv.assume(pod=inv.pod("default/h"), allocations=h.allocation, ttl=600)
        return inv
    inv.nominate(Nomination(pod_key="default/h", pod_uid="uid-h", priority=2000, node="n1",
                            allocations=h.allocation, victims=(),
                            victim_claims=h.released_claims, started_at=0.0,
                            expires_at=float("inf")))
    return inv


@pytest.mark.parametrize("hold", ["nominated", "assumed"])
@pytest.mark.parametrize("order", [["n1", "n2"], ["n2", "n1"], None])
def test_a_device_held_for_another_keeps_nodes_alike_apart(order: list[str] | None,
                                                           hold: str) -> None:
    inv = alike_but_held(hold)
    _, search = searcher(inv)
    p = inv.pod("default/p")
    with inv.holds_lifted_for(p):
        plan = search.search(p, order)
    assert {n.node: [v.pod.name for v in n.victims] for n in plan.nodes} == {
        "n1": ["n1-1"], "n2": []}


def test_the_best_node_is_not_one_whose_going_device_is_held_for_another() -> None:
    inv = alike_but_held()
    _, search = searcher(inv)
    p = inv.pod("default/p")
    with inv.holds_lifted_for(p):
        best = search.search(p, best_only=True).best
    assert best is not None and best.node == "n2" and not best.victims


def twice_allocated(*, with_n1: bool = True, second: bool = True) -> list[dict[str, Any]]:
    """n1 (if `with_n1`): 2 GPUs, b (priority 0) holds gpu-0. n2: 2 GPUs, a
    (priority 0) holds gpu-0, which claim c1, reserved for no pod, holds too
    (if `second`): releasing a's claim leaves gpu-0 taken. p wants 2 GPUs."""
    objs: list[Any] = [GPU_CLASS, template("want2", requests=[request("gpu", "gpu", count=2)]),
                       preemptor("p", priority=2, template="want2")]
    if with_n1:
        objs += [node("n1"), *gpu_node("n1", roots=("r0", "r1")),
                 *holder("b", "n1", [f"{GPU}/n1/gpu-0"])]
    objs += [node("n2"), *gpu_node("n2", roots=("r0", "r1")),
             *holder("a", "n2", [f"{GPU}/n2/gpu-0"])]
    if second:
        objs.append(unheld_claim())
    return objs


def unheld_claim() -> dict[str, Any]:
    return claim("c1", requests=[request("gpu", "gpu")],
                 results=[result("gpu", f"{GPU}/n2/gpu-0")], reserved_for=[])


def victims(plan: Any) -> dict[str, list[str]]:
    return {n.node: [v.pod.name for v in n.victims] for n in plan.nodes}


@pytest.mark.parametrize("order", [["n1", "n2"], ["n2", "n1"], ["n2"], None])
def test_a_device_a_second_claim_holds_stays_taken_on_alike_nodes(
        order: list[str] | None) -> None:
    inv = load(*twice_allocated())
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"), order)
    assert "n2" not in victims(plan) and "n2" in plan.refused
    assert victims(plan) == ({} if order == ["n2"] else {"n1": ["b"]})
    best = searcher(inv)[1].search(inv.pod("default/p"), order, best_only=True).best
    assert (best is None) if order == ["n2"] else (best is not None and best.node == "n1")


def test_a_long_lived_search_sees_a_second_claim_taking_a_held_device() -> None:
    inv = load(*twice_allocated(second=False))
    _, search = searcher(inv)
    p = inv.pod("default/p")
    assert victims(search.search(p)) == {"n1": ["b"], "n2": ["a"]}
    inv.apply("ResourceClaim", "ADDED", unheld_claim())
    plan = search.search(p)
    assert victims(plan) == {"n1": ["b"]} and "n2" in plan.refused
    inv.apply("ResourceClaim", "DELETED", unheld_claim())
    assert victims(search.search(p)) == {"n1": ["b"], "n2": ["a"]}


def test_overlapping_counts_claims_holding_a_device_alone() -> None:
    inv = load(*twice_allocated(second=False))
    assert not inv.overlapping()
    inv.apply("ResourceClaim", "ADDED", unheld_claim())
    assert inv.overlapping()
    moved = unheld_claim()
    moved["status"]["allocation"]["devices"]["results"] = [result("gpu", f"{GPU}/n2/gpu-1")]
    inv.apply("ResourceClaim", "MODIFIED", moved)
    assert not inv.overlapping()
    inv.apply("ResourceClaim", "MODIFIED", unheld_claim())
    assert inv.overlapping()
    inv.apply("ResourceClaim", "DELETED", unheld_claim())
    assert not inv.overlapping()
    for name in ("s1", "s2"):  # shared by shareID: not held alone
        inv.apply("ResourceClaim", "ADDED", claim(
            name, requests=[request("gpu", "gpu")], reserved_for=[],
            results=[result("gpu", f"{GPU}/n2/gpu-1", shareID=f"{name}-share")]))
    assert not inv.overlapping()
