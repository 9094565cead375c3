"""Extender verbs over a real inventory and the real allocator: filter reasons,
unresolvable nodes, claim resolution (direct, template in file and kube mode),
prioritize, bind (assume, memory binder, failures)."""

from __future__ import annotations

import gc
from collections.abc import Sequence
from typing import Any

from app.allocator.types import ClaimAllocation
from app.extender import BindCause, BindError, BindFailure, NodeScores
from app.extender.answers import Answers
from app.model import Pod, ResourceClaim
from tests.extender.cluster import GPU_CLASS, NIC_CLASS, extender, gpu_node, load, the_pod
from tests.inventory.objects import claim, exactly, pod, result, template

TWO_GPUS = [exactly("gpu", "gpu", count=2)]


def test_filter_passes_fitting_nodes_and_explains_the_others() -> None:
    inv = load(GPU_CLASS, gpu_node("n1"), gpu_node("n2", roots=["r0"]),
               claim("c", requests=TWO_GPUS), pod("p", claims={"g": "c"}))
    result_ = extender(inv).filter(the_pod(inv), ["n1", "n2"])
    assert result_.passed == ["n1"]
    assert result_.error is None
    assert set(result_.unresolvable) == {"n2"}
    assert '"gpu"' in result_.unresolvable["n2"] and "1" in result_.unresolvable["n2"]


def test_devices_taken_by_others_fail_the_node_but_eviction_could_help() -> None:
    taken = [result("gpu", f"gpu.example.com/n1/gpu-{i}") for i in range(3)]
    inv = load(GPU_CLASS, gpu_node("n1"), claim("other", results=taken),
               claim("c", requests=TWO_GPUS), pod("p", claims={"g": "c"}))
    result_ = extender(inv).filter(the_pod(inv), ["n1"])
    assert result_.passed == []
    assert list(result_.failed) == ["n1"]
    assert result_.unresolvable == {}


def test_filter_refuses_to_answer_until_synced() -> None:
    inv = load(GPU_CLASS, gpu_node("n1"), claim("c", requests=TWO_GPUS),
               pod("p", claims={"g": "c"}), synced=False)
    result_ = extender(inv).filter(the_pod(inv), ["n1"])
    assert result_.error is not None and "not synced" in result_.error
    assert result_.passed == []


def test_pod_without_claims_fits_everywhere() -> None:
    inv = load(pod("p"))
    result_ = extender(inv).filter(the_pod(inv), ["a", "b"])
    assert result_.passed == ["a", "b"]


def test_missing_claim_is_unresolvable_everywhere() -> None:
    inv = load(GPU_CLASS, gpu_node("n1"), pod("p", claims={"g": "nope"}))
    result_ = extender(inv).filter(the_pod(inv), ["n1", "n2"])
    assert set(result_.unresolvable) == {"n1", "n2"}
    assert "default/nope" in result_.unresolvable["n1"]
    assert "does not exist" in result_.unresolvable["n1"]


def test_missing_class_is_an_error_naming_the_class() -> None:
    inv = load(gpu_node("n1"), claim("c", requests=[exactly("gpu", "ghost")]),
               pod("p", claims={"g": "c"}))
    result_ = extender(inv).filter(the_pod(inv), ["n1"])
    assert result_.error is not None and "ghost" in result_.error
    assert "n1" in result_.unresolvable


def test_cel_runtime_error_is_an_error_not_a_misfit() -> None:
    selector = "device.attributes['gpu.example.com'].missing == 'x'"
    inv = load(GPU_CLASS, gpu_node("n1"),
               claim("c", requests=[exactly("gpu", "gpu", selectors=(selector,))]),
               pod("p", claims={"g": "c"}))
    evaluation = extender(inv).evaluate(the_pod(inv), ["n1"])[0]
    assert not evaluation.feasible
    assert evaluation.error is not None and "missing" in evaluation.error
    assert extender(inv).filter(the_pod(inv), ["n1"]).error is not None


