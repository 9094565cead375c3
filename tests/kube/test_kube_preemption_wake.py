"""The driver acts on a new preemptor as soon as its scheduler writes it
unschedulable, without waiting for its periodic pass, and such a pass looks
at the new candidates only.
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
        c, p = preemptor("big", count=8, priority=2000)
        h.server.create("resourceclaims", c)
        h.server.create("pods", p)
        h.watch()
        await h.synced()
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
