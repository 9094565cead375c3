"""A filter waits for the binds on their way (app/extender/pending.py): kube-scheduler
binds from a goroutine, so the next pod's filter can arrive before the bind that
takes its node; drax must answer it with those devices taken, or its bind fails."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from app.allocator.types import ClaimAllocation
from app.model import Pod, ResourceClaim
from tests.extender.cluster import GPU_CLASS, extender, gpu_node, load, the_pod
from tests.inventory.objects import claim, exactly, pod

TWO_GPUS = [exactly("gpu", "gpu", count=2)]


class AcceptingBinder:
    """Writes nothing: the assumption stands, as while the API writes are in flight."""

    async def bind(self, *, pod: Pod, node: str, allocations: Sequence[ClaimAllocation],
                   reserve: Sequence[ResourceClaim], extended: Any = None) -> None:
        return None


def two_pods_one_node() -> Any:
    return load(GPU_CLASS, gpu_node("n1", roots=["r0", "r0"]),
                claim("c1", requests=TWO_GPUS), pod("p", uid="u1", claims={"g": "c1"}),
                claim("c2", requests=TWO_GPUS), pod("q", uid="u2", claims={"g": "c2"}))


async def test_next_filter_waits_for_the_bind_on_its_way_and_sees_its_devices_taken() -> None:
    inv = two_pods_one_node()
    ext = extender(inv, binder=AcceptingBinder(), bind_wait=30.0)
    p, q = the_pod(inv), the_pod(inv, "default/q")
    assert ext.filter(p, ["n1"]).passed == ["n1"]
    waiting = asyncio.create_task(ext.wait_for_binds(q))
    await asyncio.sleep(0.01)
    assert not waiting.done()  # p's bind has not arrived yet
    assert await ext.bind(namespace="default", name="p", uid="u1", node="n1") is None
    waited = await asyncio.wait_for(waiting, timeout=5)
    assert waited is not None and waited < 30.0  # woken by the bind, not the deadline
    after = ext.filter(q, ["n1"])
    assert after.passed == [] and "n1" in after.failed


async def test_prioritize_marks_the_pod_too_and_a_refused_bind_also_ends_the_wait() -> None:
    inv = load(GPU_CLASS, gpu_node("n1", roots=["r0", "r0"]), gpu_node("n2", roots=["r0"]),
               claim("c1", requests=TWO_GPUS), pod("p", uid="u1", claims={"g": "c1"}),
               claim("c2", requests=TWO_GPUS), pod("q", uid="u2", claims={"g": "c2"}))
    ext = extender(inv, binder=AcceptingBinder(), bind_wait=30.0)
    p, q = the_pod(inv), the_pod(inv, "default/q")
    assert ext.prioritize(p, ["n1"])
    waiting = asyncio.create_task(ext.wait_for_binds(q))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    error = await ext.bind(namespace="default", name="p", uid="u1", node="n2")
    assert error is not None and "n2" in error.message
    assert await asyncio.wait_for(waiting, timeout=5) is not None


async def test_a_bind_that_never_comes_holds_the_next_filter_only_until_its_deadline() -> None:
    inv = two_pods_one_node()
    ext = extender(inv, binder=AcceptingBinder(), bind_wait=0.05)
    p, q = the_pod(inv), the_pod(inv, "default/q")
    ext.filter(p, ["n1"])
    waited = await asyncio.wait_for(ext.wait_for_binds(q), timeout=5)
    assert waited is not None and waited >= 0.04
    assert await ext.wait_for_binds(q) is None  # the expectation is gone


async def test_only_a_pod_with_devices_to_allocate_and_a_node_for_them_is_waited_for() -> None:
    inv = load(GPU_CLASS, gpu_node("n1", roots=["r0", "r0"]), gpu_node("small", roots=["r0"]),
               claim("c1", requests=TWO_GPUS), pod("p", uid="u1", claims={"g": "c1"}),
               pod("plain", uid="u3"), claim("c2", requests=TWO_GPUS),
               pod("q", uid="u2", claims={"g": "c2"}))
    p, q = the_pod(inv), the_pod(inv, "default/q")
    ext = extender(inv, binder=AcceptingBinder(), bind_wait=30.0)
    ext.filter(the_pod(inv, "default/plain"), ["n1"])  # no claims: nothing to assume
    ext.filter(p, ["small"])  # no node passed: no bind follows
    assert await ext.wait_for_binds(q) is None
    ext.filter(p, ["n1"])
    assert await ext.wait_for_binds(p) is None  # its own new cycle
    without_binder = extender(inv, bind_wait=30.0)  # advisor mode: drax never binds
    without_binder.filter(p, ["n1"])
    assert await without_binder.wait_for_binds(q) is None
    unset = extender(inv, binder=AcceptingBinder())  # bind_wait defaults to off
    unset.filter(p, ["n1"])
    assert await unset.wait_for_binds(q) is None
