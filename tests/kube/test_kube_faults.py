"""Faults from the API server with drax's production watch timings (the
defaults of `WatchSettings`): after three consecutive 500s, or 429s with
Retry-After, on a kind's lists or watches, the inventory holds a change made
meanwhile within 10 s."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from app.sources.kube import WatchSettings
from tests.kube.harness import KubeHarness, eventually, gpu_slice, node

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


@pytest.mark.parametrize("history", ["kept", "compacted"])
async def test_a_slice_deleted_during_three_500s_on_lists_and_watches_is_seen_within_10s(
        tmp_path: Path, history: str) -> None:
    """The watches drop, a slice is deleted meanwhile, and the next three watches
    and the next three lists of slices fail with 500. With the history kept the
    watch resumes and sees the DELETED event; compacted, the resumed watch meets
    410 Gone and the relist, failing three times too, must drop the slice."""
    async with KubeHarness(tmp_path, settings=WatchSettings()) as h:
        h.server.create("resourceslices", gpu_slice("node-a", 2))
        h.server.create("resourceslices", gpu_slice("node-b", 2))
        h.watch()
        await h.synced()
        await h.watching()
        faults = h.server.faults
        faults.only_plural, faults.watch_errors, faults.list_errors = "resourceslices", 3, 3
        h.server.drop_watches()
        started = time.monotonic()
        h.server.delete("resourceslices", "node-a-gpus")
        if history == "compacted":
            h.server.compact()
        await eventually(lambda: h.inventory.node_names() == ["node-b"],
                         "the deleted slice gone", timeout=CONVERGE_SECONDS)
        took = time.monotonic() - started
        assert faults.watch_errors == 0
        assert faults.list_errors == (0 if history == "compacted" else 3)
        print(f"deletion seen {took:.2f} s after the drop ({history} history)")
