"""Carry out a preemption the search chose, as kube-scheduler carries out its own.

Order, for preemptor P, node N and the chosen victims:

1. hold P's devices on N in the inventory (a `Nomination`), before anything
   is written, so no pod of P's priority or lower is given what the victims
   free;
2. write `status.nominatedNodeName: N` on P, with P's uid as a precondition:
   if P is gone or replaced, the hold ends and no victim is touched;
3. per victim: read it; if it is gone, replaced (another uid), or already
   deleting, it is left alone; else add the `DisruptionTarget` condition
   (reason `PreemptionByScheduler`, a message naming P and what the victim's
   going frees: devices, or room on N for P's cpu, memory or pods) with a
   strategic-merge patch guarded by the victim's uid and resourceVersion (a
   409 re-reads and retries), then, P still waiting, delete it with its uid as
   precondition and its own grace period (no `gracePeriodSeconds`), then
   record an Event (`Preempted`, regarding the victim, related to P);
4. an Event on P (`Preempting`) naming N, the victims and what they free.

Only the pods chosen are ever deleted, each at most once, and only while it is
the pod chosen (its uid) and P still waits for it as the watch sees P: once P
is deleted, replaced (another uid), bound or deleting, it needs no more
victims, and the watch ends its hold. The hold does not lapse while the actor
works: a slow API server can outlast its time-to-live, and P still needs
every device a victim already deleted frees; the time-to-live counts from
the end. A request failing for a passing reason is sent again
(`call_with_retries`); past the retries, the preemption stops where it is:
victims not yet reached stay, the hold keeps the victims actually deleted and
the claims only they release (the driver waits for those and may then search
again), and the outcome says so. Events are best effort: a failed Event never
stops a preemption.

RBAC (manifests/rbac.yaml): `get`, `delete` pods; `patch` pods/status;
`create` events (events.k8s.io).
"""

from __future__ import annotations

import functools
import logging
import math
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

import aiohttp
from kubernetes_asyncio import client

from app.allocator.types import ClaimAllocation
from app.binder import call_with_retries
from app.inventory import Inventory, Nomination, waiting_ended
from app.model import Pod
from app.model.objects import DISRUPTION_TARGET, PREEMPTING_FOR, PREEMPTION_BY_SCHEDULER
from app.model.times import format_micro_time, format_time
from app.preemption.fit import scheduler_of

log = logging.getLogger(__name__)

REPORTING_CONTROLLER: Final = "drax"
# How long devices stay held for a preemptor once its victims are gone (the
# driver renews the hold while they are still terminating or their claims
# still allocated): kube-scheduler retries an unschedulable pod at least every
# 5 minutes (podMaxInUnschedulablePodsDuration), so a preemptor still pending
# after that will not bind on these devices.
DEFAULT_HOLD_SECONDS: Final = 300.0


class _GiveUp(Exception):
    """The API server failed past the retries."""


class _Stopped(Exception):
    """No more victims: P no longer waits, or this replica no longer leads."""

    def __init__(self, refused: str, message: str) -> None:
        super().__init__(message)
        self.refused = refused


@dataclass(slots=True)
class _Progress:
    """How far a preemption got: P's nomination written, the victims deleted
    and those skipped (gone, replaced or already deleting), in order."""

    nominated: bool = False
    deleted: list[Pod] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def reached(self) -> int:
        return len(self.deleted) + len(self.skipped)


@dataclass(slots=True, frozen=True)
class Preemption:
    """What to carry out: the search's choice for one preemptor."""

    preemptor: Pod
    priority: int
    node: str
    victims: tuple[Pod, ...]
    allocations: tuple[ClaimAllocation, ...]
    released_claims: tuple[str, ...]
    freed_devices: tuple[str, ...]
    # The victims (uids) that go for P's room on the node, not for devices, and
    # the resources P lacks there without them (NodeResourcesFit's names).
    room_victims: frozenset[str] = frozenset()
    room: tuple[str, ...] = ()


@dataclass(slots=True, frozen=True)
class Outcome:
    """How a preemption ended: `refused` (a reason of metrics.REFUSAL_REASONS)
    or None when carried out; `deleted` the victims deleted (pod keys);
    `skipped` those found gone, replaced or already deleting."""

    refused: str | None
    deleted: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    message: str = ""


