"""Inventory: pools and generations, node visibility and versions, allocated and
assumed state, class selector caching, bad input."""

from __future__ import annotations

import orjson
import pytest

from app.allocator.types import ClaimAllocation
from app.inventory import Inventory, objects
from app.model import (
    AllocationResult,
    DeviceRequestAllocationResult,
    InvalidObject,
    Pod,
    Quantity,
    decode_resource_slice,
)
from tests.inventory.objects import (
    claim,
    device,
    device_class,
    node,
    resource_slice,
    result,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def inventory(*objs: dict, clock: Clock | None = None) -> Inventory:
    inv = Inventory(clock=clock or Clock())
    for obj in objs:
        inv.apply(obj["kind"], "ADDED", obj)
    return inv


def device_names(inv: Inventory, node_name: str) -> list[str]:
    state = inv.node_state(node_name)
    assert state is not None
    return [d.name for p in state.view.pools for d in p.devices]


def pool_of(inv: Inventory, node_name: str, pool: str):
    state = inv.node_state(node_name)
    assert state is not None
    return next(p for p in state.view.pools if p.name == pool)


# ---------------------------------------------------------------- pools


def test_node_local_slice_is_seen_by_its_node_only() -> None:
    inv = inventory(node("n1"), node("n2"),
                    resource_slice("s1", node_name="n1", devices=[device("gpu-0")]))
    assert device_names(inv, "n1") == ["gpu-0"]
    assert device_names(inv, "n2") == []


def test_only_the_newest_generation_counts() -> None:
    inv = inventory(
        resource_slice("old", node_name="n1", pool="p", generation=1,
                       devices=[device("gpu-old")]),
        resource_slice("new", node_name="n1", pool="p", generation=2,
                       devices=[device("gpu-new")]))
    assert device_names(inv, "n1") == ["gpu-new"]
    assert pool_of(inv, "n1", "p").generation == 2
    inv.apply("ResourceSlice", "DELETED", resource_slice("new", node_name="n1", pool="p",
                                                         generation=2))
    assert device_names(inv, "n1") == ["gpu-old"]


def test_pool_is_incomplete_until_every_slice_arrived() -> None:
    inv = inventory(resource_slice("a", node_name="n1", pool="p", count=2,
                                   devices=[device("d0")]))
    assert pool_of(inv, "n1", "p").complete is False
    inv.apply("ResourceSlice", "ADDED", resource_slice("b", node_name="n1", pool="p", count=2,
                                                       devices=[device("d1")]))
    view = pool_of(inv, "n1", "p")
    assert view.complete is True
    assert [s.name for s in view.slices] == ["a", "b"]
    assert [d.name for d in view.devices] == ["d0", "d1"]


def test_slices_of_an_older_generation_do_not_count_for_completeness() -> None:
    inv = inventory(
        resource_slice("a", node_name="n1", pool="p", generation=1, count=2,
                       devices=[device("d0")]),
        resource_slice("b", node_name="n1", pool="p", generation=2, count=2,
                       devices=[device("d1")]))
    view = pool_of(inv, "n1", "p")
    assert (view.generation, view.complete) == (2, False)
    assert [d.name for d in view.devices] == ["d1"]


def test_duplicate_device_names_make_the_pool_invalid() -> None:
    inv = inventory(
        resource_slice("a", node_name="n1", pool="p", count=2, devices=[device("d0")]),
        resource_slice("b", node_name="n1", pool="p", count=2, devices=[device("d0")]))
    reason = pool_of(inv, "n1", "p").invalid_reason
    assert reason is not None and "duplicate device name 'd0'" in reason


def test_unknown_counter_set_makes_the_pool_invalid() -> None:
    gpu = device("gpu-0")
    gpu["consumesCounters"] = [{"counterSet": "missing", "counters": {"mem": {"value": "1"}}}]
    inv = inventory(resource_slice("a", node_name="n1", devices=[gpu]))
    reason = pool_of(inv, "n1", "a").invalid_reason
    assert reason is not None and "unknown counter set 'missing'" in reason


def test_pools_are_ordered_by_driver_then_name_binding_conditions_last() -> None:
    late = device("x")
    late["bindingConditions"] = ["Ready"]
    inv = inventory(
        resource_slice("s1", driver="b.example.com", node_name="n1", pool="p1",
                       devices=[device("b")]),
        resource_slice("s2", driver="a.example.com", node_name="n1", pool="p2",
                       devices=[device("a")]),
        resource_slice("s3", driver="a.example.com", node_name="n1", pool="p0",
                       devices=[late]))
    state = inv.node_state("n1")
    assert state is not None
    assert [(p.driver, p.name) for p in state.view.pools] == [
        ("a.example.com", "p2"), ("b.example.com", "p1"), ("a.example.com", "p0")]


def test_all_nodes_node_selector_and_per_device_selection() -> None:
    per_device = [dict(device("here"), nodeName="n1"), dict(device("there"), nodeName="n2"),
                  dict(device("everywhere"), allNodes=True)]
    inv = inventory(
        node("n1", rack="a"), node("n2", rack="b"),
        resource_slice("net", pool="net", allNodes=True, devices=[device("shared")]),
        resource_slice("rack-a", pool="rack-a", devices=[device("a0")], nodeSelector={
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "rack", "operator": "In", "values": ["a"]}]}]}),
        resource_slice("pd", pool="pd", perDeviceNodeSelection=True, devices=per_device))
    assert sorted(device_names(inv, "n1")) == ["a0", "everywhere", "here", "shared"]
    assert sorted(device_names(inv, "n2")) == ["everywhere", "shared", "there"]
    inv.apply("Node", "MODIFIED", node("n2", rack="a"))
    assert "a0" in device_names(inv, "n2")


