"""Device-aware victim search: which running pods must go so a pod's claims fit.

A node the preemptor can never run on is refused with the reason before any
search, as kube-scheduler's preemption skips nodes that fail a filter no
victim can change: nodeSelector and required node affinity,
`spec.unschedulable` (unless tolerated), and NoSchedule/NoExecute taints it
does not tolerate (`Pod.refusal_on`). Where the pod would still lack cpu,
memory or room for one more pod once the victims are gone, further pods of
lower priority go too, as kube-scheduler chooses them, and a node where even
all of them going is not enough is refused (`app.preemption.fit`).

For a preemptor P of priority p and each other candidate node, the search
finds the smallest set of running pods of priority below p whose release lets an
allocation of all of P's claims exist there. Releasing a pod releases the
claims reserved only for victims and for pods already going (terminating or
terminal): a claim shared with anyone else keeps its devices. Pods already
terminating are counted as gone but are never victims again. Only pods
holding devices P could use (devices its requests match, or devices drawing
on the same shared counters as those) are candidates.

Per node the search builds the node's problem (`app.preemption.problem`:
its candidates and held claims in an order that is the same on every node
holding alike) and the solver (`app.preemption.solve`) finds every smallest
victim set that works there; each node then picks among them: in allocator
mode the best topology score, then (both modes) the fewest PDB violations
and the lowest priorities, as a user would prefer. Nodes whose problem is
equal up to renaming (hardware, usage, which claims hold which devices and
whom they need to go) share one solution: 500 full nodes of one kind cost
one search and 499 choices among its answers, whatever their pods'
priorities. A node's problem is read from its holdings in canonical order,
kept with the inventory until its pods, their claims or its devices change
(`app.preemption.held`); nodes that hold alike, with their pods in the same
parts (may go, going already, stay), share one skeleton of it per search
(`_Skeleton`), and each adds only its own pods and claims.

Across nodes the answer is ranked as kube-scheduler's
`pickOneNodeForPreemption` ranks (`NodePreemption.rank_key`), then by
drax's topology score. When only the best node is wanted (the preemption
loop), each node first gets a floor by counting (`app.preemption.counting`):
the lowest highest victim priority any answer there can have (releasing
every pod up to some priority must pass counting). Nodes are solved lowest
floor first, and a node whose floor already ranks below the best answer
found is left unsolved: its answer could not win, so the best node, its
victims and its devices are those of the full search. A node whose floor
ties the best answer on every term but the topology score is left unsolved
too when the highest score any answer there can have
(`app.preemption.ceiling`) is lower, or equal and its name later (the plan
breaks full ties by name). Pure: reads the inventory, changes nothing.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from app import garbage_collector
from app.allocator.types import AllocationOutcome, ClaimAllocation, NodeView
from app.bounded_cache import BoundedCache
from app.config import DEFAULT_SCHEDULER_NAMES
from app.extender.answers import (
    AnswerBook,
    CallState,
    allocated_elsewhere,
    request_of,
    with_claim_keys,
)
from app.extender.claims import ClaimResolver
from app.extender.signature import HashedKey, map_outcome
from app.extender.verbs import Extender
from app.inventory import Inventory, NodeState
from app.inventory.occupants import names, preemption_policy_of, priority_of
from app.model import (
    Pod,
    PodDisruptionBudget,
    ResourceClaim,
)
from app.model.objects import (
    PREEMPT_NEVER,
)
from app.preemption.ceiling import UNBOUNDED, ceiling
from app.preemption.ceiling import Layout as CeilingLayout
from app.preemption.ceiling import layout as ceiling_layout
from app.preemption.counting import (
    Check,
    Counting,
    Need,
    check_of,
    counting_of,
    fewest_pods,
    needs_for,
    plausible_freed,
    wanted_counts,
)
from app.preemption.fit import NodeFit
from app.preemption.held import Held, held_index, held_of, needed_gone
from app.preemption.importance import importance, pdb_violation_count, start_of
from app.preemption.parts import held_positions, mask_of
from app.preemption.problem import (
    Candidate,
    HeldClaim,
    MatchLayout,
    NodeFacts,
    Option,
    Problem,
    Solved,
    Victim,
    match_layout,
    one_pod,
    renamed,
)
from app.preemption.solve import (
    DEFAULT_TRIAL_BUDGET,
    NODE_FACTS,
    SHARED_SEARCHES,
    Solver,
)
from app.topology import priority as topology_priority
from app.topology.normalise import node_topology

_UNKNOWN: Final = (-math.inf,) * 3  # a node's order when counting cannot tell
# kube-scheduler adds MaxInt32+1 to each victim's priority before summing, so
# every term is at least 0 and more victims of equal (even negative) priority
# never sum lower than fewer.
PRIORITY_OFFSET: Final = 2**31


# --------------------------------------------------------------------------- results


@dataclass(slots=True)
class NodePreemption:
    """What preempting on one node takes and gives. Never changed once made
    (`dataclasses.replace` makes another); not a frozen dataclass, whose
    construction costs several times as much, as an every-node search makes
    one per node.

    `victims`: the pods to delete, most important first. `released_claims`:
    the claims deallocated once they (and `terminating`, pods already going)
    are gone, and `freed_devices` the devices those claims hold.
    `allocation`: the preemptor's claims as the allocator places them then,
    with its topology `score` (0..1) and `priority` (0..10). `exact`: False
    when the node's search budget ran out and the set is minimal (no victim
    can be spared) but a smaller one may exist.
    """

    node: str
    victims: tuple[Victim, ...]
    released_claims: tuple[str, ...]
    pdb_violations: int
    score: float | None
    priority: int
    terminating: tuple[Pod, ...] = ()
    exact: bool = True
    candidates: tuple[Pod, ...] = field(default=(), repr=False, compare=False)
    # The allocation as found on a node with the same problem (`source`), named
    # for this node only when read: ranking 500 nodes needs none of them.
    outcome: AllocationOutcome | None = field(default=None, repr=False)
    source: NodeView | None = field(default=None, repr=False, compare=False)
    target: NodeView | None = field(default=None, repr=False, compare=False)
    pending: tuple[ResourceClaim, ...] = field(default=(), repr=False, compare=False)
    released: tuple[ResourceClaim, ...] = field(default=(), repr=False, compare=False)

    @property
    def considered(self) -> frozenset[str]:
        """The UIDs of the pods the search weighed (lower priority, holding
        devices the preemptor could use); the others cannot help it."""
        return frozenset(p.uid for p in self.candidates)

    @property
    def freed_devices(self) -> tuple[str, ...]:
        """The devices of the released claims, sorted."""
        return tuple(sorted({r.device_id for c in self.released if c.allocation
                             for r in c.allocation.results}))

    @property
    def allocation(self) -> tuple[ClaimAllocation, ...]:
        outcome = self.outcome
        if outcome is None:
            return ()
        if self.source is not None and self.target is not None:
            outcome = map_outcome(outcome, source=self.source, target=self.target)
        return with_claim_keys(outcome, self.pending).claims

    def rank_key(self) -> tuple[float, ...]:
        """Smaller is better: kube-scheduler's pickOneNodeForPreemption order
        (no victims; fewest PDB violations; lowest highest victim priority;
        lowest sum of priorities, each offset by `PRIORITY_OFFSET`; fewest
        victims; latest start among the highest-priority victims), then the
        better topology score."""
        victims = self.victims
        if not victims:
            return (0, 0, 0, 0, 0, 0, -_score(self.score))
        if len(victims) == 2:  # most answers (a search ranks every node's)
            a, b = victims
            pa, pb = a.priority, b.priority
            first = (start_of(a.pod) if pa > pb else start_of(b.pod) if pb > pa
                     else min(start_of(a.pod), start_of(b.pod)))
            return (1, self.pdb_violations, pa if pa > pb else pb,
                    pa + pb + 2 * PRIORITY_OFFSET, 2, -first, -_score(self.score))
        priorities = [v.priority for v in victims]
        top = max(priorities)
        earliest = min(start_of(v.pod) for v in victims if v.priority == top)
        # (`_priority_sum`, the offsets added at once)
        return (1, self.pdb_violations, top, sum(priorities) + PRIORITY_OFFSET * len(priorities),
                len(victims), -earliest, -_score(self.score))


@dataclass(slots=True, frozen=True)
class PreemptionPlan:
    """The search's answer for one preemptor: the nodes where preemption works,
    best first, why it does not work on the others, or why the pod may not
    preempt at all (`problem`)."""

    pod: Pod
    priority: int
    nodes: tuple[NodePreemption, ...] = ()
    refused: Mapping[str, str] = field(default_factory=dict)
    problem: str | None = None

    @property
    def best(self) -> NodePreemption | None:
        return self.nodes[0] if self.nodes else None


def _fitted(fit: NodeFit, answer: NodePreemption | str,
            claim_of: Callable[[str], ResourceClaim | None], *, roomy: bool = False
            ) -> NodePreemption | str:
    """`answer` with the further pods that must go for the pod's cpu, memory
    and pod count, and the claims released with them, or why even all
    lower-priority pods going would not leave it room there
    (`app.preemption.fit`). `roomy`: the node's pick already found that the
    pod has room once its victims are gone (`NodeFit.fits`)."""
    if isinstance(answer, str) or roomy:
        return answer
    if not answer.victims:
        # No device needs a victim: freeing cpu or memory alone is what
        # kube-scheduler's own preemption does, so drax takes nothing for it.
        return fit.refusal(answer.node, (), answer.candidates) or answer
    extra = fit.room(answer.node, (v.pod for v in answer.victims), answer.candidates)
    if isinstance(extra, str):
        return extra
    if not extra:
        return answer
    room = (Victim(*e, for_room=True) for e in extra)
    victims = tuple(sorted((*answer.victims, *room), key=_importance))
    pdbs = {ns: list(fit.pdbs(ns)) for ns in {v.pod.namespace for v in victims}}
    released = _released_with(answer, victims, claim_of)
    return replace(answer, victims=victims, pdb_violations=pdb_violations(victims, pdbs),
                   released=released, released_claims=tuple(c.key for c in released))


def _released_with(answer: NodePreemption, victims: Sequence[Victim],
                   claim_of: Callable[[str], ResourceClaim | None]
                   ) -> tuple[ResourceClaim, ...]:
    """`answer.released` and the claims of room victims that every pod
    reserving them leaving (`victims`, `answer.terminating`) deallocates: each
    of its reservations names a leaving pod of its namespace (`names`)."""
    leaving = [*(v.pod for v in victims), *answer.terminating]
    out = list(answer.released)
    seen = {c.key for c in out}
    for victim in victims:
        if not victim.for_room:
            continue
        for key in victim.claims:
            claim = claim_of(key)
            if key in seen or claim is None or claim.allocation is None or not claim.reserved_for \
                    or not all(any(p.namespace == claim.namespace and names(ref, p)
                                   for p in leaving) for ref in claim.reserved_for):
                continue
            seen.add(key)
            out.append(claim)
    return tuple(out)


def _priority_sum(priorities: Iterable[int]) -> int:
    """kube-scheduler's sum of victim priorities (`PRIORITY_OFFSET`)."""
    return sum(p + PRIORITY_OFFSET for p in priorities)


