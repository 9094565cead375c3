"""The signature shortcut: nodes with the same device state share one allocator
run, nodes that differ do not, and sharing never changes an answer."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import app.extender.answers as answers
from app.allocator import AllocatedState, allocate
from app.extender import Extender
from app.extender import signature as signature_module
from app.extender.signature import MatchColumns, StaticSignatures
from app.features import FeatureGates
from app.inventory import Inventory
from app.model import Pod
from app.topology import TopologyConfig, make_objective, priority
from tests.extender.cluster import (
    GPU_CLASS,
    MIG_CLASS,
    NIC_CLASS,
    ROOT,
    SHARED_CLASS,
    extender,
    gpu_node,
    load,
    mig_node,
    shared_node,
    the_pod,
)
from tests.inventory.objects import claim, device_class, exactly, pod, result


def count_allocator_runs(monkeypatch: Any) -> list[str]:
    runs: list[str] = []
    real = answers.allocate

    def counting(claims, **kwargs):
        runs.append(kwargs["node_view"].node.name)
        return real(claims, **kwargs)

    monkeypatch.setattr(answers, "allocate", counting)
    return runs


SAME_ROOT = claim("c", requests=[exactly("gpu", "gpu", count=2), exactly("nic", "nic")],
                  constraints=[{"requests": ["gpu", "nic"], "matchAttribute": ROOT}])


def test_identical_nodes_share_one_run_and_get_their_own_devices(monkeypatch) -> None:
    nodes = [gpu_node(f"n{i}", roots=["a", "a", "b", "b"], nic_roots=["a", "b"])
             for i in range(20)]
    inv = load(GPU_CLASS, NIC_CLASS, *nodes, SAME_ROOT, pod("p", claims={"c": "c"}))
    runs = count_allocator_runs(monkeypatch)
    names = [f"n{i}" for i in range(20)]
    evaluations = extender(inv).evaluate(the_pod(inv), names)
    assert runs == ["n0"]
    for ev in evaluations:
        assert ev.feasible
        results = ev.claims[0].allocation.results
        assert {r.pool for r in results} == {ev.node}
        selector = ev.claims[0].allocation.node_selector
        assert selector is not None
        assert selector.terms[0].match_fields[0].values == (ev.node,)


def test_a_repeated_cycle_only_looks_up_versions(monkeypatch) -> None:
    nodes = [gpu_node(f"n{i}", nic_roots=["r0"]) for i in range(5)]
    inv = load(GPU_CLASS, NIC_CLASS, *nodes, SAME_ROOT, pod("p", claims={"c": "c"}))
    ext = extender(inv)
    names = [f"n{i}" for i in range(5)]
    ext.filter(the_pod(inv), names)
    runs = count_allocator_runs(monkeypatch)
    ext.filter(the_pod(inv), names)
    ext.prioritize(the_pod(inv), names)
    assert runs == []
    inv.apply("ResourceClaim", "ADDED", claim("x", results=[
        result("gpu", "gpu.example.com/n3/gpu-2")]))
    ext.filter(the_pod(inv), names)
    assert runs == ["n3"]


def test_a_representative_goes_with_its_nodes_old_snapshot() -> None:
    import weakref

    nodes = [gpu_node(f"n{i}", nic_roots=["r0"]) for i in range(3)]
    inv = load(GPU_CLASS, NIC_CLASS, *nodes, SAME_ROOT, pod("p", claims={"c": "c"}))
    ext = extender(inv)
    names = [f"n{i}" for i in range(3)]
    ext.filter(the_pod(inv), names)
    first = inv.node_state("n0")
    assert first is not None
    old = weakref.ref(first)
    del first
    inv.apply("ResourceClaim", "ADDED", claim("x", results=[
        result("gpu", "gpu.example.com/n0/gpu-2")]))
    assert ext.filter(the_pod(inv), names).passed == names
    assert old() is None


def test_nodes_with_different_free_state_get_different_answers() -> None:
    inv = load(GPU_CLASS, NIC_CLASS, gpu_node("n1", nic_roots=["r0", "r1"]),
               gpu_node("n2", nic_roots=["r0", "r1"]),
               claim("x", results=[result("gpu", "gpu.example.com/n2/gpu-0")]),
               SAME_ROOT, pod("p", claims={"c": "c"}))
    one, two = extender(inv).evaluate(the_pod(inv), ["n1", "n2"])
    assert [r.device for r in one.claims[0].allocation.results] == ["gpu-0", "gpu-1", "nic-0"]
    assert [r.device for r in two.claims[0].allocation.results] == ["gpu-2", "gpu-3", "nic-1"]


def test_pods_from_the_same_template_share_cached_answers(monkeypatch) -> None:
    inv = load(GPU_CLASS, NIC_CLASS, gpu_node("n1", nic_roots=["r0"]),
               claim("c1", requests=[exactly("gpu", "gpu", count=2)]),
               claim("c2", requests=[exactly("gpu", "gpu", count=2)]),
               pod("p1", claims={"c": "c1"}), pod("p2", claims={"c": "c2"}))
    ext = extender(inv)
    first = ext.evaluate(the_pod(inv, "default/p1"), ["n1"])[0]
    runs = count_allocator_runs(monkeypatch)
    second = ext.evaluate(the_pod(inv, "default/p2"), ["n1"])[0]
    assert runs == []
    assert first.claims[0].claim_key == "default/c1"
    assert second.claims[0].claim_key == "default/c2"


# ---------------------------------------------------------------- property


# Few choices per node, so that nodes often share a signature (the shortcut is
# exercised) while still differing in ways that must keep them apart.
# Each node is a copy of one base configuration, or differs from it in one
# dimension: nodes often share a signature (the shortcut is exercised) while the
# ones that differ must be kept apart.
NODE_CHOICES: dict[str, list[Any]] = {
    "gpus": [("pci0000:15", "pci0000:15", "pci0000:37", "pci0000:37"),
             ("pci0000:15", "PCI0000:15"), ("pci0000:37",)],
    "nics": [(), ("pci0000:15",), ("pci0000:37", "pci0000:15")],
    "taken": [(), (0,), (-1,)],
    "mig_taken": [(), ("mig-1g-0",), ("mig-4g-0",), ("mig-2g-1",)],
    "shares": [(), (5,), (2, 7)],
}


@st.composite
def node_configs(draw: Any) -> list[dict[str, Any]]:
    base = {k: draw(st.sampled_from(v)) for k, v in NODE_CHOICES.items()}
    configs = []
    for _ in range(draw(st.integers(2, 8))):
        config = dict(base)
        dimension = draw(st.sampled_from([None, *NODE_CHOICES]))
        if dimension is not None:
            config[dimension] = draw(st.sampled_from(NODE_CHOICES[dimension]))
        configs.append(config)
    return configs


@st.composite
def clusters(draw: Any) -> tuple[list[Any], list[str]]:
    objs: list[Any] = [GPU_CLASS, NIC_CLASS]
    partitions = draw(st.booleans())
    if partitions:
        objs.extend([MIG_CLASS, SHARED_CLASS])
    names = []
    for i, config in enumerate(draw(node_configs())):
        name = f"node-{i}"
        names.append(name)
        roots = config["gpus"]
        objs.append(gpu_node(name, roots=roots, nic_roots=config["nics"]))
        results = [result("gpu", f"gpu.example.com/{name}/gpu-{j % len(roots)}")
                   for j in config["taken"]]
        if partitions:
            objs.extend(_partitions_and_shares(name))
            results += [result("mig", f"mig.example.com/{name}/{part}")
                        for part in config["mig_taken"]]
            results += [result("s", f"share.example.com/{name}/shared-gpu", shareID=f"s{i}-{j}",
                               consumedCapacity={"share.example.com/memory": str(amount)})
                        for j, amount in enumerate(config["shares"])]
        if results:
            objs.append(claim(f"held-{i}", results=results))
    count = draw(st.integers(1, 3))
    requests = [exactly("gpu", "gpu", count=count)]
    constraints: list[dict[str, Any]] = []
    if draw(st.booleans()):
        requests.append(exactly("nic", "nic"))
    if draw(st.booleans()):
        constraints.append({"matchAttribute": ROOT})
    if draw(st.booleans()):
        requests[0]["exactly"]["selectors"] = [
            {"cel": {"expression": "device.attributes['gpu.example.com'].index != 1"}}]
    if partitions:
        requests.append(draw(st.sampled_from([
            exactly("mig", "mig", count=2),
            exactly("mig", "mig", selectors=("device.attributes['mig.example.com'].size >= 2",)),
            exactly("s", "shared", capacity={"requests": {"memory": "3"}}),
            exactly("s", "shared", count=2)])))
    objs.append(claim("c", requests=requests, constraints=constraints))
    objs.append(pod("p", claims={"c": "c"}))
    return objs, names


def _partitions_and_shares(name: str) -> list[Any]:
    """MIG-style partitions sharing one counter set, and a multi-allocatable GPU."""
    mig = mig_node(name)
    for d in mig["spec"]["devices"]:
        d["attributes"] = {"size": {"int": int(d["name"][4])}}
    return [mig, shared_node(name)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.sampled_from(["allocator", "advisor"]))
def test_signature_shortcut_gives_the_same_answer_as_every_node(case, mode) -> None:
    objs, names = case
    inv = load(*objs)
    shared = extender(inv, mode=mode).evaluate(the_pod(inv), names)
    claims = [c for c in [inv.claim("default/c")] if c is not None]
    config = TopologyConfig()
    for ev in shared:
        state = inv.node_state(ev.node)
        assert state is not None
        direct = allocate(claims, node_view=state.view, classes=inv.classes,
                          allocated=state.allocated, features=FeatureGates(),
                          class_matcher=inv.class_matcher,
                          selector_matches=inv.selectors.selector_matches,
                          objective=make_objective(node_view=state.view,
                                                   allocated=state.allocated,
                                                   config=config, mode=mode))
        assert ev.feasible == direct.feasible, ev.node
        assert ev.error == direct.error
        if direct.feasible:
            assert ev.score == priority(direct.score)
            assert [_without_share_ids(ca.allocation.results) for ca in ev.claims] == [
                _without_share_ids(ca.allocation.results) for ca in direct.claims]
            assert [ca.allocation.node_selector for ca in ev.claims] == [
                ca.allocation.node_selector for ca in direct.claims]
        else:
            assert ev.reason == direct.reason
            if direct.error is None:
                empty = allocate(claims, node_view=state.view, classes=inv.classes,
                                 allocated=AllocatedState(), features=FeatureGates(),
                                 class_matcher=inv.class_matcher,
                                 selector_matches=inv.selectors.selector_matches)
                assert ev.unresolvable == (not empty.feasible), ev.node


def count_cel_evaluations(monkeypatch: Any) -> list[str]:
    import app.inventory.selectors as selectors

    calls: list[str] = []
    real = selectors.SelectorCache._evaluate

    def counting(self, expressions, device):
        calls.append(device.id)
        return real(self, expressions, device)

    monkeypatch.setattr(selectors.SelectorCache, "_evaluate", counting)
    return calls


def test_warming_leaves_no_work_for_the_first_filter(monkeypatch) -> None:
    from tests.inventory.objects import template

    selector = "device.attributes['gpu.example.com'].index >= 0"
    nodes = [gpu_node(f"n{i}", nic_roots=["r0"]) for i in range(4)]
    inv = load(GPU_CLASS, NIC_CLASS, *nodes,
               template("t", requests=[exactly("gpu", "gpu", selectors=(selector,))]),
               pod("p", templates={"c": "t"}))
    ext = extender(inv, file_mode=True)
    steps = 0
    while ext.warm(budget_seconds=0):
        steps += 1
    assert steps >= 4  # one node per slice of work at least
    assert ext.warm() is False  # nothing changed since
    calls = count_cel_evaluations(monkeypatch)
    runs = count_allocator_runs(monkeypatch)
    assert ext.filter(the_pod(inv), [f"n{i}" for i in range(4)]).passed == [
        "n0", "n1", "n2", "n3"]
    assert calls == []
    assert runs == []  # the template's answers were computed while warming
    [evaluation] = ext.evaluate(the_pod(inv), ["n2"])
    assert [ca.claim_key for ca in evaluation.claims] == ["default/p-c"]
    matched = count_shared_matches(monkeypatch)
    inv.apply("DeviceClass", "MODIFIED", GPU_CLASS | {"metadata": {"name": "gpu",
                                                                   "generation": 2}})
    assert ext.warm(budget_seconds=10) is False
    # per node: the changed class on each device (4 GPUs + 1 NIC); the
    # template's selector reads nothing the class change touched, and its
    # column is known for nodes of this hardware
    assert len(matched) == 4 * 5
    assert ext.filter(the_pod(inv), [f"n{i}" for i in range(4)]).passed == [
        "n0", "n1", "n2", "n3"]
    assert len(matched) == 4 * 5  # the filter found the matches warming made


def count_shared_matches(monkeypatch: Any, *, class_read: list[bool] | None = None
                         ) -> list[str]:
    import app.inventory.selectors as selectors

    calls: list[str] = []
    real = selectors.SelectorCache.matches_shared

    def counting(self, device_class, expressions, device, *, class_holds=False):
        calls.append(device.id)
        if class_read is not None:
            class_read.append(not class_holds)
        return real(self, device_class, expressions, device, class_holds=class_holds)

    monkeypatch.setattr(selectors.SelectorCache, "matches_shared", counting)
    return calls


def test_a_new_kind_of_a_known_class_asks_only_the_devices_the_class_accepts(
        monkeypatch) -> None:
    """Every new claim shape is a new request kind; its column starts from the
    class's own, so the class is not read again and NICs are not asked."""
    inv = load(GPU_CLASS, NIC_CLASS, gpu_node("n0", nic_roots=["r0"]))
    view = inv.node_state("n0").view
    columns = MatchColumns()

    def signature(*kinds: tuple[str, tuple[str, ...]]) -> Any:
        return columns.signature(view, kinds, classes=inv.classes,
                                 matcher=inv.selectors.matches_shared)

    signature(("gpu", ()))
    class_read: list[bool] = []
    asked = count_shared_matches(monkeypatch, class_read=class_read)
    low = "device.attributes['gpu.example.com'].index < 2"
    wide = signature(("gpu", ()), ("gpu", (low,)))
    assert sorted(asked) == [f"gpu.example.com/n0/gpu-{i}" for i in range(4)]
    assert class_read == [False] * 4
    fresh = MatchColumns().signature(view, (("gpu", ()), ("gpu", (low,))),
                                     classes=inv.classes, matcher=inv.selectors.matches_shared)
    assert wide == fresh  # the same columns as asked from nothing