def test_template_in_kube_mode_waits_for_the_generated_claim() -> None:
    inv = load(GPU_CLASS, gpu_node("n1"), template("t", requests=TWO_GPUS),
               pod("p", uid="u", templates={"g": "t"}))
    result_ = extender(inv).filter(the_pod(inv), ["n1"])
    assert "not created yet" in result_.unresolvable["n1"]
    inv = load(GPU_CLASS, gpu_node("n1"), template("t", requests=TWO_GPUS),
               claim("p-g-x1y2z", requests=TWO_GPUS),
               pod("p", uid="u", templates={"g": "t"}, statuses={"g": "p-g-x1y2z"}))
    assert extender(inv).filter(the_pod(inv), ["n1"]).passed == ["n1"]


def test_template_in_file_mode_is_served_as_if_generated() -> None:
    inv = load(GPU_CLASS, gpu_node("n1"), template("t", requests=TWO_GPUS),
               pod("p", templates={"g": "t"}))
    evaluation = extender(inv, file_mode=True).evaluate(the_pod(inv), ["n1"])[0]
    assert evaluation.feasible
    assert [ca.claim_key for ca in evaluation.claims] == ["default/p-g"]


def test_missing_template_in_file_mode() -> None:
    inv = load(GPU_CLASS, gpu_node("n1"), pod("p", templates={"g": "ghost"}))
    result_ = extender(inv, file_mode=True).filter(the_pod(inv), ["n1"])
    assert "ResourceClaimTemplate default/ghost" in result_.unresolvable["n1"]


def shared_claim_on_n1() -> dict[str, Any]:
    """Claim `shared`, allocated one GPU of n1 and so usable on n1 only."""
    selector = {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}
    return claim("shared", requests=[exactly("gpu", "gpu")],
                 results=[result("gpu", "gpu.example.com/n1/gpu-0")], node_selector=selector)


def test_allocated_shared_claim_only_constrains_the_node() -> None:
    inv = load(GPU_CLASS, gpu_node("n1"), gpu_node("n2"), shared_claim_on_n1(),
               pod("p", claims={"g": "shared"}))
    result_ = extender(inv).filter(the_pod(inv), ["n1", "n2"])
    assert result_.passed == ["n1"]
    assert "already allocated" in result_.unresolvable["n2"]


def test_prioritize_scores_feasible_nodes_in_range() -> None:
    inv = load(GPU_CLASS, gpu_node("n1"), gpu_node("n2", roots=["r0", "r1"]),
               gpu_node("n3", roots=["r0"]),
               claim("c", requests=TWO_GPUS,
                     constraints=[]), pod("p", claims={"g": "c"}))
    scores = dict(extender(inv).prioritize(the_pod(inv), ["n1", "n2", "n3"]))
    # a node scoring 0 is left out, which the scheduler reads as 0
    assert all(0 < s <= 10 for s in scores.values())
    assert "n3" not in scores  # infeasible
    assert scores["n1"] > scores.get("n2", 0)  # both GPUs on one PCIe root beats two roots


def test_node_scores_name_the_nodes_with_a_score_and_zero_only_when_kept() -> None:
    names, values = ["a", "b", "c", "d"], [3, 0, None, 7]
    left_out = NodeScores(names, values)
    assert left_out.kept() == (["a", "d"], [3, 7])
    assert left_out.pairs() == [("a", 3), ("d", 7)]
    kept = NodeScores(names, values, zero_kept=True)
    assert kept.kept() == (["a", "b", "d"], [3, 0, 7])
    assert kept.pairs() == [("a", 3), ("b", 0), ("d", 7)]
    assert NodeScores([], []).kept() == ([], []) and NodeScores([], []).pairs() == []


