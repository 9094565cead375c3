"""Allocator mode's API writes: claim status, then the pod Binding.

The extender has already recomputed the best allocation on the chosen node
from the current inventory and assumed it there; this binder makes it real,
in the order the in-tree DynamicResources plugin uses (PreBind, then the
DefaultBinder), so kubelet and the DRA drivers see exactly what they would
after the default scheduler:

1. for each claim to allocate: add the `resource.kubernetes.io/delete-protection`
   finalizer with an update of the object (the status subresource ignores
   metadata), then write `status.allocation` (with `allocationTimestamp`
   while DRADeviceBindingConditions is on, as the in-tree PreBind does) and
   append the pod to `status.reservedFor` in one update of the status
   subresource;
2. for each other claim of the pod (already allocated): only append the pod
   to `status.reservedFor`;
3. create the pod's `Binding` (pod UID as precondition).

A pod's extended resources served by DRA (KEP-5004) add, before step 1, the
special claim the scheduler creates: POST with `generateName`
`<pod>-extended-resources-`, the `resource.kubernetes.io/extended-resource-claim`
annotation and the pod as controller owner; it then goes through step 1 like
any claim, and `pod.status.extendedResourceClaimStatus` (its name and the
container -> request mapping) is patched before the Binding. A failed bind
deletes that claim (finalizer first) and clears the pod status it wrote.

Every write is a PUT carrying the resourceVersion of the claim as last seen, so
the API server rejects it (409) if anyone changed the claim in between; the
binder then re-reads and retries, at most `max_attempts` times. The first
write of a claim to allocate starts from the claim watch's copy
(`ClaimCopies`), as the in-tree PreBind starts from its informer's: no read
before the write unless the copy is missing or stale. A request that fails for
a passing reason (500, 502-504, 429 after its Retry-After, a timeout, a
dropped connection) is sent again, at most `max_attempts` times with a short
backoff: the resourceVersion makes a repeated PUT safe (if the first one was
applied, the repeat meets a 409 and the re-read shows the claim done), and a
repeated Binding that finds the pod already on this node counts as bound. The
POST creating the special claim is not repeated (a second POST would create a
second claim); it fails the bind. If the claim turns out to
be allocated by someone else meanwhile, it fails as upstream does ("got
allocated elsewhere in the meantime") rather than overwrite. If a later step
fails, what this bind wrote is removed again (reservation, allocation if
nobody else reserved the claim meanwhile, and the finalizer if this bind
added it), so the claim does not stay allocated to a pod that never ran. A
write whose answer never came (a timeout) may have been applied, so the undo
is planned from intent and checked against the claim as read again: the
pod's entry in `reservedFor` shows that its allocation went in (both are
written in one update), a finalizer this bind meant to add and no allocation
show that the finalizer is ours. The undo gets three times the attempts. A
Binding that failed in a way that may have been applied (a timeout, a 5xx, a
409 on a repeat) is checked by reading the pod; if even that fails, nothing
is undone: the claims stay allocated and reserved for the pod, which is what
the scheduler's retry of the pod needs to complete the bind, while undoing
them under a pod that is on its node would leave it without its devices.

RBAC (see manifests/rbac.yaml): `get`, `update` on resourceclaims (the
finalizer), `create`, `delete` on resourceclaims (the special claim; the
built-in system:kube-scheduler role grants them), `patch` on pods/status;
`update` on resourceclaims/status and, since 1.36
(DRAResourceClaimGranularStatusAuthorization), on the synthetic
resourceclaims/binding subresource (allocation and reservedFor); `create` on
pods/binding; `get` on pods (a repeated Binding).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import aiohttp
import orjson
from kubernetes_asyncio import client
from prometheus_client import CollectorRegistry, Counter

from app.allocator.types import ClaimAllocation
from app.binder.copies import ClaimCopies
from app.extender import BindCause, BindError
from app.extender.extended import ExtendedClaim
from app.model import Pod, ResourceClaim
from app.model.times import format_time

log = logging.getLogger(__name__)

FINALIZER: Final = "resource.kubernetes.io/delete-protection"
RESERVED_FOR_MAX: Final = 256
# Answers worth sending the same request again for (client-go retries these too).
TRANSIENT_STATUS: Final = frozenset({429, 500, 502, 503, 504})
RETRY_BACKOFF_SECONDS: Final = 0.05
RETRY_AFTER_MAX_SECONDS: Final = 2.0
UNDO_ATTEMPTS_FACTOR: Final = 3


class BindMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.attempts = Counter("drax_bind_attempts_total",
                                "Binds attempted against the API server, by result.",
                                ["result"], registry=registry)
        self.conflicts = Counter("drax_bind_conflicts_total",
                                 "Claim writes rejected with 409 Conflict and retried.",
                                 registry=registry)
        self.rollbacks = Counter("drax_bind_rollbacks_total",
                                 "Failed binds whose claim writes were undone, by result.",
                                 ["result"], registry=registry)
        self.retries = Counter("drax_bind_retries_total",
                               "API requests of binds sent again after a passing failure, "
                               "by reason (the HTTP status, timeout, connection).",
                               ["reason"], registry=registry)
        for result in ("ok", "error"):
            self.attempts.labels(result=result)
            self.rollbacks.labels(result=result)


@dataclass(slots=True)
class _Written:
    """What one bind changed on one claim, so a failure can undo exactly that."""

    namespace: str
    name: str
    uid: str = ""
    # Set before the write is sent (one that timed out may have been applied).
    finalizer_added: bool = False
    allocated: bool = False
    created: bool = False  # the special claim for extended resources: delete it on undo

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class KubeBinder:
    """Implements the extender's `Binder` protocol against the API server."""

    def __init__(self, api_client: client.ApiClient, *, metrics: BindMetrics,
                 max_attempts: int = 5, request_timeout: float = 10.0,
                 allocation_timestamp: bool = True,
                 copies: ClaimCopies | None = None) -> None:
        # Typed as Any: the client's stubs demand model objects as bodies, but
        # it sends plain dicts as they are, which keeps unknown fields intact.
        self._claims: Any = client.ResourceV1Api(api_client)
        self._core: Any = client.CoreV1Api(api_client)
        self._metrics = metrics
        self._max_attempts = max_attempts
        self._timeout = aiohttp.ClientTimeout(total=request_timeout)
        # The DRADeviceBindingConditions gate (and DRAResourceClaimDeviceStatus, GA
        # and locked on in 1.37): the in-tree PreBind then stamps every allocation
        # it reserves a claim under, and its binding timeout counts from the stamp.
        self._allocation_timestamp = allocation_timestamp
        self._copies = copies

    async def bind(self, *, pod: Pod, node: str, allocations: Sequence[ClaimAllocation],
                   reserve: Sequence[ResourceClaim],
                   extended: ExtendedClaim | None = None) -> str | None:
        written: list[_Written] = []
        # `reserve` may list the claims being allocated too (the extender passes
        # all of the pod's claims); their uid still guards against a replaced claim.
        known = {c.key: c.uid for c in reserve}
        allocating = {ca.claim_key for ca in allocations}
        special = extended.claim.key if extended is not None else None
        created: str | None = None
        status_written = False
        try:
            if extended is not None:
                rec = await self._create_extended_claim(pod, extended)
                written.append(rec)
                created = rec.name
                allocation = next(ca.allocation for ca in allocations
                                  if ca.claim_key == special)
                await self._write_claim(rec, pod=pod, allocation=allocation.to_dict(),
                                        written=written)
            for ca in allocations:
                if ca.claim_key == special:
                    continue
                namespace, _, name = ca.claim_key.partition("/")
                await self._write_claim(_Written(namespace, name, uid=known.get(ca.claim_key, "")),
                                        pod=pod, allocation=ca.allocation.to_dict(),
                                        written=written)
            for claim in reserve:
                if claim.key not in allocating:
                    await self._write_claim(_Written(claim.namespace, claim.name, uid=claim.uid),
                                            pod=pod, allocation=None, written=written)
            if extended is not None and created is not None:
                status_written = True
                await self._patch_extended_status(pod, {
                    "resourceClaimName": created,
                    "requestMappings": [m.to_dict() for m in extended.mappings]})
            await self._create_binding(pod, node)
        except _BindingUnknown as exc:
            # Undoing the claims of a pod that may be running on the node would
            # leave it without its devices; left reserved, the scheduler's retry
            # of the pod finds them so and completes the bind.
            self._metrics.attempts.labels(result="error").inc()
            raise BindError(f"{exc}; whether the pod is bound is unknown, so its claims "
                            "stay allocated and reserved for it", BindCause.API_ERROR) from exc
        except (BindError, aiohttp.ClientError, TimeoutError, OSError) as exc:
            self._metrics.attempts.labels(result="error").inc()
            message = str(exc) if isinstance(exc, BindError) else \
                f"API request failed: {type(exc).__name__}: {exc}"
            if status_written:
                with contextlib.suppress(BindError, aiohttp.ClientError, TimeoutError, OSError):
                    await self._patch_extended_status(pod, None)
            if written:
                undone = await self._rollback(pod, written)
                message += "; claim writes undone" if undone else \
                    "; undoing the claim writes failed (see the log)"
            cause = exc.cause if isinstance(exc, BindError) else BindCause.API_ERROR
            raise BindError(message, cause) from exc
        self._metrics.attempts.labels(result="ok").inc()
        return created

    # ------------------------------------------------------------------ extended resources

    async def _create_extended_claim(self, pod: Pod, extended: ExtendedClaim) -> _Written:
        claim = extended.claim
        body = {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {
                "generateName": f"{pod.name}-extended-resources-",
                "namespace": pod.namespace,
                "annotations": dict(claim.annotations),
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod.name,
                                     "uid": pod.uid, "controller": True}]},
            "spec": {"devices": {"requests": [
                {"name": r.name, "exactly": {
                    "deviceClassName": r.exactly.device_class_name,
                    "allocationMode": r.exactly.allocation_mode, "count": r.exactly.count}}
                for r in claim.spec.requests if r.exactly is not None]}},
        }
        code, answer = await self._call(lambda: self._claims.create_namespaced_resource_claim(
            pod.namespace, body, _preload_content=False, _request_timeout=self._timeout),
            attempts=1)
        if code not in (200, 201):
            raise BindError(f"creating the claim for the extended resources of pod {pod.key}: "
                            f"HTTP {code}: {_message(answer)}", BindCause.API_ERROR)
        meta = answer.get("metadata") or {}
        return _Written(pod.namespace, str(meta.get("name") or ""),
                        uid=str(meta.get("uid") or ""), created=True)

    async def _patch_extended_status(self, pod: Pod, value: dict[str, Any] | None) -> None:
        code, answer = await self._call(lambda: self._core.patch_namespaced_pod_status(
            pod.name, pod.namespace, {"status": {"extendedResourceClaimStatus": value}},
            _content_type="application/merge-patch+json", _preload_content=False,
            _request_timeout=self._timeout), attempts=self._max_attempts)
        _expect_ok(code, answer, f"writing status.extendedResourceClaimStatus of pod {pod.key}")

    # ------------------------------------------------------------------ claims

    async def _write_claim(self, rec: _Written, *, pod: Pod, allocation: dict[str, Any] | None,
                           written: list[_Written]) -> None:
        # The watch's copy for the first try (module doc); a conflict reads.
        copy = self._copies.get(rec.key, uid=rec.uid) \
            if self._copies is not None and allocation is not None else None
        for _ in range(self._max_attempts):
            claim = copy if copy is not None else await self._read_claim(rec)
            copy = None
            if not rec.uid:
                rec.uid = str((claim.get("metadata") or {}).get("uid") or "")
            meta = claim.setdefault("metadata", {})
            status = claim.get("status") or {}
            claim["status"] = status
            reserved = list(status.get("reservedFor") or [])
            if any(r.get("uid") == pod.uid for r in reserved):
                return  # a retried bind: this pod holds the claim already
            if meta.get("deletionTimestamp"):
                raise BindError(f"resourceclaim {rec.key} is being deleted")
            if allocation is not None:
                if status.get("allocation") is not None:
                    raise BindError(f"resourceclaim {rec.key} got allocated elsewhere in the "
                                    "meantime", BindCause.CLAIM_TAKEN)
                finalizers = list(meta.get("finalizers") or [])
                if FINALIZER not in finalizers:
                    meta["finalizers"] = [*finalizers, FINALIZER]
                    rec.finalizer_added = True
                    _remember(written, rec)
                    body = await self._put_claim(
                        rec, claim, status=False,
                        what=f"adding the finalizer to resourceclaim {rec.key}")
                    if body is None:
                        continue
                    claim = body
                    claim["status"] = status
                status["allocation"] = self._stamped(allocation)
            elif status.get("allocation") is None:
                raise BindError(f"resourceclaim {rec.key} is no longer allocated")
            if len(reserved) >= RESERVED_FOR_MAX:
                raise BindError(f"resourceclaim {rec.key} is already reserved for "
                                f"{RESERVED_FOR_MAX} consumers, the maximum",
                                BindCause.CLAIM_TAKEN)
            status["reservedFor"] = [*reserved, _consumer(pod)]
            what = "allocation and reservation" if allocation is not None else "reservation"
            rec.allocated = allocation is not None
            _remember(written, rec)
            if await self._put_claim(rec, claim, status=True,
                                     what=f"writing the {what} of resourceclaim {rec.key}") is None:
                continue
            return
        raise BindError(f"resourceclaim {rec.key}: still conflicting after "
                        f"{self._max_attempts} attempts", BindCause.CONFLICT)

    def _stamped(self, allocation: dict[str, Any]) -> dict[str, Any]:
        """The allocation with its allocationTimestamp. Only a new one: an allocation
        written already is immutable (upstream's PreBind also stamps an unstamped old
        one, which validation would refuse)."""
        if not self._allocation_timestamp or allocation.get("allocationTimestamp"):
            return allocation
        return {**allocation, "allocationTimestamp": format_time()}

    async def _read_claim(self, rec: _Written, *, undo: bool = False) -> dict[str, Any]:
        code, claim = await self._call(lambda: self._claims.read_namespaced_resource_claim(
            rec.name, rec.namespace, _preload_content=False, _request_timeout=self._timeout),
            attempts=self._attempts(undo=undo))
        if code == 404:
            raise BindError(f"resourceclaim {rec.key} not found", BindCause.CLAIM_NOT_FOUND)
        _expect_ok(code, claim, f"reading resourceclaim {rec.key}")
        uid = str((claim.get("metadata") or {}).get("uid") or "")
        if rec.uid and uid != rec.uid:
            raise BindError(f"resourceclaim {rec.key} was replaced (uid {uid}, expected "
                            f"{rec.uid})")
        rec.uid = uid
        return claim

    # ------------------------------------------------------------------ pod binding

    async def _create_binding(self, pod: Pod, node: str) -> None:
        meta: dict[str, str] = {"name": pod.name, "namespace": pod.namespace}
        if pod.uid:
            meta["uid"] = pod.uid  # the API server checks it: never bind a replaced pod
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": meta,
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        # _preload_content=False: the server answers with a Status the client
        # cannot deserialise into a Binding (it raises after binding).
        what = f"binding pod {pod.key} to node {node}"
        try:
            code, answer = await self._call(lambda: self._core.create_namespaced_pod_binding(
                pod.name, pod.namespace, body, _preload_content=False,
                _request_timeout=self._timeout), attempts=self._max_attempts)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            code, answer = 0, {"message": f"{type(exc).__name__}: {exc}"}
        if code in (200, 201):
            return
        failure = f"{what}: HTTP {code}: {_message(answer)}" if code else \
            f"{what}: {_message(answer)}"
        if code != 409 and code not in TRANSIENT_STATUS and code != 0:
            raise BindError(failure, BindCause.API_ERROR)  # refused outright: nothing applied
        # A 409 may be an earlier attempt whose answer was lost; a timeout or a
        # 5xx may have been applied: the pod itself says which.
        if await self._bound_to(pod, node, failure=failure):
            return
        raise BindError(failure, BindCause.API_ERROR)

    async def _bound_to(self, pod: Pod, node: str, *, failure: str) -> bool:
        """Whether the pod is on `node`; _BindingUnknown if that cannot be read."""
        try:
            code, current = await self._call(lambda: self._core.read_namespaced_pod(
                pod.name, pod.namespace, _preload_content=False,
                _request_timeout=self._timeout), attempts=self._max_attempts)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise _BindingUnknown(f"{failure}; reading the pod back failed: "
                                  f"{type(exc).__name__}: {exc}") from exc
        if code not in (200, 404):
            raise _BindingUnknown(f"{failure}; reading the pod back failed: HTTP {code}: "
                                  f"{_message(current)}")
        meta, spec = current.get("metadata") or {}, current.get("spec") or {}
        return code == 200 and spec.get("nodeName") == node and \
            (not pod.uid or meta.get("uid") == pod.uid)

    # ------------------------------------------------------------------ rollback

    async def _rollback(self, pod: Pod, written: list[_Written]) -> bool:
        ok = True
        for rec in reversed(written):
            try:
                await self._undo(pod, rec)
            except (BindError, aiohttp.ClientError, TimeoutError, OSError) as exc:
                ok = False
                log.error("bind of pod %s failed and resourceclaim %s could not be restored: "
                          "%s", pod.key, rec.key, exc)
        self._metrics.rollbacks.labels(result="ok" if ok else "error").inc()
        return ok

    async def _undo(self, pod: Pod, rec: _Written) -> None:
        if rec.created:
            await self._delete_created(rec)
            return
        for _ in range(self._attempts(undo=True)):
            try:
                claim = await self._read_claim(rec, undo=True)
            except BindError:
                return  # gone or replaced: nothing of ours is left to remove
            meta = claim.setdefault("metadata", {})
            status = claim.get("status") or {}
            claim["status"] = status
            reserved = list(status.get("reservedFor") or [])
            keep = [r for r in reserved if r.get("uid") != pod.uid]
            changed = len(keep) != len(reserved)
            # The pod's entry shows the allocation went in with it (one update);
            # only while nobody else uses it: a pod reserved since then keeps it.
            if rec.allocated and changed and not keep and status.get("allocation") is not None:
                del status["allocation"]
                changed = True
            if changed:
                if keep:
                    status["reservedFor"] = keep
                else:
                    status.pop("reservedFor", None)
                body = await self._put_claim(
                    rec, claim, status=True, undo=True,
                    what=f"restoring the status of resourceclaim {rec.key}")
                if body is None:
                    continue
                claim = body
                meta = claim.setdefault("metadata", {})
                status = claim.get("status") or {}
            finalizers = list(meta.get("finalizers") or [])
            if rec.finalizer_added and status.get("allocation") is None \
                    and FINALIZER in finalizers:
                meta["finalizers"] = [f for f in finalizers if f != FINALIZER]
                if await self._put_claim(
                        rec, claim, status=False, undo=True,
                        what=f"removing the finalizer of resourceclaim {rec.key}") is None:
                    continue
            return
        raise BindError(f"resourceclaim {rec.key}: still conflicting after "
                        f"{self._max_attempts} attempts", BindCause.CONFLICT)

    async def _delete_created(self, rec: _Written) -> None:
        """Remove the special claim this bind created: finalizer off, then delete."""
        for _ in range(self._attempts(undo=True)):
            try:
                claim = await self._read_claim(rec, undo=True)
            except BindError:
                return
            meta = claim.setdefault("metadata", {})
            finalizers = list(meta.get("finalizers") or [])
            if FINALIZER in finalizers:
                meta["finalizers"] = [f for f in finalizers if f != FINALIZER]
                if await self._put_claim(rec, claim, status=False, undo=True, what=(
                        f"removing the finalizer of resourceclaim {rec.key}")) is None:
                    continue
            code, answer = await self._call(lambda: self._claims.delete_namespaced_resource_claim(
                rec.name, rec.namespace, _preload_content=False,
                _request_timeout=self._timeout), attempts=self._attempts(undo=True))
            if code not in (200, 202, 404):
                raise BindError(f"deleting resourceclaim {rec.key}: HTTP {code}: "
                                f"{_message(answer)}", BindCause.API_ERROR)
            return
        raise BindError(f"resourceclaim {rec.key}: still conflicting after "
                        f"{self._max_attempts} attempts", BindCause.CONFLICT)

    async def _put_claim(self, rec: _Written, claim: dict[str, Any], *, status: bool,
                         what: str, undo: bool = False) -> dict[str, Any] | None:
        """PUT the claim (or its status subresource), guarded by the resourceVersion
        it carries: the server's copy, or None on a conflict (re-read and retry)."""
        replace = (self._claims.replace_namespaced_resource_claim_status if status
                   else self._claims.replace_namespaced_resource_claim)
        code, body = await self._call(lambda: replace(rec.name, rec.namespace, claim,
                                                      _preload_content=False,
                                                      _request_timeout=self._timeout),
                                      attempts=self._attempts(undo=undo))
        if code == 409:
            self._metrics.conflicts.inc()
            return None
        if code == 404:  # deleted since the copy or read it was made from
            raise BindError(f"{what}: resourceclaim {rec.key} not found",
                            BindCause.CLAIM_NOT_FOUND)
        _expect_ok(code, body, what)
        return body

    def _attempts(self, *, undo: bool) -> int:
        return self._max_attempts * (UNDO_ATTEMPTS_FACTOR if undo else 1)

    async def _call(self, request: Callable[[], Awaitable[Any]], *, attempts: int
                    ) -> tuple[int, dict[str, Any]]:
        return await call_with_retries(
            request, attempts=attempts,
            retried=lambda reason: self._metrics.retries.labels(reason=reason).inc())


