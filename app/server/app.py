"""The HTTP edge: kube-scheduler's extender verbs (the probes beside them: `probes`).

kube-scheduler calls `filter` synchronously for every pod it schedules, so the
verbs are plain ASGI endpoints that a POST reaches without Starlette's
middleware or routing while the app has no middleware (FastAPI's parameter
machinery and pydantic roughly halve throughput: docs/decisions.md, "Server"):
the body is read once from `receive` under a size limit, decoded with orjson,
handed to the extender's plain functions and encoded with orjson
(prioritize's answer by `wire` itself). The filter work is CPU-bound and bounded, so it runs on the
event loop; only bind awaits I/O.

No input makes this edge crash or answer 5xx: a body drax cannot use gets a
4xx with `{"error": ...}` and one warning log line naming the pod when known
(an unknown path or method too: 404 or 405, same shape);
a failure inside filter or bind reaches the scheduler through the `Error`
field, which it logs. Prioritize has no such field, so when drax itself
cannot answer one (not synced, internal failure) it is a 503, which the
scheduler ignores while keeping the other scores.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, Protocol

from fastapi import FastAPI
from starlette.requests import ClientDisconnect
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from app import __version__, garbage_collector
from app.config import DEFAULT_SCHEDULER_NAMES
from app.extender import BindCause, BindFailure, Extender, NodeScores
from app.model import Pod
from app.preemption import Offer, VictimSearch, choose_victims
from app.server import wire
from app.server.metrics import OUTCOMES, SCORES, ServerMetrics
from app.server.probes import JSON, NOT_SYNCED, add_probes
from app.server.wire import BadRequest

log = logging.getLogger(__name__)

JSON_BYTES: Final = JSON.encode()


class FilterOutcome(Protocol):
    @property
    def passed(self) -> Sequence[str]: ...

    @property
    def failed(self) -> Mapping[str, str]: ...

    @property
    def unresolvable(self) -> Mapping[str, str]: ...

    @property
    def error(self) -> str | None: ...

    @property
    def rejections(self) -> Mapping[str, int]: ...  # failed nodes per rejection category


class Verbs(Protocol):
    """What the edge calls: `app.extender.Extender`, or the loadtest's no-op floor."""

    def filter(self, pod: Pod, node_names: Sequence[str]) -> FilterOutcome: ...

    def node_scores(self, pod: Pod, node_names: Sequence[str]) -> NodeScores: ...

    async def wait_for_binds(self, pod: Pod) -> float | None: ...

    async def bind(self, *, namespace: str, name: str, uid: str, node: str
                   ) -> BindFailure | None: ...


class InternalError(Exception):
    """A failure inside drax while answering a well-formed request."""


def _header(scope: Scope, name: bytes) -> str | None:
    """The first value of header `name` (lower case, as ASGI servers give names)."""
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


def _json_content_type(scope: Scope) -> bool:
    # kube-scheduler always sends application/json; a missing header is taken
    # as JSON so hand-written requests work, anything else is a client mistake.
    raw = _header(scope, b"content-type")
    if raw is None:
        return True
    media = raw.split(";", 1)[0].strip().lower()
    return media == JSON or (media.startswith("application/") and media.endswith("+json"))


async def read_body(scope: Scope, receive: Receive, *, limit: int,
                    timeout: float = 10.0) -> bytes:
    """The whole body, refused with 413 as soon as it is known to exceed `limit`,
    and with 408 when it has not all arrived `timeout` seconds after the headers
    (a body trickled in byte by byte would otherwise hold its connection forever).
    A client gone before the end raises ClientDisconnect."""
    declared = _header(scope, b"content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise BadRequest(f"invalid Content-Length {declared!r}", status=400) from None
        if size > limit:
            raise BadRequest(f"request body of {size} bytes exceeds the limit of {limit} bytes",
                             status=413)
    chunks: list[bytes] = []
    received = 0
    try:
        async with asyncio.timeout(timeout):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ClientDisconnect()
                chunk = message.get("body", b"")
                received += len(chunk)
                if received > limit:
                    raise BadRequest(f"request body exceeds the limit of {limit} bytes",
                                     status=413)
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
    except TimeoutError:
        raise BadRequest(f"request body not received within {timeout:g} s "
                         f"({received} bytes arrived)", status=408) from None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


Handler = Callable[[Any], Awaitable[Any]]
Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]
# Awaited before a filter with its pod and candidate nodes; what it returns,
# when not None, is called with the nodes the filter passed.
BeforeFilter = Callable[[Pod, list[str]], Awaitable[Callable[[Sequence[str]], None] | None]]