def _score(score: float | None) -> float:
    return -1.0 if score is None or math.isnan(score) else score


def pdb_violations(victims: Sequence[Victim], pdbs: Mapping[str, Sequence[PodDisruptionBudget]]
                   ) -> int:
    """How many victims a PDB would not allow to go (`app.preemption.importance`).
    `pdbs`: namespace -> its PDBs."""
    if not any(pdbs.get(v.pod.namespace) for v in victims):
        return 0
    return pdb_violation_count(((v.pod, v.priority) for v in victims),
                               lambda namespace: pdbs.get(namespace, ()))


def _importance(victim: Victim) -> tuple[int, float, str]:
    return importance(victim.pod, victim.priority)


@dataclass(slots=True)
class _Floor:
    """Per term of `NodePreemption.rank_key` after the first two, the least a
    node's answers can have (`VictimSearch._floor`): the highest victim
    priority, the priority sum (`sum` from one victim alone, `summed` given
    the victim count), the victim count (worked out only when the first terms
    tie, by `fewest_pods` over what each pod can free at most), and the latest
    start."""

    top: float
    sum: float
    latest: float
    counting: Counting | None = None
    check: Check | None = None
    # per releasable claim (its highest priority, the devices it frees for
    # the pod, its reservers (slots of `Held`), the pods it needs gone (None:
    # its one reserver), the positions of the devices it holds plainly), and
    # the pods that may go (slot -> priority)
    released: Sequence[tuple[int, int, Sequence[int], Collection[int] | None, int]] = ()
    eligible: Mapping[int, int] = field(default_factory=dict)
    _count: float | None = None
    # the search's `fewest_pods` answers, shared by nodes alike (`VictimSearch._fewest`)
    fewest: Callable[[Counting, Check, Iterable[int]], float] | None = field(
        default=None, repr=False)
    _summed: float | None = None

    def order(self) -> tuple[float, float, float]:
        return self.top, self.sum, -self.latest

    def count(self) -> float:
        if self._count is None:
            assert self.counting is not None and self.check is not None
            reach: dict[int, int] = {}
            for _, mask, reservers, _, _ in self.released:
                for reserver in reservers:
                    if reserver in self.eligible:
                        reach[reserver] = reach.get(reserver, 0) | mask
            self._count = (self.fewest or fewest_pods)(self.counting, self.check, reach.values())
        return self._count

    def summed(self) -> float:
        """The least priority sum of an answer with `count()` victims or more:
        one victim of priority `top` at least, and the others each at least
        one of the lowest priorities of the pods that may go (every offset
        priority is 0 or more, so further victims only add)."""
        if self._summed is None:
            count = self.count()
            if math.isinf(count):
                self._summed = math.inf
            else:
                others = sorted(self.eligible.values())[:int(count) - 1]
                self._summed = self.sum + _priority_sum(others)
        return self._summed


