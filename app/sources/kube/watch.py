"""List/watch the DRA objects into the inventory with informer semantics.

One `Informer` per kind drives its own list and watch requests through
kubernetes-asyncio with `_preload_content=False` and decodes the JSON-lines
stream with orjson: the client's `Watch` helper guesses model classes wrongly
for `resource.k8s.io/v1`, retries a 410 on its own, and building model objects
for thousands of devices costs more than the inventory's own parsing.

The loop is client-go's reflector, reduced to what drax needs:
- list (a consistent read, in pages of 500 like client-go's pager), each
  page parsed and put in the inventory as it arrives (`Inventory.listing`),
  then what the list did not hold deleted, so the state becomes exactly the
  list (objects deleted while away disappear) without the parsed list ever
  held beside the inventory; driven in slices of at most
  RELIST_SLICE_SECONDS (and, once synced, in small pages) so that a relist of
  a 100,000-node cluster never holds up a verb for long, and
  `mark_synced(kind)` the first time;
- watch from the list's resourceVersion with bookmarks and a server-side
  `timeoutSeconds` (randomised so the four watches do not reconnect in step),
  remembering the resourceVersion of every event and bookmark;
- after a clean close, a dropped connection or a server error: watch again
  from the last resourceVersion; after `410 Gone` (as an HTTP status or an
  ERROR event): list again;
- the first failure after a success (a dropped connection, an API-server
  restart) is retried at once; further ones (and suspiciously short empty
  watches, which count as failures) wait an exponential backoff with full
  jitter from `backoff_initial`, so a broken API server is never hammered in
  a tight loop. Any success resets it: a list read whole, a watch event, a
  watch that stayed open `min_watch`, or a 410 Gone (the server answers; the
  relist starts at once). client-go's reflector (0.37) starts at 0.8 s and
  resets only after 2 minutes without a failure; resetting on any success
  keeps a relist after a few failed watches from waiting out their whole
  backoff, so a 500 costs at most about a second more than the last one;
- `KubeSource.nudge()` cuts any wait short and resets the backoff: a standby
  that becomes leader does not wait out a backoff it grew while following.

With a node pool (`drax serve --node-selector`) the Node list and watch carry
the pool's label selector, so the API server sends only the pool's Nodes (and
DELETED for a Node whose labels stop matching). Slices cannot be selected by
their node's labels: the slice informer lists only once the Nodes are in,
the inventory drops node-local slices of other nodes before parsing them
(`Inventory.admits`), and a Node that joins the pool later makes the slice
informer relist, since its slices were dropped while it was outside. A slice
list page is skimmed (`slice_page`): msgspec finds each item's bounds and its
`spec.nodeName` without building it, and only the pool's items are decoded,
since decoding every slice of a large cluster costs more than parsing the
pool's.

ResourceSlices, list items and watch events alike, are decoded from their
JSON straight into the model (`decode_resource_slice`): no dict tree is built
for them, which would be most of a slice's cost. What that path does not take (a
bookmark, an error, an invalid slice) is read as a dict, as every other kind
is, and worded from there.

An object the inventory rejects (`InvalidObject`) is logged, counted and
skipped; the watch carries on and nothing already held is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

import aiohttp
import msgspec
import orjson
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from app import garbage_collector
from app.inventory import NodePool
from app.model import InvalidObject, decode_resource_slice, parse_object
from app.model.parse import parse_pod_usage
from app.sources.kube.metrics import WatchMetrics
from app.timeslice import run_in_slices

log = logging.getLogger(__name__)

APPLIED_EVENTS: Final = frozenset({"ADDED", "MODIFIED", "DELETED"})
# Longest a burst of watch events, or a relist, runs before it lets the event
# loop serve a verb. A verb needs a few turns of the loop (read, handler,
# write), each of which waits for one such slice, so slices are short: a
# turn of many MIG-partitioned slices' events would take tens of milliseconds,
# and a verb waits several turns.
EVENT_SLICE_SECONDS: Final = 0.002
RELIST_SLICE_SECONDS: Final = EVENT_SLICE_SECONDS
# What a list or watch parses stays in the inventory and holds no reference
# cycles, but the cyclic collector's full passes scan every object not frozen:
# parsed slices piling up unfrozen make long passes inside a burst or a
# relist. A list runs with the collector paused and freezes
# what it built; a watch freezes after every FREEZE_AFTER_EVENTS events, and
# after every FREEZE_AFTER_DEVICES devices of slice events: a partitionable
# node's slice builds a few hundred tracked objects, so a burst of them would
# otherwise set off a young collection every few events, and a middle one
# (about 0.7 ms at 20,000 nodes) inside one event in a few dozen.
# Freezing costs nothing (it moves lists), and the parsed slices hold no cycles.
FREEZE_AFTER_EVENTS: Final = 512
FREEZE_AFTER_DEVICES: Final = 128


class ListingSink(Protocol):
    """One list being applied (`Inventory.listing`)."""

    keys: set[str]

    def put(self, obj: Any) -> None: ...

    def keep(self, obj: Mapping[str, Any]) -> None: ...

    def finishing(self) -> Iterator[None]: ...


class EventSink(Protocol):
    """The inventory's event API, as far as a source uses it."""

    def apply(self, kind: str, event_type: str, obj: Mapping[str, Any],
              parse: Callable[[str, Any], Any] = parse_object) -> None: ...

    def apply_parsed(self, kind: str, event_type: str, parsed: Any) -> None: ...

    def listing(self, kind: str) -> ListingSink: ...

    def admits(self, kind: str, obj: Mapping[str, Any]) -> bool: ...

    def mark_synced(self, kind: str) -> None: ...