class ExtenderEdge:
    """The four verbs bound to one extender, with limits, metrics and error policy."""

    def __init__(self, *, verbs: Verbs, ready: Callable[[], bool], max_body_bytes: int,
                 metrics: ServerMetrics, on_request: Callable[[], None] | None = None,
                 body_read_timeout: float = 10.0,
                 before_filter: BeforeFilter | None = None,
                 schedulers: Collection[str] = DEFAULT_SCHEDULER_NAMES) -> None:
        self.verbs = verbs
        self.before_filter = before_filter
        self.metrics = metrics
        self.body_read_timeout = body_read_timeout
        self.on_request = on_request
        self.ready = ready
        self.max_body_bytes = max_body_bytes
        self._passed = metrics.filtered_nodes.labels(result="passed")
        self._failed = metrics.filtered_nodes.labels(result="failed")
        self._unresolvable = metrics.filtered_nodes.labels(result="unresolvable")
        self._scores = {int(s): metrics.prioritize_scores.labels(score=s) for s in SCORES}
        self._rejections = metrics.rejections_by_reason
        self._bound = metrics.pods_bound
        self._stats = getattr(verbs, "stats", None)
        # The victim search runs on the extender's own allocator and answers; a
        # stand-in without them (the loadtest floor) forwards the scheduler's victims.
        self._preemption = VictimSearch.of(verbs, schedulers=schedulers) \
            if isinstance(verbs, Extender) else None

    def endpoint(self, verb: str) -> ASGIApp:
        """The verb as a plain ASGI app: the body read from `receive`, the answer
        sent as two messages, no Request or Response object in between."""
        handler: Handler = getattr(self, f"_{verb}")
        metrics = self.metrics
        latency = metrics.request_seconds.labels(verb=verb)
        counts = {o: metrics.requests.labels(verb=verb, outcome=o) for o in OUTCOMES}
        in_flight = metrics.in_flight.labels(verb=verb)
        request_bytes = metrics.request_bytes.labels(verb=verb)
        response_bytes = metrics.response_bytes.labels(verb=verb)

        async def serve(scope: Scope, receive: Receive, send: Send) -> None:
            start = time.perf_counter()
            if self.on_request is not None:
                self.on_request()
            in_flight.inc()
            try:
                with garbage_collector.verb():
                    status, body, close = await answer(scope, receive)
            finally:
                in_flight.dec()
            response_bytes.observe(len(body))
            elapsed = time.perf_counter() - start
            latency.observe(elapsed)
            headers = [(b"content-length", str(len(body)).encode()),
                       (b"content-type", JSON_BYTES),
                       # The same time per response, for whoever times one call (curl
                       # -i, the soak): the histogram's buckets are too coarse to
                       # compare two p99s.
                       (b"server-timing", f"handler;dur={elapsed * 1e3:.3f}".encode())]
            if close:
                # The rest of that body may still be on its way: do not read it
                # as the next request.
                headers.append((b"connection", b"close"))
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        async def answer(scope: Scope, receive: Receive) -> tuple[int, bytes, bool]:
            doc: Any = None
            payload: Any  # the answer's bytes, or an error answer to encode
            status, close = 200, False
            try:
                if not _json_content_type(scope):
                    raise BadRequest(f"unsupported Content-Type "
                                     f"{_header(scope, b'content-type')!r}; send {JSON}",
                                     status=415)
                body = await read_body(scope, receive, limit=self.max_body_bytes,
                                       timeout=self.body_read_timeout)
                request_bytes.observe(len(body))
                doc = wire.decode(body)
                answered = await handler(doc)
                outcome = "error" if isinstance(answered, dict) and answered.get("Error") else "ok"
                payload = answered if isinstance(answered, bytes) else wire.encode(answered)
            except BadRequest as exc:
                pod = exc.pod_key or wire.pod_key_hint(doc)
                log.warning("bad %s request%s: %s", verb, f" for pod {pod}" if pod else "",
                            exc.message)
                payload, status, outcome = {"error": exc.message}, exc.status, "bad_request"
                close = exc.status in (408, 413)
            except InternalError as exc:
                payload, status, outcome = {"error": str(exc)}, 503, "error"
            except ClientDisconnect:
                log.warning("bad %s request: the client disconnected before sending the "
                            "whole body", verb)
                payload, status, outcome = {"error": "incomplete body"}, 400, "bad_request"
            except Exception as exc:
                # Outside the verb's own error handling (a hook, the encoding):
                # answered in the verb's error shape all the same.
                pod = wire.pod_key_hint(doc)
                log.exception("%s failed%s", verb, f" for pod {pod}" if pod else "")
                status, payload = _failure(verb, f"drax {verb} failed: {exc}")
                outcome = "error"
            counts[outcome].inc()
            return status, payload if isinstance(payload, bytes) else wire.encode(payload), close

        return serve

    async def _filter(self, doc: Any) -> Any:
        args = wire.parse_extender_args(doc)
        if not self.ready():
            return wire.error_filter_result(NOT_SYNCED)
        after = None
        if self.before_filter is not None:
            after = await self.before_filter(args.pod, args.node_names)
        waited = await self.verbs.wait_for_binds(args.pod)
        if waited is not None:
            self.metrics.bind_wait_seconds.observe(waited)
        computed = self._computed()
        try:
            result = self.verbs.filter(args.pod, args.node_names)
        except Exception as exc:
            log.exception("filter failed for pod %s", args.pod.key)
            return wire.error_filter_result(f"drax filter failed: {exc}")
        self._passed.inc(len(result.passed))
        self._failed.inc(len(result.failed))
        self._unresolvable.inc(len(result.unresolvable))
        for category, n in result.rejections.items():
            self._rejections[category].inc(n)
        self._count_hits(len(args.node_names), since=computed)
        if after is not None:
            after(result.passed)
        return wire.filter_result(args, passed=result.passed, failed=result.failed,
                                  unresolvable=result.unresolvable, error=result.error)

    async def _prioritize(self, doc: Any) -> Any:
        args = wire.parse_extender_args(doc)
        # HostPriorityList has no Error field; kube-scheduler ignores a failed
        # prioritize call and keeps the other scores, which is what a 503 gets.
        if not self.ready():
            raise InternalError(NOT_SYNCED)
        computed = self._computed()
        try:
            scores = self.verbs.node_scores(args.pod, args.node_names)
        except Exception as exc:
            log.exception("prioritize failed for pod %s", args.pod.key)
            raise InternalError(f"drax prioritize failed: {exc}") from None
        self._count_hits(len(args.node_names), since=computed)
        hosts, values = scores.kept()
        # Counted per distinct score (C-level Counter), not per node: at 5,000
        # nodes a per-node observation would cost more than the answer.
        by_score = collections.Counter(values)
        by_score[0] += len(args.node_names) - by_score.total()
        for score, n in by_score.items():
            counter = self._scores.get(score)
            if counter is not None and n > 0:
                counter.inc(n)
        return wire.encode_host_priority_list(hosts, values)

    def _computed(self) -> int:
        return self._stats.answers_computed if self._stats is not None else 0

    def _count_hits(self, nodes: int, *, since: int) -> None:
        # The verbs run without awaiting, so every verdict computed meanwhile
        # was computed for this call: the other nodes were answered from cache.
        hits = nodes - (self._computed() - since)
        if hits > 0:
            self.metrics.answer_cache_hits.inc(hits)

    async def _bind(self, doc: Any) -> Any:
        args = wire.parse_binding_args(doc)
        # Every bind leaves one line at the default level: it is the one verb that
        # writes to the cluster, and an operator retraces a pod's devices from it.
        if not self.ready():
            self.metrics.bind_failures.labels(cause=BindCause.NOT_SYNCED).inc()
            log.warning("bind of pod %s/%s to node %s refused: %s", args.namespace,
                        args.name, args.node, NOT_SYNCED)
            return wire.binding_result(NOT_SYNCED)
        start = time.perf_counter()
        try:
            failure = await self.verbs.bind(namespace=args.namespace, name=args.name,
                                            uid=args.uid, node=args.node)
        except Exception as exc:
            log.exception("bind failed for pod %s/%s", args.namespace, args.name)
            failure = BindFailure(f"drax bind failed: {exc}", BindCause.OTHER)
        elapsed_ms = (time.perf_counter() - start) * 1e3
        if failure is None:
            self._bound.inc()
            log.info("bound pod %s/%s (uid %s) to node %s in %.1f ms", args.namespace,
                     args.name, args.uid, args.node, elapsed_ms)
        else:
            self.metrics.bind_failures.labels(cause=failure.cause).inc()
            log.warning("bind of pod %s/%s (uid %s) to node %s failed after %.1f ms: %s",
                        args.namespace, args.name, args.uid, args.node, elapsed_ms,
                        failure.message)
        return wire.binding_result(None if failure is None else failure.message)

    async def _preempt(self, doc: Any) -> Any:
        pod, victims = wire.parse_preemption_args(doc)
        if self._preemption is None:
            return wire.preemption_result(victims)
        # ExtenderPreemptionResult has no error field: like prioritize, a call
        # drax cannot answer is a 503, which fails this preemption attempt.
        if not self.ready():
            raise InternalError(NOT_SYNCED)
        offered = {node: Offer(uids=v.uids, pdb_violations=v.pdb_violations)
                   for node, v in victims.items()}
        try:
            chosen = choose_victims(self._preemption, pod, offered)
        except Exception as exc:
            log.exception("preempt failed for pod %s", pod.key)
            raise InternalError(f"drax preempt failed: {exc}") from None
        return wire.preemption_result({
            node: wire.MetaVictims(uids=o.uids, pdb_violations=o.pdb_violations)
            for node, o in chosen.items()})


