"""filter and prioritize sort their candidates with C-level passes over the
answers and word each distinct failure once; prioritize right after a filter
over the nodes it passed reads the filter's scores. Their answers must be,
byte for byte, what a step per node gives: the reference below is that walk,
run on an extender of its own over the same inventory."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from app.allocator.types import Rejection
from app.extender import Extender, FilterResult
from app.extender.answers import Verdict
from app.model import Pod
from app.server import wire
from app.server.app import ExtenderEdge
from app.server.metrics import ServerMetrics
from tests.extender.cluster import GPU_CLASS, extender, gpu_node, load, the_pod
from tests.inventory.objects import claim, device, exactly, pod, resource_slice, result

MODEL = "device.attributes['gpu.example.com'].model == 'a100'"
SHAPES: dict[str, list[dict[str, Any]]] = {
    "two": [exactly("gpu", "gpu", count=2)],
    "one": [exactly("gpu", "gpu")],
    # an error on nodes whose GPUs have no model attribute, a fit or misfit elsewhere
    "model": [exactly("gpu", "gpu", selectors=(MODEL,))],
}
NODE_KINDS = ("four", "one", "model", "none")


def _model_node(name: str) -> dict[str, Any]:
    return resource_slice(f"{name}-gpus", node_name=name, pool=name, devices=[
        device(f"gpu-{i}", uuid=f"GPU-{name}-{i}", model="a100") for i in range(2)])


def _node(name: str, kind: str) -> list[dict[str, Any]]:
    if kind == "four":
        return gpu_node(name)
    if kind == "one":
        return gpu_node(name, roots=["r0"])
    if kind == "model":
        return [_model_node(name)]
    return []  # a node drax does not know


def _reference_filter(ext: Extender, pod_: Pod, node_names: list[str]) -> FilterResult:
    """The filter as a step per candidate name."""
    result_ = FilterResult(passed=[], failed={}, unresolvable={})
    with ext.inventory.holds_lifted_for(pod_):
        judged = ext._judge(pod_, node_names)
        if isinstance(judged, Verdict):
            if judged.feasible:
                result_.passed.extend(node_names)
            else:
                result_.unresolvable.update(dict.fromkeys(node_names, judged.reason or ""))
                if node_names:
                    result_.rejections[judged.rejection or Rejection.OTHER] = len(node_names)
            return result_
        answers, words, request = judged
        for name in node_names:
            if answers.needs(name):
                ext.book.refresh(request, answers, name)
            verdict = answers.verdicts[name][1]
            if verdict.feasible:
                result_.passed.append(name)
                continue
            rejection = verdict.rejection or Rejection.OTHER
            result_.rejections[rejection] = result_.rejections.get(rejection, 0) + 1
            reason, error = words(verdict)
            if error is not None:
                result_.unresolvable[name] = f"error: {error}"
                if result_.error is None:
                    result_.error = f"node {name}: {error}"
            elif verdict.unresolvable:
                result_.unresolvable[name] = reason or "cannot allocate all claims"
            else:
                result_.failed[name] = reason or "cannot allocate all claims"
    return result_


def _reference_prioritize(ext: Extender, pod_: Pod, node_names: list[str]
                          ) -> list[tuple[str, int]]:
    """Prioritize as a step per candidate name."""
    with ext.inventory.holds_lifted_for(pod_):
        judged = ext._judge(pod_, node_names)
        if isinstance(judged, Verdict):
            return [(n, judged.priority) for n in node_names] if judged.priority else []
        answers, _, request = judged
        scores = []
        for name in node_names:
            if answers.needs(name):
                ext.book.refresh(request, answers, name)
            verdict = answers.verdicts[name][1]
            if verdict.feasible and verdict.priority:
                scores.append((name, verdict.priority))
        return scores


def _encoded(result_: FilterResult) -> bytes:
    args = wire.ExtenderArgs(pod=None, node_names=[])  # type: ignore[arg-type]
    return wire.encode(wire.filter_result(args, passed=result_.passed, failed=result_.failed,
                                          unresolvable=result_.unresolvable,
                                          error=result_.error))


def _cluster(kinds: list[str], shapes: list[str]) -> list[Any]:
    objs: list[Any] = [GPU_CLASS]
    for i, kind in enumerate(kinds):
        objs += _node(f"n{i}", kind)
    elsewhere = {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n0"]}]}]}
    for i, shape in enumerate(shapes):
        if shape == "elsewhere":  # allocated on n0: every other node is refused, by name
            objs.append(claim(f"c{i}", requests=SHAPES["one"],
                              results=[result("gpu", "gpu.example.com/n0/gpu-0")],
                              node_selector=elsewhere))
        else:
            objs.append(claim(f"c{i}", requests=SHAPES[shape]))
        objs.append(pod(f"p{i}", uid=f"u{i}", claims={"g": f"c{i}"}))
    return objs


_STEP = st.one_of(
    st.tuples(st.just("cycle"), st.integers(0, 5), st.lists(st.integers(0, 12), max_size=16),
              st.booleans()),
    st.tuples(st.just("take"), st.integers(0, 9), st.integers(0, 3), st.booleans()))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kinds=st.lists(st.sampled_from(NODE_KINDS), min_size=1, max_size=10),
       shapes=st.lists(st.sampled_from([*SHAPES, "elsewhere"]), min_size=6, max_size=6),
       steps=st.lists(_STEP, min_size=1, max_size=12))
def test_filter_and_prioritize_answer_what_a_step_per_node_answers(
        kinds: list[str], shapes: list[str], steps: list[tuple[Any, ...]]) -> None:
    inv = load(*_cluster(kinds, shapes))
    fast, reference = extender(inv), extender(inv)
    taken = 0

    def take(node: int, gpu: int) -> None:
        nonlocal taken
        if node >= len(kinds) or kinds[node] in ("none", "model"):
            return
        taken += 1
        index = gpu % 4 if kinds[node] == "four" else 0
        inv.apply("ResourceClaim", "ADDED", claim(
            f"held-{taken}", requests=SHAPES["one"],
            results=[result("gpu", f"gpu.example.com/n{node}/gpu-{index}")]))

    for step in steps:
        if step[0] == "take":
            take(step[1], step[2])
            continue
        _, which, picks, change_between = step
        p = the_pod(inv, f"default/p{which}")
        # unknown names and repeats included, in the scheduler's order
        names = [f"n{i}" for i in picks]
        got, want = fast.filter(p, names), _reference_filter(reference, p, names)
        assert _encoded(got) == _encoded(want)
        assert got.rejections == want.rejections
        if change_between:
            take(picks[0] if picks else 0, which)
        assert fast.prioritize(p, got.passed) == _reference_prioritize(reference, p, got.passed)


def test_prioritize_after_its_filter_reads_the_filters_scores() -> None:
    inv = load(GPU_CLASS, gpu_node("n1"), gpu_node("n2", roots=["r0", "r1"]),
               gpu_node("n3", roots=["r0"]), claim("c", requests=SHAPES["two"]),
               pod("p", uid="u1", claims={"g": "c"}))
    ext = extender(inv)
    passed = ext.filter(the_pod(inv), ["n1", "n2", "n3"]).passed
    walked = []
    ext._marks = lambda *args: walked.append(args) or []  # type: ignore[method-assign]
    assert dict(ext.prioritize(the_pod(inv), passed)) == dict(
        extender(inv).prioritize(the_pod(inv), passed))
    assert walked == []
    # Other nodes than the filter passed, or a change in between: the walk again.
    ext.prioritize(the_pod(inv), ["n2", "n1"])
    assert len(walked) == 1


def test_a_change_to_another_node_between_filter_and_prioritize_keeps_the_scores() -> None:
    # The previous pod's bind reaches the watch while this pod is scheduled:
    # it changes a node this pod was not offered.
    inv = load(GPU_CLASS, gpu_node("n1"), gpu_node("n2", roots=["r0", "r1"]), gpu_node("n3"),
               claim("c", requests=SHAPES["two"]), pod("p", uid="u1", claims={"g": "c"}))
    ext = extender(inv)
    passed = ext.filter(the_pod(inv), ["n1", "n2"]).passed
    inv.apply("ResourceClaim", "ADDED", claim("held", requests=SHAPES["one"], results=[
        result("gpu", "gpu.example.com/n3/gpu-0")]))
    walked = []
    ext._marks = lambda *args: walked.append(args) or []  # type: ignore[method-assign]
    assert dict(ext.prioritize(the_pod(inv), passed)) == dict(
        extender(inv).prioritize(the_pod(inv), passed))
    assert walked == []


def test_prioritize_after_a_change_since_its_filter_reads_the_node_as_it_is() -> None:
    inv = load(GPU_CLASS, gpu_node("n1"), gpu_node("n2"), claim("c", requests=SHAPES["two"]),
               pod("p", uid="u1", claims={"g": "c"}))
    ext = extender(inv)
    passed = ext.filter(the_pod(inv), ["n1", "n2"]).passed
    assert passed == ["n1", "n2"]
    inv.apply("ResourceClaim", "ADDED", claim("held", requests=SHAPES["one"], results=[
        result("gpu", "gpu.example.com/n1/gpu-0")]))
    assert dict(ext.prioritize(the_pod(inv), passed)) == dict(
        extender(inv).prioritize(the_pod(inv), passed))


def test_a_cycle_over_many_nodes_leaves_no_object_per_node_to_the_collector() -> None:
    # Every GC-tracked object a verb keeps alive counts towards the next
    # collection (and a full one at a large cluster takes tens of milliseconds):
    # a cycle over thousands of candidates must not keep one per node.
    nodes = 600
    inv = load(GPU_CLASS, *[gpu_node(f"n{i}", roots=["r0"] if i % 3 else ["r0", "r0"])
                            for i in range(nodes)],
               claim("c", requests=SHAPES["two"]), pod("p", uid="u1", claims={"g": "c"}))
    edge = ExtenderEdge(verbs=extender(inv), ready=lambda: True, max_body_bytes=1 << 24,
                        metrics=ServerMetrics(CollectorRegistry()))
    pod_doc = {"metadata": {"name": "p", "namespace": "default", "uid": "u1"},
               "spec": {"resourceClaims": [{"name": "g", "resourceClaimName": "c"}]}}
    names = [f"n{i}" for i in range(nodes)]
    asyncio.run(edge._filter({"Pod": pod_doc, "NodeNames": names}))  # every verdict computed
    passed = [n for i, n in enumerate(names) if i % 3 == 0]

    async def cycle() -> tuple[Any, Any, int]:
        gc.collect()
        gc.disable()
        try:
            before = gc.get_count()[0]
            filtered = await edge._filter({"Pod": pod_doc, "NodeNames": names})
            scored = await edge._prioritize({"Pod": pod_doc, "NodeNames": passed})
            return filtered, scored, gc.get_count()[0] - before
        finally:
            gc.enable()

    asyncio.run(cycle())  # first-call caches (metric children, wording) filled
    filtered, scored, kept = asyncio.run(cycle())
    assert filtered["NodeNames"] == passed and len(filtered["FailedAndUnresolvableNodes"]) == 400
    assert wire.encode(scored) if not isinstance(scored, bytes) else scored
    assert kept < 200, kept