def _columns_over(inv: Any, names: list[str], kinds: tuple[Any, ...],
                  columns: MatchColumns) -> list[Any]:
    static = StaticSignatures()
    out = []
    for name in names:
        state = inv.node_state(name)
        out.append(columns.signature(state.view, kinds, classes=inv.classes,
                                     matcher=inv.selectors.matches_shared,
                                     hardware=static.of(state).hardware))
    return out


def test_a_new_kind_asks_each_kind_of_hardware_once_not_each_node(monkeypatch) -> None:
    """Ten nodes of the same hardware (uuids differ, the selector does not read
    them): the new kind's selectors are asked of one node's GPUs, and every
    node gets the column it would get on its own."""
    names = [f"n{i}" for i in range(10)]
    inv = load(GPU_CLASS, NIC_CLASS, *(gpu_node(n, nic_roots=["r0"]) for n in names))
    columns = MatchColumns()
    _columns_over(inv, names, (("gpu", ()),), columns)
    asked = count_shared_matches(monkeypatch)
    kinds = (("gpu", ()), ("gpu", ("device.attributes['gpu.example.com'].index < 2",)))
    shared = _columns_over(inv, names, kinds, columns)
    assert sorted(asked) == [f"gpu.example.com/n0/gpu-{i}" for i in range(4)]
    alone = [MatchColumns().signature(inv.node_state(n).view, kinds, classes=inv.classes,
                                      matcher=inv.selectors.matches_shared) for n in names]
    assert shared == alone