def _failure(verb: str, message: str) -> tuple[int, Any]:
    """A failure answered in the verb's shape: filter and bind carry it in their
    `Error` field (HTTP 200), which the scheduler logs; prioritize and preempt
    have no such field, so a 503."""
    if verb == "filter":
        return 200, wire.error_filter_result(message)
    if verb == "bind":
        return 200, wire.binding_result(message)
    return 503, {"error": message}


VERBS: Final = ("filter", "prioritize", "bind", "preempt")


class _Endpoint:
    """An ASGI app as a Route endpoint (a plain function there is taken for a
    Request -> Response handler)."""

    __slots__ = ("app",)

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


class ExtenderApp(FastAPI):
    """The verbs' app. A POST to a verb's path goes straight to its endpoint:
    kube-scheduler sends one per node it schedules, and Starlette's middleware
    and routing would add about as much per call as answering a small cluster
    takes. drax's own metrics are counted in the endpoint, whichever way a
    request reaches it. The router holds the same endpoints for everything else
    (another method, a path with a root path), and for every request while
    anything observes requests around the router (`observed`): then the verbs
    are seen like any other path."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.verb_endpoints: dict[str, ASGIApp] = {}

    def observed(self) -> bool:
        """Whether the full stack observes requests: middleware added to the app, a
        middleware stack an instrumentor rebuilds (OpenTelemetry's FastAPIInstrumentor
        replaces `build_middleware_stack` on the app), or FastAPI's own telemetry
        (request duration, spans, exception logs), on once a tracer, meter or logger
        provider is configured."""
        if self.user_middleware or "build_middleware_stack" in vars(self):
            return True
        telemetry = getattr(self, "_native_telemetry", None)  # FastAPI >= 0.165
        return telemetry is not None and bool(telemetry.enabled())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            endpoint = self.verb_endpoints.get(scope["path"])
            if endpoint is not None and not self.observed():
                await endpoint(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def create_app(*, verbs: Verbs, ready: Callable[[], bool], max_body_bytes: int,
               url_prefix: str = "/scheduler", mode: str = "allocator",
               info: Mapping[str, Any] | None = None, lifespan: Lifespan | None = None,
               on_request: Callable[[], None] | None = None,
               body_read_timeout: float = 10.0,
               metrics: ServerMetrics | None = None,
               before_filter: BeforeFilter | None = None,
               schedulers: Collection[str] = DEFAULT_SCHEDULER_NAMES) -> FastAPI:
    """The ASGI app: verbs at `/<verb>` and `<url_prefix>/<verb>`, plus the probes.

    `lifespan` runs around serving (the kube source starts its watches there);
    `on_request` is called as each verb request arrives, before its body is
    read (background work steps aside for it); `before_filter` is awaited
    before each filter is answered (kube mode reads a nominated preemptor's
    stale victim claims there), and what it returns is called with the nodes
    the filter passed (kube mode counts the preemptor's attempts);
    `schedulers`: the scheduler names drax serves, for the preempt verb's
    victim search (`VictimSearch`). The app
    counts on `metrics` (its own, when not given) and serves their registry at
    `/metrics`.
    """
    metrics = metrics if metrics is not None else ServerMetrics()
    app = ExtenderApp(title="drax", version=__version__, docs_url=None, redoc_url=None,
                      openapi_url=None, lifespan=lifespan)
    edge = ExtenderEdge(verbs=verbs, ready=ready, max_body_bytes=max_body_bytes,
                        metrics=metrics, on_request=on_request,
                        body_read_timeout=body_read_timeout, before_filter=before_filter,
                        schedulers=schedulers)
    metrics.ready.set_function(lambda: 1.0 if ready() else 0.0)
    prefixes = [""] + ([url_prefix.rstrip("/")] if url_prefix.strip("/") else [])
    for verb in VERBS:
        endpoint = edge.endpoint(verb)
        for prefix in prefixes:
            # The router answers the other methods (405) and the paths around it.
            app.router.routes.append(Route(f"{prefix}/{verb}", _Endpoint(endpoint),
                                           methods=["POST"]))
            app.verb_endpoints[f"{prefix}/{verb}"] = endpoint

    add_probes(app, ready=ready, metrics=metrics, mode=mode, info=info)
    return app