def _two_gpu_nodes_and_a_pod() -> Any:
    return load(GPU_CLASS, gpu_node("n1"), gpu_node("n2", roots=["r0", "r1"]),
                gpu_node("n3", roots=["r0"]), claim("c", requests=TWO_GPUS),
                pod("p", uid="u1", claims={"g": "c"}))


def test_prioritize_after_filter_reuses_its_answers_for_unchanged_nodes() -> None:
    inv = _two_gpu_nodes_and_a_pod()
    ext = extender(inv)
    passed = ext.filter(the_pod(inv), ["n1", "n2", "n3"]).passed
    assert passed == ["n1", "n2"]
    computed = ext.stats.answers_computed
    assert dict(ext.prioritize(the_pod(inv), passed)) == dict(
        extender(inv).prioritize(the_pod(inv), passed))
    assert ext.stats.answers_computed == computed


def _live_answers() -> int:
    gc.collect()
    return sum(isinstance(o, Answers) for o in gc.get_objects())


def test_the_filters_answers_are_not_kept_past_their_book_once_superseded() -> None:
    inv = load(GPU_CLASS, gpu_node("n1"), gpu_node("n2", roots=["r0", "r1"]),
               claim("c", requests=TWO_GPUS), pod("p", uid="u1", claims={"g": "c"}),
               pod("plain", uid="u2"))
    before = _live_answers()
    ext = extender(inv)
    for then in ("prioritize", "filter"):  # what supersedes the filter's scores
        assert ext.filter(the_pod(inv), ["n1", "n2"]).passed == ["n1", "n2"]
        if then == "prioritize":
            assert ext.prioritize(the_pod(inv), ["n1", "n2"])
        else:  # a pod without claims: answered without the book
            assert ext.filter(the_pod(inv, "default/plain"), ["n1"]).passed == ["n1"]
        assert _live_answers() == before + 1
        ext._book._results.clear()  # the book evicts the claim shape's answers
        assert _live_answers() == before


def test_prioritize_scores_a_node_changed_since_the_filter_as_it_is_now() -> None:
    inv = _two_gpu_nodes_and_a_pod()
    ext = extender(inv)
    passed = ext.filter(the_pod(inv), ["n1", "n2", "n3"]).passed
    assert passed == ["n1", "n2"]
    before = dict(extender(inv).prioritize(the_pod(inv), passed))
    # Another pod's claim lands on n1 between the filter and the prioritize of
    # one scheduling cycle: n1 is scored as it is now, and only n1 is searched again.
    inv.apply("ResourceClaim", "ADDED", claim(
        "other", results=[result("gpu", "gpu.example.com/n1/gpu-0")]))
    now = dict(extender(inv).prioritize(the_pod(inv), passed))
    assert now["n1"] != before["n1"]
    computed = ext.stats.answers_computed
    assert dict(ext.prioritize(the_pod(inv), passed)) == now
    assert ext.stats.answers_computed == computed + 1


def test_prioritize_recomputes_when_the_pods_claims_changed_since_its_filter() -> None:
    inv = _two_gpu_nodes_and_a_pod()
    ext = extender(inv)
    ext.filter(the_pod(inv), ["n1", "n2", "n3"])
    inv.apply("ResourceClaim", "MODIFIED", claim("c", requests=[exactly("gpu", "gpu")]))
    computed = ext.stats.answers_computed
    scores = dict(ext.prioritize(the_pod(inv), ["n1", "n2", "n3"]))
    assert ext.stats.answers_computed > computed
    assert scores == dict(extender(inv).prioritize(the_pod(inv), ["n1", "n2", "n3"]))
    assert "n3" in scores  # one GPU fits there


def test_prioritize_of_a_node_filter_did_not_pass_is_computed() -> None:
    inv = _two_gpu_nodes_and_a_pod()
    ext = extender(inv)
    ext.filter(the_pod(inv), ["n1"])
    computed = ext.stats.answers_computed
    scores = dict(ext.prioritize(the_pod(inv), ["n1", "n2"]))
    assert ext.stats.answers_computed == computed + 1
    assert scores == dict(extender(inv).prioritize(the_pod(inv), ["n1", "n2"]))