class Actor:
    def __init__(self, api_client: client.ApiClient, inventory: Inventory, *,
                 max_attempts: int = 5,
                 request_timeout: float = 10.0, hold_seconds: float = DEFAULT_HOLD_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        # Typed as Any: the client's stubs demand model objects as bodies.
        self._core: Any = client.CoreV1Api(api_client)
        self._events: Any = client.EventsV1Api(api_client)
        self._inventory = inventory
        self._attempts = max_attempts
        self._timeout = aiohttp.ClientTimeout(total=request_timeout)
        self._hold_seconds = hold_seconds
        self._clock = clock
        self._instance = f"{REPORTING_CONTROLLER}-{socket.gethostname()}-{os.getpid()}"

    async def preempt(self, p: Preemption, *,
                      still_leading: Callable[[], bool] = lambda: True) -> Outcome:
        """Carry out `p`; `still_leading` is asked before each write (a replica
        that lost the leader-election Lease meanwhile stops where it is)."""
        pod = p.preemptor
        nomination = Nomination(
            pod_key=pod.key, pod_uid=pod.uid, priority=p.priority, node=p.node,
            allocations=p.allocations, victims=tuple((v.key, v.uid) for v in p.victims),
            victim_claims=p.released_claims, started_at=self._clock(), expires_at=math.inf)
        self._inventory.nominate(nomination)
        done = _Progress()
        try:
            return await self._carry_out(p, done, still_leading)
        finally:
            self._settle(nomination, p, done)

    async def _carry_out(self, p: Preemption, done: _Progress,
                         still_leading: Callable[[], bool]) -> Outcome:
        pod = p.preemptor
        if not still_leading():
            return Outcome(refused="not-leading", message="this replica no longer leads")
        try:
            done.nominated = await self._nominate(pod, p.node)
        except _GiveUp as exc:
            return Outcome(refused="api-error", message=str(exc))
        if not done.nominated:
            return Outcome(refused="preemptor-gone",
                           message=f"pod {pod.key} (uid {pod.uid}) is gone or replaced")
        failure = ""
        refused = "api-error"
        for victim in p.victims:
            stop = self._stop(pod, still_leading)
            if stop is not None:
                refused, failure = stop
                break
            try:
                if await self._evict(victim, p, stop=lambda: self._stop(pod, still_leading)):
                    done.deleted.append(victim)
                else:
                    done.skipped.append(victim.key)
            except _Stopped as exc:
                refused, failure = exc.refused, str(exc)
                break
            except _GiveUp as exc:
                failure = str(exc)
                break
        deleted = tuple(v.key for v in done.deleted)
        if done.reached < len(p.victims):
            log.warning("preemption for pod %s on node %s stopped after %d of %d victims: %s",
                        pod.key, p.node, len(deleted), len(p.victims), failure)
            if refused == "api-error" and not still_leading():
                refused = "not-leading"
            return Outcome(refused=refused, deleted=deleted, skipped=tuple(done.skipped),
                           message=failure)
        note = preempting_note(p, done.deleted)
        await self._event(pod, related=None, reason="Preempting", action="Preempting",
                          note=note)
        log.info("preempted for pod %s: %s", pod.key, note)
        return Outcome(refused=None, deleted=deleted, skipped=tuple(done.skipped))

    def _stop(self, pod: Pod, still_leading: Callable[[], bool]) -> tuple[str, str] | None:
        """Why to touch no more victims for `pod` (a refusal reason and a
        message), or None to go on."""
        if not still_leading():
            return "not-leading", "this replica no longer leads"
        gone = self._gone(pod)
        if gone:
            return "preemptor-gone", f"pod {pod.key} (uid {pod.uid}) {gone}"
        return None

    def _gone(self, pod: Pod) -> str:
        """How preemptor `pod` no longer waits for its victims as the watch sees
        it, the rule that ends its hold in the inventory; "" while it waits."""
        return waiting_ended(self._inventory.pod(pod.key), pod.uid)

    def _settle(self, nomination: Nomination, p: Preemption, done: _Progress) -> None:
        """Leave P's hold as the preemption ended, its time-to-live counting from
        now. None when P no longer waits or its nomination was never written.
        Stopped half-way, it keeps the victims that did go, so the driver does
        not preempt again before they are gone, and waits for their claims
        alone: a claim a victim not reached holds stays allocated, and waiting
        for it would stop every later preemption."""
        pod = p.preemptor
        if not done.nominated or self._gone(pod):
            held = self._inventory.nomination(pod.key)
            if held is not None and held.pod_uid == pod.uid:
                self._inventory.end_nomination(pod.key)
            return
        if done.reached < len(p.victims):
            nomination = replace(
                nomination, victims=tuple((v.key, v.uid) for v in done.deleted),
                victim_claims=self._released_by_those_reached(p, p.victims[done.reached:]))
        self._inventory.nominate(replace(nomination,
                                         expires_at=self._clock() + self._hold_seconds))

    def _released_by_those_reached(self, p: Preemption, not_reached: Sequence[Pod]
                                   ) -> tuple[str, ...]:
        """`p`'s released claims that no victim in `not_reached` reserves."""
        staying = {v.uid for v in not_reached}
        kept = []
        for key in p.released_claims:
            claim = self._inventory.claim(key)
            if claim is None or staying.isdisjoint(ref.uid for ref in claim.reserved_for):
                kept.append(key)
        return tuple(kept)

    # ------------------------------------------------------------------ preemptor

    async def renominate(self, pod: Pod, node: str, *,
                         still_leading: Callable[[], bool] = lambda: True) -> bool:
        """Set `pod`'s nominatedNodeName to `node` again (its hold's node); False
        when it is gone or replaced, this replica no longer leads, or the API
        server failed past the retries."""
        if not still_leading():
            return False
        try:
            return await self._nominate(pod, node)
        except _GiveUp as exc:
            log.warning("%s", exc)
            return False

    async def _nominate(self, pod: Pod, node: str) -> bool:
        """Set P's nominatedNodeName; False when P is gone or another pod."""
        body = {"metadata": {"uid": pod.uid}, "status": {"nominatedNodeName": node}}
        code, answer = await self._send(
            lambda: self._core.patch_namespaced_pod_status(
                pod.name, pod.namespace, body, _content_type="application/merge-patch+json",
                _preload_content=False, _request_timeout=self._timeout),
            what=f"nominating node {node} for pod {pod.key}")
        # 409 or 422: the uid precondition failed (another pod has the name now).
        if code in (404, 409, 422):
            return False
        _expect(code, answer, f"nominating node {node} for pod {pod.key}")
        return True

    # ------------------------------------------------------------------ victims

    async def _evict(self, victim: Pod, p: Preemption, *,
                     stop: Callable[[], tuple[str, str] | None]) -> bool:
        """Mark and delete `victim` of `p`; False when it is no longer the pod
        chosen (gone, replaced, already deleting). `stop` is asked again right
        before the delete, since the reads and status writes before it can take
        long: when it answers, `_Stopped` leaves the victim running (the
        condition written stays; the disruption controller sets a stale one
        False)."""
        pod = p.preemptor
        condition = {
            "type": DISRUPTION_TARGET, "status": "True", "reason": PREEMPTION_BY_SCHEDULER,
            "message": condition_message(scheduler_of(pod), p, victim),
            "lastTransitionTime": format_time()}
        for _ in range(self._attempts):
            current = await self._read(victim)
            if current is None:
                return False
            meta = current.get("metadata") or {}
            patch = {"metadata": {"uid": victim.uid,
                                  "resourceVersion": meta.get("resourceVersion")},
                     "status": {"conditions": [condition]}}
            code, answer = await self._send(
                functools.partial(
                    self._core.patch_namespaced_pod_status, victim.name, victim.namespace, patch,
                    _content_type="application/strategic-merge-patch+json",
                    _preload_content=False, _request_timeout=self._timeout),
                what=f"marking pod {victim.key} as a disruption target")
            if code == 404:
                return False
            if code in (409, 422):
                continue  # changed meanwhile (or replaced): read it again
            _expect(code, answer, f"marking pod {victim.key} as a disruption target")
            break
        else:
            raise _GiveUp(f"pod {victim.key}: still conflicting after {self._attempts} attempts")
        # The watch's view of P, with no read of P: a read could not close the
        # window between it and the delete either, and would cost a request per
        # victim of a server that may be slow already.
        why = stop()
        if why is not None:
            raise _Stopped(*why)
        code, answer = await self._send(
            lambda: self._core.delete_namespaced_pod(
                victim.name, victim.namespace, body={"preconditions": {"uid": victim.uid}},
                _preload_content=False, _request_timeout=self._timeout),
            what=f"deleting pod {victim.key}")
        if code in (404, 409):
            return False  # gone, or the name now belongs to another pod
        _expect(code, answer, f"deleting pod {victim.key}", ok=(200, 202))
        await self._event(victim, related=pod, reason="Preempted", action="Preempting",
                          note=preempted_note(p, victim))
        return True

    async def _read(self, victim: Pod) -> dict[str, Any] | None:
        """The victim as the API server has it; None when it is not the pod chosen
        any more or is already going."""
        code, current = await self._send(
            lambda: self._core.read_namespaced_pod(
                victim.name, victim.namespace, _preload_content=False,
                _request_timeout=self._timeout), what=f"reading pod {victim.key}")
        if code == 404:
            return None
        _expect(code, current, f"reading pod {victim.key}")
        meta = current.get("metadata") or {}
        if meta.get("uid") != victim.uid or meta.get("deletionTimestamp"):
            return None
        return current

    # ------------------------------------------------------------------ events

    async def _event(self, pod: Pod, *, related: Pod | None, reason: str, action: str,
                     note: str) -> None:
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            # Named as client-go's recorder names them: the API server refuses a
            # generateName ending in ".".
            "metadata": {"name": f"{pod.name[:230]}.{time.time_ns():x}",
                         "namespace": pod.namespace},
            "eventTime": format_micro_time(),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": self._instance[:128],
            "action": action, "reason": reason, "type": "Normal", "note": note[:1024],
            "regarding": _reference(pod)}
        if related is not None:
            body["related"] = _reference(related)
        try:
            code, answer = await self._send(
                lambda: self._events.create_namespaced_event(
                    pod.namespace, body, _preload_content=False,
                    _request_timeout=self._timeout), what=f"an Event for pod {pod.key}")
        except _GiveUp as exc:
            log.warning("%s", exc)
            return
        if code not in (200, 201):
            log.warning("an Event for pod %s: HTTP %d: %s", pod.key, code,
                        answer.get("message") or "no message")

    # ------------------------------------------------------------------ requests

    async def _send(self, request: Callable[[], Any], *, what: str
                    ) -> tuple[int, dict[str, Any]]:
        try:
            return await call_with_retries(request, attempts=self._attempts)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise _GiveUp(f"{what}: {type(exc).__name__}: {exc}") from exc


