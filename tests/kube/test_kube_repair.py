"""The leader's pass over claims a killed bind left half written (app.binder.repair)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

from app.binder import FINALIZER
from app.binder.repair import RepairError, RepairMetrics, keep_releasing, release_half_written
from app.sources.kube.lease import Leadership
from tests.kube.harness import KubeHarness, claim, eventually
from tests.kube.test_kube_lease import LEASE, following, lease


def with_finalizer(name: str, *, allocated: bool = False) -> dict[str, object]:
    obj = claim(name)
    obj["metadata"]["finalizers"] = [FINALIZER, "example.com/other"]
    if allocated:
        obj["status"] = {"allocation": {"devices": {"results": []}}}
    return obj


async def test_only_a_finalizer_without_an_allocation_is_released(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        assert h.client is not None
        h.server.create("resourceclaims", with_finalizer("half"))
        h.server.create("resourceclaims", with_finalizer("allocated", allocated=True))
        h.server.create("resourceclaims", claim("plain"))
        metrics = RepairMetrics(h.registry)
        assert await release_half_written(h.client, metrics=metrics) == 1
        assert h.server.get("resourceclaims", "half", "default")["metadata"]["finalizers"] == [
            "example.com/other"]
        assert FINALIZER in h.server.get("resourceclaims", "allocated",
                                         "default")["metadata"]["finalizers"]
        assert h.metric("drax_bind_half_written_released_total") == 1
        assert await release_half_written(h.client, metrics=metrics) == 0


async def test_a_claim_written_meanwhile_is_left_alone(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        assert h.client is not None
        h.server.create("resourceclaims", with_finalizer("half"))
        faults = h.server.faults
        faults.write_period, faults.write_kinds = 1, ("409",)  # someone writes first
        assert await release_half_written(h.client, metrics=RepairMetrics(h.registry)) == 0
        assert FINALIZER in h.server.get("resourceclaims", "half",
                                         "default")["metadata"]["finalizers"]


def finalizers(h: KubeHarness, name: str) -> list[str]:
    return list(h.server.get("resourceclaims", name, "default")["metadata"]["finalizers"])


async def test_each_new_leader_releases_what_a_dead_leader_left(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        assert h.client is not None
        h.server.create("leases", lease("pod-a_1"))
        h.server.create("resourceclaims", with_finalizer("left-by-a"))
        leadership = Leadership(lease=LEASE, identity="pod-b")
        async with following(h, leadership):
            task = asyncio.create_task(keep_releasing(
                h.client, metrics=RepairMetrics(h.registry), leadership=leadership))
            try:
                await eventually(lambda: leadership.holder == "pod-a_1", "the Lease read")
                await asyncio.sleep(0.2)
                # A standby writes nothing: the claim may be pod-a's bind in flight.
                assert FINALIZER in finalizers(h, "left-by-a")
                h.server.update("leases", lease("pod-b_2", renew=1))  # pod-a died
                await eventually(lambda: FINALIZER not in finalizers(h, "left-by-a"),
                                 "the new leader's pass")
                # Losing the lease and winning it again is a new term: a new pass.
                h.server.update("leases", lease("pod-a_3", renew=2))
                await asyncio.wait_for(leadership.wait(False), 5)
                h.server.create("resourceclaims", with_finalizer("left-by-a-again"))
                h.server.update("leases", lease("pod-b_4", renew=3))
                await eventually(lambda: FINALIZER not in finalizers(h, "left-by-a-again"),
                                 "the pass of the second term")
                assert h.metric("drax_bind_half_written_released_total") == 2
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


async def test_a_pass_stops_writing_once_the_lease_is_lost(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        assert h.client is not None
        for i in range(3):
            h.server.create("resourceclaims", with_finalizer(f"half-{i}"))
        leading = iter([True, False, False])
        released = await _pass_until(h, lambda: next(leading))
        assert released == 1
        assert [FINALIZER in finalizers(h, f"half-{i}") for i in range(3)] == [
            False, True, True]


async def _pass_until(h: KubeHarness, may_write: Callable[[], bool]) -> int:
    assert h.client is not None
    try:
        return await release_half_written(h.client, metrics=RepairMetrics(h.registry),
                                          may_write=may_write)
    except RepairError:
        return int(h.metric("drax_bind_half_written_released_total"))
