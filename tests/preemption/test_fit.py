"""Room for the preemptor besides its devices: where it would still lack cpu,
memory or room for one more pod once its device victims are gone, further
lower-priority pods go as kube-scheduler's SelectVictimsOnNode chooses them,
and a node where even all of them going is not enough is refused; pods
nominated to a node with no lower priority count against its room."""

from __future__ import annotations

from typing import Any

from app.inventory import Nomination
from app.model.parse import parse_object
from app.model.requests import Resources
from app.preemption.actor import condition_message, preempted_note, preempting_note
from app.preemption.driver import preemption_of
from app.preemption.fit import NodeFit, Shortfall, lacking
from app.preemption.verb import Offer, choose_victims
from app.sources.kube.watch import parse_live_pod
from tests.extender.cluster import GPU_CLASS, gpu_node
from tests.inventory.objects import exactly as request
from tests.inventory.objects import node, template
from tests.preemption.builders import holder, load, pdb, preemptor, searcher
from tests.preemption.test_holds import full_node, pending

GPU = "gpu.example.com"


def sized(name: str, cpu: str = "8", pods: str = "110") -> dict[str, Any]:
    out = node(name)
    out["status"] = {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": pods}}
    return out


def busy(name: str, node_name: str, cpu: str, *, deleting: bool = False, priority: int = 0,
         labels: dict[str, str] | None = None, start: str = "2026-01-01T00:00:00Z",
         nominated: str = "", scheduler: str = "drax") -> dict[str, Any]:
    """A running pod without claims taking `cpu` of its node (`node_name`
    empty and `nominated` set: a pending pod of `scheduler` nominated there)."""
    pod: dict[str, Any] = {
        "kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                                    "labels": labels or {}},
        "spec": {"nodeName": node_name, "priority": priority, "schedulerName": scheduler,
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        "status": {"phase": "Running" if node_name else "Pending", "startTime": start,
                   "nominatedNodeName": nominated}}
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


def cluster(*extra: Any, web: int = 2000) -> list[Any]:
    """Two full 1-GPU nodes: "cheap" holds the cheaper victim but little cpu is free
    even without it (the "web" pod, of priority `web`, takes 6 of 8), "dear" has room."""
    objs: list[Any] = [GPU_CLASS, template("want", requests=[request("gpu", "gpu")])]
    for name, prio in (("cheap", 1), ("dear", 5)):
        objs += [sized(name), *gpu_node(name, roots=("r0",)),
                 *gpu_holder(f"{name}-0", name, 0, prio, "1")]
    objs.append(busy("web", "cheap", "6", priority=web))
    return [*objs, *extra]


def test_the_node_that_would_lack_cpu_is_refused_and_another_chosen() -> None:
    # "web" outranks the preemptor: it cannot go, so "cheap" stays short
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
                       busy("a", "n1", "1", priority=2000), busy("b", "n1", "1", priority=2000)]
    inv = load(*objs, with_cpu(preemptor(), "1"))
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert not plan.nodes
    assert plan.refused == {"n1": "node would have too many pods: 2 allowed, 2 stay after victims"}
    assert isinstance(plan.refused["n1"], Shortfall)


def test_a_node_whose_devices_need_no_victim_takes_none_for_room() -> None:
    # Only the pod count is short: kube-scheduler's own preemption frees that,
    # so drax names no victim and refuses the node with the shortfall.
    objs: list[Any] = [GPU_CLASS, template("want", requests=[request("gpu", "gpu")]),
                       sized("n1", pods="2"), *gpu_node("n1", roots=("r0", "r0")),
                       busy("a", "n1", "1"), busy("b", "n1", "1")]
    inv = load(*objs, with_cpu(preemptor(), "1"))
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert not plan.nodes
    assert plan.refused == {"n1": "node would have too many pods: 2 allowed, 2 stay after victims"}


def test_lower_priority_pods_go_for_cpu_beside_the_device_victim() -> None:
    # "web" (priority 0) takes 6 of cheap's 8 cpus: with cheap-0 gone 2 are free
    # for a 4-cpu pod, so "web" goes too; the ranking counts both victims, and
    # their highest priority (1) is below dear's one victim (5).
    inv = load(*cluster(web=0), with_cpu(preemptor(), "4"))
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert [(n.node, [v.pod.name for v in n.victims]) for n in plan.nodes] == [
        ("cheap", ["cheap-0", "web"]), ("dear", ["dear-0"])]
    assert [v.claims for v in plan.nodes[0].victims] == [("default/cheap-0-claim",), ()]
    best = search.search(inv.pod("default/p"), best_only=True).best
    assert best is not None and [v.pod.name for v in best.victims] == ["cheap-0", "web"]


def test_a_room_victims_claims_are_released_with_it() -> None:
    # "web" holds cheap's NIC, of no use to the GPU preemptor: it goes for cpu
    # alone, and its claim is deallocated as the device victim's is.
    objs = [o for o in cluster(web=0) if o["metadata"]["name"] != "web"]
    web = holder("web", "cheap", ["nic.example.com/cheap/nic-0"], request="nic")
    with_cpu(web[-1], "6")
    objs += [*web, gpu_node("cheap", roots=("r0",), nic_roots=("r0",))[-1]]
    inv = load(*objs, with_cpu(preemptor(), "4"))
    _, search = searcher(inv)
    for best in (search.search(inv.pod("default/p")).best,
                 search.search(inv.pod("default/p"), best_only=True).best):
        assert best is not None and [v.pod.name for v in best.victims] == ["cheap-0", "web"]
        assert [v.claims for v in best.victims] == [("default/cheap-0-claim",),
                                                    ("default/web-claim",)]
        assert best.released_claims == ("default/cheap-0-claim", "default/web-claim")
        assert best.freed_devices == ("gpu.example.com/cheap/gpu-0",
                                      "nic.example.com/cheap/nic-0")


def shared_nic(*, staying: bool = False, going: bool = False) -> list[Any]:
    """cluster(web=0) with "web" and "web2" (3 cpus each) sharing cheap's NIC
    claim; `staying`: a third reserver "keep" outranks the preemptor; `going`:
    web2 is terminating. Pods come as from files, without UIDs."""
    objs = [o for o in cluster(web=0) if o["metadata"]["name"] != "web"]
    sharers = ("web2", "keep") if staying else ("web2",)
    web = holder("web", "cheap", ["nic.example.com/cheap/nic-0"], request="nic",
                 sharers=sharers)
    web2 = holder("web2", "cheap", [], claim_name="web-claim", deleting=going)
    objs += [*web, *web2, gpu_node("cheap", roots=("r0",), nic_roots=("r0",))[-1]]
    with_cpu(web[-1], "3")
    with_cpu(web2[-1], "3")
    if staying:
        keep = holder("keep", "cheap", [], claim_name="web-claim", priority=2000)
        objs += keep
    for o in objs:
        if o.get("kind") == "Pod":
            o["metadata"].pop("uid", None)
    return objs


def test_a_shared_claim_of_room_victims_without_uids_is_released_with_them() -> None:
    # Both reservers of web's NIC claim go for cpu: the claim is deallocated
    # though the pods carry no UID (the reservations name them by UID).
    inv = load(*shared_nic(), with_cpu(preemptor(), "6"))
    _, search = searcher(inv)
    for best in (search.search(inv.pod("default/p")).best,
                 search.search(inv.pod("default/p"), best_only=True).best):
        assert best is not None and best.node == "cheap"
        assert sorted(v.pod.name for v in best.victims) == ["cheap-0", "web", "web2"]
        assert best.released_claims == ("default/cheap-0-claim", "default/web-claim")
        assert best.freed_devices == ("gpu.example.com/cheap/gpu-0",
                                      "nic.example.com/cheap/nic-0")


def test_a_shared_claim_of_a_room_victim_and_a_going_pod_is_released() -> None:
    # web2 is already terminating: web going for cpu deallocates their claim.
    inv = load(*shared_nic(going=True), with_cpu(preemptor(), "6"))
    _, search = searcher(inv)
    for best in (search.search(inv.pod("default/p")).best,
                 search.search(inv.pod("default/p"), best_only=True).best):
        assert best is not None and best.node == "cheap"
        assert sorted(v.pod.name for v in best.victims) == ["cheap-0", "web"]
        assert [t.name for t in best.terminating] == ["web2"]
        assert best.released_claims == ("default/cheap-0-claim", "default/web-claim")
        assert best.freed_devices == ("gpu.example.com/cheap/gpu-0",
                                      "nic.example.com/cheap/nic-0")


def test_a_shared_claim_a_staying_pod_reserves_is_not_released() -> None:
    # Neither pods nor reservations carry UIDs: "keep" stays, so web's NIC
    # claim stays allocated though web and web2 go.
    objs = shared_nic(staying=True)
    for o in objs:
        for ref in o.get("status", {}).get("reservedFor", []) if o["kind"] == "ResourceClaim" \
                else []:
            ref.pop("uid", None)
    inv = load(*objs, with_cpu(preemptor(), "6"))
    _, search = searcher(inv)
    for best in (search.search(inv.pod("default/p")).best,
                 search.search(inv.pod("default/p"), best_only=True).best):
        assert best is not None and best.node == "cheap"
        assert sorted(v.pod.name for v in best.victims) == ["cheap-0", "web", "web2"]
        assert best.released_claims == ("default/cheap-0-claim",)
        assert best.freed_devices == ("gpu.example.com/cheap/gpu-0",)


def test_room_victims_are_reprieved_as_kube_scheduler_reprieves() -> None:
    # 8 cpus: the device victim frees 1 and 7 are taken by four lower-priority
    # pods; the 4-cpu pod needs 3 more. All four go (8 free), then are
    # reprieved, the PDB violator first ("v", priority 3: 7 free, it stays),
    # then highest priority first ("hi": 5 free, it stays; "mid" and "lo",
    # "mid" started earlier: 3 free each time, both go).
    objs: list[Any] = [GPU_CLASS, template("want", requests=[request("gpu", "gpu")]),
                       sized("n1"), *gpu_node("n1", roots=("r0",)),
                       *gpu_holder("n1-0", "n1", 0, 1, "1"),
                       busy("v", "n1", "1", priority=3, labels={"app": "v"}),
                       busy("hi", "n1", "2", priority=50),
                       busy("mid", "n1", "2", priority=10),
                       busy("lo", "n1", "2", priority=10, start="2026-01-01T00:00:01Z"),
                       pdb("keep-v", {"app": "v"}, 0)]
    inv = load(*objs, with_cpu(preemptor(), "4"))
    _, search = searcher(inv)
    found = search.search(inv.pod("default/p")).nodes[0]
    assert [v.pod.name for v in found.victims] == ["mid", "lo", "n1-0"]
    assert found.pdb_violations == 0


def test_even_every_lower_priority_pod_gone_is_not_enough() -> None:
    objs: list[Any] = [GPU_CLASS, template("want", requests=[request("gpu", "gpu")]),
                       sized("n1"), *gpu_node("n1", roots=("r0",)),
                       *gpu_holder("n1-0", "n1", 0, 1, "1"),
                       busy("low", "n1", "2"), busy("high", "n1", "5", priority=2000)]
    inv = load(*objs, with_cpu(preemptor(), "4"))
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert not plan.nodes
    assert plan.refused == {"n1": "node would lack cpu: requests 4, free with every "
                                  "lower-priority pod gone 3"}


def test_pods_nominated_there_of_no_lower_priority_count_against_the_room() -> None:
    # dear has 8 cpus free once dear-0 goes; a pending 5-cpu pod nominated
    # there of the preemptor's priority leaves 3, so dear is refused; one of
    # lower priority, or the preemptor's own nomination, does not count.
    def plan_with(*nominated: dict[str, Any], pod: dict[str, Any] | None = None) -> Any:
        objs = [o for o in cluster() if o.get("metadata", {}).get("name") != "web"]
        inv = load(*objs, *nominated, pod or with_cpu(preemptor(), "4"))
        return searcher(inv)[1].search(inv.pod("default/p"))

    same = busy("q", "", "5", priority=1000, nominated="dear")
    assert plan_with(same).refused == {
        "dear": "node would lack cpu: requests 4, free after victims 3"}
    lower = busy("q", "", "5", priority=999, nominated="dear")
    assert [n.node for n in plan_with(lower).nodes] == ["cheap", "dear"]
    own = with_cpu(preemptor(), "4")
    own["status"] = {"nominatedNodeName": "dear"}
    assert [n.node for n in plan_with(pod=own).nodes] == ["cheap", "dear"]


def test_only_pods_nominated_by_the_preemptors_scheduler_count_against_the_room() -> None:
    # kube-scheduler's nominator holds only its own profiles' pods: a pod
    # another scheduler nominated to dear leaves dear's room to the preemptor,
    # the same pod of the preemptor's scheduler does not; a pod or a
    # preemptor naming no scheduler is the API server's default-scheduler's.
    # Pods without claims count as a kube watch keeps them (`PodUsage`) and
    # as a file keeps them.
    def plan_with(*objs: dict[str, Any], pod: dict[str, Any] | None = None,
                  watched: bool = False) -> Any:
        base = [o for o in cluster() if o.get("metadata", {}).get("name") != "web"]
        inv = load(*base, pod or with_cpu(preemptor(), "4"))
        for obj in objs:
            inv.apply("Pod", "ADDED", obj, parse=parse_live_pod if watched else parse_object)
        return searcher(inv)[1].search(inv.pod("default/p"))

    refused = {"dear": "node would lack cpu: requests 4, free after victims 3"}
    for watched in (False, True):
        other = busy("q", "", "5", priority=1000, nominated="dear", scheduler="other")
        assert [n.node for n in plan_with(other, watched=watched).nodes] == ["cheap", "dear"]
        ours = busy("q", "", "5", priority=1000, nominated="dear", scheduler="drax")
        assert plan_with(ours, watched=watched).refused == refused
        unnamed = busy("q", "", "5", priority=1000, nominated="dear", scheduler="")
        assert [n.node for n in plan_with(unnamed, watched=watched).nodes] == ["cheap", "dear"]
        default = with_cpu(preemptor(), "4")
        default["spec"]["schedulerName"] = "default-scheduler"
        assert plan_with(unnamed, pod=default, watched=watched).refused == refused
    # a pending pod with claims (kept whole) alike
    (claimed,) = holder("r", "", [], priority=1000, phase="Pending")
    with_cpu(claimed, "5")["status"]["nominatedNodeName"] = "dear"
    claimed["spec"]["schedulerName"] = "other"
    assert [n.node for n in plan_with(claimed).nodes] == ["cheap", "dear"]
    claimed["spec"]["schedulerName"] = "drax"
    assert plan_with(claimed).refused == refused


def test_the_pods_nominated_by_every_profile_drax_serves_count_against_the_room() -> None:
    # One kube-scheduler with profiles drax and drax-gpu keeps one nominator for
    # both: a drax-gpu pod nominated to dear counts there for a drax
    # preemptor when drax serves both names; a pod of a scheduler drax does
    # not serve does not, nor, for a preemptor of another scheduler, a pod of
    # drax's profiles.
    def plan_with(nominated: dict[str, Any], *, scheduler: str = "drax") -> Any:
        base = [o for o in cluster() if o.get("metadata", {}).get("name") != "web"]
        p = with_cpu(preemptor(), "4")
        p["spec"]["schedulerName"] = scheduler
        inv = load(*base, nominated, p)
        search = searcher(inv, schedulers=("drax", "drax-gpu"))[1]
        return search.search(inv.pod("default/p"))

    refused = {"dear": "node would lack cpu: requests 4, free after victims 3"}
    gpu = busy("q", "", "5", priority=1000, nominated="dear", scheduler="drax-gpu")
    assert plan_with(gpu).refused == refused
    assert plan_with(gpu, scheduler="drax-gpu").refused == refused
    assert [n.node for n in plan_with(gpu, scheduler="other").nodes] == ["cheap", "dear"]
    other = busy("q", "", "5", priority=1000, nominated="dear", scheduler="other")
    assert [n.node for n in plan_with(other).nodes] == ["cheap", "dear"]


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


def test_the_verb_adds_room_victims_only_among_the_offered_pods() -> None:
    inv = load(*cluster(web=0), with_cpu(preemptor(), "4"))
    _, search = searcher(inv)
    pod = inv.pod("default/p")
    # Offered only the GPU holder, "web" may not go: "cheap" is dropped.
    assert set(choose_victims(search, pod, {"cheap": Offer(uids=("uid-cheap-0",))})) == set()
    # An empty offer lets drax name any pod of the node: "web" goes for cpu.
    answer = choose_victims(search, pod, {"cheap": Offer(uids=())})
    assert sorted(answer["cheap"].uids) == ["uid-cheap-0", "uid-web"]


def test_devices_held_for_a_pod_of_no_lower_priority_are_taken_for_the_search() -> None:
    # A full 4-GPU node; p (1000) gets GPUs 0-1 held, its victims gone; GPUs
    # 2-3 stay with pods of priority 5.
    inv = load(GPU_CLASS, *full_node(), template("want", requests=[request("gpu", "gpu",
                                                                           count=2)]),
               pending("p", 1000), pending("low", 1000), pending("high", 2000))
    _, search = searcher(inv)
    best = search.search(inv.pod("default/p")).best
    assert best is not None and sorted(v.pod.name for v in best.victims) == ["n1-0", "n1-1"]
    inv.nominate(Nomination(
        pod_key="default/p", pod_uid="uid-p", priority=1000, node="n1",
        allocations=best.allocation, victims=tuple((v.pod.key, v.pod.uid) for v in best.victims),
        victim_claims=best.released_claims, started_at=0.0, expires_at=float("inf")))
    for name in ("n1-0", "n1-1"):
        inv.delete("Pod", f"default/{name}")
        inv.delete("ResourceClaim", f"default/{name}-claim")
    found = {}
    for name in ("low", "high"):
        pod = inv.pod(f"default/{name}")
        with inv.holds_lifted_for(pod):
            answer = search.search(pod).best
        assert answer is not None
        found[name] = sorted(v.pod.name for v in answer.victims)
    assert found == {"low": ["n1-2", "n1-3"], "high": []}


def test_the_room_answer_depends_on_the_pods_the_search_weighed() -> None:
    # Offered pods the search did not weigh leave with the verb's answer: with
    # "web" weighed it must go for room, with it unweighed it is leaving already.
    inv = load(*cluster(web=0), with_cpu(preemptor(), "4"))
    p, cheap0, web = (inv.pod(f"default/{n}") for n in ("p", "cheap-0", "web"))
    assert p is not None and cheap0 is not None and web is not None
    fit = NodeFit(p, inv, {"cheap": {cheap0.uid, web.uid}})
    weighed = fit.room("cheap", [cheap0], [cheap0, web])
    assert not isinstance(weighed, str) and [e[0].name for e in weighed] == ["web"]
    assert fit.room("cheap", [cheap0], [cheap0]) == ()


def test_a_room_victim_is_told_it_goes_for_the_preemptor_s_room_not_for_devices() -> None:
    # cheap: cheap-0 goes for the GPU, "web" for the cpu cheap-0 leaves short.
    inv = load(*cluster(web=0), with_cpu(preemptor(), "4"))
    _, search = searcher(inv)
    pod = inv.pod("default/p")
    plan = search.search(pod, best_only=True)
    assert plan.best is not None
    p = preemption_of(pod, plan.priority, plan.best, inv)
    device_victim, web = sorted(p.victims, key=lambda v: v.name)
    assert p.room_victims == {web.uid} and p.room == ("cpu",)
    assert condition_message("drax", p, device_victim) == (
        "drax: preempting to accommodate a higher priority pod default/p "
        "(uid uid-p; devices gpu.example.com/cheap/gpu-0)")
    assert condition_message("drax", p, web) == (
        "drax: preempting to accommodate a higher priority pod default/p "
        "(uid uid-p; room on node cheap: cpu)")
    assert preempted_note(p, web) == (
        "Preempted by pod default/p (uid uid-p) on node cheap to free room for it: cpu")
    assert "devices" not in preempted_note(p, web)
    assert preempted_note(p, device_victim).endswith("to free devices gpu.example.com/cheap/gpu-0")
    assert preempting_note(p, [device_victim, web]) == (
        "Preempting on node cheap: pod(s) default/cheap-0 to free devices "
        "gpu.example.com/cheap/gpu-0; pod(s) default/web to free room for it: cpu")
    # A preemption with device victims alone names no room.
    fits = [o for o in cluster(web=0) if o["metadata"]["name"] != "web"]
    inv = load(*fits, with_cpu(preemptor(), "4"))
    best = searcher(inv)[1].search(inv.pod("default/p"), best_only=True).best
    assert best is not None
    alone = preemption_of(inv.pod("default/p"), 1000, best, inv)
    assert alone.room_victims == frozenset() and alone.room == ()
    assert preempting_note(alone, alone.victims) == (
        f"Preempting on node {best.node}: pod(s) default/{best.node}-0 to free devices "
        f"gpu.example.com/{best.node}/gpu-0")


def test_lacks_names_every_resource_short_in_node_resources_fit_s_order() -> None:
    objs: list[Any] = [GPU_CLASS, template("want", requests=[request("gpu", "gpu")]),
                       sized("n1", pods="2"), *gpu_node("n1", roots=("r0",)),
                       *gpu_holder("n1-0", "n1", 0, 1, "1"), busy("a", "n1", "6"),
                       busy("b", "n1", "1")]
    inv = load(*objs, with_cpu(preemptor(), "4"))
    pod = inv.pod("default/p")
    fit = NodeFit(pod, inv)
    n1_0 = inv.pod("default/n1-0")
    assert fit.lacks("n1", [n1_0]) == ("pods", "cpu")
    assert fit.lacks("n1", [n1_0, inv.pod("default/a")]) == ()
