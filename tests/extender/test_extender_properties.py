"""Property: whatever sequence of pods is bound through filter, prioritize and
bind (file mode, memory binder), no device is handed out twice, no shared
counter or consumable capacity is exceeded, and every matchAttribute holds."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.inventory import Inventory
from app.model import Device
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
)
from tests.inventory.objects import exactly, pod, template

SHAPES: dict[str, dict[str, Any]] = {
    "2gpu-same-root": dict(requests=[exactly("gpu", "gpu", count=2), exactly("nic", "nic")],
                           constraints=[{"matchAttribute": ROOT}]),
    "1gpu": dict(requests=[exactly("gpu", "gpu")]),
    "mig-1": dict(requests=[exactly("mig", "mig")]),
    "mig-2": dict(requests=[exactly("mig", "mig", count=2)]),
    "share-3": dict(requests=[exactly("s", "shared", capacity={"requests": {"memory": "3"}})]),
}


def cluster(nodes: int) -> list[Any]:
    objs: list[Any] = [GPU_CLASS, NIC_CLASS, MIG_CLASS, SHARED_CLASS]
    for i in range(nodes):
        name = f"n{i}"
        objs.append(gpu_node(name, roots=["a", "a", "b", "b"], nic_roots=["a", "b"]))
        objs.append(mig_node(name))
        objs.append(shared_node(name))
    for shape, spec in SHAPES.items():
        objs.append(template(shape, **spec))
    return objs


def devices_by_id(inv: Inventory) -> dict[str, Device]:
    out = {}
    for name in inv.node_names():
        state = inv.node_state(name)
        assert state is not None
        for pool in state.view.pools:
            for d in pool.devices:
                out[d.id] = d
    return out


def check_invariants(inv: Inventory) -> None:
    devices = devices_by_id(inv)
    exclusive: set[str] = set()
    counters: dict[str, Fraction] = defaultdict(Fraction)
    capacity: dict[str, Fraction] = defaultdict(Fraction)
    for claim in inv.claims():
        assert claim.allocation is not None
        picked = []
        for r in claim.allocation.results:
            d = devices[r.device_id]
            picked.append((r.request, d))
            if r.share_id is None:
                assert r.device_id not in exclusive, f"{r.device_id} handed out twice"
                exclusive.add(r.device_id)
            for amount in r.consumed_capacity.values():
                capacity[r.device_id] += amount.value
            for use in d.consumes_counters:
                for amount in use.counters.values():
                    counters[f"{d.driver}/{d.pool}/{use.counter_set}"] += amount.value
        if any(c.match_attribute for c in claim.spec.constraints):
            roots = {d.attributes[ROOT].value for _, d in picked}
            assert len(roots) == 1, f"{claim.key}: matchAttribute broken: {roots}"
    assert all(v <= 4 for v in counters.values()), counters
    assert all(v <= 10 for v in capacity.values()), capacity


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 3), st.lists(st.sampled_from(sorted(SHAPES)), min_size=1, max_size=16),
       st.sampled_from(["allocator", "advisor"]))
def test_bound_pods_never_overcommit(nodes: int, shapes: list[str], mode: str) -> None:
    pods = [pod(f"p{i}-{shape}", uid=f"u{i}", templates={"c": shape})
            for i, shape in enumerate(shapes)]
    inv = load(*cluster(nodes), *pods)
    ext = extender(inv, file_mode=True, mode=mode)
    names = inv.node_names()
    for i, shape in enumerate(shapes):
        p = inv.pod(f"default/p{i}-{shape}")
        assert p is not None
        result = ext.filter(p, names)
        assert result.error is None
        if not result.passed:
            continue
        scores = dict(ext.prioritize(p, result.passed))
        best = max(result.passed, key=lambda n: scores[n])
        assert asyncio.run(ext.bind(namespace="default", name=p.name, uid=p.uid,
                                    node=best)) is None
    check_invariants(inv)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 3),
       st.lists(st.tuples(st.sampled_from(["bind", "release"]), st.sampled_from(sorted(SHAPES))),
                min_size=1, max_size=14))
def test_cached_answers_equal_fresh_answers_as_the_cluster_changes(
        nodes: int, steps: list[tuple[str, str]]) -> None:
    """A long-lived extender (caches, signatures, change log) answers exactly as
    a new one over the same inventory, after every bind and every release."""
    pods = [pod(f"p{i}-{shape}", uid=f"u{i}", templates={"c": shape})
            for i, (_, shape) in enumerate(steps)]
    inv = load(*cluster(nodes), *pods)
    ext = extender(inv, file_mode=True)
    names = inv.node_names()
    bound: list[str] = []
    for i, (action, shape) in enumerate(steps):
        if action == "release" and bound:
            inv.apply("ResourceClaim", "DELETED", {
                "kind": "ResourceClaim",
                "metadata": {"name": bound.pop(0), "namespace": "default"},
                "spec": {"devices": {"requests": []}}})
        p = inv.pod(f"default/p{i}-{shape}")
        assert p is not None
        cached, fresh = ext.filter(p, names), extender(inv, file_mode=True).filter(p, names)
        assert cached == fresh
        assert ext.prioritize(p, names) == extender(inv, file_mode=True).prioritize(p, names)
        if cached.passed and asyncio.run(ext.bind(namespace="default", name=p.name, uid=p.uid,
                                                  node=cached.passed[-1])) is None:
            bound.append(f"{p.name}-c")