# Told of each applied event (kind, type, raw object) and of each completed list
# (kind, "LIST", None), after the inventory has taken it in. A ResourceSlice
# event decoded straight into the model (`decode_resource_slice`) has no raw
# object: None.
OnChange = Callable[[str, str, Mapping[str, Any] | None], None]


@dataclass(slots=True, frozen=True)
class WatchedKind:
    kind: str
    api: type  # the kubernetes-asyncio API class holding `list_method`
    list_method: str
    # Sent with every list and watch: the server filters before anything is sent.
    field_selector: str | None = None
    label_selector: str | None = None
    # Set: the list and watch of that one namespace (`list_method` is namespaced).
    namespace: str | None = None
    # Turns a listed item or a watch event's object into what the inventory
    # takes (another than `parse_object`: events are applied parsed).
    parse: Callable[[str, Any], Any] = parse_object


# Terminal pods hold no devices (the resourceclaim controller drops them from
# `reservedFor`) and are never scheduled again: the API server leaves them out,
# and sends a DELETED event when a pod becomes terminal.
LIVE_PODS: Final = "status.phase!=Succeeded,status.phase!=Failed"


def pod_uses_claims(obj: Mapping[str, Any]) -> bool:
    """A pod drax can preempt for or take devices from: it names ResourceClaims or
    holds the special claim of DRA-backed extended resources. Any other pod is
    left to kube-scheduler, so most pods of a cluster cost drax nothing."""
    spec = obj.get("spec")
    if isinstance(spec, Mapping) and spec.get("resourceClaims"):
        return True
    status = obj.get("status")
    return isinstance(status, Mapping) and bool(status.get("extendedResourceClaimStatus"))


def parse_live_pod(kind: str, obj: Any) -> Any:
    """A pod that uses claims parsed whole; any other only as what it takes of
    its node (`PodUsage`: preemption checks that a preemptor fits there), so
    most pods of a cluster cost drax a few numbers each."""
    if isinstance(obj, Mapping) and not pod_uses_claims(obj):
        return parse_pod_usage(obj)
    return parse_object(kind, obj)


WATCHED_KINDS: Final = (
    WatchedKind("Node", client.CoreV1Api, "list_node"),
    WatchedKind("DeviceClass", client.ResourceV1Api, "list_device_class"),
    WatchedKind("ResourceSlice", client.ResourceV1Api, "list_resource_slice"),
    WatchedKind("ResourceClaim", client.ResourceV1Api, "list_resource_claim_for_all_namespaces"),
    WatchedKind("Pod", client.CoreV1Api, "list_pod_for_all_namespaces",
                field_selector=LIVE_PODS, parse=parse_live_pod),
    WatchedKind("PodDisruptionBudget", client.PolicyV1Api,
                "list_pod_disruption_budget_for_all_namespaces"),
    WatchedKind("PriorityClass", client.SchedulingV1Api, "list_priority_class"),
)


