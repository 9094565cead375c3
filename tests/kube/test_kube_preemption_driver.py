"""When the preemption driver acts: on a new preemptor as soon as its
scheduler writes it unschedulable, without waiting for its periodic pass
(such a pass looks at the new candidates only); never for a preemptor whose
bind is under way.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from prometheus_client import CollectorRegistry

from tests.kube.harness import KubeHarness, eventually
from tests.kube.test_kube_preemption import (
    driver_of,
    full_cluster,
    metric,
    pods_deleted,
    preemptor,
    start_with_preemptor,
)


async def test_a_pod_written_unschedulable_is_preempted_for_before_the_next_pass(
        tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        full_cluster(h.server)
        registry = CollectorRegistry()
        driver = driver_of(h, registry)
        driver._interval = 3600.0  # no periodic pass within the test
        h.watch(on_change=driver.on_change)
        await h.synced()
        running = asyncio.create_task(driver.run())
        try:
            c, p = preemptor()
            pending = p["status"]
            p["status"] = {"phase": "Pending"}
            h.server.create("resourceclaims", c)
            h.server.create("pods", p)
            await h.caught_up()
            assert metric(registry, "drax_preemptions_attempted_total") == 0
            # kube-scheduler's failed attempt writes PodScheduled=False.
            created = h.server.get("pods", "p", "default")
            created["status"] = pending
            h.server.update("pods", created)
            await eventually(lambda: metric(registry, "drax_preemptions_total") == 1,
                             "the preemption without a periodic pass")
            assert pods_deleted(h.server) == ["v0", "v1"]
        finally:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running


async def test_a_pass_for_new_candidates_leaves_the_ones_already_searched(
        tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        full_cluster(h.server)
        # Above p, but no node has 8 GPUs: searched first, never preempts.
        await start_with_preemptor(h, preemptor("big", count=8, priority=2000))
        registry = CollectorRegistry()
        driver = driver_of(h, registry)
        assert not await driver.run_once()
        assert metric(registry, "drax_preemptions_attempted_total") == 1
        c, p = preemptor("high")
        h.server.create("resourceclaims", c)
        h.server.create("pods", p)
        await h.caught_up()
        assert await driver.run_once(only_new=True)
        assert pods_deleted(h.server) == ["v0", "v1"]
        # "big" was not searched again, though the inventory changed.
        assert metric(registry, "drax_preemptions_attempted_total") == 2
        assert metric(registry, "drax_preemptions_refused_total", reason="no-candidate") == 1


async def test_a_preemptor_whose_bind_is_under_way_is_not_preempted_for_again(
        tmp_path: Path) -> None:
    """Its victims are gone and their claims freed; drax's bind of it has
    assumed its devices, and neither the claim's write nor the pod's binding
    has come back through the watch. Its PodScheduled condition still says
    Unschedulable, but a search now would see its own devices taken and take
    two more victims."""
    async with KubeHarness(tmp_path) as h:
        full_cluster(h.server)
        await start_with_preemptor(h)
        registry = CollectorRegistry()
        driver = driver_of(h, registry)
        assert await driver.run_once()
        await h.caught_up()
        for name in ("v0", "v1"):
            h.server.delete("pods", name, "default")
            h.server.delete("resourceclaims", f"{name}-gpu", "default")
        await h.caught_up()
        held = h.inventory.nomination("default/p")
        p = h.inventory.pod("default/p")
        assert held is not None and p is not None
        h.inventory.assume(pod=p, allocations=held.allocations, ttl=30)
        assert driver.candidates() == []
        assert not await driver.run_once()
        assert pods_deleted(h.server) == ["v0", "v1"]
        # The bind failed: its assumption is forgotten, and p is a candidate again
        # (its own held devices fit it: nothing to delete).
        h.inventory.forget_assumed(pod=p)
        assert [c.key for c in driver.candidates()] == ["default/p"]
        assert not await driver.run_once()
        assert pods_deleted(h.server) == ["v0", "v1"]
