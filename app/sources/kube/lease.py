"""Whether this replica leads: its kube-scheduler holds the leader-election Lease.

drax runs as a sidecar of kube-scheduler, and with several replicas every
drax keeps its inventory warm while only the kube-scheduler holding the Lease
(`kube-system/drax-scheduler` in manifests/) schedules. What drax writes on its
own, rather than in a verb that kube-scheduler calls, must run only beside
that kube-scheduler; `Leadership` says whether it does.

kube-scheduler (1.37, cmd/kube-scheduler/app/options) takes part in the
election as `<hostname>_<uuid>`, and the containers of one pod share its
hostname, so this replica leads while the Lease's `holderIdentity` starts with
`<identity>_` (the host name unless configured) and the Lease is fresh: its
holder or renewTime changed less than `leaseDurationSeconds` ago on this
process's clock, the rule client-go's leader elector applies (it too trusts
only the time it observed a change, never the writer's clock). A released
Lease (empty holder, kube-scheduler's ReleaseOnCancel on shutdown), a missing
one, or one another replica holds means following.

Without a Lease configured (one replica, file mode) this replica always leads.

The Lease is read with a list and watch of that one name (RBAC: get, list,
watch on `coordination.k8s.io` leases named like it); a failed request is
retried with the watch source's backoff, and while nothing can be read the
last view stands until it expires, so a replica cut off from the API server
stops leading once its kube-scheduler must have stopped too.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import aiohttp
import orjson
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from app.sources.kube.client import ApiReadError, read_object
from app.sources.kube.watch import Backoff

log = logging.getLogger(__name__)

# How long one watch of the Lease runs before it is renewed.
WATCH_SECONDS: Final = 60
REQUEST_TIMEOUT: Final = 10.0
# kube-scheduler's leaderElection.retryPeriod default: how often it tries the Lease.
RETRY_PERIOD: Final = 2.0


@dataclass(slots=True, frozen=True)
class LeaseRecord:
    """What the election needs of a Lease's spec."""

    holder: str
    duration: float  # leaseDurationSeconds
    renew_time: str  # as written; compared for change, never against this clock

    @classmethod
    def of(cls, lease: dict[str, Any] | None) -> LeaseRecord:
        spec = (lease or {}).get("spec") or {}
        return cls(holder=str(spec.get("holderIdentity") or ""),
                   duration=float(spec.get("leaseDurationSeconds") or 0),
                   renew_time=str(spec.get("renewTime") or ""))