@dataclass(slots=True, frozen=True)
class WatchSettings:
    """Timings; the defaults are client-go's reflector values, except the backoff's
    start (client-go: 0.8 s) and its reset (see the module doc): a dropped
    connection, three failed watches, 410 Gone and three failed lists wait at
    most 0 + 0.4 + 0.8 + 1.6, then 0 + 0.4 + 0.8 s."""

    watch_timeout: float = 300.0  # each watch asks for [t, 2t) seconds
    list_timeout: float = 60.0  # longest silence tolerated while a list is read
    page_size: int = 500  # objects per list page, as client-go's pager
    # A relist runs while verbs are served, and each page is decoded in one
    # piece: a page of 500 MIG-partitioned slices is megabytes and a decode
    # long enough to hold a verb up. The initial list (nothing is served
    # before it is in) keeps `page_size`.
    relist_page_size: int = 50
    connect_timeout: float = 10.0
    backoff_initial: float = 0.2
    backoff_max: float = 30.0
    min_watch: float = 1.0  # an empty watch shorter than this counts as a failure


class RelistRequired(Exception):
    """The held state can no longer be trusted to follow from the last resourceVersion."""


class ResourceExpired(RelistRequired):
    """410 Gone: the resourceVersion to resume from is no longer in the server's history."""


class WatchError(Exception):
    """A list or watch that failed in a way worth a backoff and a retry."""


class Backoff:
    """Exponential backoff with full jitter: the n-th wait is in [d, 2d), d = initial·2ⁿ."""

    def __init__(self, *, initial: float, maximum: float) -> None:
        self._initial = initial
        self._max = maximum
        self._next = initial

    def reset(self) -> None:
        self._next = self._initial

    def next(self) -> float:
        delay = min(self._max, self._next * (1.0 + random.random()))
        self._next = min(self._max, self._next * 2)
        return delay