def test_a_kind_reading_identity_attributes_is_asked_on_every_node(monkeypatch) -> None:
    """A selector that reads the uuid sees different values on every node: no
    column is shared, and only the one GPU it names matches."""
    names = [f"n{i}" for i in range(4)]
    inv = load(GPU_CLASS, *(gpu_node(n) for n in names))
    columns = MatchColumns()
    _columns_over(inv, names, (("gpu", ()),), columns)
    asked = count_shared_matches(monkeypatch)
    kind = ("gpu", ("device.attributes['gpu.example.com'].uuid == 'GPU-n2-1'",))
    _columns_over(inv, names, (kind,), columns)
    assert len(asked) == 16
    matched = [(n, i) for n in names for i, hit in enumerate(
        columns.known(inv.node_state(n).view)(inv.classes["gpu"], kind[1])) if hit is True]
    assert matched == [("n2", 1)]


def test_the_selectors_whose_reads_are_remembered_are_bounded(monkeypatch) -> None:
    """Per-pod selectors never repeat: what they read is remembered up to a
    bound, and the columns stay what they are without it."""
    monkeypatch.setattr(signature_module, "_SELECTOR_READS", 3)
    names = [f"n{i}" for i in range(2)]
    inv = load(GPU_CLASS, *(gpu_node(n) for n in names))
    columns = MatchColumns()
    for i in range(10):
        kinds = (("gpu", (f"device.attributes['gpu.example.com'].index < {i}",)),)
        shared = _columns_over(inv, names, kinds, columns)
        assert len(columns._reads) <= 3
        alone = [MatchColumns().signature(inv.node_state(n).view, kinds, classes=inv.classes,
                                          matcher=inv.selectors.matches_shared)
                 for n in names]
        assert shared == alone


