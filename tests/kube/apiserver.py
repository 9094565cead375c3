"""An API-server test double speaking the real list/watch protocol on loopback.

The kube source and the binder are tested with the real kubernetes-asyncio
client over HTTP, so this double implements the wire behaviour they depend on,
not a mock of the client: lists carry `metadata.resourceVersion` and are
paged with `limit` / `continue` from one snapshot (410 once it expires); watches are
chunked JSON-lines streams of ADDED / MODIFIED / DELETED / BOOKMARK events
resumable from any resourceVersion still in the history, and an ERROR event
with a 410 Status once that version has been compacted away; `timeoutSeconds`
closes a watch cleanly; `drop_watches()` aborts every open stream mid-flight;
PUT on an object or its status subresource honours the resourceVersion
precondition (409 Conflict) and the `reservedFor` validation; pods/binding
answers 201 with a Status, or fails on demand. POST on a collection creates
(`generateName` completed with five random characters, 409 on a taken name);
DELETE removes an object, or only marks it deleting while finalizers remain
(or, for a pod on a node, until the test removes it as its kubelet would),
honouring `preconditions` (409); PATCH of pods/status applies a JSON merge
patch, or a strategic one (conditions merged by type), honouring
`metadata.uid` and `metadata.resourceVersion` as preconditions (409). Lists
and watches of pods honour a `fieldSelector` (`a=b`, `a!=b` over a few pod
fields, `metadata.name` also for the other kinds, as a Lease is followed): a
watched object that stops matching arrives as DELETED. `Faults` makes requests fail
on demand: counted faults for lists, watches, status PUTs and bindings, and a
seeded random share of all writes failing with 500, 429, a 409 (someone
else's update first), a timeout (nothing applied, no answer in time) or a
lost reply (applied, no answer in time).

One global resourceVersion counter orders every change, as etcd's revision
does. Objects are stored and served as plain dicts (copied on the way in and out)
so tests can assert on exactly what the client wrote.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import random
import socket
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

RESOURCE_GROUP = "/apis/resource.k8s.io/v1"
RESERVED_FOR_MAX = 256
WRITE_METHODS = frozenset({"PUT", "POST", "PATCH", "DELETE"})
WRITE_FAULTS = ("500", "429", "409", "timeout", "lost-reply")
_BUMP = web.RequestKey("bump", bool)  # a "409" fault: another writer goes first


@dataclass(slots=True, frozen=True)
class Resource:
    plural: str
    kind: str
    api_version: str
    namespaced: bool


RESOURCES = {
    "resourceslices": Resource("resourceslices", "ResourceSlice", "resource.k8s.io/v1", False),
    "deviceclasses": Resource("deviceclasses", "DeviceClass", "resource.k8s.io/v1", False),
    "resourceclaims": Resource("resourceclaims", "ResourceClaim", "resource.k8s.io/v1", True),
    "nodes": Resource("nodes", "Node", "v1", False),
    "pods": Resource("pods", "Pod", "v1", True),
    "poddisruptionbudgets": Resource("poddisruptionbudgets", "PodDisruptionBudget", "policy/v1",
                                     True),
    "priorityclasses": Resource("priorityclasses", "PriorityClass", "scheduling.k8s.io/v1",
                                False),
    "events": Resource("events", "Event", "events.k8s.io/v1", True),
    "leases": Resource("leases", "Lease", "coordination.k8s.io/v1", True),
}
# Pod fields a fieldSelector may test, as the API server's pod field labels.
POD_FIELDS = {"status.phase": ("status", "phase"), "spec.nodeName": ("spec", "nodeName"),
              "spec.schedulerName": ("spec", "schedulerName"),
              "metadata.name": ("metadata", "name"),
              "metadata.namespace": ("metadata", "namespace")}


@dataclass(slots=True)
class _Watcher:
    plural: str
    queue: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)
    request: web.Request | None = None
    selects: Callable[[Mapping[str, Any]], bool] | None = None  # its fieldSelector
    name: str = ""  # its fieldSelector's metadata.name, if any

    def line(self, line: bytes) -> bytes | None:
        """`line` as this watcher sees it: an object its fieldSelector no longer
        selects is DELETED for it (the API server's watch cache does the same);
        None for an object of another name, which it never selected."""
        if self.selects is None:
            return line
        event = orjson.loads(line)
        if self.name and event["object"]["metadata"]["name"] != self.name:
            return None
        if event["type"] != "DELETED" and not self.selects(event["object"]):
            return orjson.dumps({"type": "DELETED", "object": event["object"]}) + b"\n"
        return line


def _selected_name(raw: str) -> str:
    """X of a `metadata.name=X` term of a fieldSelector, "" without one."""
    for term in raw.split(","):
        field_name, sep, value = term.partition("=")
        if field_name == "metadata.name" and sep:
            return value.lstrip("=")
    return ""


def field_selector(raw: str) -> Callable[[Mapping[str, Any]], bool] | None:
    """`a=b,c!=d` over POD_FIELDS (None selects everything); ValueError otherwise."""
    tests: list[tuple[tuple[str, str], bool, str]] = []
    for term in filter(None, raw.split(",")):
        negate = "!=" in term
        name, _, value = term.partition("!=" if negate else "=")
        value = value.lstrip("=")
        if name not in POD_FIELDS:
            raise ValueError(f'field label not supported: {name}')
        tests.append((POD_FIELDS[name], negate, value))
    if not tests:
        return None

    def selects(obj: Mapping[str, Any]) -> bool:
        for (part, key), negate, value in tests:
            actual = str((obj.get(part) or {}).get(key) or "")
            if (actual == value) == negate:
                return False
        return True

    return selects


def label_selector(raw: str) -> Callable[[Mapping[str, Any]], bool] | None:
    """Equality-based `a=b,c==d,e!=f` over metadata.labels (None selects everything)."""
    tests: list[tuple[str, bool, str]] = []
    for term in filter(None, raw.split(",")):
        negate = "!=" in term
        name, _, value = term.partition("!=" if negate else "=")
        tests.append((name.strip(), negate, value.lstrip("=").strip()))
    if not tests:
        return None

    def selects(obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all((labels.get(name) == value) != negate for name, negate, value in tests)

    return selects


def both(a: Callable[[Mapping[str, Any]], bool] | None,
         b: Callable[[Mapping[str, Any]], bool] | None
         ) -> Callable[[Mapping[str, Any]], bool] | None:
    if a is None or b is None:
        return a or b
    return lambda obj: a(obj) and b(obj)


@dataclass(slots=True)
class Faults:
    """Failures the next requests should meet; each counter is consumed as used."""

    # Status PUTs that first see a concurrent writer bump the object (-> 409).
    status_conflicts: int = 0
    # pods/status PATCHes that first see a concurrent writer bump the pod (a patch
    # carrying metadata.resourceVersion then meets 409).
    pod_status_conflicts: int = 0
    # pods/binding requests answered with a 500 after doing nothing.
    binding_failures: int = 0
    # Watch requests answered with a 500 before streaming anything.
    watch_errors: int = 0
    # List requests answered with a 500.
    list_errors: int = 0
    # List requests with a continue token answered with 410 Expired.
    expired_continues: int = 0
    # When set, list and watch faults hit only this resource (e.g. "nodes").
    only_plural: str = ""
    # The status of list and watch faults: 500, or 429 with Retry-After: 1.
    status: int = 500
    # The share of writes (PUT, POST, PATCH, DELETE) failing at random with one of
    # `write_kinds`, drawn from a generator seeded with `seed`; "409" applies to
    # PUTs (another writer bumps the object first), the others to any write.
    write_rate: float = 0.0
    write_kinds: tuple[str, ...] = WRITE_FAULTS
    seed: int = 0
    # Instead of a random share: the first of every `write_period` writes fails.
    write_period: int = 0
    # Every write after this many fails with a 500 (an API server going down).
    fail_writes_after: int = 0
    writes: int = 0
    # How long a "timeout" or "lost-reply" holds its answer back.
    stall_seconds: float = 1.0
    # Every write waits this long first (an API server under load).
    write_delay: float = 0.0
    injected: collections.Counter[str] = field(default_factory=collections.Counter)
    _rng: random.Random | None = None

    def hits(self, plural: str) -> bool:
        return not self.only_plural or self.only_plural == plural

    def draw_write(self, method: str) -> str | None:
        if method not in WRITE_METHODS:
            return None
        self.writes += 1
        if 0 < self.fail_writes_after < self.writes:
            return "500"
        if self._rng is None:
            self._rng = random.Random(self.seed)
        if self.write_period > 0:
            if (self.writes - 1) % self.write_period:
                return None
        elif self.write_rate <= 0 or self._rng.random() >= self.write_rate:
            return None
        kinds = [k for k in self.write_kinds if method == "PUT" or k != "409"]
        kind = self._rng.choice(kinds) if kinds else None
        if kind is not None:
            self.injected[kind] += 1
        return kind

    def answer_write(self, fault: str, method: str) -> web.Response:
        if fault == "429":
            return self._too_many(f"{method} failed on demand")
        return _status(500, "InternalError", f"{method} failed on demand")

    def _too_many(self, message: str) -> web.Response:
        response = _status(429, "TooManyRequests", message)
        response.headers["Retry-After"] = "1"
        return response

    def answer(self, message: str) -> web.Response:
        if self.status == 429:
            return self._too_many(message)
        return _status(self.status, "InternalError", message)


class FakeApiServer:
    """The double itself; `start()` binds 127.0.0.1 on a free port."""

    def __init__(self, *, bookmark_interval: float = 0.5) -> None:
        self.bookmark_interval = bookmark_interval
        self.store: dict[str, dict[tuple[str, str], dict[str, Any]]] = {p: {} for p in RESOURCES}
        self.history: list[tuple[int, str, bytes]] = []  # (rv, plural, encoded event)
        self.compacted_rv = 0
        self.faults = Faults()
        self.requests: list[tuple[str, str]] = []  # (method, path) of every request
        self.status_writes: list[dict[str, Any]] = []  # bodies of accepted status PUTs
        self.bindings: list[dict[str, Any]] = []
        self.created: list[dict[str, Any]] = []  # bodies of accepted POSTs
        self.deleted: list[tuple[str, str, str]] = []  # (plural, namespace, name) asked
        self.delete_options: list[dict[str, Any]] = []  # DeleteOptions bodies, in order
        self.status_patches: list[dict[str, Any]] = []  # pods/status merge patches
        self.collection_queries: list[tuple[str, dict[str, str]]] = []  # lists and watches
        self.before_status_put: Callable[[str, str], None] | None = None
        self._rv = itertools.count(100)
        self._current_rv = 99
        self._uids = itertools.count(1)
        self._watchers: list[_Watcher] = []
        self._held: dict[str, list[bytes]] = {}  # plural -> events not yet sent to watchers
        self._snapshots: dict[str, tuple[int, list[dict[str, Any]], int]] = {}  # paged lists
        self._runner: web.AppRunner | None = None
        self.port = 0

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
        await self._runner.setup()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        site = web.SockSite(self._runner, sock)
        await site.start()

    async def stop(self) -> None:
        self.drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kubeconfig(self) -> str:
        """A kubeconfig pointing the real client at this server."""
        return (
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
            f"clusters:\n- name: fake\n  cluster:\n    server: {self.url}\n"
            "users:\n- name: fake\n  user:\n    token: fake-token\n"
            "contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n"
        )

    # ------------------------------------------------------------------ test controls

    @property
    def resource_version(self) -> int:
        return self._current_rv

    def create(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        obj = _copy(obj)
        res = RESOURCES[plural]
        meta = obj.setdefault("metadata", {})
        if res.namespaced:
            meta.setdefault("namespace", "default")
        meta.setdefault("uid", f"uid-{next(self._uids)}")
        key = self._key(res, meta.get("namespace", ""), meta["name"])
        event = "MODIFIED" if key in self.store[plural] else "ADDED"
        return self._commit(plural, key, obj, event)

    def preload(self, plural: str, objects: Iterable[dict[str, Any]]) -> None:
        """Store `objects` as they are (no copy, no watch event): the starting
        state of a big cluster for a start-up benchmark, served by lists. A value
        may be an `orjson.Fragment` (JSON encoded once, sent as is)."""
        res = RESOURCES[plural]
        for obj in objects:
            meta = obj["metadata"]
            if res.namespaced:
                meta.setdefault("namespace", "default")
            meta.setdefault("uid", f"uid-{next(self._uids)}")
            self._current_rv = rv = next(self._rv)
            meta["resourceVersion"] = str(rv)
            obj["apiVersion"], obj["kind"] = res.api_version, res.kind
            self.store[plural][self._key(res, meta.get("namespace", ""), meta["name"])] = obj

    def update(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        return self.create(plural, obj)

    def delete(self, plural: str, name: str, namespace: str = "") -> None:
        res = RESOURCES[plural]
        key = self._key(res, namespace or ("default" if res.namespaced else ""), name)
        obj = _copy(self.store[plural].pop(key))
        rv = next(self._rv)
        self._current_rv = rv
        obj["metadata"]["resourceVersion"] = str(rv)
        self._record(rv, plural, "DELETED", obj)

    def get(self, plural: str, name: str, namespace: str = "") -> dict[str, Any]:
        res = RESOURCES[plural]
        key = self._key(res, namespace or ("default" if res.namespaced else ""), name)
        return _copy(self.store[plural][key])

    def compact(self) -> None:
        """Forget the event history: every older resourceVersion becomes 410 Gone."""
        self.history.clear()
        self.compacted_rv = self._current_rv

    def drop_watches(self) -> None:
        """Abort every open watch connection mid-stream, as a failing LB would."""
        for w in list(self._watchers):
            if w.request is not None and w.request.transport is not None:
                w.request.transport.abort()
            w.queue.put_nowait(None)

    def hold_watches(self, plural: str) -> None:
        """Keep `plural`'s new events from its open watches until `release_watches`
        (a watch trailing the store, as one behind a busy watch cache does)."""
        self._held.setdefault(plural, [])

    def release_watches(self, plural: str) -> None:
        for line in self._held.pop(plural, []):
            self._send(plural, line)

    def inject(self, plural: str, raw: bytes) -> None:
        """Send `raw` as is on every open watch of `plural` (a corrupt stream)."""
        for w in self._watchers:
            if w.plural == plural:
                w.queue.put_nowait(raw)

    def open_watches(self, plural: str) -> int:
        return sum(1 for w in self._watchers if w.plural == plural)

    def watch_queries(self, plural: str) -> list[dict[str, str]]:
        """Query parameters of every list and watch request on `plural`, in order."""
        return [q for p, q in self.collection_queries if p == plural]

    def count(self, method: str, suffix: str) -> int:
        return sum(1 for m, p in self.requests if m == method and p.endswith(suffix))

    # ------------------------------------------------------------------ internals

    @staticmethod
    def _key(res: Resource, namespace: str, name: str) -> tuple[str, str]:
        return (namespace if res.namespaced else "", name)

    def _commit(self, plural: str, key: tuple[str, str], obj: dict[str, Any],
                event: str) -> dict[str, Any]:
        res = RESOURCES[plural]
        rv = next(self._rv)
        self._current_rv = rv
        obj["apiVersion"] = res.api_version
        obj["kind"] = res.kind
        obj["metadata"]["resourceVersion"] = str(rv)
        self.store[plural][key] = obj
        self._record(rv, plural, event, obj)
        return _copy(obj)

    def _record(self, rv: int, plural: str, event: str, obj: dict[str, Any]) -> None:
        # Encoded once, as the API server's watch cache does: stored objects are
        # never mutated in place (every change stores a new dict), so sharing is safe.
        line = orjson.dumps({"type": event, "object": obj}) + b"\n"
        self.history.append((rv, plural, line))
        held = self._held.get(plural)
        if held is not None:
            held.append(line)
        else:
            self._send(plural, line)

    def _send(self, plural: str, line: bytes) -> None:
        for w in self._watchers:
            if w.plural == plural and (seen := w.line(line)) is not None:
                w.queue.put_nowait(seen)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((request.method, request.path))
        if self.faults.write_delay > 0 and request.method in WRITE_METHODS:
            await asyncio.sleep(self.faults.write_delay)
        fault = self.faults.draw_write(request.method)
        if fault is None:
            return await self._route(request)
        return await self._fail_write(fault, request, self._route)

    async def _fail_write(self, fault: str, request: web.Request,
                          route: Callable[[web.Request], Awaitable[web.StreamResponse]]
                          ) -> web.StreamResponse:
        if fault in ("500", "429"):
            return self.faults.answer_write(fault, request.method)
        if fault == "timeout":
            await asyncio.sleep(self.faults.stall_seconds)
            return _status(504, "Timeout", "the request did not complete in time")
        if fault == "409":
            request[_BUMP] = True
            return await route(request)
        answer = await route(request)  # lost-reply: applied, answered too late
        await asyncio.sleep(self.faults.stall_seconds)
        return answer

    async def _route(self, request: web.Request) -> web.StreamResponse:
        parts = request.path.strip("/").split("/")
        if request.path.startswith("/apis/") and len(parts) >= 3:
            parts = parts[3:]
        elif request.path.startswith("/api/v1"):
            parts = parts[2:]
        else:
            return _status(404, "NotFound", f"no route for {request.path}")
        namespace = ""
        if len(parts) >= 3 and parts[0] == "namespaces":
            namespace, parts = parts[1], parts[2:]
        if not parts or parts[0] not in RESOURCES:
            return _status(404, "NotFound", f"no route for {request.path}")
        plural = parts[0]
        if len(parts) == 1 and request.method == "GET":
            self.collection_queries.append((plural, dict(request.query)))
            try:
                selects = both(field_selector(request.query.get("fieldSelector", "")),
                               label_selector(request.query.get("labelSelector", "")))
            except ValueError as exc:
                return _status(400, "BadRequest", str(exc))
            if request.query.get("watch", "").lower() in ("true", "1"):
                return await self._watch(request, plural, selects)
            return self._list(plural, namespace, request.query, selects)
        if len(parts) == 1 and request.method == "POST":
            return await self._post(request, plural, namespace)
        if len(parts) == 2 and request.method == "DELETE":
            return await self._delete_request(request, plural, namespace, parts[1])
        if plural == "pods" and len(parts) == 3 and parts[2] == "status" \
                and request.method == "PATCH":
            return await self._patch_status(request, namespace, parts[1])
        if len(parts) == 2 and request.method == "GET":
            return self._get(plural, namespace, parts[1])
        if len(parts) == 2 and request.method == "PUT":
            return await self._put(request, plural, namespace, parts[1], status=False)
        if len(parts) == 3 and parts[2] == "status" and request.method == "PUT":
            return await self._put(request, plural, namespace, parts[1], status=True)
        if plural == "pods" and len(parts) == 3 and parts[2] == "binding" \
                and request.method == "POST":
            return await self._bind(request, namespace, parts[1])
        return _status(405, "MethodNotAllowed", f"{request.method} {request.path}")

    def _list(self, plural: str, namespace: str, query: Mapping[str, str],
              selects: Callable[[Mapping[str, Any]], bool] | None = None) -> web.Response:
        if self.faults.list_errors > 0 and self.faults.hits(plural):
            self.faults.list_errors -= 1
            return self.faults.answer("list failed on demand")
        res = RESOURCES[plural]
        limit = int(query.get("limit") or 0)
        token = query.get("continue")
        if token:
            page = self._snapshots.get(token)
            if page is None or page[0] < self.compacted_rv or self.faults.expired_continues > 0:
                self.faults.expired_continues = max(0, self.faults.expired_continues - 1)
                return _status(410, "Expired", "The provided continue parameter is too old to "
                               "display a consistent list result. You can start a new list "
                               "without the continue parameter.")
            rv, items, offset = page
        else:
            # List items carry no kind, as on a real server.
            rv, offset = self._current_rv, 0
            items = [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")}
                     for (ns, _), o in sorted(self.store[plural].items())
                     if (not namespace or ns == namespace) and (selects is None or selects(o))]
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        end = offset + limit if limit > 0 else len(items)
        if end < len(items):
            # Later pages come from the same snapshot, as etcd serves them at rv.
            meta["continue"] = next_token = f"{plural}-{rv}-{end}"
            self._snapshots[next_token] = (rv, items, end)
        body = {"kind": f"{res.kind}List", "apiVersion": res.api_version,
                "metadata": meta, "items": items[offset:end]}
        return web.Response(body=orjson.dumps(body), content_type="application/json")

    def _get(self, plural: str, namespace: str, name: str) -> web.Response:
        obj = self.store[plural].get(self._key(RESOURCES[plural], namespace, name))
        if obj is None:
            return _status(404, "NotFound", f'{plural} "{name}" not found')
        return web.Response(body=orjson.dumps(obj), content_type="application/json")

    async def _watch(self, request: web.Request, plural: str,
                     selects: Callable[[Mapping[str, Any]], bool] | None = None
                     ) -> web.StreamResponse:
        if self.faults.watch_errors > 0 and self.faults.hits(plural):
            self.faults.watch_errors -= 1
            return self.faults.answer("etcd leader changed")
        res = RESOURCES[plural]
        since = request.query.get("resourceVersion", "")
        bookmarks = request.query.get("allowWatchBookmarks", "").lower() in ("true", "1")
        timeout = float(request.query.get("timeoutSeconds", "1800"))
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        watcher = _Watcher(plural=plural, request=request, selects=selects,
                           name=_selected_name(request.query.get("fieldSelector", "")))
        if since in ("", "0"):
            backlog = [orjson.dumps({"type": "ADDED", "object": o}) + b"\n"
                       for o in self.store[plural].values() if selects is None or selects(o)]
        elif int(since) < self.compacted_rv:
            gone = {"type": "ERROR", "object": {
                "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410,
                "reason": "Expired", "message": f"too old resource version: {since} "
                f"({self.compacted_rv})"}}
            await resp.write(orjson.dumps(gone) + b"\n")
            return resp
        else:
            seen = (watcher.line(line) for rv, p, line in self.history
                    if p == plural and rv > int(since))
            backlog = [line for line in seen if line is not None]
        for event in backlog:
            watcher.queue.put_nowait(event)
        self._watchers.append(watcher)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while (left := deadline - loop.time()) > 0:
                wait = min(left, self.bookmark_interval) if bookmarks else left
                try:
                    line = await asyncio.wait_for(watcher.queue.get(), wait)
                except TimeoutError:
                    if not bookmarks or loop.time() >= deadline:
                        continue
                    line = orjson.dumps({"type": "BOOKMARK", "object": {
                        "kind": res.kind, "apiVersion": res.api_version,
                        "metadata": {"resourceVersion": str(self._current_rv)}}}) + b"\n"
                lines = [line]
                while lines[-1] is not None and not watcher.queue.empty():
                    lines.append(watcher.queue.get_nowait())  # one write per backlog
                ready = [x for x in lines if x is not None]
                if ready:
                    await resp.write(b"".join(ready))
                if lines[-1] is None:
                    break
        except (ConnectionResetError, RuntimeError):
            pass  # the client or drop_watches() closed the connection
        finally:
            self._watchers.remove(watcher)
        return resp

    async def _put(self, request: web.Request, plural: str, namespace: str, name: str, *,
                   status: bool) -> web.Response:
        res = RESOURCES[plural]
        key = self._key(res, namespace, name)
        if key not in self.store[plural]:
            return _status(404, "NotFound", f'{plural} "{name}" not found')
        body = orjson.loads(await request.read())
        if status and self.before_status_put is not None:
            self.before_status_put(namespace, name)
        conflict = status and self.faults.status_conflicts > 0
        if conflict:
            self.faults.status_conflicts -= 1
        if conflict or request.get(_BUMP):
            bumped = _copy(self.store[plural][key])
            bumped["metadata"].setdefault("annotations", {})["test/concurrent"] = "x"
            self._commit(plural, key, bumped, "MODIFIED")
        current = self.store[plural][key]
        sent_rv = body.get("metadata", {}).get("resourceVersion")
        if sent_rv and sent_rv != current["metadata"]["resourceVersion"]:
            return _status(409, "Conflict", f'Operation cannot be fulfilled on {plural} "{name}": '
                           "the object has been modified; please apply your changes to the "
                           "latest version and try again")
        updated = _copy(current)
        if status:
            updated["status"] = body.get("status") or {}
            invalid = _validate_claim_status(current, updated) \
                if plural == "resourceclaims" else None
            if invalid:
                return _status(422, "Invalid", invalid)
            self.status_writes.append(_copy(body))
        else:
            meta = body.get("metadata", {})
            for f in ("labels", "annotations", "finalizers", "ownerReferences"):
                if meta.get(f):
                    updated["metadata"][f] = meta[f]
                else:
                    updated["metadata"].pop(f, None)
        stored = self._commit(plural, key, updated, "MODIFIED")
        return web.Response(body=orjson.dumps(stored), content_type="application/json")

    async def _post(self, request: web.Request, plural: str, namespace: str) -> web.Response:
        body = orjson.loads(await request.read())
        self.created.append(_copy(body))
        meta = body.setdefault("metadata", {})
        meta["namespace"] = namespace or meta.get("namespace", "")
        if not meta.get("name"):
            base = meta.get("generateName")
            if not base:
                return _status(422, "Invalid", "metadata.name or generateName is required")
            meta["name"] = base[:58] + "".join(random.choices("bcdfghjklmnpqrstvwxz2456789",
                                                              k=5))
        key = self._key(RESOURCES[plural], namespace, meta["name"])
        if key in self.store[plural]:
            return _status(409, "AlreadyExists", f'{plural} "{meta["name"]}" already exists')
        stored = self.create(plural, body)
        return web.Response(status=201, body=orjson.dumps(stored),
                            content_type="application/json")

    async def _delete_request(self, request: web.Request, plural: str, namespace: str,
                              name: str) -> web.Response:
        key = self._key(RESOURCES[plural], namespace, name)
        current = self.store[plural].get(key)
        if current is None:
            return _status(404, "NotFound", f'{plural} "{name}" not found')
        raw = await request.read()
        options = orjson.loads(raw) if raw else {}
        self.delete_options.append(options)
        pre = options.get("preconditions") or {}
        for field_name in ("uid", "resourceVersion"):
            if pre.get(field_name) and pre[field_name] != current["metadata"].get(field_name):
                return _status(409, "Conflict", f"Precondition failed: {field_name} in "
                               f"precondition: {pre[field_name]}, {field_name} in object meta: "
                               f"{current['metadata'].get(field_name)}")
        self.deleted.append((plural, namespace, name))
        grace = options.get("gracePeriodSeconds")
        if plural == "pods" and (current.get("spec") or {}).get("nodeName") and grace != 0:
            # A bound pod waits for its kubelet (the test plays it: `delete`).
            if current["metadata"].get("deletionTimestamp"):
                return web.Response(body=orjson.dumps(current), content_type="application/json")
            marked = _copy(current)
            marked["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
            marked["metadata"]["deletionGracePeriodSeconds"] = grace if grace is not None else \
                (current.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
            return web.Response(body=orjson.dumps(self._commit(plural, key, marked, "MODIFIED")),
                                content_type="application/json")
        if current["metadata"].get("finalizers"):
            marked = _copy(current)
            marked["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
            return web.Response(body=orjson.dumps(self._commit(plural, key, marked, "MODIFIED")),
                                content_type="application/json")
        self.delete(plural, name, namespace)
        return _status(200, "Success", "deleted")

    async def _patch_status(self, request: web.Request, namespace: str, name: str
                            ) -> web.Response:
        key = (namespace, name)
        current = self.store["pods"].get(key)
        if current is None:
            return _status(404, "NotFound", f'pods "{name}" not found')
        patch = orjson.loads(await request.read())
        if self.faults.pod_status_conflicts > 0:
            self.faults.pod_status_conflicts -= 1
            bumped = _copy(current)
            bumped["metadata"].setdefault("annotations", {})["test/concurrent"] = "x"
            self._commit("pods", key, bumped, "MODIFIED")
            current = self.store["pods"][key]
        meta = patch.get("metadata") or {}
        for field_name in ("uid", "resourceVersion"):
            if meta.get(field_name) and meta[field_name] != current["metadata"].get(field_name):
                return _status(409, "Conflict", f'Operation cannot be fulfilled on pods "{name}": '
                               f"the object has been modified ({field_name}); please apply your "
                               "changes to the latest version and try again")
        self.status_patches.append(_copy(patch))
        updated = _copy(current)
        status = dict(patch.get("status") or {})
        strategic = request.content_type == "application/strategic-merge-patch+json"
        if strategic and "conditions" in status:
            # patchMergeKey "type": a condition replaces the one of its type.
            sent = {c["type"]: c for c in status.pop("conditions") or []}
            kept = [c for c in (updated.get("status") or {}).get("conditions") or []
                    if c.get("type") not in sent]
            updated.setdefault("status", {})["conditions"] = [*kept, *sent.values()]
        _merge(updated.setdefault("status", {}), status)
        stored = self._commit("pods", key, updated, "MODIFIED")
        return web.Response(body=orjson.dumps(stored), content_type="application/json")

    async def _bind(self, request: web.Request, namespace: str, name: str) -> web.Response:
        body = orjson.loads(await request.read())
        if self.faults.binding_failures > 0:
            self.faults.binding_failures -= 1
            return _status(500, "InternalError", "binding failed on demand")
        key = (namespace, name)
        pod = self.store["pods"].get(key)
        if pod is None:
            return _status(404, "NotFound", f'pods "{name}" not found')
        uid = body.get("metadata", {}).get("uid")
        if uid and uid != pod["metadata"]["uid"]:
            return _status(409, "Conflict", f"Precondition failed: UID in precondition: {uid}, "
                           f"UID in object meta: {pod['metadata']['uid']}")
        if pod.get("spec", {}).get("nodeName"):
            return _status(409, "Conflict", f"pod {name} is already assigned to node "
                           f"\"{pod['spec']['nodeName']}\"")
        self.bindings.append(_copy(body))
        pod = _copy(pod)
        pod.setdefault("spec", {})["nodeName"] = body["target"]["name"]
        self._commit("pods", key, pod, "MODIFIED")
        return web.Response(status=201, body=orjson.dumps(
            {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}),
            content_type="application/json")


def _merge(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """RFC 7386: null deletes, objects merge, anything else replaces."""
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        elif isinstance(v, Mapping) and isinstance(target.get(k), dict):
            _merge(target[k], v)
        else:
            target[k] = _copy(v) if isinstance(v, dict) else v


def _copy(obj: dict[str, Any]) -> dict[str, Any]:
    """A private deep copy (through JSON, as the wire would make it)."""
    copied: dict[str, Any] = orjson.loads(orjson.dumps(obj))
    return copied


def _validate_claim_status(old: dict[str, Any], claim: dict[str, Any]) -> str | None:
    status = claim.get("status") or {}
    reserved = status.get("reservedFor") or []
    before = {r.get("uid") for r in (old.get("status") or {}).get("reservedFor") or []}
    if len(reserved) > RESERVED_FOR_MAX:
        return f"status.reservedFor: Too many: {len(reserved)}: must have at most " \
               f"{RESERVED_FOR_MAX} items"
    if reserved and not status.get("allocation"):
        return "status.reservedFor: Forbidden: may not be specified when `allocated` is not set"
    added = [r for r in reserved if r.get("uid") not in before]
    if added and claim["metadata"].get("deletionTimestamp"):
        return "status.reservedFor: Forbidden: new entries may not be added while " \
               "`deallocationRequested` or `deletionTimestamp` are set"
    return None


def _status(code: int, reason: str, message: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}
    return web.Response(status=code, body=orjson.dumps(body), content_type="application/json")
