"""The victim search on small full clusters: who goes, and why."""

from __future__ import annotations

import copy
from typing import Any

from app.extender import Extender
from app.features import FeatureGates
from app.inventory.occupants import priority_of
from app.model.objects import PriorityClass
from app.model.parse import parse_resource_claim
from app.preemption import Victim, VictimSearch, pdb_violations
from app.preemption.counting import Check, Counting, fewest_pods
from app.preemption.fit import NodeFit
from app.preemption.held import held_index
from app.preemption.problem import freeable_positions, plain_positions
from tests.extender.cluster import GPU_CLASS, NIC_CLASS, ROOT, gpu_node
from tests.inventory.objects import (
    claim,
    device,
    device_class,
    node,
    resource_slice,
    result,
    template,
)
from tests.inventory.objects import exactly as request
from tests.preemption.builders import answer, holder, load, pdb, preemptor, searcher

GPU = "gpu.example.com"


def gpus(name: str, *priorities: int, roots: tuple[str, ...] = ("r0", "r0", "r1", "r1"),
         nic_roots: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """A node whose GPU i is held by pod `<name>-<i>` of priority `priorities[i]`."""
    out = [node(name), *gpu_node(name, roots=roots, nic_roots=nic_roots)]
    for i, prio in enumerate(priorities):
        out += holder(f"{name}-{i}", name, [f"{GPU}/{name}/gpu-{i}"], priority=prio)
    return out


def want(count: int = 1, name: str = "want") -> dict[str, Any]:
    return template(name, requests=[request("gpu", "gpu", count=count)])


def victims(plan: Any, node_name: str | None = None) -> list[str]:
    found = plan.best if node_name is None else next(n for n in plan.nodes
                                                     if n.node == node_name)
    return sorted(v.pod.name for v in found.victims)


def test_two_gpus_take_the_two_lowest_on_one_root() -> None:
    inv = load(GPU_CLASS, gpus("n1", 1, 0, 3, 2), want(2), preemptor())
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert plan.problem is None and not plan.refused
    best = plan.best
    assert best is not None and best.exact
    assert victims(plan) == ["n1-0", "n1-1"]
    assert best.freed_devices == (f"{GPU}/n1/gpu-0", f"{GPU}/n1/gpu-1")
    assert [r.device for ca in best.allocation for r in ca.allocation.results] == [
        "gpu-0", "gpu-1"]
    assert best.allocation[0].claim_key == "default/p-dev"


def test_gpu_and_nic_on_one_root_free_that_root_not_the_two_cheapest_gpus() -> None:
    # The two lowest priorities (n1-2: 0, n1-0: 1) sit on different roots.
    objs = [GPU_CLASS, NIC_CLASS, gpus("n1", 1, 2, 0, 5, nic_roots=("r0", "r1")),
            template("want", requests=[request("gpu", "gpu", count=2), request("nic", "nic")],
                     constraints=[{"requests": ["gpu", "nic"], "matchAttribute": ROOT}]),
            preemptor()]
    inv = load(*objs)
    for mode in ("allocator", "advisor"):
        _, search = searcher(inv, mode=mode)
        plan = search.search(inv.pod("default/p"))
        assert victims(plan) == ["n1-0", "n1-1"], mode
        devices = {r.device for ca in plan.best.allocation for r in ca.allocation.results}
        assert devices == {"gpu-0", "gpu-1", "nic-0"}


def test_only_lower_priority_pods_go() -> None:
    inv = load(GPU_CLASS, gpus("n1", 1000, 2000, 5, 5000), want(2), preemptor(priority=1000))
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert not plan.nodes
    assert "even with all 1 lower-priority pods" in plan.refused["n1"]


def test_never_policy_preempts_nothing() -> None:
    inv = load(GPU_CLASS, gpus("n1", 0, 0, 0, 0), want(1), preemptor(policy="Never"))
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert plan.problem == "the pod's preemptionPolicy is Never" and not plan.nodes


def test_never_policy_from_the_priority_class() -> None:
    pc = {"kind": "PriorityClass", "metadata": {"name": "polite"}, "value": 500,
          "preemptionPolicy": "Never"}
    pod = preemptor()
    del pod["spec"]["priority"]
    pod["spec"]["priorityClassName"] = "polite"
    inv = load(GPU_CLASS, gpus("n1", 0, 0, 0, 0), want(1), pod, pc)
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert plan.priority == 500 and not plan.nodes
    assert plan.problem == "the pod's preemptionPolicy is Never"


def test_priority_from_class_and_global_default() -> None:
    inv = load({"kind": "PriorityClass", "metadata": {"name": "base"}, "value": 7,
                "globalDefault": True},
               {"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 900})
    occupants = inv.occupants
    assert occupants.default_priority_class == PriorityClass(name="base", value=7,
                                                             global_default=True)
    bare = preemptor()
    del bare["spec"]["priority"]
    inv.apply("Pod", "ADDED", bare)
    assert priority_of(inv.pod("default/p"), occupants) == 7
    bare["spec"]["priorityClassName"] = "high"
    inv.apply("Pod", "MODIFIED", bare)
    assert priority_of(inv.pod("default/p"), occupants) == 900


def test_a_pod_without_claims_is_left_to_the_scheduler() -> None:
    pod = preemptor()
    pod["spec"]["resourceClaims"] = []
    inv = load(GPU_CLASS, gpus("n1", 0, 0, 0, 0), pod)
    _, search = searcher(inv)
    assert "no resource claims" in (search.search(inv.pod("default/p")).problem or "")


def test_terminating_pods_count_as_released_but_are_not_victims() -> None:
    objs = [GPU_CLASS, node("n1"), gpu_node("n1"), want(2), preemptor()]
    objs += holder("going", "n1", [f"{GPU}/n1/gpu-0"], deleting=True)
    objs += holder("done", "n1", [f"{GPU}/n1/gpu-3"], phase="Succeeded")
    for i in (1, 2):
        objs += holder(f"low{i}", "n1", [f"{GPU}/n1/gpu-{i}"], priority=i)
    inv = load(*objs)
    _, search = searcher(inv)
    best = search.search(inv.pod("default/p")).best
    assert best is not None and not best.victims  # gpu-0 and gpu-3 come free on their own
    assert sorted(p.name for p in best.terminating) == ["done", "going"]
    inv.apply("ResourceClaimTemplate", "MODIFIED", want(3))
    best = search.search(inv.pod("default/p")).best
    assert best is not None and [v.pod.name for v in best.victims] == ["low1"]


def test_a_claim_shared_with_a_pod_that_stays_keeps_its_devices() -> None:
    objs = [GPU_CLASS, node("n1"), gpu_node("n1", roots=("r0", "r1")), want(1), preemptor()]
    # gpu-0: shared by low "a" and high "boss"; gpu-1: shared by low "b" and low "c".
    objs += holder("a", "n1", [f"{GPU}/n1/gpu-0"], priority=1, sharers=("boss",),
                   claim_name="c0")
    objs += holder("boss", "n1", [], priority=5000, claim_name="c0")
    objs += holder("b", "n1", [f"{GPU}/n1/gpu-1"], priority=1, sharers=("c",), claim_name="c1")
    objs += holder("c", "n1", [], priority=2, claim_name="c1")
    inv = load(*objs)
    _, search = searcher(inv)
    best = search.search(inv.pod("default/p")).best
    assert best is not None
    assert sorted(v.pod.name for v in best.victims) == ["b", "c"]
    assert best.released_claims == ("default/c1",)


def mig_node(name: str) -> list[dict[str, Any]]:
    """One GPU of 4 memory units as partitions 4 x 1g, 2 x 2g, 1 x 4g."""
    parts = []
    for size, count in ((1, 4), (2, 2), (4, 1)):
        for i in range(count):
            d = device(f"mig-{size}g-{i}", profile=f"{size}g")
            d["consumesCounters"] = [{"counterSet": "gpu-0",
                                      "counters": {"mem": {"value": str(size)}}}]
            parts.append(d)
    return [node(name), resource_slice(
        f"{name}-mig", driver="mig.example.com", node_name=name, pool=name, devices=parts,
        shared_counters=[{"name": "gpu-0", "counters": {"mem": {"value": "4"}}}])]


MIG = device_class("mig", "device.driver == 'mig.example.com'")


def want_mig(profile: str) -> dict[str, Any]:
    return template("want", requests=[request(
        "mig", "mig", selectors=(f"device.attributes['mig.example.com'].profile == "
                                 f"'{profile}'",))])


def test_freeing_one_mig_slice_is_enough_for_a_1g_pod() -> None:
    objs = [MIG, mig_node("m1"), want_mig("1g"), preemptor()]
    for i, prio in enumerate((3, 1, 2, 4)):
        objs += holder(f"s{i}", "m1", [f"mig.example.com/m1/mig-1g-{i}"], priority=prio,
                       request="mig")
    inv = load(*objs)
    _, search = searcher(inv)
    best = search.search(inv.pod("default/p")).best
    assert best is not None and [v.pod.name for v in best.victims] == ["s1"]
    assert best.allocation[0].allocation.results[0].device == "mig-1g-1"


def test_a_1g_pod_takes_the_counters_of_a_whole_gpu_partition() -> None:
    # The 1g placements are all free devices, but the 4g one holds every counter.
    objs = [MIG, mig_node("m1"), want_mig("1g"), preemptor()]
    objs += holder("whole", "m1", ["mig.example.com/m1/mig-4g-0"], priority=1, request="mig")
    inv = load(*objs)
    _, search = searcher(inv)
    best = search.search(inv.pod("default/p")).best
    assert best is not None and [v.pod.name for v in best.victims] == ["whole"]


def test_nodes_rank_by_pdb_violations_first() -> None:
    objs = [GPU_CLASS, want(1), preemptor(), pdb("keep", {"app": "keep"}, 0)]
    for name, labels, prio in (("a", {"app": "keep"}, 1), ("b", {}, 9)):
        objs += [node(name), *gpu_node(name, roots=("r0",))]
        objs += holder(f"{name}-0", name, [f"{GPU}/{name}/gpu-0"], priority=prio,
                       labels=labels)
    inv = load(*objs)
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert [n.node for n in plan.nodes] == ["b", "a"]
    assert [n.pdb_violations for n in plan.nodes] == [0, 1]


def test_nodes_rank_by_priorities_then_count_then_start() -> None:
    objs = [GPU_CLASS, want(1), preemptor()]
    for name, prio, start in (("hi", 50, "2026-01-01T00:00:00Z"),
                              ("old", 10, "2026-01-01T00:00:00Z"),
                              ("new", 10, "2026-03-01T00:00:00Z")):
        objs += [node(name), *gpu_node(name, roots=("r0",))]
        objs += holder(f"{name}-0", name, [f"{GPU}/{name}/gpu-0"], priority=prio, start=start)
    inv = load(*objs)
    _, search = searcher(inv)
    assert [n.node for n in search.search(inv.pod("default/p")).nodes] == ["new", "old", "hi"]


def test_priority_sums_count_each_victim_offset_like_kube_scheduler() -> None:
    # pickOneNodeForPreemption adds MaxInt32+1 to each victim's priority before
    # summing: a's {10, 1} beats b's {10, 0, 0} (raw sums 11 and 10).
    objs = [GPU_CLASS, want(2), preemptor(), node("a"), *gpu_node("a")]
    for i, prio in enumerate((10, 1, 20, 20)):
        objs += holder(f"a{i}", "a", [f"{GPU}/a/gpu-{i}"], priority=prio)
    objs += [node("b"), *gpu_node("b"),
             *holder("b0", "b", [f"{GPU}/b/gpu-0"], priority=10),
             *holder("b1", "b", [f"{GPU}/b/gpu-1"], priority=0, claim_name="shared",
                     sharers=("b2",)),
             *holder("b2", "b", [], priority=0, claim_name="shared"),
             *holder("b3", "b", [f"{GPU}/b/gpu-2"], priority=2000),
             *holder("b4", "b", [f"{GPU}/b/gpu-3"], priority=2000)]
    inv = load(*objs)
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert [n.node for n in plan.nodes] == ["a", "b"]
    assert victims(plan) == ["a0", "a1"] and victims(plan, "b") == ["b0", "b1", "b2"]
    _, search = searcher(inv)
    assert victims(search.search(inv.pod("default/p"), best_only=True)) == ["a0", "a1"]


def test_a_best_only_search_leaves_out_nodes_whose_offset_priority_sum_cannot_win() -> None:
    # Both nodes' highest victim has priority 10. n1 frees two GPUs with its
    # one pod of 10 (one claim of two); n2 needs its pod of -100 and one of 10,
    # whose sum is higher once each priority is offset by MaxInt32+1.
    inv = load(GPU_CLASS, node("n1"), *gpu_node("n1"),
               holder("n1-0", "n1", [f"{GPU}/n1/gpu-0", f"{GPU}/n1/gpu-1"], priority=10),
               holder("n1-2", "n1", [f"{GPU}/n1/gpu-2"], priority=20),
               holder("n1-3", "n1", [f"{GPU}/n1/gpu-3"], priority=20),
               gpus("n2", 10, -100, 10, 10), want(2), preemptor())
    _, search = searcher(inv)
    full = search.search(inv.pod("default/p"))
    assert [n.node for n in full.nodes] == ["n1", "n2"]
    _, search = searcher(inv)
    best = search.search(inv.pod("default/p"), best_only=True)
    assert answer(best.best) == answer(full.best) and victims(best) == ["n1-0"]
    assert search.left_out == 1


def test_within_a_node_pdb_covered_pods_are_spared_when_the_size_allows() -> None:
    objs = [GPU_CLASS, want(1), preemptor(), pdb("keep", {"app": "keep"}, 0),
            node("n1"), *gpu_node("n1", roots=("r0", "r0"))]
    objs += holder("covered", "n1", [f"{GPU}/n1/gpu-0"], priority=1, labels={"app": "keep"})
    objs += holder("free", "n1", [f"{GPU}/n1/gpu-1"], priority=3)
    inv = load(*objs)
    _, search = searcher(inv)
    best = search.search(inv.pod("default/p")).best
    assert best is not None and [v.pod.name for v in best.victims] == ["free"]
    assert best.pdb_violations == 0


def test_pdb_violations_are_counted_like_kube_scheduler() -> None:
    objs = [pdb("one", {"app": "x"}, 1), pdb("all", {}, 0)]  # an empty selector: no pod
    objs += holder("x1", "n1", [], labels={"app": "x"}, priority=3)
    objs += holder("x2", "n1", [], labels={"app": "x"}, priority=2)
    inv = load(*objs)
    pods = [Victim(pod=inv.pod(f"default/x{i}"), priority=4 - i, claims=()) for i in (1, 2)]
    assert pdb_violations(pods, {"default": list(inv.occupants.pdbs("default"))}) == 1
    assert pdb_violations(pods[:1], {"default": list(inv.occupants.pdbs("default"))}) == 0


def test_a_pod_counts_as_violating_at_the_first_budget_it_breaks() -> None:
    # kube-scheduler's FilterVictimsWithPDBViolation stops at the first budget
    # going below 0: x1 breaks a-tight and leaves b-loose's allowance of 1 to x2.
    objs = [pdb("a-tight", {"app": "x"}, 0), pdb("b-loose", {"tier": "t"}, 1)]
    objs += holder("x1", "n1", [], labels={"app": "x", "tier": "t"}, priority=3)
    objs += holder("x2", "n1", [], labels={"tier": "t"}, priority=2)
    inv = load(*objs)
    pods = [Victim(pod=inv.pod(f"default/x{i}"), priority=4 - i, claims=()) for i in (1, 2)]
    pdbs = list(inv.occupants.pdbs("default"))
    assert pdb_violations(pods, {"default": pdbs}) == 1
    assert pdb_violations(pods, {"default": pdbs[::-1]}) == 1


def test_identical_nodes_share_one_search_and_name_their_own_pods() -> None:
    objs = [GPU_CLASS, want(2), preemptor()]
    for n in ("n1", "n2", "n3"):
        objs += gpus(n, 1, 0, 3, 2)
    inv = load(*objs)
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    one = search.trials
    assert {n.node for n in plan.nodes} == {"n1", "n2", "n3"}
    for found in plan.nodes:
        assert all(v.pod.node_name == found.node for v in found.victims)
        assert sorted(v.pod.name for v in found.victims) == [f"{found.node}-0",
                                                             f"{found.node}-1"]
        assert all(d.startswith(f"{GPU}/{found.node}/") for d in found.freed_devices)
        assert {r.pool for ca in found.allocation for r in ca.allocation.results} == {found.node}
    single = load(GPU_CLASS, want(2), preemptor(), gpus("n1", 1, 0, 3, 2))
    _, alone = searcher(single)
    alone.search(single.pod("default/p"))
    assert one == alone.trials


def test_allowed_victims_restrict_the_choice() -> None:
    inv = load(GPU_CLASS, gpus("n1", 1, 0, 3, 2), want(2), preemptor())
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"), ["n1"],
                         allowed={"n1": ["uid-n1-2", "uid-n1-3"]})
    assert victims(plan) == ["n1-2", "n1-3"]
    plan = search.search(inv.pod("default/p"), ["n1"], allowed={"n1": ["uid-n1-2"]})
    assert not plan.nodes and "n1" in plan.refused


def test_past_the_budget_a_minimal_set_is_reprieved() -> None:
    inv = load(GPU_CLASS, gpus("n1", 1, 0, 3, 2), want(2), preemptor())
    _, search = searcher(inv, trial_budget=2)
    best = search.search(inv.pod("default/p")).best
    assert best is not None and not best.exact and len(best.victims) == 2


def test_nodes_differing_only_in_priorities_share_the_search_and_choose_apart() -> None:
    objs = [GPU_CLASS, want(2), preemptor(), *gpus("n1", 1, 0, 3, 2), *gpus("n2", 3, 2, 1, 0)]
    inv = load(*objs)
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert victims(plan, "n1") == ["n1-0", "n1-1"]
    assert victims(plan, "n2") == ["n2-2", "n2-3"]
    single = load(GPU_CLASS, want(2), preemptor(), gpus("n1", 1, 0, 3, 2))
    _, alone = searcher(single)
    alone.search(single.pod("default/p"))
    assert search.trials == alone.trials


def test_counting_rules_out_sets_that_free_too_few_devices() -> None:
    inv = load(GPU_CLASS, gpus("n1", 1, 0, 3, 2), want(3), preemptor())
    _, search = searcher(inv)
    best = search.search(inv.pod("default/p")).best
    assert best is not None and len(best.victims) == 3
    # only the 4 sets of three: counting rules out the rest
    assert search.trials == 4


def test_a_node_the_pod_cannot_run_on_is_refused_with_the_reason() -> None:
    # "cheap" has the cheapest victims, but a taint p does not tolerate; "cordoned"
    # is next cheapest but unschedulable; p gets "dear" unless it tolerates both.
    tainted = node("cheap")
    tainted["spec"] = {"taints": [{"key": "team", "value": "infra", "effect": "NoSchedule"}]}
    cordoned = node("cordoned")
    cordoned["spec"] = {"unschedulable": True}
    objs: list[Any] = [GPU_CLASS, want(1), tainted, cordoned, node("dear")]
    for name, prio in (("cheap", 1), ("cordoned", 2), ("dear", 5)):
        objs += [*gpu_node(name, roots=("r0",)),
                 *holder(f"{name}-0", name, [f"{GPU}/{name}/gpu-0"], priority=prio)]
    inv = load(*objs, preemptor())
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert [n.node for n in plan.nodes] == ["dear"] and victims(plan) == ["dear-0"]
    assert plan.refused == {
        "cheap": "node has taint {team=infra:NoSchedule} the pod does not tolerate",
        "cordoned": "node is unschedulable (cordoned) and the pod does not tolerate it"}
    tolerant = preemptor("q")
    tolerant["spec"]["tolerations"] = [
        {"key": "team", "operator": "Equal", "value": "infra", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]
    inv = load(*objs, tolerant)
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/q"))
    assert [n.node for n in plan.nodes] == ["cheap", "cordoned", "dear"] and not plan.refused


def test_nodes_alike_once_victims_go_share_allocator_runs() -> None:
    # n2 differs from n1 (one claim holds GPUs 2 and 3 for two pods), so the
    # two are different problems; but freeing GPUs 0+1 or 2+3 leaves each
    # node in the same state as the other, so n2 needs no allocator run.
    two = template("want", requests=[request("gpu", "gpu", count=2)],
                   constraints=[{"requests": ["gpu"], "matchAttribute": ROOT}])
    n2 = [node("n2"), *gpu_node("n2"),
          *holder("n2-0", "n2", [f"{GPU}/n2/gpu-0"], priority=1),
          *holder("n2-1", "n2", [f"{GPU}/n2/gpu-1"], priority=0),
          *holder("n2-2", "n2", [f"{GPU}/n2/gpu-2", f"{GPU}/n2/gpu-3"], priority=3,
                  claim_name="n2-both", sharers=("n2-3",)),
          *holder("n2-3", "n2", [], priority=2, claim_name="n2-both")]
    inv = load(GPU_CLASS, two, preemptor(), gpus("n1", 1, 0, 3, 2), n2)
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert victims(plan, "n1") == ["n1-0", "n1-1"]
    assert victims(plan, "n2") == ["n2-0", "n2-1"]
    found = next(n for n in plan.nodes if n.node == "n2")
    assert {r.device for ca in found.allocation for r in ca.allocation.results} == {
        "gpu-0", "gpu-1"}
    assert {r.pool for ca in found.allocation for r in ca.allocation.results} == {"n2"}
    single = load(GPU_CLASS, two, preemptor(), gpus("n1", 1, 0, 3, 2))
    _, alone = searcher(single)
    alone.search(single.pod("default/p"))
    assert search.trials == alone.trials == 2


def test_a_release_of_plain_claims_on_a_node_alike_reads_no_state_again() -> None:
    # n1 and n2 hold the same devices (every GPU taken) through different
    # claims, so they are different problems; releasing GPUs 0+1 (or 2+3)
    # leaves the same state on both, found from n1's signature and the
    # positions released without reading n2's state once its claims go.
    two = template("want", requests=[request("gpu", "gpu", count=2)],
                   constraints=[{"requests": ["gpu"], "matchAttribute": ROOT}])
    n2 = [node("n2"), *gpu_node("n2"),
          *holder("n2-0", "n2", [f"{GPU}/n2/gpu-0", f"{GPU}/n2/gpu-1"], priority=0),
          *holder("n2-2", "n2", [f"{GPU}/n2/gpu-2", f"{GPU}/n2/gpu-3"], priority=3)]
    inv = load(GPU_CLASS, two, preemptor(), gpus("n1", 1, 0, 3, 2), n2)
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert victims(plan, "n1") == ["n1-0", "n1-1"] and victims(plan, "n2") == ["n2-0"]
    _, alone = searcher(load(GPU_CLASS, two, preemptor(), gpus("n1", 1, 0, 3, 2)))
    alone.search(alone.inventory.pod("default/p"))
    assert search.trials == alone.trials == 2
    assert search.states_read == alone.states_read == 2


def test_a_pod_kept_on_one_root_enumerates_victims_per_root() -> None:
    # 16 GPUs on 4 roots, each held by its own pod; 4 GPUs on one root take the
    # 4 pods of one root. Per root there are 4 candidates, not 16: the
    # smallest set is found exactly within a budget that sets of 16 exceed.
    roots = tuple(f"r{i // 4}" for i in range(16))
    priorities = [5, 6, 7, 8, 9, 10, 11, 12, 1, 2, 3, 0, 13, 14, 15, 16]
    four = template("want", requests=[request("gpu", "gpu", count=4)],
                    constraints=[{"requests": ["gpu"], "matchAttribute": ROOT}])
    inv = load(GPU_CLASS, four, preemptor(), gpus("n1", *priorities, roots=roots))
    _, search = searcher(inv, trial_budget=8)
    best = search.search(inv.pod("default/p")).best
    assert best is not None and best.exact
    assert victims(search.search(inv.pod("default/p"))) == ["n1-10", "n1-11", "n1-8", "n1-9"]
    assert search.trials == 4


def test_nodes_of_one_kind_read_their_devices_once_per_shape() -> None:
    # Three nodes of the same hardware, held differently: which devices the
    # pod's requests can use is worked out once, not per node.
    objs = [GPU_CLASS, want(2), preemptor(), *gpus("n1", 1, 0, 3, 2), *gpus("n2", 3, 2),
            *gpus("n3", 0, 1, 2)]
    inv = load(*objs)
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert victims(plan, "n1") == ["n1-0", "n1-1"]
    assert victims(plan, "n2") == []
    assert victims(plan, "n3") == ["n3-2"]  # beside the free GPU 3, on one root
    assert len(search._layouts) == 1


def test_counting_lets_overlapping_list_attributes_through() -> None:
    # With list-typed attributes, GPU 0 (domains a, b) pairs with GPU 1 (a) or
    # GPU 2 (b): no single list value is held by two GPUs, yet two GPUs share
    # a domain. Counting must leave that to the allocator.
    domain = "gpu.example.com/domains"
    devices = [{"name": f"gpu-{i}", "attributes": {domain: {"strings": values}}}
               for i, values in enumerate((["a", "b"], ["a"], ["b"]))]
    objs = [GPU_CLASS, node("n1"),
            resource_slice("n1-gpus", node_name="n1", pool="n1", devices=devices),
            template("want", requests=[request("gpu", "gpu", count=2)],
                     constraints=[{"requests": ["gpu"], "matchAttribute": domain}]),
            preemptor()]
    for i, prio in enumerate((1, 0, 2)):
        objs += holder(f"n1-{i}", "n1", [f"{GPU}/n1/gpu-{i}"], priority=prio)
    inv = load(*objs)
    ext = Extender(inv, features=FeatureGates(list_type_attributes=True), file_mode=True)
    plan = VictimSearch.of(ext).search(inv.pod("default/p"))
    assert victims(plan) == ["n1-0", "n1-1"], plan.refused


def test_a_changed_device_class_is_read_again() -> None:
    # Shared answers are kept across searches; a class's config goes into the
    # allocation, so a changed class is not answered from before.
    objs = [GPU_CLASS, want(2), preemptor(), *gpus("n1", 1, 0, 3, 2), *gpus("n2", 1, 0, 3, 2)]
    inv = load(*objs)
    _, search = searcher(inv)
    before = search.search(inv.pod("default/p")).best
    assert before is not None
    assert not [c for ca in before.allocation for c in ca.allocation.config]
    parameters = {"driver": GPU, "parameters": {"mode": "exclusive"}}
    inv.apply("DeviceClass", "MODIFIED", {**GPU_CLASS, "spec": {
        **GPU_CLASS["spec"], "config": [{"opaque": parameters}]}})
    after = search.search(inv.pod("default/p")).best
    assert after is not None
    assert [c["opaque"] for ca in after.allocation for c in ca.allocation.config] == [parameters]


def test_a_best_only_search_leaves_out_nodes_whose_victims_cannot_win() -> None:
    # n1's best costs priorities 5 and 6; n2 must lose a pod of priority 10 or
    # more (its priority-0 pod frees one GPU of the two wanted), n3 two of 20+.
    inv = load(GPU_CLASS, gpus("n1", 5, 6, 7, 8), gpus("n2", 0, 10, 11, 12),
               gpus("n3", 20, 21, 22, 23), want(2), preemptor())
    _, search = searcher(inv)
    full = search.search(inv.pod("default/p"))
    assert [n.node for n in full.nodes] == ["n1", "n2", "n3"]
    _, search = searcher(inv)
    best = search.search(inv.pod("default/p"), best_only=True)
    assert answer(best.best) == answer(full.best)
    assert search.left_out == 2 and [n.node for n in best.nodes] == ["n1"]


def test_a_best_only_search_solves_nodes_where_pods_going_may_be_enough() -> None:
    # n2's victims would cost more, but its terminating pod may free enough alone.
    inv = load(GPU_CLASS, gpus("n1", 1, 2, 3, 4), node("n2"), *gpu_node("n2"),
               holder("n2-0", "n2", [f"{GPU}/n2/gpu-0"], priority=50, deleting=True),
               holder("n2-1", "n2", [f"{GPU}/n2/gpu-1"], priority=50),
               holder("n2-2", "n2", [f"{GPU}/n2/gpu-2"], priority=50),
               holder("n2-3", "n2", [f"{GPU}/n2/gpu-3"], priority=50), want(1), preemptor())
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"), best_only=True)
    assert plan.best is not None and plan.best.node == "n2" and not plan.best.victims
    assert search.left_out == 1


def test_nodes_alike_are_counted_once_for_their_floors() -> None:
    # Three nodes of one kind with the same GPUs taken: the floors read
    # counting's view of the node as it is once, whoever holds the GPUs.
    inv = load(GPU_CLASS, gpus("n1", 5, 6, 7, 8), gpus("n2", 0, 10, 11, 12),
               gpus("n3", 20, 21, 22, 23), want(2), preemptor())
    _, search = searcher(inv)
    search.search(inv.pod("default/p"), best_only=True)
    assert search.countings == 1


def test_a_best_only_search_leaves_out_nodes_needing_more_victims_of_equal_priority() -> None:
    # Every pod has priority 0: n1 frees two GPUs with one victim (one claim
    # of two), n2 and n3 need two victims whatever they choose.
    inv = load(GPU_CLASS, node("n1"), *gpu_node("n1"),
               holder("n1-0", "n1", [f"{GPU}/n1/gpu-0", f"{GPU}/n1/gpu-1"]),
               holder("n1-2", "n1", [f"{GPU}/n1/gpu-2"]),
               holder("n1-3", "n1", [f"{GPU}/n1/gpu-3"]),
               gpus("n2", 0, 0, 0, 0), gpus("n3", 0, 0, 0, 0), want(2), preemptor())
    _, search = searcher(inv)
    full = search.search(inv.pod("default/p"))
    _, search = searcher(inv)
    best = search.search(inv.pod("default/p"), best_only=True)
    assert answer(best.best) == answer(full.best) and victims(best) == ["n1-0"]
    assert search.left_out == 2


def test_a_best_only_search_leaves_out_nodes_whose_pods_all_started_earlier() -> None:
    # Equal priorities and counts: the victims that started latest win, so n2,
    # whose pods all started before n1's, cannot.
    objs: list[Any] = [GPU_CLASS, want(2), preemptor()]
    for name, start in (("n1", "2026-01-03T00:00:00Z"), ("n2", "2026-01-01T00:00:00Z")):
        objs += [node(name), *gpu_node(name)]
        objs += [holder(f"{name}-{i}", name, [f"{GPU}/{name}/gpu-{i}"], start=start)
                 for i in range(4)]
    inv = load(*objs)
    _, search = searcher(inv)
    full = search.search(inv.pod("default/p"))
    _, search = searcher(inv)
    best = search.search(inv.pod("default/p"), best_only=True)
    assert answer(best.best) == answer(full.best) and best.best.node == "n1"
    assert search.left_out == 1


def test_a_claim_frees_only_the_devices_it_holds_alone() -> None:
    # admin access takes nothing from others, a shared result is not its alone:
    # the counting's freeable devices and the quick runs' plain ones agree.
    held = parse_resource_claim(claim("c", results=[
        result("gpu", f"{GPU}/n1/gpu-0"), result("gpu", f"{GPU}/n1/gpu-1", adminAccess=True),
        result("gpu", f"{GPU}/n1/gpu-2", shareID="s1")]))
    places = (0, 1, 2)
    assert freeable_positions(held, places, frozenset(places)) == 0b001
    assert plain_positions(held, places) == 0b001


def test_a_pick_that_leaves_room_is_not_checked_for_room_again(monkeypatch: Any) -> None:
    # Four options of one victim each: the node's pick asks whether the pod has
    # room once (here it has, as the node is); the answer then needs no second
    # room check.
    sized = node("n1")
    sized["status"] = {"allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110"}}
    inv = load(GPU_CLASS, sized, *gpus("n1", 4, 3, 2, 1)[1:], want(1), preemptor())
    calls: list[str] = []
    fits, roomy, room = NodeFit.fits, NodeFit.roomy, NodeFit._room
    monkeypatch.setattr(NodeFit, "fits", lambda self, *a: calls.append("fits") or fits(self, *a))
    monkeypatch.setattr(NodeFit, "roomy",
                        lambda self, *a: calls.append("roomy") or roomy(self, *a))
    monkeypatch.setattr(NodeFit, "_room", lambda self, *a: calls.append("room") or room(self, *a))
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert victims(plan) == ["n1-3"]
    assert calls == ["roomy"]


def test_the_fewest_victims_are_shared_only_by_nodes_whose_pods_free_the_same() -> None:
    # Two held devices, both needed: one pod freeing both is one victim, two
    # pods freeing one each are two, in whatever order the node lists them.
    _, search = searcher(load(GPU_CLASS))
    counting = Counting(freeable=(), by_kind=((0, 0b11),), values=())
    check = Check(plain=((0, 2),), total=2, groups=())
    assert search._fewest(counting, check, [0b11]) == 1
    assert search._fewest(counting, check, [0b01, 0b10]) == 2
    assert search._fewest(counting, check, [0b10, 0b01]) == 2
    # a node of other usage (one device free) whose pods reach the same is not
    # served the first node's answer: it needs one pod
    other = Counting(freeable=(), by_kind=((0b01, 0b10),), values=())
    assert search._fewest(other, check, [0b01, 0b10]) == 1 == fewest_pods(other, check, [0b10])


def test_a_node_whose_slices_changed_is_read_again_by_a_kept_search() -> None:
    # A 2 GPU + 1 NIC same-root pod on n1: the NIC sits on r1, so the victims
    # are the two r1 pods. Then the NIC moves to r0: the same search object
    # must choose the two r0 pods, as a fresh one does, for each shape in turn.
    same_root = template("same", requests=[request("gpu", "gpu", count=2),
                                           request("nic", "nic")],
                         constraints=[{"requests": ["gpu", "nic"], "matchAttribute": ROOT}])
    objs = [GPU_CLASS, NIC_CLASS, want(2), same_root, preemptor(),
            preemptor("q", template="same"),
            *gpus("n1", 1, 2, 3, 4, nic_roots=("r1",))]
    inv = load(*objs)
    _, kept = searcher(inv)
    assert victims(kept.search(inv.pod("default/p"))) == ["n1-0", "n1-1"]
    assert victims(kept.search(inv.pod("default/q"))) == ["n1-2", "n1-3"]
    for obj in gpu_node("n1", nic_roots=("r0",)):
        inv.apply("ResourceSlice", "MODIFIED", obj)
    for key in ("default/q", "default/p", "default/q"):
        _, fresh = searcher(inv)
        assert answer(kept.search(inv.pod(key)).best) == answer(fresh.search(inv.pod(key)).best)
    assert victims(kept.search(inv.pod("default/q"))) == ["n1-0", "n1-1"]


def test_a_pool_over_its_counters_limit_is_freed_by_a_victim_of_any_root() -> None:
    # GPUs 0-3 (roots r0, r1) draw on counters of 3, so with all four held the
    # pool is over its limit and the allocator refuses every GPU of it until
    # one of them goes. Two GPUs on one root: r2's pod and one GPU of r0/r1
    # (the cheapest, n1-2), not three pods of r0/r1.
    gpus_ = []
    for i, root in enumerate(("r0", "r0", "r1", "r1", "r2", "r2")):
        d = device(f"gpu-{i}", uuid=f"GPU-n1-{i}", **{ROOT: root})
        d["consumesCounters"] = [{"counterSet": "board01" if i < 4 else "board2",
                                  "counters": {"mem": {"value": "1"}}}]
        gpus_.append(d)
    objs = [GPU_CLASS, node("n1"), resource_slice(
        "n1-gpus", node_name="n1", pool="n1", devices=gpus_,
        shared_counters=[{"name": "board01", "counters": {"mem": {"value": "3"}}},
                         {"name": "board2", "counters": {"mem": {"value": "2"}}}]),
        template("want", requests=[request("gpu", "gpu", count=2)],
                 constraints=[{"requests": ["gpu"], "matchAttribute": ROOT}]),
        preemptor()]
    for i, prio in enumerate((3, 2, 1, 4)):
        objs += holder(f"n1-{i}", "n1", [f"{GPU}/n1/gpu-{i}"], priority=prio)
    objs += holder("n1-4", "n1", [f"{GPU}/n1/gpu-4", f"{GPU}/n1/gpu-5"], priority=0)
    inv = load(*objs)
    for mode in ("allocator", "advisor"):
        _, search = searcher(inv, mode=mode)
        plan = search.search(inv.pod("default/p"))
        assert victims(plan) == ["n1-2", "n1-4"], mode
        assert plan.best is not None and plan.best.exact
        assert sorted(r.device for ca in plan.best.allocation
                      for r in ca.allocation.results) == ["gpu-4", "gpu-5"]


def test_nodes_holding_alike_share_one_skeleton_and_their_holdings_are_kept() -> None:
    # n1..n3 hold alike (one pod per GPU) with their priorities in different
    # orders: one problem skeleton, its claims read once to solve it, each
    # node still picking its own lowest. n4's pod 0 outranks the preemptor,
    # so its skeleton is another. A later
    # search over the same inventory reads every node's holdings as kept;
    # a pod changing on n2 rebuilds n2's alone.
    inv = load(GPU_CLASS, want(1), preemptor(), gpus("n1", 3, 1, 2, 4), gpus("n2", 1, 2, 3, 4),
               gpus("n3", 4, 3, 2, 1), gpus("n4", 5000, 2, 3, 4))
    index = held_index(inv)
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert [victims(plan, n) for n in ("n1", "n2", "n3", "n4")] == [
        ["n1-1"], ["n2-0"], ["n3-3"], ["n4-1"]]
    assert search.skeletons == 2 and index.built == 4 and index.releases == 2
    assert search.claims_read == search.problems == 2
    helds = {n: index.of(inv.node_state(n).view, inv.occupants.occupancy(n))
             for n in ("n1", "n2", "n3", "n4")}
    assert helds["n1"].shape is helds["n2"].shape is helds["n3"].shape is helds["n4"].shape
    # and their small tuples are one object per value
    assert all(a is b for a, b in zip(helds["n1"].places, helds["n3"].places, strict=True))
    assert helds["n1"].staying is helds["n2"].staying
    # the pods below the preemptor's priority (1000) are kept per node too
    assert helds["n4"].below(1000) is helds["n4"].picks[1000] == ({1: 2, 2: 3, 3: 4}, 0b1110)
    _, again = searcher(inv)
    second = again.search(inv.pod("default/p"))
    assert index.built == 4 and index.releases == 2
    # each node's candidates and victims, with their spec's priorities, are kept too
    assert all(a.victims[0] is b.victims[0] and a.candidates is b.candidates
               for a, b in zip(plan.nodes, second.nodes, strict=True))
    for o in holder("n2-0", "n2", [f"{GPU}/n2/gpu-0"], priority=9):
        inv.apply(o["kind"], "MODIFIED", o)
    plan = again.search(inv.pod("default/p"))
    assert index.built == 5 and victims(plan, "n2") == ["n2-1"]


def test_a_priority_class_changing_is_read_by_the_next_search() -> None:
    # Pods without spec.priority take their class's value at every search:
    # their candidates are not kept with the node's holdings.
    def classed(name: str, index: int, cls: str) -> list[dict[str, Any]]:
        objs = holder(name, "n1", [f"{GPU}/n1/gpu-{index}"])
        del objs[-1]["spec"]["priority"]
        objs[-1]["spec"]["priorityClassName"] = cls
        return objs

    def pc(name: str, value: int) -> dict[str, Any]:
        return {"kind": "PriorityClass", "metadata": {"name": name}, "value": value}

    inv = load(GPU_CLASS, want(1), preemptor(), node("n1"), *gpu_node("n1"), pc("a", 1),
               pc("b", 2), classed("n1-0", 0, "a"), classed("n1-1", 1, "b"),
               classed("n1-2", 2, "b"), classed("n1-3", 3, "b"))
    _, search = searcher(inv)
    assert victims(search.search(inv.pod("default/p"))) == ["n1-0"]
    inv.apply("PriorityClass", "MODIFIED", pc("a", 5))
    _, again = searcher(inv)
    assert victims(again.search(inv.pod("default/p"))) == ["n1-1"]


def test_a_node_weighs_only_the_best_scoring_options_and_keeps_a_reason_naming_nothing() -> None:
    # Two GPUs of four: six pairs work, the two on one root score best, and
    # only those two are weighed by the pods' priorities (n1-0 + n1-2, the
    # lowest pair, sit on two roots). n2 and n3 cannot be helped: the reason
    # found on n2 names nothing of it, so n3 takes it as it is.
    objs = [GPU_CLASS, want(2), preemptor(), *gpus("n1", 0, 5, 1, 7),
            *gpus("n2", 2000, 1, 2000, 2000), *gpus("n3", 2000, 1, 2000, 2000)]
    inv = load(*objs)
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert victims(plan, "n1") == ["n1-0", "n1-1"]
    assert search.weighed == 2
    assert plan.refused["n2"] == plan.refused["n3"] and search.renamings == 0
    assert "even with all 1 lower-priority pods" in plan.refused["n3"]


def test_a_sharer_on_another_node_terminating_releases_the_claim_on_the_next_search() -> None:
    # gpu-0 of n1 is held by "a" (low) and shared with "boss" (high) bound to
    # n2; gpu-1 by "b" (high). While boss runs, gpu-0 stays; once boss is
    # terminating, its share counts as released and "a" alone frees gpu-0.
    objs = [GPU_CLASS, node("n1"), gpu_node("n1", roots=("r0", "r1")), want(1), preemptor()]
    objs += holder("a", "n1", [f"{GPU}/n1/gpu-0"], priority=1, sharers=("boss",),
                   claim_name="c0")
    objs += holder("b", "n1", [f"{GPU}/n1/gpu-1"], priority=5000)
    boss = holder("boss", "n2", [], priority=5000, claim_name="c0")
    inv = load(*objs, *boss)
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"), ["n1"])
    assert plan.best is None and "n1" in plan.refused
    going = copy.deepcopy(boss[-1])
    going["metadata"]["deletionTimestamp"] = "2026-01-02T00:00:00Z"
    inv.apply("Pod", "MODIFIED", going)
    _, search = searcher(inv)
    assert victims(search.search(inv.pod("default/p"), ["n1"])) == ["a"]