def test_nodes_known_from_slices_without_node_objects() -> None:
    inv = inventory(node("n0"), resource_slice("s", node_name="n1", devices=[device("d")]))
    assert inv.node_names() == ["n0", "n1"]
    assert inv.node_state("unknown") is None


# ---------------------------------------------------------------- versions


def test_versions_change_only_for_nodes_that_can_see_the_change() -> None:
    inv = inventory(node("n1"), node("n2"), resource_slice("s1", node_name="n1"))
    v1, v2 = inv.version("n1"), inv.version("n2")
    inv.apply("ResourceSlice", "MODIFIED",
              resource_slice("s1", node_name="n1", devices=[device("d")]))
    assert inv.version("n1") > v1
    assert inv.version("n2") == v2
    inv.apply("ResourceSlice", "ADDED", resource_slice("net", allNodes=True))
    assert inv.version("n1") > v1 + 1 or inv.version("n1") > v1
    assert inv.version("n2") > v2


def test_device_class_change_bumps_every_node() -> None:
    inv = inventory(node("n1"), node("n2"))
    before = (inv.version("n1"), inv.version("n2"))
    inv.apply("DeviceClass", "ADDED", device_class("gpu"))
    assert inv.version("n1") > before[0] and inv.version("n2") > before[1]


def test_claim_allocation_bumps_only_the_node_holding_the_devices() -> None:
    inv = inventory(resource_slice("s1", node_name="n1", devices=[device("d")]),
                    resource_slice("s2", node_name="n2", devices=[device("d")]))
    v1, v2 = inv.version("n1"), inv.version("n2")
    inv.apply("ResourceClaim", "ADDED",
              claim("c", results=[result("r", "gpu.example.com/s1/d")]))
    assert inv.version("n1") > v1
    assert inv.version("n2") == v2


def test_node_state_is_cached_until_the_version_changes() -> None:
    inv = inventory(resource_slice("s1", node_name="n1", devices=[device("d")]))
    first = inv.node_state("n1")
    assert inv.node_state("n1") is first
    inv.apply("ResourceSlice", "MODIFIED", resource_slice("s1", node_name="n1"))
    assert inv.node_state("n1") is not first


def test_pod_and_template_events_do_not_bump_versions() -> None:
    inv = inventory(resource_slice("s1", node_name="n1"))
    before = inv.version("n1")
    inv.apply("Pod", "ADDED", {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}})
    assert inv.version("n1") == before
    assert inv.pod("ns/p") is not None


# ---------------------------------------------------------------- allocated state


def partitionable_slice() -> dict:
    gpu = device("gpu-0")
    gpu["consumesCounters"] = [{"counterSet": "gpu-0-cs", "counters": {"mem": {"value": "40"}}}]
    shared = device("shared-0")
    shared["allowMultipleAllocations"] = True
    shared["capacity"] = {"bw": {"value": "100"}}
    return resource_slice("s1", node_name="n1", devices=[gpu, shared, device("plain")],
                          shared_counters=[{"name": "gpu-0-cs",
                                            "counters": {"mem": {"value": "80"}}}])


