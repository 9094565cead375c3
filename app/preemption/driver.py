"""The preemption driver: finds the pods drax must preempt for, and acts.

kube-scheduler 1.37 never asks an extender to preempt for devices (in
allocator mode the dry run ignores extender filters; in advisor mode the
in-tree DynamicResources plugin rejects the pod before any extender is
called). So drax drives preemption itself, from what the scheduler writes:
a pod of one of the scheduler names drax serves (the profiles of the
kube-scheduler that calls it: `VictimSearch.schedulers`), not bound, not
deleting, whose PodScheduled condition is False with reason Unschedulable,
with claims (a pod without claims is the scheduler's business) and a
preemptionPolicy other than Never, and no bind of it under way (drax's bind
assumed its devices, not yet confirmed by the watch).

Every `interval` seconds, while this replica leads (`leadership`: its
kube-scheduler holds the leader-election Lease; always without one), the
driver makes a pass over every candidate. A pod that becomes a candidate and
was never considered (`on_change`, the watch's hook: the scheduler has just
written it unschedulable) gets a pass of its own at once, over the new
candidates only: a preemptor's first preemption waits for no tick, as
kube-scheduler's own PostFilter follows the failed attempt directly, and
the candidates already searched are searched again on the tick only, so a
stream of new pods does not multiply their cost. A pass:

1. renews the holds whose victims are still terminating or whose claims are
   still allocated (so a slow kubelet does not end a hold), and notes the
   preemptors that got bound (`drax_preemptor_bind_seconds`);
2. takes the candidates highest priority first and, for each holding
   devices whose nominatedNodeName is cleared (kube-scheduler's
   DefaultPreemption clears it in advisor mode, see `_renominate`), writes
   the hold's node back; then skips it while
   its earlier victims are pending (no cascading), or when nothing relevant
   changed since its last fruitless search (the inventory's devices, claims,
   nodes and classes; a pod with claims anywhere; any pod bound or nominated
   to a node refused for room, or to the node it fits on; `RETRY_SECONDS`
   bounds the wait for what none of these tell); else runs the victim search
   with the pod's own holds lifted, over every node (the search refuses the
   nodes the pod can never run on: nodeSelector, required node affinity,
   taints, cordon). A best node without victims means the pod already fits
   (it waits for the scheduler's retry; when its scheduler nominated it to
   that node, or nominated it nowhere and those pods were preempted for it,
   and it takes devices that pods of lower priority still going there
   release, as a failover leaves it, its devices there are held for it);
   otherwise the actor carries out the best
   node's preemption, and the pass ends there: the next search then sees
   this one's victims as going.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from app.inventory import Inventory, Nomination
from app.inventory.occupants import preemption_policy_of, priority_of
from app.model import Pod
from app.model.objects import PREEMPT_NEVER
from app.preemption.actor import DEFAULT_HOLD_SECONDS, Actor, Preemption
from app.preemption.fit import NodeFit, short_of_room
from app.preemption.metrics import PreemptionMetrics
from app.preemption.search import NodePreemption, VictimSearch
from app.sources.kube.lease import Leadership

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_SECONDS: Final = 1.0
# A fruitless search is repeated when something it read changed (see the
# module doc), else after this long: a PodDisruptionBudget or PriorityClass
# change, which moves no sequence, cannot make a fruitless search succeed
# except through a pod's priority read from its class.
RETRY_SECONDS: Final = 300.0


@dataclass(slots=True)
class _Tried:
    uid: str
    sequence: int
    at: float
    reason: str
    usage: int = 0  # the pods' change sequence (`PodUsages.changed_since`)
    nodes: frozenset[str] = frozenset()  # refused for room, or where it fits


class Driver:
    def __init__(self, inventory: Inventory, *, search: VictimSearch, actor: Actor,
                 metrics: PreemptionMetrics, leadership: Leadership | None = None,
                 interval: float = DEFAULT_INTERVAL_SECONDS,
                 hold_seconds: float = DEFAULT_HOLD_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._inventory = inventory
        self._search = search
        self._actor = actor
        self._metrics = metrics
        self._leadership = leadership or Leadership()
        self._interval = interval
        self._hold_seconds = hold_seconds
        self._clock = clock
        self._tried: dict[str, _Tried] = {}
        self._waiting: dict[str, tuple[str, float]] = {}  # preemptor -> (uid, acted at)
        self._pending_noted: set[tuple[str, float]] = set()
        self._new = asyncio.Event()

    async def run(self) -> None:
        """Drive until cancelled: a pass over every candidate each `interval`
        seconds, one over the new candidates as soon as one appears; a failing
        pass is logged and the next one runs."""
        next_tick = self._clock() + self._interval
        while True:
            try:
                async with asyncio.timeout(max(0.0, next_tick - self._clock())):
                    await self._new.wait()
            except TimeoutError:
                pass
            self._new.clear()
            full = self._clock() >= next_tick
            if full:
                next_tick = self._clock() + self._interval
            if not self._leadership.leading or not self._inventory.synced:
                continue
            try:
                await self.run_once(only_new=not full)
            except Exception:
                log.exception("preemption pass failed")

    def on_change(self, kind: str, event_type: str, obj: Mapping[str, Any] | None) -> None:
        """The watch source's change hook (called once the inventory holds the
        change): a pod that became a candidate never considered wakes the
        driver for a pass over the new candidates."""
        if kind != "Pod" or event_type not in ("ADDED", "MODIFIED") or not obj:
            return
        meta = obj.get("metadata") or {}
        pod = self._inventory.pod(f"{meta.get('namespace', '')}/{meta.get('name', '')}")
        if pod is not None and self._candidate(pod) and self._untried(pod):
            self._new.set()

    async def run_once(self, *, only_new: bool = False) -> bool:
        """One pass, over the candidates never considered when `only_new`;
        True when a preemption was carried out."""
        self._follow_nominations()
        for pod in self.candidates():
            if only_new and not self._untried(pod):
                continue
            if await self._consider(pod):
                return True
        return False

    def candidates(self) -> list[Pod]:
        """Pending pods of the schedulers drax serves found unschedulable, with
        claims, highest priority first."""
        found = [pod for pod in self._inventory.pods() if self._candidate(pod)]
        occupants = self._inventory.occupants
        found.sort(key=lambda p: (-priority_of(p, occupants), p.key))
        return found

    def _candidate(self, pod: Pod) -> bool:
        """A pod drax preempts for (see the module doc). One whose bind is under
        way is not, though its PodScheduled condition still says Unschedulable:
        the scheduler has placed it, and a search now would count the devices
        its own bind assumed as taken and preempt again."""
        return (pod.scheduler_name in self._search.schedulers and not pod.node_name
                and not pod.deleting and not pod.terminal and pod.unschedulable
                and bool(pod.resource_claims or pod.extended_resource_claim_status)
                and not self._inventory.binding(pod.key))

    def _untried(self, pod: Pod) -> bool:
        """Never considered: not searched for (this pod, this uid) and no hold of its own."""
        tried = self._tried.get(pod.key)
        if tried is not None and tried.uid == pod.uid:
            return False
        held = self._inventory.nomination(pod.key)
        return held is None or held.pod_uid != pod.uid

    # ------------------------------------------------------------------ nominations

    def _follow_nominations(self) -> None:
        now = self._clock()
        nominations = self._inventory.nominations()
        live = {(n.pod_key, n.started_at) for n in nominations}
        self._pending_noted &= live
        for nomination in nominations:
            if self.victims_pending(nomination):
                self._inventory.nominate(replace(nomination,
                                                 expires_at=now + self._hold_seconds))
        for key, (uid, acted_at) in list(self._waiting.items()):
            pod = self._inventory.pod(key)
            if pod is None or pod.uid != uid:
                del self._waiting[key]
            elif pod.node_name:
                self._metrics.bind_seconds.observe(now - acted_at)
                del self._waiting[key]

    def victims_pending(self, nomination: Nomination) -> bool:
        """A victim still exists (terminating) or a claim it released is still
        allocated: preempting again now would take more than needed."""
        for key, uid in nomination.victims:
            pod = self._inventory.pod(key)
            if pod is not None and pod.uid == uid:
                return True
        for key in nomination.victim_claims:
            claim = self._inventory.claim(key)
            if claim is not None and claim.allocation is not None:
                return True
        return False

    # ------------------------------------------------------------------ one preemptor

    async def _consider(self, pod: Pod) -> bool:
        held = self._inventory.nomination(pod.key)
        if held is not None and held.pod_uid == pod.uid and not pod.nominated_node_name:
            await self._renominate(pod, held)
        if held is not None and held.pod_uid == pod.uid and self.victims_pending(held):
            mark = (pod.key, held.started_at)
            if mark not in self._pending_noted:
                self._pending_noted.add(mark)
                self._metrics.refused.labels(reason="victims-pending").inc()
            return False
        sequence = self._inventory.sequence
        now = self._clock()
        tried = self._tried.get(pod.key)
        usage = self._inventory.usage
        if tried is not None and tried.uid == pod.uid and tried.sequence == sequence \
                and not usage.changed_since(tried.usage, tried.nodes) \
                and now - tried.at < RETRY_SECONDS:
            return False
        self._metrics.attempted.inc()
        with self._inventory.holds_lifted_for(pod):
            plan = self._search.search(pod, best_only=True)
        sequence = self._inventory.sequence  # lifting a hold stamps versions
        best = plan.best
        if plan.problem is not None or best is None:
            reason = self._refusal(pod, plan.problem)
            self._tried[pod.key] = _Tried(pod.uid, sequence, now, reason, usage.sequence,
                                          frozenset(short_of_room(plan.refused)))
            self._metrics.refused.labels(reason=reason).inc()
            # Said once per pod and reason; the searches repeated as the cluster
            # changes say it at debug level.
            again = tried is not None and tried.uid == pod.uid and tried.reason == reason
            log.log(logging.DEBUG if again else logging.INFO, "no preemption for pod %s: %s",
                    pod.key, plan.problem or _refusals(plan.refused))
            return False
        if not best.victims:
            # It fits once the pods already going are gone: the scheduler's retry
            # places it; nothing to delete.
            self._tried[pod.key] = _Tried(pod.uid, sequence, now, "fits", usage.sequence,
                                          frozenset((best.node,)))
            self._hold_nominated(pod, plan.priority, best, now)
            return False
        self._tried.pop(pod.key, None)
        term = self._leadership.term
        outcome = await self._actor.preempt(
            preemption_of(pod, plan.priority, best, self._inventory,
                          schedulers=self._search.schedulers),
            still_leading=lambda: self._leadership.still_leading(term))
        if outcome.refused is not None:
            self._metrics.refused.labels(reason=outcome.refused).inc()
        if outcome.deleted:
            self._metrics.victims.observe(len(outcome.deleted))
        if outcome.refused is None:
            self._metrics.done.inc()
            self._metrics.devices_freed.inc(len(best.freed_devices))
            self._waiting[pod.key] = (pod.uid, self._clock())
        return outcome.refused is None or bool(outcome.deleted)

    async def _renominate(self, pod: Pod, held: Nomination) -> None:
        """Write the node of `pod`'s hold back as its nominatedNodeName, which
        was cleared: in advisor mode kube-scheduler's DefaultPreemption clears
        it at the preemptor's next failed attempt (the DynamicResources filter
        refuses every node as unresolvable, so it finds no candidate). The
        nomination is what makes kube-scheduler try that node first and count
        the pod there for pods of no higher priority, and what a new leader
        rebuilds the hold from. A pod gone or replaced is left to end its hold."""
        term = self._leadership.term
        if await self._actor.renominate(pod, held.node,
                                        still_leading=lambda: self._leadership.still_leading(
                                            term)):
            log.info("nominated node %s written back for pod %s (its scheduler cleared it)",
                     held.node, pod.key)

    def _hold_nominated(self, pod: Pod, priority: int, best: NodePreemption,
                        now: float) -> None:
        """Hold the devices `pod` fits on for it when its scheduler nominated it
        to that node, its allocation there takes devices of claims that pods
        of lower priority, all going, release, and no hold of this replica's
        covers it: what a failover leaves (holds live in the leader's memory;
        the nomination and the terminating victims are in the API server).
        kube-scheduler counts a nominated pod on its node for pods of no
        higher priority; the hold does the same for its devices, with those
        going pods as its victims and their claims as its victims' claims. A
        pod going that the allocation does not need, or one of no lower
        priority (never a victim of this pod), is none of the hold's business.
        A pod nominated nowhere gets the hold when one of those pods was
        preempted for it (its DisruptionTarget condition names the pod's uid): in
        advisor mode the new leader's kube-scheduler clears the nomination at
        its first failed attempt, which may come before this replica's first
        pass; the next pass writes the nomination back (`_renominate`)."""
        if not best.terminating or pod.nominated_node_name not in ("", best.node):
            return
        held = self._inventory.nomination(pod.key)
        if held is not None and held.pod_uid == pod.uid:
            return
        allocation = best.allocation  # mapped to this node's names at each read
        taken = {r.device_id for ca in allocation for r in ca.allocation.results}
        victims, victim_claims = self._victims_going(priority, best, taken)
        if not victim_claims:
            return
        if pod.nominated_node_name == best.node:
            why = "nominated there by its scheduler"
        elif self._preempted_for(pod, victims):
            why = "its nomination cleared, its victims there naming it"
        else:
            return
        self._inventory.nominate(Nomination(
            pod_key=pod.key, pod_uid=pod.uid, priority=priority, node=best.node,
            allocations=allocation, victims=victims, victim_claims=victim_claims,
            started_at=now, expires_at=now + self._hold_seconds))
        log.info("holding devices %s on node %s for pod %s, %s", ", ".join(sorted(taken)),
                 best.node, pod.key, why)

    def _preempted_for(self, pod: Pod, victims: tuple[tuple[str, str], ...]) -> bool:
        """One of `victims` (key, uid) was preempted for `pod`: its condition
        names `pod`'s uid (a pod deleted and created again under the same name,
        as a StatefulSet does, is not the pod they went for)."""
        for key, uid in victims:
            victim = self._inventory.pod(key)
            if victim is not None and victim.uid == uid and victim.preempted_for == pod.uid:
                return True
        return False

    def _victims_going(self, priority: int, best: NodePreemption, taken: set[str]
                       ) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
        """The going pods below `priority` whose released claims hold devices the
        allocation takes (`taken`) (key, uid), and those claims: a claim counts
        only when every pod reserving it is such a pod."""
        occupants = self._inventory.occupants
        going = {t.uid: t for t in best.terminating if priority_of(t, occupants) < priority}
        victims: dict[str, str] = {}
        claims: list[str] = []
        for claim in best.released:
            if claim.allocation is None or not claim.reserved_for or taken.isdisjoint(
                    r.device_id for r in claim.allocation.results):
                continue
            reservers = [going.get(ref.uid) for ref in claim.reserved_for]
            if any(r is None for r in reservers):
                continue
            claims.append(claim.key)
            victims.update((r.key, r.uid) for r in reservers if r is not None)
        return tuple(sorted(victims.items())), tuple(sorted(claims))

    def _refusal(self, pod: Pod, problem: str | None) -> str:
        if problem is None:
            return "no-candidate"
        if preemption_policy_of(pod, self._inventory.occupants) == PREEMPT_NEVER:
            return "never"
        return "claims"


def preemption_of(pod: Pod, priority: int, best: NodePreemption, inventory: Inventory, *,
                  schedulers: Collection[str] = ()) -> Preemption:
    """What the actor carries out for `pod` on `best`'s node: its victims, those
    among them that go for room, and what the pod lacks there without them
    (`schedulers`: as the search that chose them counted, `NodeFit`)."""
    room_victims = frozenset(v.pod.uid for v in best.victims if v.for_room)
    room: tuple[str, ...] = ()
    if room_victims:
        room = NodeFit(pod, inventory, schedulers=schedulers).lacks(
            best.node, (v.pod for v in best.victims if not v.for_room))
    return Preemption(
        preemptor=pod, priority=priority, node=best.node,
        victims=tuple(v.pod for v in best.victims), allocations=best.allocation,
        released_claims=best.released_claims, freed_devices=best.freed_devices,
        room_victims=room_victims, room=room)


def _refusals(refused: Mapping[str, str]) -> str:
    if not refused:
        return "no node"
    first = sorted(refused.items())[:3]
    more = f" (+{len(refused) - 3} more)" if len(refused) > 3 else ""
    return "; ".join(f"{node}: {why}" for node, why in first) + more