# ---------------------------------------------------------------- bind


async def test_bind_in_file_mode_records_the_allocation_for_the_next_pod() -> None:
    inv = load(GPU_CLASS, gpu_node("n1", roots=["r0", "r0"]), template("t", requests=TWO_GPUS),
               pod("p", uid="u1", templates={"g": "t"}),
               pod("q", uid="u2", templates={"g": "t"}))
    ext = extender(inv, file_mode=True)
    assert ext.filter(the_pod(inv), ["n1"]).passed == ["n1"]
    assert await ext.bind(namespace="default", name="p", uid="u1", node="n1") is None
    generated = inv.claim("default/p-g")
    assert generated is not None and generated.allocation is not None
    assert [r.name for r in generated.reserved_for] == ["p"]
    bound = inv.pod("default/p")
    assert bound is not None and bound.node_name == "n1"
    assert inv.assumed_claims() == []  # the memory binder's write confirmed it
    after = ext.filter(the_pod(inv, "default/q"), ["n1"])
    assert after.passed == []
    assert "n1" in after.failed
    # Binding the same pod again reuses its claim instead of allocating twice.
    assert ext.filter(the_pod(inv), ["n1"]).passed == ["n1"]


async def test_bind_recomputes_instead_of_trusting_the_filter_cache() -> None:
    inv = load(GPU_CLASS, gpu_node("n1", roots=["r0", "r0", "r0"]),
               claim("c", requests=TWO_GPUS), pod("p", uid="u", claims={"g": "c"}))
    ext = extender(inv, file_mode=True)
    first = ext.evaluate(the_pod(inv), ["n1"])[0]
    assert [r.device for r in first.claims[0].allocation.results] == ["gpu-0", "gpu-1"]
    inv.apply("ResourceClaim", "ADDED", claim("other", results=[
        result("gpu", "gpu.example.com/n1/gpu-0")]))
    assert await ext.bind(namespace="default", name="p", uid="u", node="n1") is None
    bound = inv.claim("default/c")
    assert bound is not None and bound.allocation is not None
    assert [r.device for r in bound.allocation.results] == ["gpu-1", "gpu-2"]


async def test_bind_on_an_unchanged_node_writes_what_filter_found_without_a_search(
        monkeypatch) -> None:
    from tests.extender.test_extender_signature import count_allocator_runs

    inv = load(GPU_CLASS, gpu_node("n1", roots=["r0", "r1", "r0"]),
               claim("c", requests=TWO_GPUS), pod("p", uid="u", claims={"g": "c"}))
    ext = extender(inv, file_mode=True)
    found = ext.evaluate(the_pod(inv), ["n1"])[0]
    runs = count_allocator_runs(monkeypatch)
    assert await ext.bind(namespace="default", name="p", uid="u", node="n1") is None
    assert runs == []
    bound = inv.claim("default/c")
    assert bound is not None and bound.allocation is not None
    assert bound.allocation.results == found.claims[0].allocation.results
    assert [r.device for r in bound.allocation.results] == ["gpu-0", "gpu-2"]


class FailingBinder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    async def bind(self, *, pod: Pod, node: str, allocations: Sequence[ClaimAllocation],
                   reserve: Sequence[ResourceClaim], extended: Any = None) -> None:
        self.calls.append((node, [ca.claim_key for ca in allocations]))
        raise BindError("conflict writing claim status")


class AssumeCheckingBinder:
    def __init__(self, inventory) -> None:
        self.inventory = inventory
        self.seen: list[str] = []

    async def bind(self, *, pod: Pod, node: str, allocations: Sequence[ClaimAllocation],
                   reserve: Sequence[ResourceClaim], extended: Any = None) -> None:
        self.seen = self.inventory.assumed_claims()


