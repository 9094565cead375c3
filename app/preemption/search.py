"""Device-aware victim search: which running pods must go so a pod's claims fit.

For a preemptor P of priority p and each candidate node, the search finds the
smallest set of running pods of priority below p whose release lets an
allocation of all of P's claims exist there, asking the same allocator the
filter asks (`AnswerBook.allocate`: CEL, constraints, counters, taints,
extended resources, the topology objective). Releasing a pod releases the
claims reserved only for victims and for pods already going (terminating or
terminal): a claim shared with anyone else keeps its devices. Pods already
terminating are counted as gone but are never victims again.

Per node it tries victim sets in increasing size and keeps every set of the
smallest size that works; each node then picks among them: in allocator mode
the best topology score, then (both modes) the fewest PDB violations and the
lowest priorities, as a user would prefer. Only pods holding devices P could
use (devices its requests match, or devices drawing on the same shared
counters as those) are tried; a set that frees fewer matching devices than
P's requests take is ruled out by counting, without the allocator; a set
that releases the same claims as one already tried is not tried again. Past
a budget of allocator runs a node settles for a minimal set (no victim can be
spared), reprieving pods highest priority first as kube-scheduler does.
Nodes whose problem is equal up to renaming (hardware, usage, which claims
hold which devices and whom they need to go) share one search: 500 full
nodes of one kind cost one search and 499 choices among its answers, whatever
their pods' priorities.

Across nodes the answer is ranked as kube-scheduler's
`pickOneNodeForPreemption` ranks (`NodePreemption.rank_key`), then by
drax's topology score. Pure: reads the inventory, changes nothing.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from cachetools import LRUCache

from app.allocator.types import AllocationOutcome, ClaimAllocation, NodeView
from app.extender.answers import (
    AnswerBook,
    CallState,
    allocated_elsewhere,
    request_of,
    with_claim_keys,
)
from app.extender.claims import ClaimResolver
from app.extender.signature import HashedKey, flat_devices, map_outcome
from app.extender.verbs import Extender
from app.inventory import Inventory, NodeState, Occupants
from app.model import (
    Pod,
    PodDisruptionBudget,
    ResourceClaim,
)
from app.model.objects import ALLOCATION_MODE_EXACT_COUNT, PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER
from app.topology import priority as topology_priority

# Allocator runs one node's search may spend on exact search before it settles
# for a minimal (not necessarily smallest) set by reprieving pods one by one.
DEFAULT_TRIAL_BUDGET: Final = 512
# Victim sets looked at per allocator run allowed (most are ruled out by counting).
_ENUMERATED_PER_TRIAL: Final = 16
_SHARED_SEARCHES: Final = 4096


# --------------------------------------------------------------------------- results


@dataclass(slots=True, frozen=True)
class Victim:
    """A pod to delete, its priority, and the claims it holds on the node."""

    pod: Pod
    priority: int
    claims: tuple[str, ...]


@dataclass(slots=True, frozen=True)
class NodePreemption:
    """What preempting on one node takes and gives.

    `victims`: the pods to delete, most important first. `released_claims`:
    the claims deallocated once they (and `terminating`, pods already going)
    are gone, and `freed_devices` the devices those claims hold.
    `allocation`: the preemptor's claims as the allocator places them then,
    with its topology `score` (0..1) and `priority` (0..10). `exact`: False
    when the node's search budget ran out and the set is minimal (no victim
    can be spared) but a smaller one may exist. `considered`: the UIDs of the
    pods the search weighed (lower priority, holding devices the preemptor
    could use); the others cannot help it.
    """

    node: str
    victims: tuple[Victim, ...]
    released_claims: tuple[str, ...]
    freed_devices: tuple[str, ...]
    pdb_violations: int
    allocation: tuple[ClaimAllocation, ...]
    score: float | None
    priority: int
    terminating: tuple[Pod, ...] = ()
    exact: bool = True
    considered: frozenset[str] = frozenset()

    def rank_key(self) -> tuple[float, ...]:
        """Smaller is better: kube-scheduler's pickOneNodeForPreemption order
        (no victims; fewest PDB violations; lowest highest victim priority;
        lowest priority sum; fewest victims; latest start among the
        highest-priority victims), then the better topology score."""
        if not self.victims:
            return (0, 0, 0, 0, 0, 0, -_score(self.score))
        top = max(v.priority for v in self.victims)
        earliest = min(_start(v.pod) for v in self.victims if v.priority == top)
        return (1, self.pdb_violations, top, sum(v.priority for v in self.victims),
                len(self.victims), -earliest, -_score(self.score))


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


def _score(score: float | None) -> float:
    return -1.0 if score is None or math.isnan(score) else score


def _start(pod: Pod) -> float:
    # kube-scheduler takes a pod that has not started yet as starting now.
    return math.inf if pod.start_time is None else pod.start_time


# --------------------------------------------------------------------------- priorities


def priority_of(pod: Pod, occupants: Occupants) -> int:
    """spec.priority as admission sets it; for a pod that was never admitted
    (objects from files) its PriorityClass's value, else the global default's,
    else 0."""
    if pod.priority is not None:
        return pod.priority
    pc = (occupants.priority_class(pod.priority_class_name) if pod.priority_class_name
          else occupants.default_priority_class)
    return pc.value if pc is not None else 0


def preemption_policy_of(pod: Pod, occupants: Occupants) -> str:
    if pod.preemption_policy:
        return pod.preemption_policy
    pc = (occupants.priority_class(pod.priority_class_name) if pod.priority_class_name
          else occupants.default_priority_class)
    return pc.preemption_policy if pc is not None else PREEMPT_LOWER_PRIORITY


def pdb_violations(victims: Iterable[Victim], pdbs: Mapping[str, Sequence[PodDisruptionBudget]]
                   ) -> int:
    """How many victims a PDB would not allow to go, counted as kube-scheduler's
    filterPodsWithPDBViolation counts: most important victim first, each
    covering PDB's allowance decremented, a pod violating once any goes below 0.
    `pdbs`: namespace -> its PDBs."""
    allowed: dict[str, int] = {}
    count = 0
    for victim in sorted(victims, key=_importance):
        violated = False
        for pdb in pdbs.get(victim.pod.namespace, ()):
            if not pdb.selects(victim.pod):
                continue
            left = allowed.get(pdb.key, pdb.disruptions_allowed) - 1
            allowed[pdb.key] = left
            violated = violated or left < 0
        count += violated
    return count


def _importance(victim: Victim) -> tuple[float, float, str]:
    """Most important first: higher priority, then the earlier start (MoreImportantPod)."""
    return (-victim.priority, _start(victim.pod), victim.pod.key)


# --------------------------------------------------------------------------- the search

_Released = Callable[[Collection[int]], tuple[int, ...]]
_Attempt = Callable[[tuple[int, ...]], AllocationOutcome]


@dataclass(slots=True)
class _Claim:
    """One claim held on the node: the eligible pods that must all go to release
    it (empty: released already), or None when someone who stays holds it."""

    claim: ResourceClaim
    needs: frozenset[int] | None
    relevant: bool
    matched: frozenset[str] = frozenset()  # its devices the preemptor's requests match


@dataclass(slots=True)
class _Problem:
    """One node's search problem, pods and claims in a canonical order."""

    state: NodeState
    pending: tuple[ResourceClaim, ...]
    pods: list[Victim]  # the candidates, canonical order
    claims: list[_Claim]
    terminating: tuple[Pod, ...]
    free_matched: int = 0  # devices its requests match that nobody holds
    key: Hashable | None = None