class Informer:
    """Keeps one kind of the inventory equal to the API server's view of it."""

    def __init__(self, api_client: client.ApiClient, sink: EventSink, watched: WatchedKind, *,
                 metrics: WatchMetrics, settings: WatchSettings,
                 after: asyncio.Event | None = None,
                 on_change: OnChange | None = None,
                 keeps_node: Callable[[str], bool] | None = None) -> None:
        self.kind = watched.kind
        self._on_change = on_change
        list_call = getattr(watched.api(api_client), watched.list_method)
        if watched.namespace is not None:
            list_call = functools.partial(list_call, watched.namespace)
        self._list_call = list_call
        self._parse_item = watched.parse
        self._selecting: dict[str, str] = {}
        if watched.field_selector is not None:
            self._selecting["field_selector"] = watched.field_selector
        if watched.label_selector is not None:
            self._selecting["label_selector"] = watched.label_selector
        # Set once the first list is in; `after`: another informer's, awaited
        # before this one lists.
        self.listed = asyncio.Event()
        self._after = after
        # With it, a list page's node-local items of other nodes are never decoded.
        self._keeps_node = keeps_node
        # ResourceSlices are decoded from their JSON straight into the model.
        self._typed = watched.kind == "ResourceSlice"
        self._devices_built = 0  # by slice events since the last freeze
        self._listing_started = False
        self._relist_wanted = False
        self._response: aiohttp.ClientResponse | None = None
        self._sink = sink
        self._metrics = metrics
        self._settings = settings
        self._backoff = Backoff(initial=settings.backoff_initial, maximum=settings.backoff_max)
        self._failures = 0  # in a row, since the last success
        self._since_relist = False  # a success since the last 410 Gone
        self._watch_opened: float | None = None
        self._wake = asyncio.Event()
        self._synced = False
        # The kind's series, looked up once: a label lookup per event costs more
        # than the counter it finds.
        self._apply_seconds = metrics.apply_seconds.labels(kind=self.kind)
        self._applied = {t: metrics.events.labels(kind=self.kind, type=t)
                         for t in APPLIED_EVENTS}
        self.resource_version: str | None = None

    async def run(self) -> None:
        """List and watch until cancelled."""
        if self._after is not None:
            await self._after.wait()
        self._listing_started = True
        while True:
            try:
                if self._relist_wanted:
                    self._relist_wanted = False
                    self.resource_version = None
                if self.resource_version is None:
                    self.resource_version = await self._list()
                if self._relist_wanted:
                    continue
                await self._watch(self.resource_version)
                self._after_watch()
                continue
            except RelistRequired as exc:
                log.info("%s: %s; relisting", self.kind, exc)
                self._metrics.relists.labels(kind=self.kind).inc()
                self.resource_version = None
                if self._since_relist:  # the server answers: relist at once
                    self._succeeded()
                self._since_relist = False
            except (WatchError, ApiException, aiohttp.ClientError, TimeoutError, OSError,
                    orjson.JSONDecodeError) as exc:
                self._after_watch()
                if self._relist_wanted:  # the watch was closed for it
                    continue
                self._metrics.errors.labels(kind=self.kind).inc()
                log.warning("%s: list/watch failed (%s); resuming from resourceVersion %s",
                            self.kind, _describe(exc), self.resource_version or "<relist>")
            except Exception:
                # A bug, not bad input: keep watching, from a fresh list.
                self._metrics.errors.labels(kind=self.kind).inc()
                log.exception("%s: unexpected failure; relisting", self.kind)
                self.resource_version = None
            await self._sleep(self._pause())

    def request_relist(self) -> None:
        """List again soon (the current watch is closed), unless the first list
        has not started yet: it will see everything anyway."""
        if not self._listing_started:
            return
        self._relist_wanted = True
        self._wake.set()
        if self._response is not None:
            self._response.close()

    def nudge(self) -> None:
        """Retry now, and with a fresh backoff."""
        self._succeeded()
        self._wake.set()

    def _succeeded(self) -> None:
        self._failures = 0
        self._backoff.reset()
        self._since_relist = True

    def _after_watch(self) -> None:
        """A watch that stayed open long enough was a success before it failed."""
        opened, self._watch_opened = self._watch_opened, None
        if opened is not None and (asyncio.get_running_loop().time() - opened
                                   >= self._settings.min_watch):
            self._succeeded()

    def _pause(self) -> float:
        self._failures += 1
        return 0.0 if self._failures == 1 else self._backoff.next()

    async def _sleep(self, delay: float) -> None:
        if delay <= 0:
            return
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), delay)

    async def _list(self) -> str:
        """A full list, in pages of `page_size` from one consistent snapshot,
        each page parsed as it arrives: the raw objects of a 100,000-node
        cluster's slices would take several times the memory of the parsed ones.
        Read and applied with the cyclic collector paused (FREEZE_AFTER_EVENTS)."""
        with garbage_collector.paused(then_freeze=True):
            return await self._list_all()

    async def _list_all(self) -> str:
        listing = self._sink.listing(self.kind)
        token: str | None = None
        while True:
            decoded = await self._list_page(token)
            await run_in_slices(self._put(decoded.get("items") or [], listing),
                                slice_seconds=RELIST_SLICE_SECONDS)
            del decoded["items"]
            meta = decoded.get("metadata") or {}
            rv = str(meta.get("resourceVersion") or "")
            token = meta.get("continue") or None
            if token is None:
                break
        if not rv:
            raise WatchError("list: the response carries no metadata.resourceVersion")
        listed = len(listing.keys)
        await run_in_slices(listing.finishing(), slice_seconds=RELIST_SLICE_SECONDS)
        if self._on_change is not None:
            self._on_change(self.kind, "LIST", None)
        self._metrics.seen(self.kind)
        if not self._synced:
            self._sink.mark_synced(self.kind)
            self._synced = True
            self.listed.set()
        log.info("%s: listed %d objects at resourceVersion %s", self.kind, listed, rv)
        self._succeeded()
        return rv

    async def _list_page(self, token: str | None) -> dict[str, Any]:
        s = self._settings
        paging: dict[str, Any] = {"limit": s.relist_page_size if self._synced
                                  else s.page_size}
        if token is not None:
            paging["_continue"] = token
        resp = await self._list_call(
            **paging, **self._selecting, _preload_content=False,
            # No total: a big cluster's list may take long; a stalled one may not.
            _request_timeout=aiohttp.ClientTimeout(sock_connect=s.connect_timeout,
                                                   sock_read=s.list_timeout))
        try:
            body = await resp.read()
        finally:
            resp.release()
        if resp.status == 410:
            # The snapshot behind the continue token is gone: start over.
            raise ResourceExpired(_status_message(body))
        if resp.status != 200:
            raise WatchError(f"list: HTTP {resp.status}: {_status_message(body)}")
        if self._typed:
            return slice_page(body, self._keeps_node)
        decoded = orjson.loads(body)
        if not isinstance(decoded, dict):
            raise WatchError("list: the response is not an object")
        return decoded

    def _put(self, raw: Iterable[Any], listing: ListingSink) -> Iterator[None]:
        """Parse each listed object of a page and put it in the inventory at
        once (a slice page's items come undecoded: `slice_page`); an object the
        inventory would reject is counted and skipped, so one broken object
        cannot keep the whole kind stale, and the copy held of it stays."""
        admits = self._sink.admits
        parse = self._parse_item
        kind = self.kind
        for item in raw:
            try:
                if type(item) is msgspec.Raw:
                    parsed = decode_resource_slice(item)
                elif not admits(kind, item):
                    continue
                else:
                    parsed = parse(kind, item)
            except InvalidObject as exc:
                self._metrics.invalid.labels(kind=kind).inc()
                log.warning("%s: rejected from the list: %s", kind, exc)
                listing.keep(orjson.loads(memoryview(item)) if type(item) is msgspec.Raw
                             else item)
            except orjson.JSONDecodeError as exc:  # an undecoded item's bytes (not UTF-8)
                self._metrics.invalid.labels(kind=kind).inc()
                named = _named(item)
                log.warning("%s %s: rejected from the list: not JSON (%s)", kind,
                            named["metadata"].get("name") or "(unnamed)", exc)
                listing.keep(named)
            else:
                listing.put(parsed)
                del parsed
            yield

    async def _watch(self, rv: str) -> None:
        """One watch request from `rv`; `resource_version` follows every event."""
        s = self._settings
        # timeoutSeconds=0 would mean "no timeout" to the API server.
        timeout = max(1, int(s.watch_timeout * (1.0 + random.random())))
        loop = asyncio.get_running_loop()
        started = loop.time()
        resp = await self._list_call(
            watch=True, resource_version=rv, allow_watch_bookmarks=True, **self._selecting,
            timeout_seconds=timeout, _preload_content=False,
            # Nothing at all for longer than the whole watch: the connection is dead.
            _request_timeout=aiohttp.ClientTimeout(sock_connect=s.connect_timeout,
                                                   sock_read=timeout + s.list_timeout))
        events = 0
        deadline = loop.time() + EVENT_SLICE_SECONDS
        try:
            if resp.status != 200:
                body = await resp.read()
                if resp.status == 410:
                    raise ResourceExpired(_status_message(body))
                raise WatchError(f"watch: HTTP {resp.status}: {_status_message(body)}")
            self._watch_opened = started
            self._response = resp
            if self._relist_wanted:
                return
            buf = bytearray()
            async for chunk in resp.content.iter_any():
                buf += chunk
                start = 0
                while (end := buf.find(b"\n", start)) >= 0:
                    if end > start:
                        self._handle(bytes(buf[start:end]))
                        events += 1
                        if events == 1:
                            self._succeeded()
                        if events % FREEZE_AFTER_EVENTS == 0:
                            garbage_collector.freeze()
                        if loop.time() >= deadline:
                            await asyncio.sleep(0)
                            deadline = loop.time() + EVENT_SLICE_SECONDS
                    start = end + 1
                del buf[:start]
            if buf.strip():
                self._handle(bytes(buf))
                events += 1
        finally:
            self._response = None
            resp.release()
        if events == 0 and loop.time() - started < s.min_watch:
            raise WatchError("watch closed at once without any event")

    def _handle(self, line: bytes) -> None:
        started = time.perf_counter()
        if self._typed and self._handle_typed(line, started):
            return
        event = orjson.loads(line)
        if not isinstance(event, dict):
            raise WatchError(f"watch line is not an event object: {line[:80]!r}")
        event_type = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            raise WatchError(f"watch event {event_type!r} without an object")
        if event_type == "ERROR":
            if obj.get("code") == 410:
                raise ResourceExpired(obj.get("message") or "resourceVersion expired")
            raise WatchError(f"watch ERROR {obj.get('code')}: {obj.get('message')}")
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if rv:
            self.resource_version = rv
        self._metrics.seen(self.kind)
        if event_type == "BOOKMARK":
            return
        if event_type not in APPLIED_EVENTS:
            log.warning("%s: ignoring watch event of unknown type %r", self.kind, event_type)
            return
        try:
            self._sink.apply(self.kind, event_type, obj, self._parse_item)
        except InvalidObject as exc:
            self._metrics.invalid.labels(kind=self.kind).inc()
            log.warning("%s %s: rejected: %s", self.kind, event_type, exc)
        except Exception as exc:
            log.exception("%s %s: the inventory failed to apply it", self.kind, event_type)
            raise RelistRequired(f"applying a {event_type} event failed ({exc})") from exc
        else:
            self._applied[event_type].inc()
            self._apply_seconds.observe(time.perf_counter() - started)
            if self._on_change is not None:
                self._on_change(self.kind, event_type, obj)


    def _handle_typed(self, line: bytes, started: float) -> bool:
        """A slice's ADDED, MODIFIED or DELETED event, its object decoded straight
        into the model; False for any other line (a bookmark, an error, a slice of
        a node outside the pool, an invalid or undecodable object), which
        `_handle` then reads as a plain dict and words what is wrong."""
        try:
            event = _EVENT.decode(line)
        except msgspec.DecodeError:
            return False
        event_type, raw = event.type, event.object
        if event_type not in APPLIED_EVENTS or not len(raw):
            return False
        if self._keeps_node is not None and not _keeps(raw, self._keeps_node):
            return False  # `apply` drops it without parsing it
        try:
            parsed = decode_resource_slice(raw)
        except (InvalidObject, orjson.JSONDecodeError):
            return False
        if parsed.resource_version:
            self.resource_version = parsed.resource_version
        self._metrics.seen(self.kind)
        try:
            self._sink.apply_parsed(self.kind, event_type, parsed)
        except Exception as exc:
            log.exception("%s %s: the inventory failed to apply it", self.kind, event_type)
            raise RelistRequired(f"applying a {event_type} event failed ({exc})") from exc
        self._applied[event_type].inc()
        self._apply_seconds.observe(time.perf_counter() - started)
        self._devices_built += len(parsed.devices)
        if self._devices_built >= FREEZE_AFTER_DEVICES:
            garbage_collector.freeze()
            self._devices_built = 0
        if self._on_change is not None:
            self._on_change(self.kind, event_type, None)
        return True