def test_allocated_state_from_claims() -> None:
    inv = inventory(partitionable_slice())
    inv.apply("ResourceClaim", "ADDED", claim("c1", results=[
        result("a", "gpu.example.com/s1/gpu-0"),
        result("b", "gpu.example.com/s1/plain", adminAccess=True),
        result("c", "gpu.example.com/s1/shared-0", shareID="u1",
               consumedCapacity={"gpu.example.com/bw": "30"}),
    ]))
    inv.apply("ResourceClaim", "ADDED", claim("c2", results=[
        result("c", "gpu.example.com/s1/shared-0", shareID="u2",
               consumedCapacity={"gpu.example.com/bw": "20"})]))
    state = inv.node_state("n1")
    assert state is not None
    allocated = state.allocated
    assert allocated.devices == {"gpu.example.com/s1/gpu-0"}
    assert allocated.multi_allocated == {"gpu.example.com/s1/shared-0"}
    assert allocated.consumed_capacity["gpu.example.com/s1/shared-0"] == {
        "gpu.example.com/bw": Quantity(50)}
    assert allocated.consumed_counters[("gpu.example.com", "s1")] == {
        ("gpu-0-cs", "mem"): Quantity(40)}
    assert inv.counts().allocated_devices == 2
    inv.apply("ResourceClaim", "DELETED", claim("c1"))
    state = inv.node_state("n1")
    assert state is not None
    assert state.allocated.devices == frozenset()
    assert state.allocated.consumed_counters == {}


def test_counts() -> None:
    inv = inventory(node("n0"), partitionable_slice())
    counts = inv.counts()
    assert (counts.nodes, counts.devices, counts.allocated_devices) == (2, 3, 0)


def test_node_count_follows_nodes_and_their_local_slices_in_any_order() -> None:
    """A node is counted (and named) once whether a Node object, local slices or
    both name it."""
    inv = inventory()
    gpus = resource_slice("s1", node_name="n1", devices=[device("d0")])
    events = [("Node", "ADDED", node("n1")), ("ResourceSlice", "ADDED", gpus),
              ("Node", "DELETED", node("n1")), ("ResourceSlice", "DELETED", gpus),
              ("ResourceSlice", "ADDED", gpus), ("Node", "ADDED", node("n1")),
              ("ResourceSlice", "DELETED", gpus), ("Node", "ADDED", node("n2")),
              ("Node", "DELETED", node("n1"))]
    seen, names = [], []
    for kind, event, obj in events:
        inv.apply(kind, event, obj)
        seen.append(inv.counts().nodes)
        names.append(inv.node_names())
    assert seen == [1, 1, 1, 0, 1, 1, 1, 2, 1]
    assert names == [["n1"]] * 3 + [[]] + [["n1"]] * 3 + [["n1", "n2"], ["n2"]]


def test_device_count_follows_every_change_of_a_pool_counted_before() -> None:
    """`counts` keeps a pool's count between scrapes; each change must drop it."""
    inv = inventory(node("n1"),
                    resource_slice("a", node_name="n1", pool="p", count=2,
                                   devices=[device("d0"), device("d1")]))
    assert inv.counts().devices == 2
    inv.apply("ResourceSlice", "ADDED", resource_slice("b", node_name="n1", pool="p", count=2,
                                                       devices=[device("d2")]))
    assert inv.counts().devices == 3
    inv.node_state("n1")  # the pool's info built after it was counted
    assert inv.counts().devices == 3
    inv.apply("ResourceSlice", "MODIFIED", resource_slice(
        "a", node_name="n1", pool="p", generation=2, devices=[device("d0")]))
    assert inv.counts().devices == 1  # only the newest generation
    inv.apply("ResourceSlice", "DELETED", resource_slice("a", node_name="n1", pool="p",
                                                         generation=2))
    assert inv.counts().devices == 1  # generation 1's "b" again
    inv.replace("ResourceSlice", [resource_slice("c", node_name="n1", pool="q",
                                                 devices=[device("e0")])])
    assert inv.counts().devices == 1
    inv.replace("ResourceSlice", [])
    assert inv.counts().devices == 0