class Leadership:
    """`leading` is True while this replica's kube-scheduler holds the Lease.

    `term` counts the times this replica became leader: work that must not
    outlive one term (a preemption decided, then written) records it first and
    checks `still_leading(term)` before each write.
    """

    def __init__(self, *, lease: tuple[str, str] | None = None, identity: str = "",
                 clock: Callable[[], float] | None = None) -> None:
        self.lease = lease
        self.identity = identity or socket.gethostname()
        self._clock = clock
        self._record = LeaseRecord(holder="", duration=0.0, renew_time="")
        self._observed_at = float("-inf")
        self._leading = lease is None
        self.term = 1 if self._leading else 0
        self._subscribers: list[Callable[[bool], None]] = []
        self._expiry: asyncio.TimerHandle | None = None
        self._waiters: list[tuple[bool, asyncio.Future[None]]] = []

    # ------------------------------------------------------------------ reading

    @property
    def configured(self) -> bool:
        return self.lease is not None

    @property
    def leading(self) -> bool:
        return self._leading

    @property
    def holder(self) -> str:
        """The Lease's holderIdentity as last read ("" if none or not configured)."""
        return self._record.holder

    def still_leading(self, term: int) -> bool:
        """Leading, and without a lost lease since `term` began."""
        return self._leading and self.term == term

    def subscribe(self, callback: Callable[[bool], None]) -> Callable[[], None]:
        """Call `callback(leading)` on every change, on the event loop; returns an
        unsubscribe function."""
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback)

    async def wait(self, leading: bool = True) -> None:
        """Return once `.leading == leading` (at once if it already is)."""
        if self._leading == leading:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((leading, future))
        try:
            await future
        finally:
            self._waiters = [(want, f) for want, f in self._waiters if f is not future]

    # ------------------------------------------------------------------ observing

    def _now(self) -> float:
        return self._clock() if self._clock else asyncio.get_running_loop().time()

    def ours(self, holder: str) -> bool:
        return holder == self.identity or holder.startswith(self.identity + "_")

    def observe(self, lease: dict[str, Any] | None) -> None:
        """Take in the Lease as just read (None: it does not exist)."""
        record = LeaseRecord.of(lease)
        if record != self._record:
            self._record = record
            self._observed_at = self._now()
        self._update()

    def _update(self) -> None:
        record = self._record
        fresh = self._now() < self._observed_at + record.duration
        self._set(bool(record.holder) and fresh and self.ours(record.holder))
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        if self._leading:
            # Nothing may arrive (the API server gone): stop leading at expiry anyway.
            loop = asyncio.get_running_loop()
            left = self._observed_at + record.duration - self._now()
            self._expiry = loop.call_later(max(0.0, left) + 0.01, self._update)

    def _set(self, leading: bool) -> None:
        if leading == self._leading:
            return
        self._leading = leading
        if leading:
            self.term += 1
        log.info("%s the leader-election Lease %s (holder %r; this replica: %s_*)",
                 "holding" if leading else "not holding", "/".join(self.lease or ()),
                 self._record.holder, self.identity)
        for want, future in self._waiters:
            if want == leading and not future.done():
                future.set_result(None)
        for callback in list(self._subscribers):
            try:
                callback(leading)
            except Exception:
                log.exception("a leadership subscriber failed")

    async def run(self, api_client: client.ApiClient, *, backoff_initial: float = 0.4,
                  backoff_max: float = RETRY_PERIOD) -> None:
        """Follow the Lease until cancelled (returns at once without one). A failed
        read is retried within kube-scheduler's own retry period, so a standby
        never learns of its takeover a backoff later than its kube-scheduler."""
        if self.lease is None:
            return
        namespace, name = self.lease
        leases: Any = client.CoordinationV1Api(api_client)
        backoff = Backoff(initial=backoff_initial, maximum=backoff_max)
        selector = f"metadata.name={name}"
        timeout = aiohttp.ClientTimeout(sock_connect=REQUEST_TIMEOUT,
                                        sock_read=WATCH_SECONDS + REQUEST_TIMEOUT)
        try:
            while True:
                try:
                    listed = await read_object(leases.list_namespaced_lease(
                        namespace, field_selector=selector, _preload_content=False,
                        _request_timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)),
                        what="list")
                    items = listed.get("items") or []
                    self.observe(items[0] if items else None)
                    backoff.reset()
                    rv = str((listed.get("metadata") or {}).get("resourceVersion") or "")
                    await self._watch(leases, namespace, selector, rv, timeout)
                    continue
                except (_LeaseError, ApiReadError, ApiException, aiohttp.ClientError,
                        TimeoutError, OSError, orjson.JSONDecodeError) as exc:
                    log.warning("reading Lease %s/%s failed: %s", namespace, name, exc)
                await asyncio.sleep(backoff.next())
        finally:
            if self._expiry is not None:
                self._expiry.cancel()

    async def _watch(self, leases: Any, namespace: str, selector: str, rv: str,
                     timeout: aiohttp.ClientTimeout) -> None:
        resp = await leases.list_namespaced_lease(
            namespace, field_selector=selector, watch=True, resource_version=rv,
            allow_watch_bookmarks=True, timeout_seconds=WATCH_SECONDS,
            _preload_content=False, _request_timeout=timeout)
        try:
            if resp.status != 200:
                raise _LeaseError(f"watch: HTTP {resp.status}")
            buf = bytearray()
            async for chunk in resp.content.iter_any():
                buf += chunk
                while (end := buf.find(b"\n")) >= 0:
                    line = bytes(buf[:end])
                    del buf[:end + 1]
                    if line.strip():
                        self._event(orjson.loads(line))
        finally:
            resp.release()

    def _event(self, event: Any) -> None:
        if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
            raise _LeaseError("watch: a line that is not an event")
        kind = event.get("type")
        if kind == "ERROR":
            raise _LeaseError(f"watch: {event['object'].get('message')}")
        if kind in ("ADDED", "MODIFIED"):
            self.observe(event["object"])
        elif kind == "DELETED" and self.lease is not None and (
                event["object"].get("metadata") or {}).get("name") == self.lease[1]:
            self.observe(None)


class _LeaseError(Exception):
    pass