class KubeSource:
    """Runs one informer per watched kind as background tasks."""

    def __init__(self, api_client: client.ApiClient, sink: EventSink, *, metrics: WatchMetrics,
                 settings: WatchSettings | None = None,
                 kinds: Iterable[WatchedKind] = WATCHED_KINDS,
                 pool: NodePool | None = None,
                 on_change: OnChange | None = None) -> None:
        settings = settings or WatchSettings()
        kinds = list(kinds)
        if pool is not None:
            kinds = [dataclasses.replace(w, label_selector=pool.describe())
                     if w.kind == "Node" else w for w in kinds]
        self.informers: list[Informer] = []
        nodes: Informer | None = None
        for w in kinds:
            after = nodes.listed if (pool is not None and nodes is not None
                                     and w.kind == "ResourceSlice") else None
            keeps_node = (pool.members.__contains__
                          if pool is not None and w.kind == "ResourceSlice" else None)
            informer = Informer(api_client, sink, w, metrics=metrics, settings=settings,
                                after=after, on_change=on_change, keeps_node=keeps_node)
            self.informers.append(informer)
            if w.kind == "Node":
                nodes = informer
            elif pool is not None and w.kind == "ResourceSlice":
                pool.on_join = lambda _name, i=informer: i.request_relist()
        self._pool = pool
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(i.run(), name=f"watch-{i.kind}")
                       for i in self.informers]

    def nudge(self) -> None:
        """Every informer waiting out a backoff retries now, with the backoff reset."""
        for informer in self.informers:
            informer.nudge()

    async def stop(self) -> None:
        if self._pool is not None:
            self._pool.on_join = None
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []


class _SkimSpec(msgspec.Struct):
    nodeName: str | None = None


class _SkimItem(msgspec.Struct):
    spec: _SkimSpec | None = None


class _SkimMeta(msgspec.Struct):
    resourceVersion: str | None = None
    # `continue` is a keyword: renamed to the API's name.
    token: str | None = msgspec.field(default=None, name="continue")


class _SkimPage(msgspec.Struct):
    metadata: _SkimMeta | None = None
    items: list[msgspec.Raw] | None = None


class _SkimName(msgspec.Struct):
    name: str | None = None
    namespace: str | None = None


class _SkimNamed(msgspec.Struct):
    metadata: _SkimName | None = None


_PAGE = msgspec.json.Decoder(_SkimPage)
_ITEM = msgspec.json.Decoder(_SkimItem)
_NAMED = msgspec.json.Decoder(_SkimNamed)


def _named(raw: msgspec.Raw) -> dict[str, Any]:
    """The metadata naming a listed item whose bytes are not JSON as a whole
    (msgspec checks only the strings it decodes), so the copy held of it
    stays; empty metadata when even its name cannot be read."""
    try:
        meta = _NAMED.decode(raw).metadata or _SkimName()
    except msgspec.DecodeError:
        meta = _SkimName()
    return {"metadata": {k: v for k, v in msgspec.structs.asdict(meta).items()
                         if v is not None}}