async def test_bind_failure_forgets_the_assumption() -> None:
    inv = load(GPU_CLASS, gpu_node("n1"), claim("c", requests=TWO_GPUS),
               pod("p", uid="u", claims={"g": "c"}))
    binder = FailingBinder()
    ext = extender(inv, binder=binder)
    ext.filter(the_pod(inv), ["n1"])
    error = await ext.bind(namespace="default", name="p", uid="u", node="n1")
    assert error == BindFailure("conflict writing claim status", BindCause.OTHER)
    assert binder.calls == [("n1", ["default/c"])]
    assert inv.assumed_claims() == []


async def test_bind_assumes_before_the_binder_writes() -> None:
    inv = load(GPU_CLASS, gpu_node("n1"), claim("c", requests=TWO_GPUS),
               pod("p", uid="u", claims={"g": "c"}))
    binder = AssumeCheckingBinder(inv)
    ext = extender(inv, binder=binder)
    ext.filter(the_pod(inv), ["n1"])
    assert await ext.bind(namespace="default", name="p", uid="u", node="n1") is None
    assert binder.seen == ["default/c"]
    assert inv.assumed_claims() == ["default/c"]  # held until the claim comes back


async def test_bind_of_an_unknown_pod_or_a_full_node_is_an_error() -> None:
    inv = load(GPU_CLASS, gpu_node("n1", roots=["r0"]), claim("c", requests=TWO_GPUS),
               pod("p", uid="u", claims={"g": "c"}))
    ext = extender(inv, file_mode=True)
    error = await ext.bind(namespace="default", name="ghost", uid="x", node="n1")
    assert error is not None and "unknown" in error.message
    assert error.cause == BindCause.POD_UNKNOWN
    error = await ext.bind(namespace="default", name="p", uid="u", node="n1")
    assert error is not None and "n1" in error.message
    assert error.cause == BindCause.NO_LONGER_FITS


async def test_bind_uses_pods_remembered_from_filter_by_uid() -> None:
    inv = load(GPU_CLASS, gpu_node("n1"), claim("c", requests=TWO_GPUS))
    from app.model import PodResourceClaim

    seen = Pod(namespace="default", name="p", uid="u",
               resource_claims=(PodResourceClaim(name="g", resource_claim_name="c"),))
    ext = extender(inv, file_mode=True)
    assert ext.filter(seen, ["n1"]).passed == ["n1"]
    assert await ext.bind(namespace="default", name="p", uid="u", node="n1") is None


class FlakyBinder:
    """Fails its first bind, then records the pods it bound."""

    def __init__(self) -> None:
        self.failed = False
        self.bound: list[str] = []

    async def bind(self, *, pod: Pod, node: str, allocations: Sequence[ClaimAllocation],
                   reserve: Sequence[ResourceClaim], extended: Any = None) -> None:
        if not self.failed:
            self.failed = True
            raise BindError("conflict writing claim status")
        self.bound.append(pod.uid)


async def test_a_bound_pod_is_forgotten_and_a_failed_bind_keeps_it() -> None:
    from app.model import PodResourceClaim

    # As against a cluster: the pod is only in what filter saw, not in the inventory.
    inv = load(GPU_CLASS, gpu_node("n1"), claim("c", requests=TWO_GPUS))
    seen = Pod(namespace="default", name="p", uid="u",
               resource_claims=(PodResourceClaim(name="g", resource_claim_name="c"),))
    binder = FlakyBinder()
    ext = extender(inv, binder=binder)
    assert ext.filter(seen, ["n1"]).passed == ["n1"]
    assert await ext.bind(namespace="default", name="p", uid="u", node="n1") == \
        BindFailure("conflict writing claim status", BindCause.OTHER)
    assert await ext.bind(namespace="default", name="p", uid="u", node="n1") is None
    assert binder.bound == ["u"]
    error = await ext.bind(namespace="default", name="p", uid="u", node="n1")
    assert error is not None and "unknown to drax" in error.message


