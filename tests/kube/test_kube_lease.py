"""Leadership follows the kube-scheduler's leader-election Lease through the real client."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.config import ConfigError, load_settings
from app.sources.kube.lease import LEASE_WATCH, Leadership
from tests.kube.harness import KubeHarness, eventually

LEASE = ("kube-system", "drax-scheduler")
FAST = dataclasses.replace(LEASE_WATCH, backoff_initial=0.02, backoff_max=0.1)


def lease(holder: str, *, renew: int = 0, duration: int = 15,
          name: str = "drax-scheduler") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration,
                     "renewTime": f"2026-01-01T00:00:{renew:02d}.000000Z"}}


@contextlib.asynccontextmanager
async def following(h: KubeHarness, leadership: Leadership) -> AsyncIterator[Leadership]:
    assert h.client is not None
    task = asyncio.create_task(leadership.run(h.client, settings=FAST))
    try:
        yield leadership
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_without_a_lease_this_replica_always_leads() -> None:
    leadership = Leadership()
    assert leadership.leading and leadership.term == 1 and not leadership.configured
    await asyncio.wait_for(leadership.wait(), 1)
    await leadership.run(None)  # type: ignore[arg-type]  # returns at once, reads nothing


async def test_leads_while_its_kube_scheduler_holds_the_lease(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        h.server.create("leases", lease("pod-b_4f1c", name="other-lease"))
        h.server.create("leases", lease("pod-a_9e2d"))
        seen: list[bool] = []
        leadership = Leadership(lease=LEASE, identity="pod-b")
        leadership.subscribe(seen.append)
        async with following(h, leadership):
            await eventually(lambda: leadership.holder == "pod-a_9e2d", "the Lease read")
            assert not leadership.leading and leadership.term == 0
            # Another replica's kube-scheduler takes over: this one is `pod-b_<uuid>`.
            waiting = asyncio.create_task(leadership.wait(True))
            h.server.update("leases", lease("pod-b_77aa", renew=1))
            await asyncio.wait_for(waiting, 5)
            assert leadership.leading and leadership.term == 1
            assert leadership.still_leading(1)
            # Renewals keep it; a holder named like a prefix of ours is someone else.
            h.server.update("leases", lease("pod-b_77aa", renew=2))
            h.server.update("leases", lease("pod-bb_1234", renew=3))
            await eventually(lambda: not leadership.leading, "another holder")
            assert not leadership.still_leading(1)
            assert seen == [True, False]
        # Only the named Lease was read, never the whole namespace.
        assert all(q.get("fieldSelector") == "metadata.name=drax-scheduler"
                   for q in h.server.watch_queries("leases"))


async def test_a_takeover_is_seen_from_the_watch_without_a_relist(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        h.server.create("leases", lease("pod-a_1"))
        leadership = Leadership(lease=LEASE, identity="pod-b")
        # Watches the server closes after a second, and one dropped mid-stream.
        settings = dataclasses.replace(FAST, watch_timeout=1.0, min_watch=0.0)
        task = asyncio.create_task(leadership.run(h.client, settings=settings))
        try:
            await eventually(lambda: leadership.holder == "pod-a_1", "the Lease read")
            await eventually(lambda: len(h.server.watch_queries("leases")) >= 3,
                             "a watch renewed after the server closed it")
            h.server.drop_watches()
            h.server.update("leases", lease("pod-b_2", renew=1))  # the watch is being resumed
            await asyncio.wait_for(leadership.wait(True), 5)
            h.server.update("leases", lease("pod-a_3", renew=2))
            await asyncio.wait_for(leadership.wait(False), 5)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        queries = h.server.watch_queries("leases")
        # One list; every later request is a watch resumed from where the last one was.
        assert [q.get("watch", "").lower() for q in queries] == ["", *["true"] * (len(queries) - 1)]
        assert all(q.get("resourceVersion") for q in queries[1:])


async def test_a_lease_not_renewed_expires_without_any_event(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        h.server.create("leases", lease("pod-a_1", duration=1))
        leadership = Leadership(lease=LEASE, identity="pod-a")
        async with following(h, leadership):
            await asyncio.wait_for(leadership.wait(True), 5)
            loop = asyncio.get_running_loop()
            started = loop.time()
            await asyncio.wait_for(leadership.wait(False), 5)
            # Not before the lease duration ran out on this process's clock.
            assert loop.time() - started >= 0.5
            # A renewal seen again makes it lead again, in a new term.
            h.server.update("leases", lease("pod-a_1", renew=5, duration=1))
            await asyncio.wait_for(leadership.wait(True), 5)
            assert leadership.term == 2


@pytest.mark.parametrize("end", ["released", "deleted"])
async def test_a_released_or_deleted_lease_means_following(tmp_path: Path, end: str) -> None:
    async with KubeHarness(tmp_path) as h:
        h.server.create("leases", lease("pod-a_1"))
        leadership = Leadership(lease=LEASE, identity="pod-a")
        async with following(h, leadership):
            await asyncio.wait_for(leadership.wait(True), 5)
            if end == "released":  # kube-scheduler's ReleaseOnCancel on a clean shutdown
                h.server.update("leases", lease("", renew=9, duration=1))
            else:
                h.server.delete("leases", "drax-scheduler", "kube-system")
            await asyncio.wait_for(leadership.wait(False), 5)
            assert leadership.holder == ""


async def test_reading_the_lease_survives_api_errors(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        h.server.create("leases", lease("pod-a_1"))
        h.server.faults.only_plural, h.server.faults.list_errors = "leases", 3
        leadership = Leadership(lease=LEASE, identity="pod-a")
        async with following(h, leadership):
            await asyncio.wait_for(leadership.wait(True), 5)
            assert h.server.faults.list_errors == 0
            h.server.faults.watch_errors = 2
            h.server.drop_watches()
            h.server.update("leases", lease("pod-z_1", renew=4))
            await asyncio.wait_for(leadership.wait(False), 5)


def test_the_lease_setting_is_namespace_slash_name() -> None:
    settings = load_settings(environ={}, overrides={
        "leader_election_lease": "kube-system/drax-scheduler"})
    assert settings.lease == LEASE
    assert load_settings(environ={}).lease is None
    for bad in ("drax-scheduler", "/x", "x/", "a/b/c"):
        with pytest.raises(ConfigError, match="leader_election_lease: expected namespace/name"):
            load_settings(environ={}, overrides={"leader_election_lease": bad})
