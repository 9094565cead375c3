"""The requeuer: pods drax rejected get their status touched when devices may have
appeared, through the real client against the API double (app.binder.requeue)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.binder.requeue import CONDITION, RequeueMetrics, Requeuer, may_add_capacity
from app.extender.waiting import WaitingPods
from app.model import parse_object
from app.sources.kube.lease import Leadership
from tests.kube.harness import KubeHarness, eventually, gpu_slice, pod
from tests.kube.test_kube_lease import LEASE, following, lease


@pytest.mark.parametrize(("kind", "event", "obj", "adds"), [
    ("ResourceSlice", "ADDED", {}, True),
    ("ResourceSlice", "MODIFIED", {}, True),
    ("ResourceSlice", "DELETED", {}, False),
    ("DeviceClass", "MODIFIED", {}, True),
    ("Node", "ADDED", {}, True),
    ("Node", "MODIFIED", {}, False),
    ("ResourceClaim", "DELETED", {}, True),
    ("ResourceClaim", "MODIFIED", {"status": {}}, True),
    ("ResourceClaim", "MODIFIED", {"status": {"allocation": {"devices": {}}}}, False),
    ("ResourceClaim", "ADDED", {}, False),
    ("Pod", "DELETED", {}, False),
    ("ResourceSlice", "LIST", None, True),
    ("Pod", "LIST", None, False),
])
def test_what_may_add_capacity(kind: str, event: str, obj: dict[str, Any] | None,
                               adds: bool) -> None:
    assert may_add_capacity(kind, event, obj) is adds


@contextlib.asynccontextmanager
async def requeuing(h: KubeHarness, waiting: WaitingPods,
                    leadership: Leadership) -> AsyncIterator[Requeuer]:
    assert h.client is not None
    requeuer = Requeuer(h.client, waiting=waiting, leadership=leadership,
                        metrics=RequeueMetrics(h.registry, waiting), settle=0.01,
                        min_interval=0.05)
    task = asyncio.create_task(requeuer.run())
    try:
        yield requeuer
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def conditions(h: KubeHarness, name: str) -> list[dict[str, Any]]:
    return [c for c in h.server.get("pods", name, "default").get("status", {})
            .get("conditions", []) if c["type"] == CONDITION]


async def test_devices_appearing_touch_each_waiting_pod_once(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        waiting = WaitingPods()
        for name in ("a", "b", "gone"):
            h.server.create("pods", pod(name, "c"))
            waiting.rejected(parse_object("Pod", h.server.get("pods", name, "default")))
        h.server.delete("pods", "gone", "default")
        async with requeuing(h, waiting, Leadership()) as requeuer:
            # A slice update that takes devices away is not worth a retry.
            requeuer.on_change("ResourceSlice", "DELETED", gpu_slice("n1", 1))
            await asyncio.sleep(0.2)
            assert h.server.status_patches == []
            for i in range(5):  # one burst: one round
                requeuer.on_change("ResourceSlice", "ADDED", gpu_slice(f"n{i}", 8))
            await eventually(lambda: h.metric("drax_requeue_nudges_total", result="ok") == 2,
                             "both waiting pods touched")
            await asyncio.sleep(0.2)
        assert len(h.server.status_patches) == 2  # one round; "gone" met 404
        for name in ("a", "b"):
            (cond,) = conditions(h, name)
            assert cond["status"] == "True" and cond["reason"] == "DevicesChanged"
        assert h.metric("drax_requeue_nudges_total", result="gone") == 1
        assert [w.name for w in waiting.snapshot()] == ["a", "b"]
        assert h.metric("drax_pods_waiting_for_devices") == 2


async def test_only_the_leader_touches_pods(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        h.server.create("leases", lease("other_1"))
        h.server.create("pods", pod("a", "c"))
        waiting = WaitingPods()
        waiting.rejected(parse_object("Pod", h.server.get("pods", "a", "default")))
        leadership = Leadership(lease=LEASE, identity="this")
        async with following(h, leadership), requeuing(h, waiting, leadership) as requeuer:
            await eventually(lambda: leadership.holder == "other_1", "the Lease read")
            requeuer.on_change("ResourceSlice", "ADDED", gpu_slice("n1", 8))
            await asyncio.sleep(0.3)
            assert h.server.status_patches == []
            h.server.update("leases", lease("this_2", renew=1))
            await asyncio.wait_for(leadership.wait(True), 5)
            requeuer.on_change("ResourceSlice", "MODIFIED", gpu_slice("n1", 8))
            await eventually(lambda: len(conditions(h, "a")) == 1, "the leader's patch")