_NOTHING_ENOUGH: Final = _Floor(top=math.inf, sum=math.inf, latest=-math.inf,
                                _count=math.inf)


def _cannot_win(floor: _Floor, best: tuple[float, ...]) -> bool:
    """Whether every answer with victims on a node of `floor` ranks below
    `best` (`NodePreemption.rank_key`): its first six terms are each at least
    (1, 0, top, sum, count, -latest), and those alone already compare greater."""
    head = (1, 0, floor.top)
    if head != best[:3]:
        return head > best[:3]
    if floor.sum > best[3]:
        return True
    return (floor.summed(), floor.count(), -floor.latest) > best[3:6]


def _ties(floor: _Floor, best: tuple[float, ...]) -> bool:
    """Whether the least answer on a node of `floor` ties `best` on every
    term of `NodePreemption.rank_key` before the topology score."""
    return (1, 0, floor.top, floor.summed(), floor.count(), -floor.latest) == best[:6]


# --------------------------------------------------------------------------- the search

_Pdbs = dict[str, list[PodDisruptionBudget]]  # namespace -> its PDBs, filled per search


@dataclass(slots=True)
class _Holders:
    """Who holds what on a node, as the preemptor sees it (`VictimSearch._holders`):
    the node's holdings in canonical order (`held`) and the pods (slots of
    `held`) that may go, with their priorities (`eligible`) and as a mask
    (`may_go`). A reserver stays unless it may go or is going already
    (`Held.going`). Nodes that hold alike with equal masks share one problem
    skeleton (`_Skeleton`)."""

    held: Held
    eligible: dict[int, int]
    may_go: int

    @property
    def terminating(self) -> tuple[Pod, ...]:
        return self.held.terminating

    def needs(self, reservers: Sequence[int]) -> set[int] | None:
        """`needed_gone` of a claim reserved for `reservers` on this node."""
        return needed_gone(reservers, self.may_go, self.held.going)


@dataclass(slots=True)
class _Skeleton:
    """What every node of one `Held.shape` and parts (`_Holders`) shares in
    its problem for one request, found once (`VictimSearch._skeleton`): per
    claim whether it holds devices the pod's requests can use (`relevant`)
    and the pods (slots) that must all go to release it (`needs`, None: one
    that stays holds it); the candidates, the pods some relevant releasable
    claim needs, each with the first claim that needs them (`first`); and
    per order of the candidates (by `first`, then, where several share a
    first claim, by their priorities and names) the problem's claims' needs
    in candidate indexes and its key (`frames`; `frame`: the one frame when
    `first` alone orders them)."""

    relevant: tuple[bool, ...]
    needs: tuple[frozenset[int] | None, ...]
    first: dict[int, int]
    # what it is keyed by identity (`VictimSearch._skeletons`): the request,
    # the shape, the match columns and the layout, held so that their ids stay
    # theirs as long as the key is kept
    held: tuple[CallState, HashedKey, HashedKey, MatchLayout]
    frame: _Frame | None = None
    frames: dict[tuple[int, ...], _Frame] = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class _Frame:
    """A `_Skeleton` with its candidates in order (`order`, slots): per claim
    the candidates it needs gone (`needed`), and the problem's key without
    the node's signature and stuck devices (`canon`)."""

    order: tuple[int, ...]
    needed: tuple[frozenset[int] | None, ...]
    canon: HashedKey