def test_a_node_view_found_current_is_not_compared_again(monkeypatch) -> None:
    """Every filter reads each candidate's columns; a view already found to
    hold the Node and slices they were built from is not compared again."""
    inv = load(GPU_CLASS, gpu_node("n0"))
    columns = MatchColumns()
    kinds = (("gpu", ()),)
    first = inv.node_state("n0").view
    columns.signature(first, kinds, classes=inv.classes, matcher=inv.selectors.matches_shared)
    compared: list[int] = []
    real = signature_module._same_slices

    def counting(a: Any, b: Any) -> bool:
        compared.append(1)
        return bool(real(a, b))

    monkeypatch.setattr(signature_module, "_same_slices", counting)
    later = replace(first, version=first.version + 1)  # a bind: same Node, same slices
    for view in (later, later, later):
        assert columns.signature(view, kinds, classes=inv.classes,
                                 matcher=inv.selectors.matches_shared) is not None
    assert len(compared) == 1


async def test_keep_warm_runs_in_the_background() -> None:
    import asyncio

    inv = load(GPU_CLASS, gpu_node("n0"))
    ext = extender(inv)
    task = asyncio.create_task(ext.keep_warm(slice_seconds=0.001, idle_seconds=0.01))
    await asyncio.sleep(0.05)
    task.cancel()
    assert ext.warm() is False