async def call_with_retries(request: Callable[[], Awaitable[Any]], *, attempts: int,
                            retried: Callable[[str], None] = lambda reason: None
                            ) -> tuple[int, dict[str, Any]]:
    """Send a `_preload_content=False` request, again after a passing failure
    (at most `attempts` sends; `retried` hears the reason of each repeat); its
    status and decoded JSON body. The last failure to connect is raised."""
    for attempt in range(1, attempts + 1):
        try:
            code, body, retry_after = await _send(request())
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            if attempt == attempts:
                raise
            reason = "timeout" if isinstance(exc, TimeoutError) else "connection"
            retry_after = None
        else:
            if code not in TRANSIENT_STATUS or attempt == attempts:
                return code, body
            reason = str(code)
        retried(reason)
        backoff = random.uniform(0, RETRY_BACKOFF_SECONDS * 2 ** attempt)
        await asyncio.sleep(retry_after if retry_after is not None else backoff)
    raise AssertionError("unreachable: the last attempt returns or raises")


async def _send(request: Awaitable[Any]) -> tuple[int, dict[str, Any], float | None]:
    """One request: its status, decoded JSON body and Retry-After (seconds, capped)."""
    resp = await request
    try:
        raw = await resp.read()
    finally:
        resp.release()
    try:
        body = orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError:
        body = {"message": raw[:200].decode("utf-8", "replace")}
    retry_after: float | None = None
    with contextlib.suppress(TypeError, ValueError):
        retry_after = min(float(resp.headers.get("Retry-After")), RETRY_AFTER_MAX_SECONDS)
    return resp.status, body if isinstance(body, dict) else {}, retry_after


class _BindingUnknown(BindError):
    """The Binding may or may not have been applied, and the pod cannot be read."""


def _consumer(pod: Pod) -> dict[str, str]:
    return {"resource": "pods", "name": pod.name, "uid": pod.uid}


def _remember(written: list[_Written], rec: _Written) -> None:
    if not any(w is rec for w in written):
        written.append(rec)


def _expect_ok(code: int, body: dict[str, Any], what: str) -> None:
    if code != 200:
        raise BindError(f"{what}: HTTP {code}: {_message(body)}", BindCause.API_ERROR)


def _message(body: dict[str, Any]) -> str:
    return str(body.get("message") or body.get("reason") or "no message")