class VictimSearch:
    """The victim search over one inventory, with the filter's allocator
    (`book`) and claim lookup (`resolver`); `schedulers`: the scheduler names
    drax serves, the profiles of one kube-scheduler (`NodeFit`; the driver
    preempts for their pods)."""

    def __init__(self, inventory: Inventory, *, book: AnswerBook, resolver: ClaimResolver,
                 mode: str = "allocator", trial_budget: int = DEFAULT_TRIAL_BUDGET,
                 schedulers: Collection[str] = DEFAULT_SCHEDULER_NAMES) -> None:
        self._inventory = inventory
        self._schedulers = frozenset(schedulers)
        self._book = book
        self._resolver = resolver
        self._first_fit = mode == "advisor"
        self._solver = Solver(inventory, book=book, first_fit=self._first_fit,
                              trial_budget=trial_budget)
        # request kinds -> node -> its facts (checked against its view): no key
        # object per node, so a search over 500 nodes leaves less to collect
        self._node_facts: dict[Hashable, dict[str, NodeFacts]] = {}
        self._facts_kept = 0
        # the match columns of request kinds, one object per value
        self._kinds: BoundedCache[HashedKey, HashedKey] = BoundedCache(NODE_FACTS)
        # per (hardware, match columns) by identity: them and their layout
        self._layouts: BoundedCache[tuple[int, int], tuple[Hashable, HashedKey, MatchLayout]] = \
            BoundedCache(SHARED_SEARCHES)
        self._match_layouts: BoundedCache[MatchLayout, MatchLayout] = BoundedCache(
            SHARED_SEARCHES)
        self._ceilings: BoundedCache[Hashable, float] = BoundedCache(SHARED_SEARCHES)
        self._shapes: BoundedCache[Hashable, CeilingLayout | None] = BoundedCache(
            SHARED_SEARCHES)
        # per shape, its roots' ceilings (`ceiling`'s memo)
        self._root_ceilings: BoundedCache[Hashable, dict[Hashable, float | None]] = \
            BoundedCache(SHARED_SEARCHES)
        self._countings: BoundedCache[Hashable, tuple[Counting, bool]] = BoundedCache(
            NODE_FACTS)
        self._shared_fewest = self._fewest  # one bound method for every floor
        # (counting, check, what each pod can free) -> `fewest_pods`: nodes alike
        # ask the same; the counting and check are held so their ids stay theirs
        self._fewests: BoundedCache[Hashable, tuple[Counting, Check, float]] = BoundedCache(
            NODE_FACTS)
        # needs -> their key, hashed once (per request, while it is held)
        self._need_keys: BoundedCache[int, tuple[Sequence[Need], HashedKey]] = BoundedCache(
            SHARED_SEARCHES)
        # Whether anything besides the claims of the pods on nodes holds devices
        # (a nomination, an assumption, a second claim on a device a claim holds
        # alone): read once per search, for `_stuck`.
        self._others_hold = True
        self.countings = 0  # nodes as they are read by counting for floors (for tests)
        self.left_out = 0  # nodes a best-only search left unsolved (for tests)
        # every node's holdings, kept with the inventory for every search over it
        self._held = held_index(inventory)
        # per (request, `Held.shape`, parts, matches): its `_Skeleton`, for one
        # search (its requests are held by it, so their ids stay theirs)
        self._skeletons: dict[Hashable, _Skeleton] = {}
        self._home: str | None = None  # see `_search`
        # per match layout (held, so its id stays its own): its relevant devices as a mask
        self._relevant_masks: BoundedCache[int, tuple[MatchLayout, int]] = BoundedCache(
            SHARED_SEARCHES)
        self.skeletons = 0  # problem skeletons built (for tests)
        self.claims_read = 0  # problems whose claims were read, to be solved (for tests)
        self.weighed = 0  # options weighed by a node's pods to pick among (for tests)
        self.renamings = 0  # reasons renamed for another node (for tests)
        # per solution (held, so its id stays its own): whether its reason names
        # anything of its node (`_names_in_reason`), its options best on score
        self._reasons: BoundedCache[int, tuple[Solved, bool]] = BoundedCache(SHARED_SEARCHES)
        self._leading: BoundedCache[int, tuple[Solved, list[Option]]] = BoundedCache(
            SHARED_SEARCHES)
        # topology score -> its priority (`app.topology.priority`): nodes alike share scores
        self._priorities: BoundedCache[float | None, int] = BoundedCache(SHARED_SEARCHES)

    @property
    def inventory(self) -> Inventory:
        return self._inventory

    @property
    def trials(self) -> int:
        """Allocator runs so far (for benchmarks and tests)."""
        return self._solver.trials

    @property
    def problems(self) -> int:
        """Distinct problems solved and kept (for benchmarks)."""
        return self._solver.problems

    @property
    def states_read(self) -> int:
        """Node states read once claims are released (for tests)."""
        return self._solver.states_read

    @classmethod
    def of(cls, extender: Extender, *, trial_budget: int = DEFAULT_TRIAL_BUDGET,
           schedulers: Collection[str] = DEFAULT_SCHEDULER_NAMES) -> VictimSearch:
        """The search over `extender`'s inventory, allocator and claim lookup."""
        return cls(extender.inventory, book=extender.book, resolver=extender.resolver,
                   mode=extender.mode, trial_budget=trial_budget, schedulers=schedulers)

    @property
    def schedulers(self) -> frozenset[str]:
        return self._schedulers

    def search(self, pod: Pod, node_names: Sequence[str] | None = None, *,
               allowed: Mapping[str, Collection[str] | None] | None = None,
               best_only: bool = False) -> PreemptionPlan:
        """Victims per node for `pod` (every node when `node_names` is None).
        `allowed`: per node, the UIDs that may be chosen (None or absent: any
        pod on the node), as the preempt verb offers them. `best_only`: only
        the best node is wanted (`plan.best`, the same as without it); nodes
        that provably rank below a node already found are left out unsolved,
        so `nodes` and `refused` may miss them (`_cannot_win` says which).

        The search runs with the cyclic collector paused (`garbage_collector.
        paused`): it is a bounded computation whose garbage is freed by
        reference counting, and with the collector on it would pay a young
        pass every few hundred allocations (about twenty per search at 500
        nodes) over containers that die anyway. What survives it (the plan,
        the search's caches) gets the one young pass the allocations made due,
        here rather than at the caller's next allocation."""
        with garbage_collector.paused():
            plan = self._search(pod, node_names, allowed=allowed, best_only=best_only)
        garbage_collector.collect_young_if_due()
        return plan

    def _search(self, pod: Pod, node_names: Sequence[str] | None, *,
                allowed: Mapping[str, Collection[str] | None] | None,
                best_only: bool) -> PreemptionPlan:
        occupants = self._inventory.occupants
        p = priority_of(pod, occupants)
        if preemption_policy_of(pod, occupants) == PREEMPT_NEVER:
            return PreemptionPlan(pod=pod, priority=p,
                                  problem="the pod's preemptionPolicy is Never")
        claims = self._resolver.resolve(pod)
        if claims.problem is not None:
            return PreemptionPlan(pod=pod, priority=p, problem=claims.problem)
        if not claims.claims and claims.extended is None:
            return PreemptionPlan(pod=pod, priority=p, problem=(
                "the pod has no resource claims: whether it fits is the scheduler's "
                "business, not drax's"))
        request = request_of(claims, pod=pod)
        self._skeletons = {}
        self._solver.begin()
        # The node where the pod itself holds claims, if any (`_holders`
        # leaves them out): where the inventory's pod of its key and UID is.
        mine = self._inventory.pod(pod.key)
        self._home = mine.node_name if mine is not None and mine.uid == pod.uid else None
        names = self._inventory.node_names() if node_names is None else node_names
        self._others_hold = bool(self._inventory.overlapping()
                                 or self._inventory.nominations()
                                 or self._inventory.assumed_claims())
        # None: no PDB anywhere, so no victim can violate one
        pdbs: _Pdbs | None = {} if self._inventory.occupants.pdb_table() else None
        fit = NodeFit(pod, self._inventory, allowed, schedulers=self._schedulers)
        found: list[NodePreemption] = []
        refused: dict[str, str] = {}
        # the nodes to search, and per node its state, request and allowed victims
        # (dicts rather than a tuple per node: less for the collector to walk)
        ready: list[str] = []
        states: dict[str, NodeState] = {}
        requests: dict[str, CallState] = {}
        allows: dict[str, frozenset[str]] = {}
        for name in names:
            allow = None if allowed is None else allowed.get(name)
            prepared = self._prepare(pod, request, name)
            if isinstance(prepared, NodePreemption):
                prepared = _fitted(fit, prepared, self._inventory.claim)
            if isinstance(prepared, str):
                refused[name] = prepared
            elif isinstance(prepared, NodePreemption):
                found.append(prepared)
            else:
                ready.append(name)
                states[name], requests[name] = prepared
                if allow is not None:
                    allows[name] = frozenset(allow)
        floors: dict[str, _Floor | None] = {}
        # who holds what per node, read once for its floor and its problem
        holders: dict[str, _Holders] = {}
        if best_only:
            # per request (one per variant): its needs, arranged for counting
            checks: dict[int, tuple[list[Need], Check] | None] = {}
            wants: dict[int, tuple[int, ...] | None] = {}  # per request: `wanted_counts`
            for name in ready:
                state, node_request = states[name], requests[name]
                if id(node_request) not in checks:
                    needs = needs_for(node_request.pending, node_request.kinds)
                    checks[id(node_request)] = None if needs is None else (needs, check_of(needs))
                    wants[id(node_request)] = wanted_counts(node_request, checks[id(node_request)])
                holders[name] = self._holders(pod, p, state, allows.get(name))
                floors[name] = self._floor(node_request, state, holders[name],
                                           checks[id(node_request)])
            # The likeliest winners first: the sooner a good node is found, the
            # more nodes are left out.
            ready.sort(key=lambda n: (_UNKNOWN if (f := floors[n]) is None else f.order(), n))
        # the best answer so far, as the plan orders them: rank, then node name
        best = min(((n.rank_key(), n.node) for n in found), default=None) if best_only \
            else None
        for name in ready:
            state, node_request = states[name], requests[name]
            floor = floors.get(name)
            # A node tying the best answer on every term but the topology score
            # cannot beat it when its ceiling is lower, or equal and its name later.
            if best is not None and floor is not None and (
                    _cannot_win(floor, best[0]) or (_ties(floor, best[0]) and (
                        -self._ceiling(node_request, state, floor, wants[id(node_request)]),
                        name) > (best[0][6], best[1]))):
                self.left_out += 1
                continue
            held = holders.get(name) or self._holders(pod, p, state, allows.get(name))
            answer, roomy = self._node(node_request, state, held, pdbs, fit)
            answer = _fitted(fit, answer, self._inventory.claim, roomy=roomy)
            if isinstance(answer, str):
                refused[name] = answer
                continue
            found.append(answer)
            if best_only:
                key = (answer.rank_key(), answer.node)
                best = key if best is None or key < best else best
        found.sort(key=lambda n: (n.rank_key(), n.node))
        return PreemptionPlan(pod=pod, priority=p, nodes=tuple(found), refused=refused)

    # ------------------------------------------------------------------ one node

    def _prepare(self, pod: Pod, request: CallState, name: str
                 ) -> tuple[NodeState, CallState] | NodePreemption | str:
        """The node's state and the request as it stands there (the claim for
        extended resources fitted to the node), or the node's answer when no
        search is needed: why the pod can never run there, or no victims."""
        state = self._inventory.node_state(name)
        if state is None:
            return f"node {name} is unknown to drax"
        never = pod.refusal_on(state.view.node)
        if never is not None:
            return never
        elsewhere = allocated_elsewhere(request.claims, state)
        if elsewhere is not None:
            return elsewhere
        if request.claims.extended is not None:
            variant = self._book.variant(request, state.view.node)
            if isinstance(variant, str):
                return variant
            request = variant
        if not request.pending:
            return NodePreemption(node=name, victims=(), released_claims=(),
                                  pdb_violations=0, score=None, priority=0)
        return state, request

    def _node(self, request: CallState, state: NodeState, holders: _Holders,
              pdbs: _Pdbs | None, fit: NodeFit) -> tuple[NodePreemption | str, bool]:
        """The node's answer, and whether its pick found that the pod has room
        there once the victims are gone (`_choose`)."""
        problem, skeleton, frame, pods = self._problem(request, state, holders)
        # Most nodes share a problem solved already: they read none of its
        # claims but those their victims release (`_express`).
        solved = self._solver.known(problem.key)
        if solved is None:
            held = holders.held
            solved = self._solver.known_parts(problem, frame.needed, skeleton.relevant,
                                              held.plain, held.places)
        if solved is None or solved.cut:
            held = holders.held
            self.claims_read += 1
            problem.claims = [HeldClaim(*entry) for entry in zip(
                held.claims, frame.needed, skeleton.relevant, held.places, held.plain,
                strict=True)]
            if solved is None:
                solved = self._solver.solve(problem)
        return self._express(solved, problem, holders.held, frame.order, pods, pdbs, fit)

    def _floor(self, request: CallState, state: NodeState, holders: _Holders,
               needs: tuple[list[Need], Check] | None) -> _Floor | None:
        """Per term of `NodePreemption.rank_key` after the first two, the least
        any answer on the node can have (the highest victim priority, the
        priority sum, the victim count, the latest start), found by counting
        (`plausible_release`); infinite terms when no set of pods that may go is
        enough. None when counting cannot show that the pod needs victims
        there (it may fit as the node is, or once pods already going are
        gone): only the search can tell.

        Releasing more never frees less, so the smallest t for which releasing
        every claim whose pods that may go all have priority t at most passes
        counting is a floor on the highest victim priority; the sum
        (`_priority_sum`) is at least that one victim's. The count: `fewest_pods`. The
        earliest start among the victims is no later than the latest start
        among the pods that may go."""
        if needs is None:
            return None
        needs_list, check = needs
        facts = self._facts(state, request)
        layout = facts.layout
        if layout.shared:
            return None
        if holders.terminating:
            return None
        eligible = holders.eligible
        held = holders.held
        pods = held.pods
        latest = max((start_of(pods[slot]) for slot in eligible), default=-math.inf)
        # Per releasable claim: the highest priority among the pods it needs
        # gone, the devices its release frees for the pod, its reservers.
        released = []
        # Devices another holder keeps taken are neither freed for the pod nor
        # released from the fill a ceiling reads (`_frees`).
        kept = ~self._stuck(state, held)
        matched = layout.matched_mask
        for reservers, alone_mask in zip(held.reservers, held.alone, strict=True):
            if len(reservers) == 1 and reservers[0] in eligible:
                # one reserver that may go: the common case, without `needs`
                # (None: that reserver alone, without a collection per claim)
                gone: Collection[int] | None = None
                top = eligible[reservers[0]]
            else:
                found = holders.needs(reservers)
                if found is None:
                    continue
                if not found:
                    return None  # released once the pods going are gone
                gone, top = found, max(eligible[k] for k in found)
            plain = alone_mask & kept
            released.append((top, plain & matched, reservers, gone, plain))
        # What counting reads of the node as it is: the same on nodes alike.
        counted_key = (facts.signature, facts.kinds, self._needs_key(needs_list))
        counted = self._countings.get(counted_key)
        if counted is None:
            self.countings += 1
            counting = counting_of(facts, state.allocated.devices, (),
                                   self._solver.values_of(facts, needs_list))
            counted = self._countings.put(counted_key, (
                counting, plausible_freed(counting, 0, check)))
        counting, enough = counted
        if enough:
            return None
        order = sorted(released, key=operator.itemgetter(0))
        freed = 0
        for i, (top, mask, _, _, _) in enumerate(order):
            freed |= mask
            if (i + 1 == len(order) or order[i + 1][0] != top) \
                    and plausible_freed(counting, freed, check):
                return _Floor(top=top, sum=_priority_sum((top,)), latest=latest,
                              counting=counting, check=check, released=order,
                              eligible=eligible, fewest=self._shared_fewest)
        return _NOTHING_ENOUGH

    def _fewest(self, counting: Counting, check: Check, reach: Iterable[int]) -> float:
        """`fewest_pods`, shared by nodes whose pods can free the same (in any order)."""
        masks = tuple(sorted(reach))
        key = (id(counting), id(check), masks)
        hit = self._fewests.get(key)
        if hit is None or hit[0] is not counting or hit[1] is not check:
            hit = self._fewests.put(key, (counting, check, fewest_pods(counting, check, masks)))
        return hit[2]

    def _needs_key(self, needs: Sequence[Need]) -> HashedKey:
        """`needs` as a key, hashed once while the request's needs are held."""
        hit = self._need_keys.get(id(needs))
        if hit is None or hit[0] is not needs:
            hit = self._need_keys.put(id(needs), (needs, HashedKey(tuple(needs))))
        return hit[1]

    def _ceiling(self, request: CallState, state: NodeState, floor: _Floor,
                 wanted: tuple[int, ...] | None) -> float:
        """The highest topology score any answer on the node can have
        (`app.preemption.ceiling`); infinite when it cannot be told.
        `wanted`: per request kind, the devices the pod's requests take
        (`wanted_counts`)."""
        if wanted is None:
            return UNBOUNDED
        facts = self._facts(state, request)
        config = self._book.topology
        frees = _frees(floor)
        layout = facts.layout
        # (the book, so its topology config, is this search's for good)
        shape_key = (facts.hardware, facts.kinds)
        if shape_key in self._shapes:
            shape = self._shapes[shape_key]
        else:
            matched = 0
            for mask in layout.kinds:
                matched |= mask
            shape = self._shapes.put(shape_key, ceiling_layout(
                node_topology(state.view, config), facts.devices, matched))
        # Node-independent: nodes of one kind, usage and holdings share it
        # (`frees` leaves out the devices held for others that stay taken).
        key = (facts.signature, facts.kinds, wanted, frees)
        hit = self._ceilings.get(key)
        if hit is None:
            taken, shared = held_positions(state.allocated, facts.position)
            memo = self._root_ceilings.get(shape_key)
            if memo is None or len(memo) >= SHARED_SEARCHES:
                memo = self._root_ceilings.put(shape_key, {})
            hit = self._ceilings.put(key, ceiling(
                shape, config, kinds=layout.kinds, wanted=wanted, total=sum(wanted),
                taken=taken, shared=shared, frees=dict(frees), memo=memo))
        return hit

    def _holders(self, pod: Pod, p: int, state: NodeState,
                 allow: frozenset[str] | None) -> _Holders:
        """Who may go (on this node, below p, running, offered), who is going
        already, and what they hold; the preemptor itself is none of them."""
        occupants = self._inventory.occupants
        view = state.view
        occupancy = occupants.occupancy(view.node.name)
        held = self._held.of(view, occupancy)
        if view.node.name == self._home and held.holds(pod):
            occupancy = tuple(h for h in occupancy if not (
                h.pod.uid == pod.uid and h.pod.name == pod.name
                and h.pod.namespace == pod.namespace))
            held = held_of(view, occupancy, self._held.devices(view)[1])
        if allow is None:
            kept = held.below(p)
            if kept is not None:
                return _Holders(held=held, eligible=kept[0], may_go=kept[1])
        eligible: dict[int, int] = {}
        may_go = 0
        for slot, priority in zip(held.staying, held.priorities, strict=True):
            if priority is None:
                other = held.pods[slot]
                priority = priority_of(other, occupants)
            if priority < p and (allow is None or held.pods[slot].uid in allow):
                eligible[slot] = priority
                may_go |= 1 << slot
        return _Holders(held=held, eligible=eligible, may_go=may_go)

    def _skeleton(self, request: CallState, facts: NodeFacts, holders: _Holders
                  ) -> _Skeleton:
        """The problem skeleton of nodes holding as this one does, with its
        pods' parts (may go, going already, stay), for `request` (kept for the
        search, `_skeletons`)."""
        held = holders.held
        # (ids: the shape and the match columns are interned, so nodes alike
        # share their objects; the skeleton holds every object its key names
        # by id, see `_Skeleton.held`)
        key = (id(request), id(held.shape), held.going, holders.may_go, id(facts.kinds),
               id(facts.layout))
        hit = self._skeletons.get(key)
        if hit is not None:
            return hit
        self.skeletons += 1
        layout = facts.layout
        masked = self._relevant_masks.get(id(layout))
        if masked is None or masked[0] is not layout:
            masked = self._relevant_masks.put(id(layout), (layout, mask_of(layout.relevant)))
        relevant_mask = masked[1]
        relevant = tuple(bool(span & relevant_mask) for span in held.spans)
        # which claims need whom gone: the same for every search that lets
        # the same pods go (`HeldIndex.release`)
        release = self._held.release(held, holders.may_go)
        useful: set[int] = set()
        for found, is_relevant in zip(release.needs, relevant, strict=True):
            if found and is_relevant:
                useful.update(found)
        first = release.first
        skeleton = _Skeleton(relevant=relevant, needs=release.needs,
                             first={slot: first[slot] for slot in useful},
                             held=(request, held.shape, facts.kinds, layout))
        if len(set(skeleton.first.values())) == len(useful):
            skeleton.frame = self._framed(request, facts, held, skeleton,
                                          tuple(sorted(useful, key=first.__getitem__)))
        self._skeletons[key] = skeleton
        return skeleton

    def _frame(self, request: CallState, facts: NodeFacts, holders: _Holders,
               skeleton: _Skeleton) -> _Frame:
        """The skeleton with its candidates in this node's order: by the first
        claim that needs them, then (sharing one) priority, name, slot."""
        if skeleton.frame is not None:
            return skeleton.frame
        eligible, pods, first = holders.eligible, holders.held.pods, skeleton.first
        order = tuple(sorted(first, key=lambda slot: (
            first[slot], eligible[slot], pods[slot].name, slot)))
        hit = skeleton.frames.get(order)
        if hit is None:
            hit = skeleton.frames[order] = self._framed(request, facts, holders.held,
                                                        skeleton, order)
        return hit

    def _framed(self, request: CallState, facts: NodeFacts, held: Held, skeleton: _Skeleton,
                order: tuple[int, ...]) -> _Frame:
        """`_Frame` of the skeleton with its candidates in `order`."""
        index = {slot: i for i, slot in enumerate(order)}
        needed: list[frozenset[int] | None] = []
        for found in skeleton.needs:
            if found is None:
                needed.append(None)
            elif len(found) == 1:
                (slot,) = found
                needed.append(one_pod(index[slot]) if slot in index else None)
            else:
                needed.append(frozenset(index[k] for k in found)
                              if found <= index.keys() else None)
        frozen = tuple(needed)
        spots = held.shape.value[0]  # type: ignore[index]
        return _Frame(order=order, needed=frozen, canon=HashedKey((
            request.claims.shape, facts.kinds, self._first_fit, len(order), spots, frozen,
            skeleton.relevant)))

    def _problem(self, request: CallState, state: NodeState, holders: _Holders
                 ) -> tuple[Problem, _Skeleton, _Frame, tuple[Pod, ...]]:
        """The node's problem, its claims left out (`_node` adds them when the
        problem is to be solved), its skeleton (`_skeleton`, `_frame`),
        shared by the nodes that hold alike, and its candidates' pods."""
        facts = self._facts(state, request)
        skeleton = self._skeleton(request, facts, holders)
        frame = self._frame(request, facts, holders, skeleton)
        held = holders.held
        candidates, pods = held.candidates(frame.order, holders.eligible)
        # The key holds everything the search reads, in node-independent terms,
        # but not the candidates' priorities or PDBs: those only choose among the
        # smallest sets, which each node does for itself (`_choose`).
        key: Hashable | None = None
        base: Hashable | None = None
        stuck = 0
        if request.special is None:
            stuck = self._stuck(state, held)
            key = (frame.canon, facts.signature, stuck)
            base = (request.claims.shape, facts.kinds, facts.hardware, self._first_fit)
        return Problem(state=state, pending=request.pending, pods=candidates, claims=[],
                       terminating=held.terminating, facts=facts, kinds=request.kinds,
                       key=key, base=base, stuck=stuck), skeleton, frame, pods

    def _stuck(self, state: NodeState, held: Held) -> int:
        """`Problem.stuck` of the node, as a mask of positions."""
        if not held.claims or not self._others_hold:
            return 0
        left = self._inventory.allocated_without(state, held.keys).devices
        mask = 0
        for ids, places in zip(held.ids, held.places, strict=True):
            for device, at in zip(ids, places, strict=True):
                if at is not None and device in left:
                    mask |= 1 << at
        return mask

    def _facts(self, state: NodeState, request: CallState) -> NodeFacts:
        """What one node's problems read of its devices for a shape's request
        kinds, kept per node version (every preemptor of the shape reads it)."""
        view = state.view
        name = view.node.name
        per_node = self._node_facts.get(request.kinds)
        if per_node is None:
            per_node = self._node_facts[request.kinds] = {}
        hit = per_node.get(name)
        if hit is not None and hit.view is view:
            return hit
        kinds = self._book.matches.signature(
            view, request.kinds, classes=self._inventory.classes,
            matcher=self._inventory.selectors.matches_shared)
        assert isinstance(kinds, HashedKey)
        kinds = self._kinds.intern(kinds)
        static = self._book.static.of(state)
        devices, position = self._held.devices(view)
        # (ids: both are interned; the entry holds them, so their ids stay theirs)
        layout_key = (id(static.hardware), id(kinds))
        kept = self._layouts.get(layout_key)
        if kept is None:
            # one object per value: nodes of other hardware whose devices the
            # requests match alike share skeletons (`_skeleton`, keyed by its id)
            kept = self._layouts.put(layout_key, (static.hardware, kinds,
                                                  self._match_layouts.intern(
                                                      match_layout(kinds, devices))))
        layout = kept[2]
        facts = NodeFacts(view=view, kinds=kinds, signature=static.full,
                          hardware=static.hardware, devices=devices, position=position,
                          layout=layout)
        if hit is None:
            self._facts_kept += 1
            if self._facts_kept > NODE_FACTS:
                self._node_facts.clear()
                self._facts_kept = 1
                per_node = self._node_facts[request.kinds] = {}
        per_node[name] = facts
        return facts

    def _choose(self, solved: Solved, problem: Problem, candidates: tuple[Pod, ...],
                pdbs: _Pdbs | None, fit: NodeFit) -> tuple[Option, bool]:
        """This node's pick among the shared options: one that needs the fewest
        further victims for the pod's cpu, memory and pods (`NodeFit.room`;
        none when one leaves it room), then in allocator mode
        the best topology score, then (both modes) fewest PDB violations,
        lowest priorities, canonical order; and whether the pick leaves the
        pod room (False: not asked, or it does not). `candidates`: the
        problem's candidates' pods."""
        assert solved.options
        if len(solved.options) == 1:
            return solved.options[0], False
        pods = problem.pods
        covered = False
        if pdbs is not None:
            namespaces = {v.pod.namespace for v in pods}
            self._pdbs_in(namespaces, pdbs)
            covered = any(pdbs[ns] for ns in namespaces)
        # The preference's first term is the option's own: only the options
        # best on it, kept per solution, are weighed by this node's pods.
        leaders = self._leaders(solved)
        if len(leaders) == 1:
            chosen = leaders[0]
        elif covered:
            self.weighed += len(leaders)
            chosen = min(leaders, key=self._preference(pods, pdbs))
        else:
            self.weighed += len(leaders)
            chosen = _lowest(leaders, pods)
        node = problem.state.view.node.name
        if fit.roomy(node) or fit.fits(node, [pods[i].pod for i in chosen.victims], candidates):
            return chosen, True
        preference = self._preference(pods, pdbs if covered else None)
        fitting = [option for option in solved.options
                   if fit.fits(node, [pods[i].pod for i in option.victims], candidates)]
        if fitting:
            return min(fitting, key=preference), True

        def extra(option: Option) -> float:
            found = fit.room(node, [pods[i].pod for i in option.victims], candidates)
            return math.inf if isinstance(found, str) else len(found)

        # None leaves room: the fewest room victims, preferred first; one is
        # the fewest any can need.
        best, fewest = chosen, extra(chosen)
        for option in sorted(solved.options, key=preference):
            if fewest <= 1:
                break
            count = extra(option)
            if count < fewest:
                best, fewest = option, count
        return best, False

    def _preference(self, pods: Sequence[Candidate], pdbs: _Pdbs | None
                    ) -> Callable[[Option], tuple[float, int, int, int, tuple[int, ...]]]:
        """The pick's order among options (smaller first) on a node whose
        candidates are `pods`: in allocator mode the better topology score,
        then the fewest PDB violations (`pdbs`: None when no PDB covers any of
        them), the lowest highest priority, the lowest sum, canonical order."""
        first_fit = self._first_fit

        def preference(option: Option) -> tuple[float, int, int, int, tuple[int, ...]]:
            chosen = option.victims
            score = option.outcome.score
            # (-`_score`, inline: it is asked per option of every node)
            fitness = 0.0 if first_fit else 1.0 if score is None or math.isnan(score) \
                else -score
            priorities = [pods[i].priority for i in chosen]
            return (fitness, 0 if pdbs is None else pdb_violations(
                [pods[i].victim() for i in chosen], pdbs),
                max(priorities, default=0), sum(priorities), chosen)

        return preference

    def _names_in_reason(self, solved: Solved) -> bool:
        """Whether the reason of `solved` names its node, a pool or a device
        there: only then is it renamed for another node (`rename_words`
        replaces whole names and nothing else)."""
        hit = self._reasons.get(id(solved))
        if hit is None or hit[0] is not solved:
            view, text = solved.view, solved.reason
            devices, _ = self._held.devices(view)
            named = view.node.name in text or any(p.name in text for p in view.pools) \
                or any(d.name in text for d in devices)
            hit = self._reasons.put(id(solved), (solved, named))
        return hit[1]

    def _leaders(self, solved: Solved) -> Sequence[Option]:
        """The options of `solved` with the best topology score in allocator
        mode (all of them in advisor mode, where the pick reads no score)."""
        options = solved.options
        assert options
        if self._first_fit:
            return options
        hit = self._leading.get(id(solved))
        if hit is None or hit[0] is not solved:
            best = max(_score(o.outcome.score) for o in options)
            hit = self._leading.put(id(solved), (solved, [
                o for o in options if _score(o.outcome.score) == best]))
        return hit[1]

    def _violations(self, victims: Sequence[Victim], pdbs: _Pdbs | None) -> int:
        if pdbs is None:
            return 0
        return pdb_violations(victims, self._pdbs_in({v.pod.namespace for v in victims}, pdbs))

    def _pdbs_in(self, namespaces: Iterable[str], pdbs: _Pdbs) -> _Pdbs:
        """`pdbs` (namespace -> its PDBs, filled per search) holding `namespaces`."""
        for namespace in namespaces:
            if namespace not in pdbs:
                pdbs[namespace] = list(self._inventory.occupants.pdbs(namespace))
        return pdbs

    def _express(self, solved: Solved, problem: Problem, held: Held, order: tuple[int, ...],
                 candidates: tuple[Pod, ...], pdbs: _Pdbs | None, fit: NodeFit
                 ) -> tuple[NodePreemption | str, bool]:
        """A (possibly shared) canonical answer in this node's names (`held`:
        the node's holdings, `order`: its candidates' slots there,
        `candidates`: their pods), and whether the pick found that it leaves
        the pod room (`_choose`)."""
        view = problem.state.view
        roomy = False
        if solved.cut:
            reprieved = self._solver.reprieve(problem)
            if isinstance(reprieved, str):
                return reprieved, False
            option, exact = reprieved
        elif solved.options is None:
            if solved.view is view or not self._names_in_reason(solved):
                return solved.reason, False
            self.renamings += 1
            return renamed(solved.reason, solved.view, view), False
        else:
            option, roomy = self._choose(solved, problem, candidates, pdbs, fit)
            exact = True
        outcome = option.outcome
        pods = problem.pods
        victims = held.victims(order, pods, option.victims)
        claims, keys = held.claims, held.keys
        released = tuple([claims[i] for i in option.released])
        score = outcome.score
        priority = self._priorities.get(score)
        if priority is None:
            priority = self._priorities.put(score, topology_priority(score))
        return NodePreemption(
            node=view.node.name, victims=victims,
            released_claims=tuple([keys[i] for i in option.released]), released=released,
            pdb_violations=self._violations(victims, pdbs),
            score=score, priority=priority,
            terminating=problem.terminating, exact=exact,
            candidates=candidates,
            outcome=outcome, source=option.source, target=view,
            pending=problem.pending), roomy