async def first_of_two_bound_to_n1() -> tuple[Inventory, Extender, list[str], Pod]:
    """Three GPU nodes and two pods of one shape, the first filtered and bound
    to n1: (inventory, extender, node names, the second pod)."""
    inv = load(GPU_CLASS, *[gpu_node(f"n{i}") for i in range(3)],
               *[claim(f"c{i}", requests=[exactly("gpu", "gpu", count=2)]) for i in range(2)],
               *[pod(f"p{i}", claims={"c": f"c{i}"}) for i in range(2)])
    ext = extender(inv, file_mode=True)
    names = [f"n{i}" for i in range(3)]
    first, second = the_pod(inv, "default/p0"), the_pod(inv, "default/p1")
    assert ext.filter(first, names).passed == names
    assert await ext.bind(namespace="default", name="p0", uid=first.uid, node="n1") is None
    return inv, ext, names, second


async def test_after_a_bind_the_next_pod_of_the_shape_finds_the_bound_node_answered(
        monkeypatch) -> None:
    import asyncio

    inv, ext, names, second = await first_of_two_bound_to_n1()
    await asyncio.sleep(0.01)
    runs = count_allocator_runs(monkeypatch)
    answer = ext.prioritize(second, names)
    assert runs == []  # nothing left for the second pod's cycle to compute
    assert answer == extender(inv, file_mode=True).prioritize(second, names)
    assert runs != []  # the fresh extender did compute


