"""Full collections wait for a quiet moment between verbs, up to a cap."""

from __future__ import annotations

import asyncio
import gc
import socket
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from app import garbage_collector


@pytest.fixture
def full_passes() -> Iterator[list[int]]:
    """The full passes that start while the test runs, over a frozen heap as in
    `drax serve`; threshold and heap restored after."""
    threshold = gc.get_threshold()
    seen: list[int] = []

    def record(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info["generation"] == 2:
            seen.append(2)

    gc.freeze()
    gc.collect()
    gc.callbacks.append(record)
    try:
        yield seen
    finally:
        gc.callbacks.remove(record)
        gc.set_threshold(*threshold)
        gc.unfreeze()


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


def build(count: int) -> list[dict[str, int]]:
    """`count` surviving containers: enough young passes to reach the default full trigger."""
    return [{"i": i} for i in range(count)]


def test_a_verb_building_a_large_tree_starts_no_full_pass(full_passes: list[int]) -> None:
    young, middle, _ = gc.get_threshold()
    count = young * middle * 30  # thirty times the default trigger
    gc.set_threshold(young, middle, 10)
    kept = build(count)
    assert full_passes, "the default trigger runs a full pass inside the work"
    del kept
    gc.collect()
    full_passes.clear()
    garbage_collector.defer_full_collections()
    with garbage_collector.verb():
        kept = build(count)
    assert full_passes == []
    del kept


def test_the_idle_collector_waits_for_no_verb_and_a_quiet_interval(full_passes: list[int]
                                                                   ) -> None:
    garbage_collector.defer_full_collections()
    with garbage_collector.verb():
        node = Node()
        alive = weakref.ref(node)
        kept = build(20_000)  # young passes promote the cycle to the oldest generation
        del node
        kept += build(20_000)
        assert not garbage_collector.collect_if_idle(quiet=0.0)
    assert not garbage_collector.collect_if_idle(quiet=60.0)  # a verb ended just now
    assert alive() is not None and full_passes == []
    assert garbage_collector.collect_if_idle(quiet=0.0)
    assert full_passes == [2]
    assert alive() is None, "the cycle dropped during the verb is reclaimed"
    del kept


def test_the_cap_still_collects_under_unbroken_traffic(full_passes: list[int]) -> None:
    young, middle, _ = gc.get_threshold()
    garbage_collector.defer_full_collections(cap=2)
    with garbage_collector.verb():
        kept = build(young * middle * 10)
    assert full_passes, "past the cap a full pass runs even with a verb in flight"
    del kept


def test_the_idle_task_collects_once_the_server_is_quiet(full_passes: list[int]) -> None:
    garbage_collector.defer_full_collections()
    node = Node()
    alive = weakref.ref(node)
    kept = build(20_000)
    del node

    async def run() -> None:
        task = asyncio.create_task(garbage_collector.idle_collector(quiet=0.0, every=0.01))
        for _ in range(200):
            await asyncio.sleep(0.01)
            if alive() is None:
                break
        task.cancel()

    asyncio.run(run())
    assert alive() is None
    assert 2 in full_passes
    del kept


def test_the_idle_task_leaves_the_pass_while_the_server_has_a_request(
        full_passes: list[int]) -> None:
    garbage_collector.defer_full_collections()
    node = Node()
    alive = weakref.ref(node)
    kept = build(20_000)
    del node
    in_hand = [True]

    async def run() -> None:
        task = asyncio.create_task(garbage_collector.idle_collector(
            quiet=0.0, every=0.01, busy=lambda: bool(in_hand)))
        await asyncio.sleep(0.2)
        assert alive() is not None and 2 not in full_passes
        in_hand.clear()
        for _ in range(200):
            await asyncio.sleep(0.01)
            if alive() is None:
                break
        task.cancel()

    asyncio.run(run())
    assert alive() is None
    del kept


def test_a_request_that_reaches_the_socket_as_the_idle_task_wakes_goes_first(
        full_passes: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    garbage_collector.defer_full_collections()
    kept = build(20_000)
    client, server = socket.socketpair()
    tasks: set[asyncio.Task[None]] = set()
    idle = garbage_collector._idle

    def idle_and_a_request_arrives(quiet: float) -> bool:
        client.send(b"POST /filter")  # after this loop turn read its sockets
        return idle(quiet)

    monkeypatch.setattr(garbage_collector, "_idle", idle_and_a_request_arrives)

    async def handle() -> None:
        await asyncio.sleep(1.0)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        # what the server does with a request's headers: start its task
        loop.add_reader(server, lambda: (server.recv(100), tasks.add(loop.create_task(handle()))))
        collector = asyncio.create_task(garbage_collector.idle_collector(
            quiet=0.0, every=0.01, busy=lambda: bool(tasks)))
        while not tasks:
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.01)
        collector.cancel()
        loop.remove_reader(server)
        for task in tasks:
            task.cancel()

    try:
        asyncio.run(run())
    finally:
        client.close()
        server.close()
    assert 2 not in full_passes, "the pass waited for the request that had arrived"
    del kept