def test_a_list_counts_its_pools_in_its_own_steps_not_at_the_next_scrape(
        monkeypatch: pytest.MonkeyPatch) -> None:
    inv = inventory()
    steps = list(inv.replacing("ResourceSlice", [
        resource_slice(f"s{i}", node_name=f"n{i}", devices=[device("d0"), device("d1")])
        for i in range(3)]))
    assert len(steps) >= 3 * 2
    counted: list[int] = []
    real = objects._newest_device_names
    monkeypatch.setattr(objects, "_newest_device_names",
                        lambda slices: counted.append(1) or real(slices))
    assert inv.counts().devices == 6
    assert counted == []


# ---------------------------------------------------------------- assumed allocations


def allocation(*device_ids: str) -> AllocationResult:
    return AllocationResult(results=tuple(
        DeviceRequestAllocationResult(request="r", driver=i.split("/")[0],
                                      pool=i.split("/")[1], device=i.split("/")[2])
        for i in device_ids))


POD = Pod(namespace="default", name="p", uid="u")


def taken(inv: Inventory, node_name: str = "n1") -> set[str]:
    state = inv.node_state(node_name)
    assert state is not None
    return set(state.allocated.devices)


def test_assumed_allocations_count_until_forgotten() -> None:
    inv = inventory(resource_slice("s1", node_name="n1", devices=[device("d")]))
    before = inv.version("n1")
    inv.assume(pod=POD, allocations=[ClaimAllocation("default/c", allocation(
        "gpu.example.com/s1/d"))], ttl=30)
    assert inv.version("n1") > before
    assert taken(inv) == {"gpu.example.com/s1/d"}
    assert inv.assumed_claims() == ["default/c"]
    inv.forget_assumed(pod=POD)
    assert taken(inv) == set()
    assert inv.assumed_claims() == []


def test_assumed_allocations_expire() -> None:
    clock = Clock()
    inv = inventory(resource_slice("s1", node_name="n1", devices=[device("d")]), clock=clock)
    inv.assume(pod=POD, allocations=[ClaimAllocation("default/c", allocation(
        "gpu.example.com/s1/d"))], ttl=30)
    clock.now += 29
    assert taken(inv) == {"gpu.example.com/s1/d"}
    clock.now += 2
    assert taken(inv) == set()


def test_assumption_is_confirmed_by_the_claim_carrying_the_allocation() -> None:
    inv = inventory(resource_slice("s1", node_name="n1", devices=[device("d")]))
    inv.assume(pod=POD, allocations=[ClaimAllocation("default/c", allocation(
        "gpu.example.com/s1/d"))], ttl=30)
    inv.apply("ResourceClaim", "ADDED", claim("c"))
    assert inv.assumed_claims() == ["default/c"]  # not allocated yet: still held
    inv.apply("ResourceClaim", "MODIFIED",
              claim("c", results=[result("r", "gpu.example.com/s1/d")]))
    assert inv.assumed_claims() == []
    assert taken(inv) == {"gpu.example.com/s1/d"}


# ---------------------------------------------------------------- events and bad input


def test_invalid_object_raises_and_changes_nothing() -> None:
    inv = inventory(resource_slice("s1", node_name="n1", devices=[device("d")]))
    before = inv.version("n1")
    bad = resource_slice("s1", node_name="n1")
    bad["spec"]["devices"] = "not a list"
    with pytest.raises(InvalidObject):
        inv.apply("ResourceSlice", "MODIFIED", bad)
    with pytest.raises(InvalidObject):
        inv.apply("ResourceSlice", "BOGUS", resource_slice("s2", node_name="n1"))
    with pytest.raises(InvalidObject):
        inv.apply("Secret", "ADDED", {"metadata": {"name": "x"}})
    assert device_names(inv, "n1") == ["d"]
    assert inv.version("n1") == before


def test_a_bad_slice_decoded_from_its_json_changes_nothing() -> None:
    inv = inventory(resource_slice("s1", node_name="n1", devices=[device("d", model="a")]))
    before = inv.version("n1")
    bad = resource_slice("s1", node_name="n1", generation=2, devices=[
        device("d", model="b"),
        {"name": "e", "attributes": {"l": {"ints": [1]}}, "capacity": {"m": {"value": "12K"}}}])
    with pytest.raises(InvalidObject, match=r"spec.devices\[1\] \(e\).capacity\[m\]"):
        inv.apply_parsed("ResourceSlice", "MODIFIED", decode_resource_slice(orjson.dumps(bad)))
    assert device_names(inv, "n1") == ["d"]
    assert pool_of(inv, "n1", "s1").devices[0].attributes["gpu.example.com/model"].value == "a"
    assert inv.version("n1") == before