# ---------------------------------------------------------------------- messages


def condition_message(scheduler: str, p: Preemption, victim: Pod) -> str:
    """The DisruptionTarget condition's message on `victim`: P and what the
    victim's going frees for it, after P's `scheduler` name, as kube-scheduler's
    own message opens."""
    if victim.uid in p.room_victims:
        frees = f"room on node {p.node}{_for(p.room)}"
    else:
        frees = f"devices {_devices(p)}"
    pod = p.preemptor
    return f"{scheduler}: {PREEMPTING_FOR} {pod.key} (uid {pod.uid}; {frees})"


def preempted_note(p: Preemption, victim: Pod) -> str:
    """The `Preempted` Event's note on `victim`."""
    pod = p.preemptor
    return f"Preempted by pod {pod.key} (uid {pod.uid}) on node {p.node} to free " + (
        f"room for it{_for(p.room)}" if victim.uid in p.room_victims
        else f"devices {_devices(p)}")


def preempting_note(p: Preemption, deleted: Sequence[Pod]) -> str:
    """The `Preempting` Event's note on P: the victims deleted, by what they free."""
    for_devices = [v.key for v in deleted if v.uid not in p.room_victims]
    for_room = [v.key for v in deleted if v.uid in p.room_victims]
    parts = []
    if for_devices:
        parts.append(f"pod(s) {', '.join(for_devices)} to free devices {_devices(p)}")
    if for_room:
        parts.append(f"pod(s) {', '.join(for_room)} to free room for it{_for(p.room)}")
    return f"Preempting on node {p.node}: " + ("; ".join(parts) or "none (already going)")


def _devices(p: Preemption) -> str:
    return ", ".join(p.freed_devices) or "its devices"


def _for(room: Sequence[str]) -> str:
    return f": {', '.join(room)}" if room else ""


def _expect(code: int, body: dict[str, Any], what: str, *,
            ok: Sequence[int] = (200,)) -> None:
    if code not in ok:
        raise _GiveUp(f"{what}: HTTP {code}: {body.get('message') or 'no message'}")


def _reference(pod: Pod) -> dict[str, str]:
    return {"apiVersion": "v1", "kind": "Pod", "namespace": pod.namespace, "name": pod.name,
            "uid": pod.uid}