def slice_page(body: bytes, keeps_node: Callable[[str], bool] | None) -> dict[str, Any]:
    """A ResourceSlice list page as `orjson.loads` gives it, but with each item
    left undecoded (`msgspec.Raw`, for `decode_resource_slice`) and, with
    `keeps_node`, without the node-local items of nodes it refuses. A page the
    skim cannot read is decoded whole, for the callers' checks to word."""
    try:
        page = _PAGE.decode(body)
    except msgspec.DecodeError:
        decoded = orjson.loads(body)
        if not isinstance(decoded, dict):
            raise WatchError("list: the response is not an object") from None
        return decoded
    items = page.items or []
    if keeps_node is not None:
        items = [raw for raw in items if _keeps(raw, keeps_node)]
    meta = page.metadata or _SkimMeta()
    return {"metadata": {"resourceVersion": meta.resourceVersion, "continue": meta.token},
            "items": items}


def _keeps(raw: msgspec.Raw, keeps_node: Callable[[str], bool]) -> bool:
    """False for a node-local slice of a node `keeps_node` refuses."""
    try:
        spec = _ITEM.decode(raw).spec
    except msgspec.DecodeError:
        return True  # the parse says what is wrong with it
    return spec is None or not spec.nodeName or keeps_node(spec.nodeName)


class _Event(msgspec.Struct, gc=False):
    type: str | None = None
    object: msgspec.Raw = msgspec.Raw()  # empty when absent (msgspec takes no Raw | None)


_EVENT = msgspec.json.Decoder(_Event)


class ListError(Exception):
    """A one-shot list failed; the message names the kind and the cause."""


async def list_once(api_client: client.ApiClient, sink: EventSink, *, metrics: WatchMetrics,
                    settings: WatchSettings | None = None,
                    kinds: Iterable[WatchedKind] = WATCHED_KINDS) -> None:
    """Every kind listed once into `sink`, as an informer's first list, and no
    retry: a one-shot reader (`drax capacity --kubeconfig`) reports an API
    server it cannot reach instead of waiting for it to come back."""
    async def one(informer: Informer) -> None:
        try:
            await informer._list()
        except (RelistRequired, WatchError, ApiException, aiohttp.ClientError, TimeoutError,
                OSError, orjson.JSONDecodeError) as exc:
            detail = (str(exc).removeprefix("list: ") if isinstance(exc, WatchError)
                      else _describe(exc))
            raise ListError(f"{informer.kind}: list failed: {detail}") from None

    source = KubeSource(api_client, sink, metrics=metrics, settings=settings, kinds=kinds)
    try:
        async with asyncio.TaskGroup() as group:
            for informer in source.informers:
                group.create_task(one(informer))
    except* ListError as failed:
        raise failed.exceptions[0] from None


def _status_message(body: bytes) -> str:
    try:
        status = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body[:200].decode("utf-8", "replace")
    if isinstance(status, dict) and status.get("message"):
        return str(status["message"])
    return body[:200].decode("utf-8", "replace")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return f"HTTP {exc.status}: {exc.reason}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