def test_a_slice_update_leaves_the_devices_of_other_slices_as_they_were() -> None:
    inv = Inventory()
    for n in ("n1", "n2"):
        inv.apply_parsed("ResourceSlice", "ADDED", decode_resource_slice(orjson.dumps(
            resource_slice(f"s-{n}", node_name=n, devices=[device("d", model="a", numa=0)]))))
    n2 = pool_of(inv, "n2", "s-n2").devices[0]
    inv.apply_parsed("ResourceSlice", "MODIFIED", decode_resource_slice(orjson.dumps(
        resource_slice("s-n1", node_name="n1", generation=2,
                       devices=[device("d", model="b", numa=0)]))))
    assert pool_of(inv, "n1", "s-n1").devices[0].attributes["gpu.example.com/model"].value == "b"
    after = pool_of(inv, "n2", "s-n2").devices[0]
    assert after is n2 and after.attributes["gpu.example.com/model"].value == "a"


def test_a_deleted_event_of_an_invalid_object_deletes_what_its_metadata_names() -> None:
    inv = inventory(resource_slice("s1", node_name="n1", devices=[device("d")]),
                    claim("c", namespace="ml"))
    bad = resource_slice("s1", node_name="n1")
    bad["spec"]["devices"] = "not a list"
    inv.apply("ResourceSlice", "DELETED", bad)
    assert inv.counts().devices == 0
    bad_claim = claim("c", namespace="ml")
    bad_claim["spec"] = "not a map"
    inv.apply("ResourceClaim", "DELETED", bad_claim)
    assert inv.claim("ml/c") is None
    with pytest.raises(InvalidObject):  # nothing named: nothing to delete
        inv.apply("ResourceSlice", "DELETED", {"metadata": {"name": 5}, "spec": {}})


def test_replace_is_atomic() -> None:
    inv = inventory(node("a"), node("b"))
    bad = node("c")
    bad["metadata"]["labels"] = ["not", "a", "map"]
    with pytest.raises(InvalidObject):
        inv.replace("Node", [node("c"), bad])
    assert inv.node_names() == ["a", "b"]
    inv.replace("Node", [node("b", zone="z"), node("c")])
    assert inv.node_names() == ["b", "c"]


def test_synced_once_every_expected_kind_is_marked() -> None:
    inv = Inventory(expected_kinds=("Node", "ResourceSlice"))
    assert not inv.synced
    inv.mark_synced("Node")
    assert not inv.synced
    inv.mark_synced("ResourceSlice")
    assert inv.synced
    with pytest.raises(ValueError):
        Inventory(expected_kinds=("Secret",))


# ---------------------------------------------------------------- class selectors


def test_class_selector_results_are_cached_per_class_and_device(monkeypatch) -> None:
    import app.inventory.selectors as selectors

    calls: list[str] = []
    real = selectors.SelectorCache._evaluate

    def counting(self, expressions, dev):
        calls.append(dev.name)
        return real(self, expressions, dev)

    monkeypatch.setattr(selectors.SelectorCache, "_evaluate", counting)
    inv = inventory(device_class("gpu", "device.driver == 'gpu.example.com'"),
                    resource_slice("s1", node_name="n1", devices=[device("d")]))
    gpu_class = inv.classes["gpu"]
    dev = pool_of(inv, "n1", "s1").devices[0]
    assert inv.class_matcher(gpu_class, dev) is True
    assert inv.class_matcher(gpu_class, dev) is True
    assert calls == ["d"]
    inv.apply("DeviceClass", "MODIFIED",
              device_class("gpu", "device.driver == 'other.example.com'"))
    assert inv.class_matcher(inv.classes["gpu"], dev) is False
    assert calls == ["d", "d"]


def test_cel_errors_are_remembered_not_raised_by_the_event() -> None:
    from app.cel import CelCompileError, CelEvalError

    inv = inventory(resource_slice("s1", node_name="n1", devices=[device("d")]))
    inv.apply("DeviceClass", "ADDED", device_class("broken", "device.attributes["))
    inv.apply("DeviceClass", "ADDED",
              device_class("missing", "device.attributes['gpu.example.com'].nope == 1"))
    dev = pool_of(inv, "n1", "s1").devices[0]
    with pytest.raises(CelCompileError):
        inv.class_matcher(inv.classes["broken"], dev)
    with pytest.raises(CelEvalError):
        inv.class_matcher(inv.classes["missing"], dev)
    with pytest.raises(CelEvalError):
        inv.class_matcher(inv.classes["missing"], dev)