async def test_no_catch_up_after_a_bind_once_the_next_request_has_arrived(
        monkeypatch) -> None:
    import asyncio

    _, ext, names, second = await first_of_two_bound_to_n1()
    ext.note_request()  # the next request arrived before the catch-up's turn
    await asyncio.sleep(0.01)
    runs = count_allocator_runs(monkeypatch)
    ext.prioritize(second, names)
    assert runs == ["n1"]  # the request refreshed the bound node itself


async def test_keep_warm_waits_while_verbs_are_being_called() -> None:
    import asyncio

    inv = load(GPU_CLASS, gpu_node("n0"), pod("p", claims={"c": "c"}),
               claim("c", requests=[exactly("gpu", "gpu")]))
    ext = extender(inv)
    ext.prioritize(the_pod(inv), [])
    task = asyncio.create_task(ext.keep_warm(slice_seconds=0.001, quiet_seconds=60))
    await asyncio.sleep(0.05)
    task.cancel()
    assert ext.warm(budget_seconds=0) is True  # the pass had not started


async def test_keep_warm_reports_settling_after_full_passes_only() -> None:
    import asyncio

    inv = load(GPU_CLASS, gpu_node("n0"), gpu_node("n1"))
    ext = extender(inv)
    settled: list[int] = []
    task = asyncio.create_task(ext.keep_warm(slice_seconds=0.001, idle_seconds=0.01,
                                             on_settled=lambda: settled.append(inv.sequence)))
    await asyncio.sleep(0.05)
    assert len(settled) == 1
    inv.apply("ResourceClaim", "ADDED", claim("x", results=[
        result("gpu", "gpu.example.com/n1/gpu-0")]))
    await asyncio.sleep(0.05)
    assert len(settled) == 1  # one node changed: no full pass
    inv.apply("DeviceClass", "MODIFIED",
              device_class("gpu", "device.driver == 'gpu.example.com' && true"))
    await asyncio.sleep(0.05)
    task.cancel()
    assert len(settled) == 2


async def test_keep_warm_reports_progress_during_a_long_pass_and_none_when_idle() -> None:
    import asyncio

    inv = load(GPU_CLASS, *[gpu_node(f"n{i}") for i in range(200)],
               claim("a", requests=[exactly("gpu", "gpu")]))
    ext = extender(inv)
    progress: list[int] = []
    settled: list[int] = []
    task = asyncio.create_task(ext.keep_warm(
        slice_seconds=0.001, idle_seconds=0.01, progress_seconds=0.002,
        on_settled=lambda: settled.append(len(progress)),
        on_progress=lambda: progress.append(ext.stats.warming_backlog)))
    for _ in range(500):
        if settled:
            break
        await asyncio.sleep(0.01)
    reported = len(progress)
    await asyncio.sleep(0.1)
    task.cancel()
    assert settled and settled[0] >= 1  # reported before the pass was over
    assert any(backlog > 0 for backlog in progress)
    assert len(progress) == reported  # nothing to warm: nothing reported


