"""Faults from the API server with drax's production watch timings (the
defaults of `WatchSettings`): after three consecutive 500s, or 429s with
Retry-After, on a kind's lists or watches, the inventory holds a change made
meanwhile within 10 s (issue 13)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from app.sources.kube import WatchSettings
from tests.kube.harness import KubeHarness, eventually, node

CONVERGE_SECONDS = 10.0


async def _converges(h: KubeHarness, *, name: str) -> float:
    started = time.monotonic()
    h.server.create("nodes", node(name))
    await eventually(lambda: name in h.inventory.node_names(), f"node {name}",
                     timeout=CONVERGE_SECONDS)
    return time.monotonic() - started


@pytest.mark.parametrize("status", [500, 429])
async def test_three_consecutive_list_faults_converge_within_10s(tmp_path: Path,
                                                                 status: int) -> None:
    async with KubeHarness(tmp_path, settings=WatchSettings()) as h:
        faults = h.server.faults
        faults.only_plural, faults.status, faults.list_errors = "nodes", status, 3
        h.server.create("nodes", node("listed"))
        started = time.monotonic()
        h.watch()
        await eventually(lambda: "listed" in h.inventory.node_names(), "the node listed",
                         timeout=CONVERGE_SECONDS)
        took = time.monotonic() - started
        assert faults.list_errors == 0
        await h.synced()
        print(f"converged {took:.2f} s after three list {status}s")


@pytest.mark.parametrize("status", [500, 429])
async def test_three_consecutive_watch_faults_converge_within_10s(tmp_path: Path,
                                                                  status: int) -> None:
    async with KubeHarness(tmp_path, settings=WatchSettings()) as h:
        h.watch()
        await h.synced()
        await h.watching()
        faults = h.server.faults
        faults.only_plural, faults.status, faults.watch_errors = "nodes", status, 3
        h.server.drop_watches()
        took = await _converges(h, name="after-watch-faults")
        assert faults.watch_errors == 0
        print(f"converged {took:.2f} s after three watch {status}s")