def test_generated_claims_are_found_by_owner_and_pod_claim_name() -> None:
    generated = claim("p-gpu-x7k2p")
    generated["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
    generated["metadata"]["ownerReferences"] = [
        {"kind": "Pod", "name": "p", "uid": "pod-uid", "controller": True}]
    inv = inventory(generated)
    owner = Pod(namespace="default", name="p", uid="pod-uid")
    found = inv.generated_claim(pod=owner, pod_claim_name="gpu")
    assert found is not None and found.name == "p-gpu-x7k2p"
    assert inv.generated_claim(pod=owner, pod_claim_name="other") is None
    assert inv.generated_claim(pod=Pod(namespace="default", name="p", uid="someone-else"),
                               pod_claim_name="gpu") is None
    inv.apply("ResourceClaim", "DELETED", generated)
    assert inv.generated_claim(pod=owner, pod_claim_name="gpu") is None


def test_resyncs_that_change_nothing_keep_versions_and_caches() -> None:
    inv = inventory(node("n1", zone="a"), device_class("gpu", "device.driver == 'x'"),
                    resource_slice("s1", node_name="n1", devices=[device("d", model="a")]))
    state = inv.node_state("n1")
    before = inv.version("n1")
    resent = [node("n1", zone="a"), device_class("gpu", "device.driver == 'x'"),
              resource_slice("s1", node_name="n1", devices=[device("d", model="a")])]
    for obj in resent:
        obj["metadata"]["resourceVersion"] = "999"
        inv.apply(obj["kind"], "MODIFIED", obj)
    inv.replace("DeviceClass", [resent[1]])
    assert inv.version("n1") == before
    assert inv.node_state("n1") is state
    inv.apply("Node", "MODIFIED", node("n1", zone="b"))
    assert inv.version("n1") > before


def test_changed_since_lists_the_nodes_stamped_after_a_sequence() -> None:
    inv = inventory(node("n1"), node("n2"), node("n3"))
    start = inv.sequence
    assert inv.changed_since(start) == set()
    inv.apply("Node", "MODIFIED", node("n1", a="b"))
    inv.apply("ResourceSlice", "ADDED", resource_slice("s", node_name="n3"))
    middle = inv.sequence
    assert inv.changed_since(start) == {"n1", "n3"}
    inv.apply("DeviceClass", "ADDED", device_class("gpu"))
    assert inv.changed_since(start) is None  # every node can see a class
    assert inv.changed_since(middle) is None
    assert inv.changed_since(inv.sequence) == set()


def test_changed_since_gives_up_on_history_it_no_longer_holds() -> None:
    inv = inventory(node("n1"))
    start = inv.sequence
    for i in range(5000):
        inv.apply("Node", "MODIFIED", node("n1", i=str(i)))
    assert inv.changed_since(start) is None
    assert inv.changed_since(inv.sequence - 1) == {"n1"}


# ---------------------------------------------------------------- relist in steps


def _node_slices(count: int, *, first: int = 0) -> list[dict]:
    return [resource_slice(f"s{i}", node_name=f"n{i}", devices=[device("gpu-0")])
            for i in range(first, first + count)]


def test_a_relist_in_steps_ends_exactly_as_the_list() -> None:
    inv = inventory(*_node_slices(10))
    steps = list(inv.replacing("ResourceSlice", _node_slices(10, first=5), step=4))
    assert len(steps) > 3  # it yields while parsing, deleting and upserting
    assert inv.node_names() == sorted(f"n{i}" for i in range(5, 15))
    assert device_names(inv, "n14") == ["gpu-0"] and inv.node_state("n0") is None


def test_a_bad_object_in_a_stepwise_relist_changes_nothing() -> None:
    inv = inventory(*_node_slices(3))
    bad = {"kind": "ResourceSlice", "metadata": {"name": "bad"}, "spec": {}}
    steps = inv.replacing("ResourceSlice", [*_node_slices(5, first=3), bad], step=1)
    with pytest.raises(InvalidObject):
        for _ in steps:
            pass
    assert inv.node_names() == ["n0", "n1", "n2"]