async def test_a_shape_whose_last_claim_was_allocated_needs_no_pass_over_every_node(
        ) -> None:
    import asyncio

    one, two = [exactly("gpu", "gpu")], [exactly("gpu", "gpu", count=2)]
    inv = load(GPU_CLASS, gpu_node("n0"), gpu_node("n1"), claim("a", requests=one),
               claim("b", requests=two))
    ext = extender(inv)
    settled: list[int] = []
    task = asyncio.create_task(ext.keep_warm(slice_seconds=0.001, idle_seconds=0.01,
                                             on_settled=lambda: settled.append(inv.sequence)))
    await asyncio.sleep(0.05)
    assert len(settled) == 1
    inv.apply("ResourceClaim", "MODIFIED", claim("b", requests=two, results=[
        result("gpu", "gpu.example.com/n1/gpu-0"), result("gpu", "gpu.example.com/n1/gpu-1")]))
    await asyncio.sleep(0.05)
    task.cancel()
    assert len(settled) == 1  # shape b is gone: only n1 was visited


def test_a_changed_node_is_recomputed_once_by_the_next_request_not_by_warming(
        monkeypatch) -> None:
    from tests.inventory.objects import template

    inv = load(GPU_CLASS, *[gpu_node(f"n{i}") for i in range(4)],
               template("t", requests=[exactly("gpu", "gpu", count=2)]),
               pod("p", templates={"c": "t"}))
    ext = extender(inv, file_mode=True)
    while ext.warm(budget_seconds=10):
        pass
    runs = count_allocator_runs(monkeypatch)
    for device in ("gpu-0", "gpu-1"):
        inv.apply("ResourceClaim", "ADDED", claim(f"x-{device}", results=[
            result("gpu", f"gpu.example.com/n2/{device}")]))
        while ext.warm(budget_seconds=10):
            pass
    assert runs == []
    names = [f"n{i}" for i in range(4)]
    ext.filter(inv.pod("default/p"), names)
    assert runs == ["n2"]
    ext.filter(inv.pod("default/p"), names)
    assert runs == ["n2"]


def test_a_changed_node_is_recomputed_when_it_is_next_a_candidate(monkeypatch) -> None:
    """The scheduler offers each pod a share of the nodes: a node changed
    since the shape's last call is recomputed by the first filter or
    prioritize that asks about it, not by one over other nodes, and the
    answer it gives then is the changed node's."""
    inv = load(GPU_CLASS, *[gpu_node(f"n{i}") for i in range(4)],
               claim("c", requests=[exactly("gpu", "gpu", count=3)]),
               pod("p", claims={"c": "c"}))
    ext = extender(inv, file_mode=True)
    names = [f"n{i}" for i in range(4)]
    assert ext.filter(inv.pod("default/p"), names).passed == names
    runs = count_allocator_runs(monkeypatch)
    inv.apply("ResourceClaim", "ADDED", claim("x", results=[
        result("gpu", "gpu.example.com/n2/gpu-0"), result("gpu", "gpu.example.com/n2/gpu-1")]))
    assert ext.filter(inv.pod("default/p"), ["n0", "n1"]).passed == ["n0", "n1"]
    ext.prioritize(inv.pod("default/p"), ["n0", "n1"])
    assert runs == []
    result_ = ext.filter(inv.pod("default/p"), ["n1", "n2", "n3"])
    assert result_.passed == ["n1", "n3"] and "n2" in result_.failed
    assert set(runs) == {"n2"}  # its search, and on n2 emptied (may preemption help?)
    asked = len(runs)
    ext.filter(inv.pod("default/p"), names)
    assert len(runs) == asked


def test_the_first_filter_after_warming_reads_only_what_changed(monkeypatch) -> None:
    """Warming answers every node before any verb asks: the first filter of a
    shape then looks up the nodes changed since its answers began, not every
    node's version (at 100,000 nodes, tens of milliseconds once per shape)."""
    from app.inventory import Inventory

    inv = load(GPU_CLASS, *[gpu_node(f"n{i}") for i in range(4)],
               claim("c", requests=[exactly("gpu", "gpu", count=3)]),
               pod("p", claims={"c": "c"}))
    ext = extender(inv, file_mode=True)
    while ext.warm(budget_seconds=10):
        pass
    inv.apply("ResourceClaim", "ADDED", claim("x", results=[
        result("gpu", "gpu.example.com/n2/gpu-0"), result("gpu", "gpu.example.com/n2/gpu-1")]))
    looked_up: list[str] = []
    real = Inventory.versions
    monkeypatch.setattr(Inventory, "versions", lambda self, names: (
        looked_up.extend(names), real(self, names))[1])
    runs = count_allocator_runs(monkeypatch)
    names = [f"n{i}" for i in range(4)]
    assert ext.filter(inv.pod("default/p"), names).passed == ["n0", "n1", "n3"]
    assert looked_up == []
    assert set(runs) == {"n2"}