def test_constraint_that_no_device_meets_gives_a_reason() -> None:
    inv = load(GPU_CLASS, NIC_CLASS, gpu_node("n1", nic_roots=["r1"]),
               claim("c", requests=[exactly("gpu", "gpu"), exactly("nic", "nic")],
                     constraints=[{"matchAttribute": "resource.kubernetes.io/none"}]),
               pod("p", claims={"g": "c"}))
    evaluation = extender(inv).evaluate(the_pod(inv), ["n1"])[0]
    assert not evaluation.feasible
    assert evaluation.reason


def test_evaluation_json_shape() -> None:
    inv = load(GPU_CLASS, gpu_node("n1"), claim("c", requests=TWO_GPUS),
               pod("p", claims={"g": "c"}))
    doc = extender(inv).evaluate(the_pod(inv), ["n1"])[0].to_dict()
    assert set(doc) == {"node", "feasible", "score", "claims", "reason", "error"}
    assert set(doc["claims"][0]) == {"claim", "results", "nodeSelector"}
    assert set(doc["claims"][0]["results"][0]) == {
        "request", "driver", "pool", "device", "adminAccess", "tolerations",
        "consumedCapacity", "shareID"}


def test_cached_answers_keep_pods_with_different_shared_claims_apart() -> None:
    inv = load(GPU_CLASS, gpu_node("n1"), gpu_node("n2"), shared_claim_on_n1(),
               claim("c1", requests=[exactly("gpu", "gpu")]),
               claim("c2", requests=[exactly("gpu", "gpu")]),
               pod("with-shared", claims={"s": "shared", "g": "c1"}),
               pod("alone", claims={"g": "c2"}))
    ext = extender(inv)
    assert ext.filter(the_pod(inv, "default/with-shared"), ["n1", "n2"]).passed == ["n1"]
    assert ext.filter(the_pod(inv, "default/alone"), ["n1", "n2"]).passed == ["n1", "n2"]


def test_claim_reserved_by_the_maximum_of_consumers_is_refused() -> None:
    consumers = [{"resource": "pods", "name": f"c{i}", "uid": f"u{i}"} for i in range(256)]
    inv = load(GPU_CLASS, gpu_node("n1"),
               claim("shared", requests=[exactly("gpu", "gpu")],
                     results=[result("gpu", "gpu.example.com/n1/gpu-0")],
                     reserved_for=consumers),
               pod("p", uid="new", claims={"g": "shared"}),
               pod("c7", uid="u7", claims={"g": "shared"}))
    ext = extender(inv)
    assert "256 consumers" in ext.filter(the_pod(inv), ["n1"]).unresolvable["n1"]
    assert ext.filter(the_pod(inv, "default/c7"), ["n1"]).passed == ["n1"]


def test_a_cached_reason_names_the_asking_pods_claim() -> None:
    inv = load(GPU_CLASS, gpu_node("n1", roots=["r0"]),
               claim("c1", requests=TWO_GPUS), claim("c2", requests=TWO_GPUS),
               pod("p1", claims={"g": "c1"}), pod("p2", claims={"g": "c2"}))
    ext = extender(inv)
    first = ext.filter(the_pod(inv, "default/p1"), ["n1"]).unresolvable["n1"]
    second = ext.filter(the_pod(inv, "default/p2"), ["n1"]).unresolvable["n1"]
    assert "default/c1" in first
    assert "default/c2" in second and "default/c1" not in second


