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

The Lease is read by the kube source's `Informer`, listing and watching that
one name (RBAC: get, list, watch on `coordination.k8s.io` leases named like
it): one list, then watches resumed from the last resourceVersion, a new list
only after 410 Gone. Every write to the Lease arrives as a watch event, so a
takeover is seen as soon as it is written and no periodic resync is needed;
silence is what the expiry covers. A failed request is retried with the
informer's backoff, and while nothing can be read the last view stands until
it expires, so a replica cut off from the API server stops leading once its
kube-scheduler must have stopped too.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kubernetes_asyncio import client
from prometheus_client import CollectorRegistry

from app.model import InvalidObject
from app.sources.kube.metrics import WatchMetrics
from app.sources.kube.watch import Informer, WatchedKind, WatchSettings

log = logging.getLogger(__name__)

# kube-scheduler's leaderElection.retryPeriod default: how often it tries the Lease.
RETRY_PERIOD: Final = 2.0
# The informer's loop: a failed request is retried within kube-scheduler's own
# retry period, so a standby never learns of its takeover a backoff later than
# its kube-scheduler; a watch is renewed (from its resourceVersion) within a
# minute, so a connection that died without a word is replaced soon.
LEASE_WATCH: Final = WatchSettings(watch_timeout=30.0, list_timeout=10.0,
                                   connect_timeout=10.0, backoff_initial=0.4,
                                   backoff_max=RETRY_PERIOD)


@dataclass(slots=True, frozen=True)
class LeaseRecord:
    """What the election needs of a Lease's spec."""

    holder: str
    duration: float  # leaseDurationSeconds
    renew_time: str  # as written; compared for change, never against this clock

    @classmethod
    def of(cls, lease: Mapping[str, Any] | None) -> LeaseRecord:
        """Raises InvalidObject for a Lease whose spec cannot be read."""
        spec = (lease or {}).get("spec") or {}
        try:
            return cls(holder=str(spec.get("holderIdentity") or ""),
                       duration=float(spec.get("leaseDurationSeconds") or 0),
                       renew_time=str(spec.get("renewTime") or ""))
        except (AttributeError, TypeError, ValueError) as exc:
            raise InvalidObject(f"Lease: unreadable spec ({exc})") from None


NO_LEASE: Final = LeaseRecord(holder="", duration=0.0, renew_time="")


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
        self._record = NO_LEASE
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

    def take(self, record: LeaseRecord | None) -> None:
        """Take in the Lease's record as just read (None: it does not exist)."""
        record = record or NO_LEASE
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

    async def run(self, api_client: client.ApiClient, *,
                  settings: WatchSettings = LEASE_WATCH) -> None:
        """Follow the Lease until cancelled (returns at once without one)."""
        if self.lease is None:
            return
        namespace, name = self.lease
        watched = WatchedKind("Lease", client.CoordinationV1Api, "list_namespaced_lease",
                              namespace=namespace, field_selector=f"metadata.name={name}",
                              parse=_parse_lease)
        # Its own registry: the Lease is not part of the inventory's watch metrics.
        metrics = WatchMetrics(CollectorRegistry(), kinds=(watched.kind,))
        informer = Informer(api_client, _LeaseSink(self), watched, metrics=metrics,
                            settings=settings)
        try:
            await informer.run()
        finally:
            if self._expiry is not None:
                self._expiry.cancel()


def _parse_lease(_kind: str, lease: Any) -> LeaseRecord:
    return LeaseRecord.of(lease)


class _LeaseSink:
    """The informer's sink for the one Lease: every list and event is observed."""

    def __init__(self, leadership: Leadership) -> None:
        self._leadership = leadership

    def apply(self, kind: str, event_type: str, obj: Mapping[str, Any],
              parse: Callable[[str, Any], Any] = _parse_lease) -> None:
        self._leadership.take(None if event_type == "DELETED" else parse(kind, obj))

    def apply_parsed(self, kind: str, event_type: str, parsed: LeaseRecord) -> None:
        self._leadership.take(None if event_type == "DELETED" else parsed)

    def listing(self, kind: str) -> _LeaseListing:
        return _LeaseListing(self._leadership)

    def admits(self, kind: str, obj: Mapping[str, Any]) -> bool:
        return True

    def mark_synced(self, kind: str) -> None:
        pass


class _LeaseListing:
    """A list of the one Lease: taken once read whole (none listed: no Lease)."""

    def __init__(self, leadership: Leadership) -> None:
        self._leadership = leadership
        self._record: LeaseRecord | None = None
        self.keys: set[str] = set()

    def put(self, obj: LeaseRecord) -> None:
        self.keys.add("lease")
        self._record = obj

    def keep(self, obj: Any) -> None:
        """An unreadable Lease is read as none."""

    def finishing(self) -> Iterator[None]:
        self._leadership.take(self._record)
        yield
