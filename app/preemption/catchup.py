"""Catch up on a preemptor's victims' claims before answering its filter.

Once a preemptor's victims are gone, the resource-claim controller
deallocates their claims, and kube-scheduler retries the preemptor on every
event it is interested in: a few milliseconds apart while events flow. drax
learns of the deallocation from its own watch, which can trail the API
server by more than one such retry; a filter answered in that gap rejects a
pod whose devices are in fact free, and the scheduler has to try again.

So before the filter of a nominated preemptor (its own nomination, same uid)
whose victims' released claims drax still sees allocated, `Catchup` reads
those few claims from the API server and applies what is newer than the
inventory's copy (a higher resourceVersion; a claim answered 404 is gone,
unless the watch changed the inventory's copy while the read was on its way;
one the watch removed meanwhile stays removed). The
filter then answers from the API server's present state, as kube-scheduler's
own cache would once the events arrive. The watch delivers the same writes
later; the inventory drops those older than its copy, and ignores those of a
claim read as gone until its deletion arrives (`Inventory.delete`).

The reads are bounded: only claims of a live nomination that drax sees
allocated, one read of them at a time per preemptor (a filter arriving while
one is under way waits for it), no more often than every `min_interval`
seconds per preemptor but at the first filter of each scheduling attempt,
each with a short timeout. A failed read leaves the inventory as it was: the
filter answers from the watch's view, as without it.

The same reads tell the preemptor's attempts before the victims' claims were
deallocated from those after (`drax_preemptor_attempts_total{claims}`).
Each attempt (told apart from its filters by `Attempts`) is counted once, at
its first filter, by what drax knew of the claims when it answered: a read
sent for that filter found one still allocated at the API server
(`allocated`: the attempt began before their deallocation); every one was
deallocated or gone, as the watch or a read said (`freed`); or the watch
still showed one allocated and no read of this filter said otherwise
(`unread`: drax is not connected, or the read failed or timed out, so the
claims may still have been allocated). Of the attempts that reach drax,
those after the deallocation are thus at least the `freed` ones and at most
`freed` + `unread`; an attempt that the scheduler's own filters end before
any extender call is never seen. In advisor mode the in-tree DynamicResources
filter is one of those: on a full cluster no attempt reaches drax before
kube-scheduler's own claim cache has the victims' claims deallocated, so
`allocated` counts only attempts that reached drax through other nodes, and
`freed` + `unread` only those after the scheduler saw the deallocation, not
one that began between the API server's deallocation and the scheduler's
watch delivering it (docs/preemption.md).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

import aiohttp
from kubernetes_asyncio import client
from prometheus_client import CollectorRegistry, Counter

from app.binder import call_with_retries
from app.inventory import Inventory, compare_revisions
from app.model import InvalidObject, Pod
from app.preemption.attempts import Attempts

log = logging.getLogger(__name__)

# The scheduler retries a preemptor no faster than this while events flow
# (7-20 ms on the real control plane), so this spacing reads at most about
# once per retry.
DEFAULT_MIN_INTERVAL_SECONDS: Final = 0.005
DEFAULT_READ_TIMEOUT_SECONDS: Final = 2.0
# What a read found: the claim still allocated at the API server; freed there
# (deallocated or gone) before drax's watch said so; the watch already said so
# by the time the read came back; no answer.
READ_RESULTS: Final = ("allocated", "freed", "caught-up", "error")
# What drax knew of a preemptor's victims' claims at an attempt's first filter
# (see the module doc).
ATTEMPT_CLAIMS: Final = ("allocated", "freed", "unread")


class CatchupMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.reads = Counter(
            "drax_preemptor_claim_reads_total",
            "Victims' claims read from the API server before a nominated preemptor's "
            "filter, by what the read found.", ["result"], registry=registry)
        self.attempts = Counter(
            "drax_preemptor_attempts_total",
            "Scheduling attempts of a nominated preemptor that reach drax's filter (in "
            "advisor mode none before kube-scheduler's own DynamicResources filter passes a "
            "node), counted at each attempt's first filter, by what drax knew of its "
            "victims' claims: a read found one still allocated, every one freed, or one "
            "allocated in the watch's view and not read.",
            ["claims"], registry=registry)
        for result in READ_RESULTS:
            self.reads.labels(result=result)
        for claims in ATTEMPT_CLAIMS:
            self.attempts.labels(claims=claims)


class Catchup:
    """Reads a nominated preemptor's stale victim claims before its filter.

    `api` is set once the client is connected (kube mode's lifespan); until
    then, and without one, `before_filter` does nothing."""

    def __init__(self, inventory: Inventory, *, metrics: CatchupMetrics | None = None,
                 min_interval: float = DEFAULT_MIN_INTERVAL_SECONDS,
                 read_timeout: float = DEFAULT_READ_TIMEOUT_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.api: client.ApiClient | None = None
        self._inventory = inventory
        self._metrics = metrics
        self._min_interval = min_interval
        self._timeout = aiohttp.ClientTimeout(total=read_timeout)
        self._clock = clock
        self._running: dict[str, asyncio.Task[list[str]]] = {}
        self._last: dict[str, float] = {}
        self._attempts = Attempts()

    def stale_claims(self, pod: Pod) -> list[str]:
        """The released claims of `pod`'s own nomination that drax still sees allocated."""
        held = self._inventory.nomination(pod.key)
        if held is None or held.pod_uid != pod.uid:
            return []
        stale = []
        for key in held.victim_claims:
            claim = self._inventory.claim(key)
            if claim is not None and claim.allocation is not None:
                stale.append(key)
        return stale

    async def before_filter(self, pod: Pod, node_names: Sequence[str] = ()
                            ) -> Callable[[Sequence[str]], None] | None:
        """Bring the inventory's copies of `pod`'s stale victim claims up to the
        API server's (see the module doc), and count the scheduling attempt
        this filter over `node_names` starts; never raises for a failed read.
        For a nominated preemptor, returns what to call with the nodes the
        filter passed; else None."""
        self._forget_ended()
        held = self._inventory.nomination(pod.key)
        if held is None or held.pod_uid != pod.uid:
            return None
        nominated = pod.nominated_node_name
        starts = self._attempts.starts_attempt(pod.key, pod.uid, nominated, node_names)
        claims = await self._catch_up(pod, fresh=starts)
        if starts and self._metrics is not None:
            self._metrics.attempts.labels(claims=claims).inc()
        names = list(node_names)

        def after(passed: Sequence[str]) -> None:
            self._attempts.filtered(pod.key, pod.uid, nominated, names, passed, started=starts)

        return after

    async def _catch_up(self, pod: Pod, *, fresh: bool) -> str:
        """Read `pod`'s stale victim claims, unless a read is under way (then wait
        for it) or the last was under `min_interval` ago; a `fresh` filter (an
        attempt's first) waits for one under way and then reads for itself.
        What drax knows of the claims after it (`ATTEMPT_CLAIMS`)."""
        running = self._running.get(pod.key)
        if running is not None:
            await asyncio.shield(running)
            if not fresh:
                return "unread"
        stale = self.stale_claims(pod)
        if not stale:
            self._last.pop(pod.key, None)
            return "freed"
        if self.api is None:
            return "unread"
        now = self._clock()
        if not fresh and now - self._last.get(pod.key, float("-inf")) < self._min_interval:
            return "unread"
        self._last[pod.key] = now
        task = asyncio.get_running_loop().create_task(self._read_all(self.api, stale))
        self._running[pod.key] = task
        try:
            results = await asyncio.shield(task)
        finally:
            if self._running.get(pod.key) is task:
                del self._running[pod.key]
        if "allocated" in results:
            return "allocated"
        return "unread" if "error" in results or self.stale_claims(pod) else "freed"

    def _forget_ended(self) -> None:
        """Forget the last read and filter of preemptors whose nomination ended
        (deleted, bound, replaced)."""
        ended = [key for key in self._last if self._inventory.nomination(key) is None]
        for key in ended:
            del self._last[key]
        self._attempts.forget(lambda key: self._inventory.nomination(key) is not None)

    async def _read_all(self, api: client.ApiClient, keys: list[str]) -> list[str]:
        """Read and apply claims `keys`; what each read found (`READ_RESULTS`)."""
        claims: Any = client.ResourceV1Api(api)
        sent = [self._copy(key) for key in keys]
        answers = await asyncio.gather(*(self._read(claims, key) for key in keys))
        results = []
        for key, copy, answer in zip(keys, sent, answers, strict=True):
            result = self._apply(key, answer, copy)
            results.append(result)
            if self._metrics is not None:
                self._metrics.reads.labels(result=result).inc()
        return results

    async def _read(self, claims: Any, key: str) -> tuple[int, dict[str, Any]] | None:
        namespace, name = key.split("/", 1)
        try:
            return await call_with_retries(lambda: claims.read_namespaced_resource_claim(
                name, namespace, _preload_content=False, _request_timeout=self._timeout),
                attempts=1)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            log.debug("reading resourceclaim %s: %s: %s", key, type(exc).__name__, exc)
            return None

    def _copy(self, key: str) -> tuple[str, str] | None:
        """The (uid, resourceVersion) of the inventory's copy of claim `key`."""
        held = self._inventory.claim(key)
        return None if held is None else (held.uid, held.resource_version)

    def _apply(self, key: str, answer: tuple[int, dict[str, Any]] | None,
               sent: tuple[str, str] | None) -> str:
        """Apply one read, sent while the inventory held copy `sent` of the
        claim; what it found (`READ_RESULTS`)."""
        if answer is None:
            return "error"
        code, body = answer
        held = self._inventory.claim(key)
        if held is None:
            # The watch delivered the deletion while the read was on its way: a
            # copy read before it must not bring the claim back.
            return "caught-up"
        if code == 404:
            if (held.uid, held.resource_version) != sent:
                # The watch delivered a later write while the read was on its
                # way, perhaps a new claim of that name: the 404 may be older.
                return "caught-up"
            self._inventory.delete("ResourceClaim", key)
            return "freed"
        if code != 200:
            log.debug("reading resourceclaim %s: HTTP %d: %s", key, code,
                      body.get("message") or "no message")
            return "error"
        version = str((body.get("metadata") or {}).get("resourceVersion") or "")
        if not newer(version, held.resource_version):
            return "allocated" if held.allocation is not None else "caught-up"
        try:
            self._inventory.apply("ResourceClaim", "MODIFIED", body)
        except InvalidObject as exc:
            log.warning("resourceclaim %s as read: %s", key, exc)
            return "error"
        current = self._inventory.claim(key)
        return "allocated" if current is not None and current.allocation is not None \
            else "freed"


def newer(version: str, than: str) -> bool:
    """Whether resourceVersion `version` is a later revision than `than`; False
    when either is not an integer (nothing is known of their order, and the
    read then leaves the watch's copy)."""
    order = compare_revisions(version, than)
    return order is not None and order > 0