def test_a_search_cut_short_by_the_step_budget_leaves_the_node_resolvable() -> None:
    inv = load(GPU_CLASS, NIC_CLASS, gpu_node("n1", roots=["a", "b", "c", "d"],
                                              nic_roots=["e"]),
               claim("c", requests=[exactly("gpu", "gpu", count=2), exactly("nic", "nic")],
                     constraints=[{"matchAttribute": "resource.kubernetes.io/pcieRoot"}]),
               pod("p", claims={"g": "c"}))
    result_ = extender(inv, step_budget=2).filter(the_pod(inv), ["n1"])
    assert list(result_.failed) == ["n1"]
    assert result_.failed["n1"]
    assert extender(inv).filter(the_pod(inv), ["n1"]).unresolvable


def test_a_generated_claim_owned_by_another_pod_is_refused() -> None:
    foreign = claim("p-g-abcde", requests=TWO_GPUS)
    foreign["metadata"]["ownerReferences"] = [
        {"kind": "Pod", "name": "old-p", "uid": "old-uid", "controller": True}]
    inv = load(GPU_CLASS, gpu_node("n1"), template("t", requests=TWO_GPUS), foreign,
               pod("p", uid="new-uid", templates={"g": "t"}, statuses={"g": "p-g-abcde"}))
    result_ = extender(inv).filter(the_pod(inv), ["n1"])
    assert "was not created for pod default/p" in result_.unresolvable["n1"]


def test_a_claim_being_deleted_is_refused() -> None:
    deleting = claim("c", requests=TWO_GPUS)
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    inv = load(GPU_CLASS, gpu_node("n1"), deleting, pod("p", claims={"g": "c"}))
    assert "being deleted" in extender(inv).filter(the_pod(inv), ["n1"]).unresolvable["n1"]


async def test_memory_binder_refuses_a_claim_someone_else_allocated() -> None:
    import pytest

    from app.extender import MemoryBinder
    from app.model import AllocationResult, DeviceRequestAllocationResult

    inv = load(GPU_CLASS, gpu_node("n1"),
               claim("c", requests=[exactly("gpu", "gpu")],
                     results=[result("gpu", "gpu.example.com/n1/gpu-0")]),
               pod("p", uid="u", claims={"g": "c"}))
    mine = AllocationResult(results=(DeviceRequestAllocationResult(
        request="gpu", driver="gpu.example.com", pool="n1", device="gpu-1"),))
    current = inv.claim("default/c")
    assert current is not None
    with pytest.raises(BindError, match="allocated by someone else"):
        await MemoryBinder(inv).bind(pod=the_pod(inv), node="n1",
                                     allocations=[ClaimAllocation("default/c", mine)],
                                     reserve=[current])
    assert inv.claim("default/c") is current


def test_a_deleted_claims_spec_is_not_kept_alive_by_its_shape() -> None:
    import weakref

    inv = load(GPU_CLASS, gpu_node("n1"), claim("c", requests=TWO_GPUS),
               pod("p", uid="u", claims={"g": "c"}))
    ext = extender(inv)
    held = inv.claim("default/c")
    assert held is not None
    spec = weakref.ref(held.spec)
    del held
    assert ext.filter(the_pod(inv), ["n1"]).passed == ["n1"]
    inv.apply("ResourceClaim", "DELETED", claim("c", requests=TWO_GPUS))
    assert spec() is None


def test_filter_remembers_the_pods_it_left_without_a_node_until_one_passes() -> None:
    inv = load(GPU_CLASS, gpu_node("n1", roots=["r0"]), claim("c", requests=TWO_GPUS),
               pod("p", claims={"g": "c"}))
    ext = extender(inv)
    p = the_pod(inv)
    assert ext.filter(p, ["n1"]).passed == []
    assert [(w.namespace, w.name) for w in ext.waiting.snapshot()] == [("default", "p")]
    ext.filter(p, ["n1"])  # rejected again: still one entry
    assert len(ext.waiting) == 1
    for obj in gpu_node("n2"):  # a driver publishes another node's GPUs
        inv.apply("ResourceSlice", "ADDED", obj)
    assert ext.filter(p, ["n1", "n2"]).passed == ["n2"]
    assert len(ext.waiting) == 0
