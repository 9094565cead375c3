"""The victim search refuses a node where the preemptor would still lack cpu,
memory or room for one more pod once its victims are gone: freeing its devices
there would delete pods for nothing."""

from __future__ import annotations

from typing import Any

from app.model.requests import Resources
from app.preemption.fit import lacking
from app.preemption.verb import Offer, choose_victims
from tests.extender.cluster import GPU_CLASS, gpu_node
from tests.inventory.objects import exactly as request
from tests.inventory.objects import node, template
from tests.preemption.builders import holder, load, preemptor, searcher

GPU = "gpu.example.com"


def sized(name: str, cpu: str = "8", pods: str = "110") -> dict[str, Any]:
    out = node(name)
    out["status"] = {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": pods}}
    return out


def busy(name: str, node_name: str, cpu: str, *, deleting: bool = False) -> dict[str, Any]:
    """A running pod without claims taking `cpu` of its node."""
    pod: dict[str, Any] = {
        "kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"nodeName": node_name, "priority": 0,
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        "status": {"phase": "Running"}}
    if deleting:
        pod["metadata"]["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    return pod


def with_cpu(pod: dict[str, Any], cpu: str) -> dict[str, Any]:
    pod["spec"]["containers"] = [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]
    return pod


def gpu_holder(name: str, node_name: str, gpu: int, priority: int, cpu: str
               ) -> list[dict[str, Any]]:
    objs = holder(name, node_name, [f"{GPU}/{node_name}/gpu-{gpu}"], priority=priority)
    with_cpu(objs[-1], cpu)
    return objs


def cluster(*extra: Any) -> list[Any]:
    """Two full 1-GPU nodes: "cheap" holds the cheaper victim but little cpu is free
    even without it, "dear" has room."""
    objs: list[Any] = [GPU_CLASS, template("want", requests=[request("gpu", "gpu")])]
    for name, prio in (("cheap", 1), ("dear", 5)):
        objs += [sized(name), *gpu_node(name, roots=("r0",)),
                 *gpu_holder(f"{name}-0", name, 0, prio, "1")]
    objs.append(busy("web", "cheap", "6"))
    return [*objs, *extra]


def test_the_node_that_would_lack_cpu_is_refused_and_another_chosen() -> None:
    inv = load(*cluster(), with_cpu(preemptor(), "4"))
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert [n.node for n in plan.nodes] == ["dear"]
    assert [v.pod.name for v in plan.nodes[0].victims] == ["dear-0"]
    # 8 allocatable, 6 stay (web) once cheap-0's 1 is gone
    assert plan.refused == {"cheap": "node would lack cpu: requests 4, free after victims 2"}
    assert search.search(inv.pod("default/p"), best_only=True).best.node == "dear"


def test_without_the_cpu_pod_the_cheaper_node_wins() -> None:
    objs = [o for o in cluster() if o.get("metadata", {}).get("name") != "web"]
    inv = load(*objs, with_cpu(preemptor(), "4"))
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert [n.node for n in plan.nodes] == ["cheap", "dear"] and not plan.refused


def test_pods_already_terminating_count_as_gone() -> None:
    inv = load(*cluster(busy("old", "dear", "7", deleting=True)), with_cpu(preemptor(), "4"))
    inv.delete("Pod", "default/web")
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert [n.node for n in plan.nodes] == ["cheap", "dear"] and not plan.refused


def test_a_node_full_of_pods_is_refused_even_when_nothing_needs_to_go() -> None:
    objs: list[Any] = [GPU_CLASS, template("want", requests=[request("gpu", "gpu")]),
                       sized("n1", pods="2"), *gpu_node("n1", roots=("r0", "r0")),
                       busy("a", "n1", "1"), busy("b", "n1", "1")]
    inv = load(*objs, with_cpu(preemptor(), "1"))
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert not plan.nodes
    assert plan.refused == {"n1": "node would have too many pods: 2 allowed, 2 stay after victims"}


def test_a_node_reporting_no_allocatable_is_not_judged() -> None:
    objs: list[Any] = [GPU_CLASS, template("want", requests=[request("gpu", "gpu")]),
                       node("n1"), *gpu_node("n1", roots=("r0",)),
                       *gpu_holder("n1-0", "n1", 0, 1, "1"), busy("web", "n1", "64")]
    inv = load(*objs, with_cpu(preemptor(), "4"))
    _, search = searcher(inv)
    assert [n.node for n in search.search(inv.pod("default/p")).nodes] == ["n1"]


def test_the_verb_drops_a_node_lacking_cpu_and_counts_the_offered_pods_it_keeps() -> None:
    inv = load(*cluster(), with_cpu(preemptor(), "4"))
    _, search = searcher(inv)
    pod = inv.pod("default/p")
    # Offered only the GPU holders, "cheap" stays short of cpu; offered "web" too
    # (chosen by the scheduler for cpu, kept in the answer), it fits.
    answer = choose_victims(search, pod, {"cheap": Offer(uids=("uid-cheap-0",)),
                                          "dear": Offer(uids=("uid-dear-0",))})
    assert set(answer) == {"dear"}
    answer = choose_victims(search, pod, {"cheap": Offer(uids=("uid-cheap-0", "uid-web"))})
    assert answer["cheap"].uids == ("uid-cheap-0", "uid-web")


def test_lacking_follows_node_resources_fit_order_and_skips_what_dra_serves() -> None:
    node_size = Resources(milli_cpu=4000, memory=8, pods=10,
                          scalars=(("example.com/fpga", 1),))
    used = Resources(milli_cpu=3000, memory=8)
    want = Resources(milli_cpu=2000, memory=1, scalars=(("example.com/fpga", 2),
                                                        ("example.com/gpu", 1)))
    assert lacking(want, node_size, used, 3) == (
        "node would lack cpu: requests 2, free after victims 1")
    roomy = Resources(milli_cpu=500)
    want = Resources(milli_cpu=500, scalars=(("example.com/gpu", 1),))
    assert lacking(want, node_size, roomy, 3) == (
        "node would lack example.com/gpu: requests 1, free after victims 0")
    assert lacking(want, node_size, roomy, 3, dra={"example.com/gpu"}) is None
    assert lacking(Resources(memory=1), node_size, Resources(memory=8), 0) == (
        "node would lack memory: requests 1, free after victims 0")


def test_among_the_smallest_sets_the_one_that_leaves_room_for_the_cpu_is_chosen() -> None:
    # Two GPU holders of one priority: "small" frees 1 cpu, "big" 4; 7 of 8 are
    # taken, so only "big" going leaves the 4-cpu preemptor room.
    objs: list[Any] = [GPU_CLASS, template("want", requests=[request("gpu", "gpu")]),
                       sized("n1"), *gpu_node("n1", roots=("r0", "r0")),
                       *gpu_holder("n1-small", "n1", 0, 1, "1"),
                       *gpu_holder("n1-big", "n1", 1, 1, "4"), busy("web", "n1", "2")]
    inv = load(*objs, with_cpu(preemptor(), "4"))
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert [v.pod.name for v in plan.nodes[0].victims] == ["n1-big"] and not plan.refused
