"""The kube source against the API double, through the real kubernetes-asyncio client."""

from __future__ import annotations

import asyncio
import gc
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import orjson
import pytest

from app.inventory import NodePool
from app.model import decode_resource_slice
from app.sources.kube import WATCHED_KINDS, WatchSettings, watch
from app.sources.kube.watch import RELIST_SLICE_SECONDS, Backoff
from app.timeslice import run_in_slices
from tests.kube.harness import (
    FAST,
    WATCHED_PLURALS,
    KubeHarness,
    claim,
    device_class,
    eventually,
    gpu_slice,
    node,
    pod,
)


async def test_initial_lists_fill_the_inventory_and_mark_it_synced(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        h.server.create("nodes", node("node-a"))
        h.server.create("resourceslices", gpu_slice("node-a", 8))
        h.server.create("deviceclasses", device_class())
        h.server.create("resourceclaims", claim("train", namespace="ml"))
        h.watch()
        await h.synced()
        counts = h.inventory.counts()
        assert (counts.nodes, counts.devices) == (1, 8)
        assert set(h.inventory.classes) == {"gpu"}
        assert h.inventory.claim("ml/train") is not None
        assert h.metric("drax_inventory_nodes") == 1
        assert h.metric("drax_inventory_devices") == 8
        assert h.metric("drax_inventory_allocated_devices") == 0
        assert 0 <= h.metric("drax_watch_seconds_since_last_event", kind="Node") < 60
        # Each kind was listed once, then watched from the list's resourceVersion.
        listed_at = str(h.server.resource_version)
        await eventually(lambda: h.server.open_watches("resourceslices") == 1, "the watch")
        first, second = h.server.watch_queries("resourceslices")
        assert "watch" not in first
        assert second["watch"] == "True" and second["resourceVersion"] == listed_at
        assert h.metric("drax_watch_relists_total", kind="ResourceSlice") == 0


async def test_not_synced_while_an_initial_list_fails(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        h.server.create("nodes", node("node-a"))
        h.server.create("resourceslices", gpu_slice("node-a", 8))
        h.server.faults.only_plural, h.server.faults.list_errors = "resourceslices", 10**6
        h.watch()
        # Every other kind is listed and watched; the slices' list keeps failing.
        await eventually(lambda: all(h.server.open_watches(p) == 1 for p in WATCHED_PLURALS
                                     if p != "resourceslices"), "the other kinds watched")
        await eventually(lambda: h.metric("drax_watch_errors_total", kind="ResourceSlice") >= 3,
                         "three failed slice lists")
        assert not h.inventory.synced
        assert h.inventory.counts().nodes == 1 and h.inventory.counts().devices == 0
        assert h.metric("drax_watch_errors_total", kind="Node") == 0
        # The API server recovers: the retried list fills the slices in.
        h.server.faults.list_errors = 0
        await h.synced()
        assert h.inventory.counts().devices == 8


async def test_watch_events_add_update_and_delete_each_kind(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        h.watch()
        await h.synced()
        h.server.create("nodes", node("node-a", zone="a"))
        h.server.create("resourceslices", gpu_slice("node-a", 4))
        h.server.create("deviceclasses", device_class())
        h.server.create("resourceclaims", claim("c1"))
        await h.caught_up()
        assert h.inventory.counts().devices == 4
        assert h.inventory.claim("default/c1") is not None

        h.server.update("nodes", node("node-a", zone="b"))
        h.server.update("resourceslices", gpu_slice("node-a", 6, generation=2))
        h.server.update("deviceclasses", device_class(expression="true"))
        h.server.update("resourceclaims", claim("c1", count=2))
        await h.caught_up()
        state = h.inventory.node_state("node-a")
        assert state is not None and state.view.node.labels == {"zone": "b"}
        assert h.inventory.counts().devices == 6
        assert h.inventory.classes["gpu"].selectors == ("true",)
        c1 = h.inventory.claim("default/c1")
        assert c1 is not None and c1.spec.requests[0].exactly is not None
        assert c1.spec.requests[0].exactly.count == 2

        h.server.delete("resourceslices", "node-a-gpus")
        h.server.delete("deviceclasses", "gpu")
        h.server.delete("resourceclaims", "c1", "default")
        h.server.delete("nodes", "node-a")
        await h.caught_up()
        assert h.inventory.counts().devices == 0
        assert h.inventory.node_names() == []
        assert not h.inventory.classes
        assert h.inventory.claim("default/c1") is None
        for kind in ("Node", "ResourceSlice", "DeviceClass", "ResourceClaim"):
            for event in ("ADDED", "MODIFIED", "DELETED"):
                assert h.metric("drax_watch_events_total", kind=kind, type=event) == 1
            # every applied event timed once; bookmarks are not events
            assert h.metric("drax_watch_event_apply_seconds_count", kind=kind) == 3
            assert h.metric("drax_watch_event_apply_seconds_sum", kind=kind) > 0


async def test_dropped_connection_resumes_from_the_last_resource_version(tmp_path: Path
                                                                         ) -> None:
    async with KubeHarness(tmp_path) as h:
        h.server.create("resourceslices", gpu_slice("node-a", 2))
        h.watch()
        await h.synced()
        h.server.create("resourceslices", gpu_slice("node-b", 2))
        await h.caught_up()
        seen = h.server.resource_version
        h.server.drop_watches()
        h.server.create("resourceslices", gpu_slice("node-c", 2))  # while disconnected
        await eventually(lambda: "node-c" in h.inventory.node_names(), "node-c after resume")
        assert h.inventory.node_names() == ["node-a", "node-b", "node-c"]
        # Resumed by watching again, not by listing again.
        lists = [q for q in h.server.watch_queries("resourceslices") if q.get("watch") is None]
        assert len(lists) == 1
        resumes = [q["resourceVersion"] for q in h.server.watch_queries("resourceslices")
                   if q.get("watch")]
        assert resumes[-1] == str(seen)
        assert h.metric("drax_watch_relists_total", kind="ResourceSlice") == 0
        assert h.metric("drax_watch_errors_total", kind="ResourceSlice") >= 1


async def test_gone_relists_and_drops_objects_deleted_while_away(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        for name in ("node-a", "node-b"):
            h.server.create("resourceslices", gpu_slice(name, 2))
        h.server.create("resourceclaims", claim("old"))
        h.watch()
        await h.synced()
        await h.watching()
        h.server.drop_watches()
        # While drax is away: a slice and a claim vanish, another slice appears,
        # and the server forgets the history drax would resume from.
        h.server.delete("resourceslices", "node-a-gpus")
        h.server.delete("resourceclaims", "old", "default")
        h.server.create("resourceslices", gpu_slice("node-c", 2))
        h.server.compact()
        await eventually(lambda: h.metric("drax_watch_relists_total", kind="ResourceSlice") == 1
                         and h.metric("drax_watch_relists_total", kind="ResourceClaim") == 1,
                         "the relists")
        await h.caught_up()
        assert h.inventory.node_names() == ["node-b", "node-c"]
        assert h.inventory.claim("default/old") is None
        assert h.inventory.synced


async def test_server_side_timeout_is_followed_by_a_new_watch(tmp_path: Path) -> None:
    settings = WatchSettings(watch_timeout=1.0, backoff_initial=0.02, backoff_max=0.1)
    async with KubeHarness(tmp_path, settings=settings) as h:
        h.watch()
        await h.synced()
        await eventually(lambda: len([q for q in h.server.watch_queries("nodes")
                                      if q.get("watch")]) >= 2, "a second watch", timeout=10)
        h.server.create("nodes", node("late"))
        await eventually(lambda: h.inventory.node_names() == ["late"], "the late node")
        assert h.metric("drax_watch_errors_total", kind="Node") == 0
        assert h.metric("drax_watch_relists_total", kind="Node") == 0


async def test_bookmarks_advance_the_resource_version(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        h.watch()
        await h.synced()
        for i in range(3):  # changes to other kinds move the global resourceVersion
            h.server.create("nodes", node(f"n{i}"))
        await h.caught_up()  # the DeviceClass informer got there by bookmarks alone
        assert h.metric("drax_watch_events_total", kind="DeviceClass", type="ADDED") == 0
        assert all(q["allowWatchBookmarks"] == "True"
                   for q in h.server.watch_queries("deviceclasses") if q.get("watch"))


async def test_a_watch_error_backs_off_and_resumes(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        h.watch()
        await h.synced()
        await h.watching()
        h.server.faults.watch_errors = 4
        h.server.drop_watches()
        h.server.create("nodes", node("after-errors"))
        await eventually(lambda: "after-errors" in h.inventory.node_names(), "the node")
        assert h.server.faults.watch_errors == 0
        # One per watch dropped, and the four faults.
        assert sum(h.metric("drax_watch_errors_total", kind=w.kind)
                   for w in WATCHED_KINDS) == len(WATCHED_KINDS) + 4


async def test_invalid_objects_are_counted_and_skipped(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        bad = gpu_slice("node-x", 1)
        del bad["spec"]["nodeName"]  # no node selection at all: invalid
        h.server.create("resourceslices", bad)
        h.server.create("resourceslices", gpu_slice("node-a", 2))
        h.watch()
        await h.synced()
        assert h.inventory.node_names() == ["node-a"]
        assert h.metric("drax_watch_invalid_objects_total", kind="ResourceSlice") == 1
        h.server.update("resourceslices", {**gpu_slice("node-a", 2),
                                           "spec": {"driver": "", "pool": {}}})
        h.server.create("resourceslices", gpu_slice("node-b", 2))
        await h.caught_up()
        # The bad update changed nothing; the watch went on.
        assert h.inventory.node_names() == ["node-a", "node-b"]
        assert h.inventory.counts().devices == 4
        assert h.metric("drax_watch_invalid_objects_total", kind="ResourceSlice") == 2


async def test_a_relist_keeps_the_held_copy_of_an_object_it_lists_invalid(
        tmp_path: Path) -> None:
    """As a refused watch event does: nothing already held is lost."""
    async with KubeHarness(tmp_path) as h:
        h.server.create("resourceslices", gpu_slice("node-a", 2))
        h.server.create("resourceslices", gpu_slice("node-b", 2))
        h.watch()
        await h.synced()
        await h.watching()
        h.server.hold_watches("resourceslices")  # both changes reach drax by the relist
        h.server.update("resourceslices", {**gpu_slice("node-a", 2),
                                           "spec": {"driver": "", "pool": {}}})
        h.server.delete("resourceslices", "node-b-gpus")
        h.server.compact()
        h.server.drop_watches()
        await eventually(lambda: "node-b" not in h.inventory.node_names(), "the relist")
        await h.caught_up()
        assert h.inventory.node_names() == ["node-a"]
        assert h.inventory.counts().devices == 2
        assert h.metric("drax_watch_relists_total", kind="ResourceSlice") == 1
        assert h.metric("drax_watch_invalid_objects_total", kind="ResourceSlice") == 1


async def test_a_listed_slice_that_is_not_utf8_is_refused_and_its_held_copy_stays(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bytes no API server writes: an item msgspec skipped whole but no decoder
    reads is one invalid object, and the list goes on."""
    corrupt = {b"node-a-gpus"}
    real = watch.slice_page

    def slice_page(body: bytes, keeps_node: Any) -> dict[str, Any]:
        page = real(body, keeps_node)
        page["items"] = [msgspec.Raw(bytes(raw).replace(b"H100", b"H\xff\xfe0"))
                         if any(name in bytes(raw) for name in corrupt) else raw
                         for raw in page["items"]]
        return page

    async with KubeHarness(tmp_path) as h:
        h.server.create("resourceslices", gpu_slice("node-a", 2))
        h.server.create("resourceslices", gpu_slice("node-b", 2))
        h.server.create("resourceslices", gpu_slice("node-c", 2))
        monkeypatch.setattr(watch, "slice_page", slice_page)
        h.watch()
        await h.synced()
        assert h.inventory.node_names() == ["node-b", "node-c"]
        assert h.metric("drax_watch_invalid_objects_total", kind="ResourceSlice") == 1
        await h.watching()
        # a relist meeting a held slice's bytes unreadable keeps the copy held
        corrupt = {b"node-b-gpus"}
        h.server.hold_watches("resourceslices")
        h.server.delete("resourceslices", "node-c-gpus")
        h.server.compact()
        h.server.drop_watches()
        await eventually(lambda: "node-c" not in h.inventory.node_names(), "the relist")
        await h.caught_up()
        assert h.inventory.node_names() == ["node-a", "node-b"]
        assert h.inventory.counts().devices == 4
        assert h.metric("drax_watch_invalid_objects_total", kind="ResourceSlice") == 2


def test_an_unreadable_items_name_is_read_alone_when_it_can_be() -> None:
    assert watch._named(msgspec.Raw(b'{"metadata":{"name":"s","namespace":"ns"},'
                                    b'"spec":{"driver":"\xff"}}')) == {
        "metadata": {"name": "s", "namespace": "ns"}}
    assert watch._named(msgspec.Raw(b'{"metadata":{"name":"s\xff"}}')) == {"metadata": {}}
    assert watch._named(msgspec.Raw(b'{"metadata":7}')) == {"metadata": {}}


async def test_a_deleted_event_of_an_invalid_object_deletes_the_held_copy(
        tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        h.server.create("resourceslices", gpu_slice("node-a", 2))
        h.server.create("resourceclaims", claim("c"))
        h.server.create("pods", pod("p", "c"))
        h.watch()
        await h.synced()
        h.server.update("resourceslices", {**gpu_slice("node-a", 2),
                                           "spec": {"driver": "", "pool": {}}})
        bad_pod = pod("p", "c")
        bad_pod["spec"]["priority"] = "high"
        h.server.update("pods", bad_pod)
        await h.caught_up()
        # Refused updates: the copies held stay ...
        assert h.inventory.node_names() == ["node-a"]
        assert h.inventory.pod("default/p") is not None
        h.server.delete("resourceslices", "node-a-gpus")
        h.server.delete("pods", "p")
        await h.caught_up()
        # ... until the objects are deleted.
        assert h.inventory.node_names() == []
        assert h.inventory.pod("default/p") is None


def test_backoff_doubles_with_jitter_up_to_the_cap() -> None:
    backoff = Backoff(initial=1.0, maximum=8.0)
    delays = [backoff.next() for _ in range(5)]
    assert 1.0 <= delays[0] < 2.0 and 2.0 <= delays[1] < 4.0 and 4.0 <= delays[2] < 8.0
    assert delays[3:] == [8.0, 8.0]
    backoff.reset()
    assert 1.0 <= backoff.next() < 2.0


async def test_a_failing_server_is_not_hammered(tmp_path: Path) -> None:
    settings = WatchSettings(watch_timeout=30.0, backoff_initial=0.1, backoff_max=0.4)
    async with KubeHarness(tmp_path, settings=settings) as h:
        h.server.faults.list_errors = 10_000
        h.watch()
        await asyncio.sleep(1.0)
        # Without the backoff, four informers would send thousands of lists a second.
        assert len(h.server.watch_queries("nodes")) <= 8


async def test_lists_are_paged_and_restart_when_the_snapshot_expires(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path, settings=replace(FAST, page_size=2)) as h:
        for i in range(5):
            h.server.create("nodes", node(f"n{i}"))
        h.server.faults.expired_continues = 1
        h.watch()
        await h.synced()
        assert h.inventory.node_names() == ["n0", "n1", "n2", "n3", "n4"]
        lists = [q for q in h.server.watch_queries("nodes") if "watch" not in q]
        assert all(q["limit"] == "2" for q in lists)
        # Page 2 met an expired snapshot, so the list started over: three pages.
        assert ["continue" in q for q in lists] == [False, True, False, True, True]
        assert h.metric("drax_watch_relists_total", kind="Node") == 1


async def test_a_relist_cut_short_keeps_what_it_read_and_its_retry_brings_nothing_back(
        tmp_path: Path) -> None:
    """A relist after sync whose snapshot expires after its first page: that
    page stays applied and nothing is deleted until a list is read whole;
    the list started over drops what was deleted meanwhile, from the pages
    applied already and from those never read, and brings none of it back."""
    async with KubeHarness(tmp_path, settings=replace(FAST, relist_page_size=1)) as h:
        for i in range(5):
            h.server.create("nodes", node(f"n{i}"))
        h.watch()
        await h.synced()
        await h.watching()
        between: list[list[str]] = []
        expired = False
        serve = h.server._list

        def list_nodes(plural: str, namespace: str, query: Any, selects: Any = None) -> Any:
            nonlocal expired
            if plural == "nodes" and expired and "continue" not in query and not between:
                between.append(h.inventory.node_names())  # the list starts over
            answer = serve(plural, namespace, query, selects)
            if plural == "nodes" and answer.status == 410 and not expired:
                expired = True
                h.server.delete("nodes", "n0")  # on the page read already
                h.server.delete("nodes", "n2")  # on a page not read yet
            return answer

        h.server._list = list_nodes  # type: ignore[method-assign]
        h.server.hold_watches("nodes")  # the changes reach drax by the list only
        h.server.faults.only_plural, h.server.faults.expired_continues = "nodes", 1
        h.server.update("nodes", node("n4", zone="b"))  # what drax holds is now too old
        h.server.compact()
        h.server.drop_watches()
        await eventually(lambda: h.inventory.node_names() == ["n1", "n3", "n4"],
                         "the list started over")
        assert between == [["n0", "n1", "n2", "n3", "n4"]]
        lists = [q for q in h.server.watch_queries("nodes") if "watch" not in q]
        # the first list; page 1, page 2 expired; the three pages left
        assert ["continue" in q for q in lists] == [False, False, True, False, True, True]
        assert all(q["limit"] == "1" for q in lists[1:])


async def test_a_relist_after_sync_reads_small_pages(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path, settings=replace(FAST, page_size=4,
                                                      relist_page_size=1)) as h:
        for i in range(3):
            h.server.create("nodes", node(f"n{i}"))
        h.watch()
        await h.synced()
        await h.watching()
        h.server.drop_watches()
        h.server.delete("nodes", "n0")
        h.server.compact()
        await eventually(lambda: h.inventory.node_names() == ["n1", "n2"], "the relist")
        lists = [q for q in h.server.watch_queries("nodes") if "watch" not in q]
        # verbs are served during a relist: its pages are decoded one by one
        assert [q["limit"] for q in lists] == ["4", "1", "1"]


async def test_a_corrupt_watch_stream_is_resumed_without_losing_state(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        h.server.create("nodes", node("n0"))
        h.watch()
        await h.synced()
        await h.watching()
        h.server.inject("nodes", b'{"type": "ADDED", "object": {"metad\n')
        h.server.inject("nodes", b"[1, 2]\n")
        h.server.create("nodes", node("n1"))
        await eventually(lambda: h.inventory.node_names() == ["n0", "n1"], "n1")
        assert h.metric("drax_watch_errors_total", kind="Node") >= 1
        assert h.metric("drax_watch_relists_total", kind="Node") == 0


async def test_a_long_relist_lets_the_event_loop_run_between_its_slices() -> None:
    ran_between: list[int] = []
    done = 0

    def steps():
        nonlocal done
        for _ in range(4):
            deadline = asyncio.get_running_loop().time() + RELIST_SLICE_SECONDS
            while asyncio.get_running_loop().time() < deadline:
                pass  # one step of relist work, a slice long
            done += 1
            yield

    async def other_task() -> None:
        while done < 4:
            ran_between.append(done)
            await asyncio.sleep(0)

    await asyncio.gather(run_in_slices(steps(), slice_seconds=RELIST_SLICE_SECONDS),
                         other_task())
    assert {1, 2, 3} <= set(ran_between)  # it ran after each slice, not only at the end


async def test_a_success_resets_the_backoff_and_a_nudge_cuts_a_wait_short(
        tmp_path: Path) -> None:
    settings = WatchSettings(watch_timeout=30.0, backoff_initial=30.0, backoff_max=60.0,
                             min_watch=0.05)
    async with KubeHarness(tmp_path, settings=settings) as h:
        h.watch()
        await h.synced()
        await h.watching()
        # Two failures in a row: the first is retried at once, the second waits >= 30 s.
        h.server.faults.only_plural, h.server.faults.watch_errors = "nodes", 1
        h.server.drop_watches()
        await eventually(lambda: h.server.faults.watch_errors == 0, "the failed watch")
        await asyncio.sleep(0.3)
        assert h.server.open_watches("nodes") == 0
        assert h.source is not None
        h.source.nudge()  # e.g. this replica just became leader
        await eventually(lambda: h.server.open_watches("nodes") == 1, "the watch again",
                         timeout=5)
        # The watch that followed was a success: the next drop is retried at once.
        h.server.create("nodes", node("seen"))
        await eventually(lambda: h.inventory.node_names() == ["seen"], "the node")
        h.server.drop_watches()
        h.server.create("nodes", node("after-drop"))
        await eventually(lambda: "after-drop" in h.inventory.node_names(), "the next node",
                         timeout=5)


async def test_a_node_pool_watches_its_nodes_by_label_and_follows_relabelling(
        tmp_path: Path) -> None:
    async with KubeHarness(tmp_path, pool=NodePool({"pool": "a"})) as h:
        h.server.create("nodes", node("a1", pool="a"))
        h.server.create("nodes", node("b1", pool="b"))
        for name in ("a1", "b1", "c1"):
            h.server.create("resourceslices", gpu_slice(name, 2))
        h.server.create("nodes", node("c1", pool="c"))
        h.watch()
        await h.synced()
        inv = h.inventory
        assert inv.node_names() == ["a1"] and inv.counts().devices == 2
        # The API server selects the Nodes; the slices are listed only once they are in.
        node_queries = [q for p, q in h.server.collection_queries if p == "nodes"]
        assert node_queries and all(q.get("labelSelector") == "pool=a" for q in node_queries)
        await h.watching()
        # A node that joins brings its slices (listed again); one that leaves takes them.
        h.server.update("nodes", node("c1", pool="a"))
        await eventually(lambda: inv.counts().devices == 4, "c1's slices after it joined")
        assert inv.node_names() == ["a1", "c1"]
        h.server.update("nodes", node("a1", pool="b"))
        await eventually(lambda: inv.node_names() == ["c1"], "a1 leaving")
        assert inv.counts().devices == 2
        # Slice events of nodes outside the pool change nothing.
        h.server.update("resourceslices", gpu_slice("b1", 8, generation=2))
        h.server.update("resourceslices", gpu_slice("c1", 3, generation=2))
        await eventually(lambda: inv.counts().devices == 3, "c1's new slice")
        assert inv.node_names() == ["c1"]


async def test_a_node_pools_slice_list_never_decodes_other_nodes_slices(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[bytes] = []

    def recording(data: Any) -> Any:
        decoded.append(bytes(data))
        return orjson.loads(data)

    def typed(data: Any) -> Any:
        decoded.append(bytes(data))
        return decode_resource_slice(data)

    # The source's own decoding only (the double decodes with orjson too).
    monkeypatch.setattr(watch, "orjson", SimpleNamespace(
        loads=recording, JSONDecodeError=orjson.JSONDecodeError))
    monkeypatch.setattr(watch, "decode_resource_slice", typed)
    async with KubeHarness(tmp_path, pool=NodePool({"pool": "a"})) as h:
        h.server.create("nodes", node("a1", pool="a"))
        h.server.create("nodes", node("b1", pool="b"))
        h.server.create("resourceslices", gpu_slice("a1", 2))
        h.server.create("resourceslices", gpu_slice("b1", 2, name="slice-of-b1"))
        broken = gpu_slice("c1", 1, name="unreadable")
        broken["spec"]["nodeName"] = 7  # not skimmed: decoded whole, then rejected
        h.server.create("resourceslices", broken)
        h.watch()
        await h.synced()
        assert h.inventory.counts().devices == 2
        assert any(b"a1-gpus" in d for d in decoded)
        assert any(b"unreadable" in d for d in decoded)
        assert not any(b"slice-of-b1" in d for d in decoded)
        assert h.metric("drax_watch_invalid_objects_total", kind="ResourceSlice") == 1


def test_a_sliced_page_holds_its_items_undecoded_without_other_nodes_items() -> None:
    page = {"kind": "ResourceSliceList", "metadata": {"resourceVersion": "7", "continue": "t"},
            "items": [gpu_slice("a1", 1), gpu_slice("b1", 1),
                      {"metadata": {"name": "shared"}, "spec": {"allNodes": True}}]}
    for keeps, kept in (({"a1"}.__contains__, [0, 2]), (None, [0, 1, 2])):
        sliced = watch.slice_page(orjson.dumps(page), keeps)
        assert sliced["metadata"] == {"resourceVersion": "7", "continue": "t"}
        assert all(type(raw) is msgspec.Raw for raw in sliced["items"])
        assert [orjson.loads(bytes(raw)) for raw in sliced["items"]] == [
            page["items"][i] for i in kept]
    # a page the skim cannot read is decoded whole, for the list's checks to word
    assert watch.slice_page(b'{"items": 5}', None) == {"items": 5}
    with pytest.raises(watch.WatchError):
        watch.slice_page(b"[1]", {"a1"}.__contains__)


async def test_slice_events_are_decoded_straight_into_the_model(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[bytes] = []

    def recording(data: Any) -> Any:
        decoded.append(bytes(data))
        return orjson.loads(data)

    monkeypatch.setattr(watch, "orjson", SimpleNamespace(
        loads=recording, JSONDecodeError=orjson.JSONDecodeError))
    async with KubeHarness(tmp_path) as h:
        h.server.create("resourceslices", gpu_slice("node-a", 2))
        h.watch()
        await h.synced()
        await h.watching()
        h.server.create("resourceslices", gpu_slice("node-b", 3))
        h.server.update("resourceslices", gpu_slice("node-a", 4, generation=2))
        h.server.delete("resourceslices", "node-b-gpus")
        await h.caught_up()
        assert h.inventory.node_names() == ["node-a"]
        assert h.inventory.counts().devices == 4
        assert h.metric("drax_watch_events_total", kind="ResourceSlice", type="DELETED") == 1
        # No slice went through a dict tree: neither the list nor the events.
        assert not any(b"-gpus" in d for d in decoded)


async def test_a_list_puts_each_page_in_the_inventory_before_reading_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with KubeHarness(tmp_path, settings=replace(FAST, page_size=1)) as h:
        for i in range(3):
            h.server.create("resourceslices", gpu_slice(f"n{i}", 1))
        inventory = h.inventory
        opened = inventory.listing
        pages_read_at_put: list[int] = []

        def listing(kind: str) -> Any:
            one = opened(kind)
            if kind == "ResourceSlice":
                put = one.put

                def recording(obj: Any) -> None:
                    pages_read_at_put.append(sum(
                        "watch" not in q for q in h.server.watch_queries("resourceslices")))
                    put(obj)

                monkeypatch.setattr(one, "put", recording)
            return one

        monkeypatch.setattr(inventory, "listing", listing)
        h.watch()
        await h.synced()
        assert inventory.node_names() == ["n0", "n1", "n2"]
        # Each page's slice is in the inventory before the next page is read:
        # the parsed list is never held beside the inventory.
        assert pages_read_at_put == [1, 2, 3]


async def test_slice_events_freeze_what_they_built_every_few_devices(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        h.watch()
        await h.synced()
        await h.watching()
        frozen = gc.get_freeze_count()
        per_event = 16
        events = watch.FREEZE_AFTER_DEVICES // per_event
        assert events < watch.FREEZE_AFTER_EVENTS
        for i in range(events):
            h.server.create("resourceslices", gpu_slice(f"n{i}", per_event))
        await h.caught_up()
        assert h.inventory.counts().devices == events * per_event
        # The slices built are out of the collector's young passes.
        assert gc.get_freeze_count() > frozen