@dataclass(slots=True, frozen=True)
class _Option:
    """One smallest victim set (candidate indexes), the claims it releases, and
    the allocation then."""

    victims: tuple[int, ...]
    released: tuple[int, ...]
    outcome: AllocationOutcome


@dataclass(slots=True, frozen=True)
class _Solved:
    """A node's problem solved in canonical terms, shared by nodes with an equal
    problem: every smallest victim set that works (`options`), so each node
    picks among them by its own pods' priorities and PDBs. `options` None:
    nothing works (`reason`); `cut`: the budget ran out before the smallest
    size was settled, so each node reprieves on its own."""

    view: NodeView
    options: tuple[_Option, ...] | None
    reason: str = ""
    cut: bool = False


class VictimSearch:
    """The victim search over one inventory, with the filter's allocator
    (`book`) and claim lookup (`resolver`)."""

    def __init__(self, inventory: Inventory, *, book: AnswerBook, resolver: ClaimResolver,
                 mode: str = "allocator", trial_budget: int = DEFAULT_TRIAL_BUDGET) -> None:
        self._inventory = inventory
        self._book = book
        self._resolver = resolver
        self._first_fit = mode == "advisor"
        self._trial_budget = trial_budget
        self._solved: LRUCache[Hashable, _Solved] = LRUCache(maxsize=_SHARED_SEARCHES)
        self.trials = 0  # allocator runs so far (for benchmarks and tests)

    @property
    def inventory(self) -> Inventory:
        return self._inventory

    @classmethod
    def of(cls, extender: Extender, *, trial_budget: int = DEFAULT_TRIAL_BUDGET
           ) -> VictimSearch:
        """The search over `extender`'s inventory, allocator and claim lookup."""
        return cls(extender.inventory, book=extender.book, resolver=extender.resolver,
                   mode=extender.mode, trial_budget=trial_budget)

    def search(self, pod: Pod, node_names: Sequence[str] | None = None, *,
               allowed: Mapping[str, Collection[str] | None] | None = None) -> PreemptionPlan:
        """Victims per node for `pod` (every node when `node_names` is None).
        `allowed`: per node, the UIDs that may be chosen (None or absent: any
        pod on the node), as the preempt verb offers them."""
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
        names = self._inventory.node_names() if node_names is None else node_names
        pdbs: dict[str, list[PodDisruptionBudget]] = {}
        found: list[NodePreemption] = []
        refused: dict[str, str] = {}
        for name in names:
            allow = None if allowed is None else allowed.get(name)
            answer = self._node(pod, p, request, name,
                                None if allow is None else frozenset(allow), pdbs)
            if isinstance(answer, str):
                refused[name] = answer
            else:
                found.append(answer)
        found.sort(key=lambda n: (n.rank_key(), n.node))
        return PreemptionPlan(pod=pod, priority=p, nodes=tuple(found), refused=refused)

    # ------------------------------------------------------------------ one node

    def _node(self, pod: Pod, p: int, request: CallState, name: str,
              allow: frozenset[str] | None,
              pdbs: dict[str, list[PodDisruptionBudget]]) -> NodePreemption | str:
        inv = self._inventory
        state = inv.node_state(name)
        if state is None:
            return f"node {name} is unknown to drax"
        elsewhere = allocated_elsewhere(request.claims, state)
        if elsewhere is not None:
            return elsewhere
        if request.claims.extended is not None:
            variant = self._book.variant(request, state.view.node)
            if isinstance(variant, str):
                return variant
            request = variant
        if not request.pending:
            return NodePreemption(node=name, victims=(), released_claims=(), freed_devices=(),
                                  pdb_violations=0, allocation=(), score=None, priority=0)
        problem = self._problem(pod, p, request, state, allow)
        solved = self._solved.get(problem.key) if problem.key is not None else None
        if solved is None:
            solved = self._solve(problem)
            if problem.key is not None:
                self._solved[problem.key] = solved
        return self._express(solved, problem, pdbs)

    def _problem(self, pod: Pod, p: int, request: CallState, state: NodeState,
                 allow: frozenset[str] | None) -> _Problem:
        occupants = self._inventory.occupants
        name = state.view.node.name
        kinds = self._book.matches.signature(
            state.view, request.kinds, classes=self._inventory.classes,
            matcher=self._inventory.selectors.matches_shared)
        assert isinstance(kinds, HashedKey)
        relevant, matched = self._relevant_devices(kinds, state)
        devices = flat_devices(state.view)
        position = {d.id: i for i, d in enumerate(devices)}
        # Who may go: on this node, below p, running, offered.
        eligible: dict[str, Victim] = {}
        held: dict[str, ResourceClaim] = {}
        terminating: list[Pod] = []
        for other in occupants.pods_on(name):
            if other.uid == pod.uid and other.key == pod.key:
                continue
            holdings = occupants.holdings(other)
            if not holdings:
                continue
            for claim in holdings:
                held[claim.key] = claim
            if other.deleting or other.terminal:
                terminating.append(other)
                continue
            priority = priority_of(other, occupants)
            if priority < p and (allow is None or other.uid in allow):
                eligible[other.key] = Victim(pod=other, priority=priority,
                                             claims=tuple(c.key for c in holdings))
        # Per claim: the eligible pods that must all go to release it.
        claim_needs: dict[str, frozenset[str] | None] = {}
        for claim_key, claim in held.items():
            needs: set[str] = set()
            kept = False
            for reserver in occupants.reservers(claim):
                if reserver is None or (not reserver.deleting and not reserver.terminal
                                        and reserver.key not in eligible):
                    kept = True
                    break
                if reserver.key in eligible:
                    needs.add(reserver.key)
            claim_needs[claim_key] = None if kept else frozenset(needs)

        def spots(claim: ResourceClaim) -> tuple[Hashable, ...]:
            """Where the claim's devices are, in node-independent terms."""
            assert claim.allocation is not None
            return tuple(sorted(((position.get(r.device_id, r.device_id), r.admin_access,
                                  r.share_id is not None,
                                  tuple(sorted((k, q.value)
                                               for k, q in r.consumed_capacity.items())))
                                 for r in claim.allocation.results), key=repr))

        ordered_claims = sorted(held.values(), key=lambda c: (spots(c), c.key))
        is_relevant = {c.key: any(r.device_id in relevant for r in c.allocation.results)
                       if c.allocation else False for c in ordered_claims}
        # Candidates: eligible pods that some releasable claim of use needs.
        useful = {k for c in ordered_claims if is_relevant[c.key]
                  for k in (claim_needs[c.key] or ())}
        first_spot: dict[str, int] = {}
        for i, c in enumerate(ordered_claims):
            for k in claim_needs[c.key] or ():
                first_spot.setdefault(k, i)
        candidates = sorted((eligible[k] for k in useful),
                            key=lambda v: (first_spot[v.pod.key], v.priority, v.pod.key))
        index = {v.pod.key: i for i, v in enumerate(candidates)}
        claims = [_Claim(claim=c, relevant=is_relevant[c.key],
                         needs=None if claim_needs[c.key] is None or not (
                             claim_needs[c.key] or frozenset()) <= index.keys()
                         else frozenset(index[k] for k in claim_needs[c.key] or ()),
                         matched=frozenset(r.device_id for r in c.allocation.results
                                           if r.device_id in matched and r.share_id is None)
                         if c.allocation else frozenset())
                  for c in ordered_claims]
        taken = state.allocated.devices
        free = len(matched) if any(d.allow_multiple_allocations for d in devices
                                   if d.id in matched) else len(matched - taken)
        # The key holds everything the search reads, in node-independent terms,
        # but not the candidates' priorities or PDBs: those only choose among the
        # smallest sets, which each node does for itself (`_choose`).
        key: Hashable | None = None
        if request.special is None:
            signature = self._book.static.of(state).full
            key = HashedKey((request.claims.shape, signature, kinds, self._first_fit,
                             len(candidates),
                             tuple((spots(c.claim), c.needs, c.relevant) for c in claims)))
        return _Problem(state=state, pending=request.pending, pods=candidates, claims=claims,
                        terminating=tuple(terminating), free_matched=free, key=key)

    @staticmethod
    def _relevant_devices(kinds: HashedKey, state: NodeState) -> tuple[set[str], set[str]]:
        """(relevant, matched): the devices the preemptor's requests match
        (`kinds`: the match columns of its request kinds), and those plus the
        devices drawing on the same shared counters (freeing them frees counters
        it needs)."""
        columns = kinds.value
        devices = flat_devices(state.view)
        relevant = set()
        counter_sets = set()
        assert isinstance(columns, tuple)
        for column in columns:
            if column is None:
                continue
            for device, match in zip(devices, column, strict=True):
                if match is not False:  # True, or a CEL error the allocator must meet
                    relevant.add(device.id)
                    for use in device.consumes_counters:
                        counter_sets.add((device.driver, device.pool, use.counter_set))
        matched = set(relevant)
        if counter_sets:
            for device in devices:
                if any((device.driver, device.pool, use.counter_set) in counter_sets
                       for use in device.consumes_counters):
                    relevant.add(device.id)
        return relevant, matched

    def _solve(self, problem: _Problem) -> _Solved:
        view = problem.state.view
        attempt, released = self._attempts(problem)
        base = released(())
        outcome = attempt(base)
        if outcome.error is not None:
            return _Solved(view=view, options=None,
                           reason=f"cannot allocate the pod's claims: {outcome.error}")
        if outcome.feasible:
            return _Solved(view=view, options=(_Option((), base, outcome),))
        everyone = tuple(range(len(problem.pods)))
        if not everyone:
            return _Solved(view=view, options=None, reason=(
                "preempting cannot help: no lower-priority pod holds devices the pod could "
                f"use ({outcome.reason or 'cannot allocate all claims'})"))
        all_gone = attempt(released(everyone))
        if not all_gone.feasible:
            return _Solved(view=view, options=None, reason=(
                f"even with all {len(everyone)} lower-priority pods holding devices the pod "
                "could use gone: "
                f"{all_gone.error or all_gone.reason or 'cannot allocate all claims'}"))
        needed = _devices_needed(problem.pending)
        budget = self._trial_budget
        for size in range(1, len(everyone)):
            if math.comb(len(everyone), size) > budget * _ENUMERATED_PER_TRIAL:
                return _Solved(view=view, options=None, cut=True)
            options = []
            for combo in itertools.combinations(everyone, size):
                idx = released(combo)
                if needed is not None and _free_after(problem, idx) < needed:
                    continue  # too few devices it could use come free: skip the allocator
                budget -= 1
                if budget < 0:
                    return _Solved(view=view, options=None, cut=True)
                result = attempt(idx)
                if result.feasible:
                    options.append(_Option(combo, idx, result))
            if options:
                return _Solved(view=view, options=tuple(options))
        return _Solved(view=view, options=(_Option(everyone, released(everyone), all_gone),))

    def _attempts(self, problem: _Problem
                  ) -> tuple[Callable[[tuple[int, ...]], AllocationOutcome], _Released]:
        """The allocator over the node with the claims of given indexes released
        (memoised), and which claims a victim set releases."""
        claims = problem.claims
        outcomes: dict[tuple[int, ...], AllocationOutcome] = {}

        def released(victims: Collection[int]) -> tuple[int, ...]:
            gone = frozenset(victims)
            return tuple(i for i, c in enumerate(claims)
                         if c.needs is not None and c.needs <= gone)

        def attempt(idx: tuple[int, ...]) -> AllocationOutcome:
            hit = outcomes.get(idx)
            if hit is None:
                self.trials += 1
                allocated = self._inventory.allocated_without(
                    problem.state, (claims[i].claim.key for i in idx))
                hit = outcomes[idx] = self._book.allocate(problem.pending, problem.state,
                                                          allocated)
            return hit

        return attempt, released

    def _reprieve(self, problem: _Problem) -> tuple[_Option, bool]:
        """Past the budget: start from every candidate gone and spare them one by
        one, highest priority first (as kube-scheduler reprieves), while the pod
        still fits. The set is minimal, not necessarily the smallest."""
        attempt, released = self._attempts(problem)
        victims = set(range(len(problem.pods)))
        outcome = attempt(released(tuple(victims)))
        for i in sorted(victims, key=lambda i: (-problem.pods[i].priority, i)):
            trial = tuple(sorted(victims - {i}))
            result = attempt(released(trial))
            if result.feasible:
                victims.discard(i)
                outcome = result
        chosen = tuple(sorted(victims))
        return _Option(chosen, released(chosen), outcome), False

    def _choose(self, solved: _Solved, problem: _Problem,
                pdbs: dict[str, list[PodDisruptionBudget]]) -> tuple[_Option, bool]:
        """This node's pick among the shared options: in allocator mode the best
        topology score, then (both modes) fewest PDB violations, lowest
        priorities, canonical order."""
        assert solved.options
        pods = problem.pods

        def preference(option: _Option) -> tuple[float, int, int, int, tuple[int, ...]]:
            victims = [pods[i] for i in option.victims]
            return (0.0 if self._first_fit else -_score(option.outcome.score),
                    pdb_violations(victims, self._pdbs_of(victims, pdbs)),
                    max((v.priority for v in victims), default=0),
                    sum(v.priority for v in victims), option.victims)

        return min(solved.options, key=preference), True

    def _pdbs_of(self, victims: Iterable[Victim], pdbs: dict[str, list[PodDisruptionBudget]]
                 ) -> dict[str, list[PodDisruptionBudget]]:
        for v in victims:
            namespace = v.pod.namespace
            if namespace not in pdbs:
                pdbs[namespace] = list(self._inventory.occupants.pdbs(namespace))
        return pdbs

    def _express(self, solved: _Solved, problem: _Problem,
                 pdbs: dict[str, list[PodDisruptionBudget]]) -> NodePreemption | str:
        """A (possibly shared) canonical answer in this node's names."""
        view = problem.state.view
        if solved.cut:
            option, exact = self._reprieve(problem)
            source = view
        elif solved.options is None:
            if solved.view is view:
                return solved.reason
            return _renamed(solved.reason, solved.view, view)
        else:
            option, exact = self._choose(solved, problem, pdbs)
            source = solved.view
        outcome = with_claim_keys(map_outcome(option.outcome, source=source, target=view),
                                  problem.pending)
        victims = tuple(sorted((problem.pods[i] for i in option.victims), key=_importance))
        released = tuple(problem.claims[i].claim for i in option.released)
        freed = tuple(sorted({r.device_id for c in released if c.allocation
                              for r in c.allocation.results}))
        return NodePreemption(
            node=view.node.name, victims=victims,
            released_claims=tuple(c.key for c in released), freed_devices=freed,
            pdb_violations=pdb_violations(victims, self._pdbs_of(victims, pdbs)),
            allocation=outcome.claims, score=outcome.score,
            priority=topology_priority(outcome.score), terminating=problem.terminating,
            exact=exact, considered=frozenset(v.pod.uid for v in problem.pods))


def _devices_needed(pending: Sequence[ResourceClaim]) -> int | None:
    """How many distinct devices the claims take, when that is plain: every
    request `exactly` a count, no admin access (which may share a taken device);
    None otherwise (no bound from counting)."""
    total = 0
    for claim in pending:
        for request in claim.spec.requests:
            exact = request.exactly
            if exact is None or exact.allocation_mode != ALLOCATION_MODE_EXACT_COUNT \
                    or exact.admin_access:
                return None
            total += exact.count
    return total


def _free_after(problem: _Problem, released: tuple[int, ...]) -> int:
    """Devices the preemptor's requests match that are free once `released` go."""
    freed: set[str] = set()
    for i in released:
        freed |= problem.claims[i].matched
    return problem.free_matched + len(freed)


def _renamed(text: str, source: NodeView, target: NodeView) -> str:
    outcome = map_outcome(AllocationOutcome(feasible=False, reason=text), source=source,
                          target=target)
    return outcome.reason or text