def test_a_changed_node_is_recomputed_by_the_prioritize_that_asks_about_it(
        monkeypatch) -> None:
    inv = load(GPU_CLASS, *[gpu_node(f"n{i}", roots=("r0", "r0", "r0", "r0")) for i in range(2)],
               claim("c", requests=[exactly("gpu", "gpu", count=2)]),
               pod("p", claims={"c": "c"}))
    ext = extender(inv, file_mode=True)
    names = ["n0", "n1"]
    before = dict(ext.prioritize(inv.pod("default/p"), names))
    runs = count_allocator_runs(monkeypatch)
    inv.apply("ResourceClaim", "ADDED", claim("x", results=[
        result("gpu", "gpu.example.com/n1/gpu-0")]))
    after = dict(ext.prioritize(inv.pod("default/p"), names))
    assert runs == ["n1"]
    assert after == dict(extender(inv, file_mode=True).prioritize(inv.pod("default/p"), names))
    assert after["n0"] == before["n0"] and after["n1"] != before["n1"]


def test_recomputing_a_changed_node_reads_its_match_columns(monkeypatch) -> None:
    import app.inventory.selectors as selectors

    selector = "device.attributes['gpu.example.com'].index >= 0"
    inv = load(GPU_CLASS, *[gpu_node(f"n{i}") for i in range(4)],
               claim("c", requests=[exactly("gpu", "gpu", count=2, selectors=(selector,))]),
               pod("p", claims={"c": "c"}))
    ext = extender(inv, file_mode=True)
    while ext.warm(budget_seconds=10):
        pass
    asked: list[str] = []
    for name in ("class_matches", "selector_matches", "matches_shared"):
        real = getattr(selectors.SelectorCache, name)
        monkeypatch.setattr(selectors.SelectorCache, name,
                            lambda self, *args, real=real, name=name: (
                                asked.append(name), real(self, *args))[1])
    runs = count_allocator_runs(monkeypatch)
    inv.apply("ResourceClaim", "ADDED", claim("x", results=[
        result("gpu", "gpu.example.com/n2/gpu-0")]))
    names = [f"n{i}" for i in range(4)]
    assert ext.filter(inv.pod("default/p"), names).passed == names
    assert runs == ["n2"]
    assert asked == []  # the search read the columns the signature had


def _without_share_ids(results: Any) -> list[Any]:
    """Share IDs are fresh UUIDs per allocation; only whether there is one matters."""
    return [replace(r, share_id=r.share_id is not None) for r in results]


def test_a_changed_slice_changes_the_answer_of_its_node_only() -> None:
    inv = load(GPU_CLASS, NIC_CLASS, gpu_node("n0", nic_roots=["r0"]),
               gpu_node("n1", nic_roots=["r0"]), SAME_ROOT, pod("p", claims={"c": "c"}))
    ext = extender(inv)
    assert ext.filter(the_pod(inv), ["n0", "n1"]).passed == ["n0", "n1"]
    for obj in gpu_node("n1", roots=["r0", "r1", "r2", "r3"], nic_roots=["r0"]):
        inv.apply(obj["kind"], "MODIFIED", obj)
    result_ = ext.filter(the_pod(inv), ["n0", "n1"])
    assert result_.passed == ["n0"]
    assert "n1" in result_.unresolvable
    inv.apply("Node", "ADDED", {"kind": "Node", "metadata": {"name": "n1",
                                                            "labels": {"x": "y"}}})
    assert ext.filter(the_pod(inv), ["n0", "n1"]).passed == ["n0"]