def _lowest(options: Sequence[Option], pods: Sequence[Candidate]) -> Option:
    """The option whose victims (`pods` by index) have the lowest highest
    priority, then the lowest sum, then come first in canonical order: the
    pick's preference among options of one score and no PDB to count."""
    best = options[0]
    best_key: tuple[int, int, tuple[int, ...]] | None = None
    for option in options:
        chosen = option.victims
        key: tuple[int, int, tuple[int, ...]]
        if len(chosen) == 2:  # most sets: two victims, no list
            a, b = pods[chosen[0]].priority, pods[chosen[1]].priority
            key = (a if a > b else b, a + b, chosen)
        else:
            priorities = [pods[i].priority for i in chosen]
            key = (max(priorities, default=0), sum(priorities), chosen)
        if best_key is None or key < best_key:
            best, best_key = option, key
    return best


def _frees(floor: _Floor) -> tuple[tuple[int, int], ...]:
    """Per position of a device some victim set can release (held plainly by
    a releasable claim, and by nothing else that stays: a nomination, an
    assumption, another claim), the
    devices surely released with it (a mask of positions): those its claim
    holds plainly, and those of every claim needing no pod beyond the ones
    that claim needs gone. In position order, so nodes alike share one
    ceiling."""
    by_pods: dict[frozenset[int], int] = {}
    claims = []
    for _, _, reservers, gone, plain in floor.released:
        pods = frozenset((reservers[0],) if gone is None else gone)
        by_pods[pods] = by_pods.get(pods, 0) | plain
        claims.append((pods, plain))
    out: dict[int, int] = {}
    for pods, plain in claims:
        if len(pods) == 1:
            freed = by_pods[pods]  # no other claim needs a subset of one pod
        else:
            freed = 0
            for group, mask in by_pods.items():
                if group <= pods:
                    freed |= mask
        while plain:
            low = plain & -plain
            out[low.bit_length() - 1] = freed
            plain ^= low
    return tuple(sorted(out.items()))


