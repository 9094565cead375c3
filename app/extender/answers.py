"""Answer caching: what the verbs know about one claim shape on each node.

A verdict (`Verdict`) is one claim shape's answer on one node, computed at
that node's inventory version. `AnswerBook` keeps, per claim shape, a verdict
for every node asked about (`Answers`), and brings them up to date lazily: a
call catches up on the nodes the inventory stamped since the previous call and
computes a verdict only for those and for nodes never seen. On a miss, nodes
with the same signature (see `signature`) share one allocator run, so a first
cycle over 500 identical fresh nodes runs the allocator once; the borrowed
answer is re-expressed for the node only when its devices are read.

Kept apart from the verbs because this is the part that decides when an
answer may be reused; the verbs only read it, and warming only fills it.
"""

from __future__ import annotations

import contextlib
import math
import time
import weakref
from collections.abc import Callable, Hashable, Sequence, Set
from dataclasses import dataclass, field, replace
from typing import Any, Final

from cachetools import LRUCache

from app.allocator import DEFAULT_STEP_BUDGET, allocate
from app.allocator.types import (
    AllocatedState,
    AllocationOutcome,
    ClaimAllocation,
    DeviceId,
    NodeView,
    Rejection,
)
from app.bounded_cache import BoundedCache
from app.cel import CelCompileError, CelEvalError
from app.extender.claims import PodClaims
from app.extender.extended import (
    SPECIAL_CLAIM_NAME,
    ExtendedClaim,
    extended_claim,
    requested_devices,
    served_by_dra,
)
from app.extender.signature import (
    MatchColumns,
    RequestKind,
    StaticSignatures,
    map_outcome,
    rename_words,
    request_kinds,
)
from app.extender.stats import SearchStats
from app.features import FeatureGates
from app.inventory import Inventory, NodeState
from app.model import Device, Node, Pod, ResourceClaim
from app.topology import TopologyConfig, TopologyObjective, make_objective, priority

_SHAPES_CACHED: Final = 256
_SIGNATURE_CACHE_SIZE: Final = 4096
_FAILURES_SHARED: Final = 4096


@dataclass(slots=True, frozen=True)
class Verdict:
    """One claim shape on one node, everything the verbs read, computed once.

    `outcome` is the allocator's answer (None when the node was decided
    without it); its claim keys are those of the pod that asked first. A
    feasible answer borrowed from a node with the same signature keeps that
    node's outcome plus both views, and is re-expressed for this node only
    when someone asks for the devices (`node_outcome`): filter and prioritize
    never do, and thousands of copied allocations would cost memory.
    """

    feasible: bool
    outcome: AllocationOutcome | None = None
    priority: int = 0
    reason: str | None = None
    error: str | None = None
    unresolvable: bool = False
    claim_keys: tuple[str, ...] = ()  # the pending claims `reason` and `error` name
    rejection: Rejection | None = None  # the category of `reason` or `error`
    source: NodeView | None = None  # the node `outcome` was computed on, if not this one
    target: NodeView | None = None

    def node_outcome(self) -> AllocationOutcome | None:
        if self.outcome is None or self.source is None or self.target is None:
            return self.outcome
        return map_outcome(self.outcome, source=self.source, target=self.target)


NO_CLAIMS: Final = Verdict(feasible=True)


@dataclass(slots=True, frozen=True, eq=False)
class Failure:
    """What filter reads of a verdict that rules its node out. Nodes whose
    verdicts word the same failure share one `Failure` (`Answers.failure`), so
    filter words and counts each distinct failure once per call, without a
    Python step per node."""

    reason: str | None
    error: str | None
    unresolvable: bool
    rejection: Rejection | None
    claim_keys: tuple[str, ...]


def from_outcome(outcome: AllocationOutcome, *, claim_keys: tuple[str, ...],
                 unresolvable: bool = False) -> Verdict:
    if outcome.error is not None:
        return Verdict(feasible=False, outcome=outcome, error=outcome.error, unresolvable=True,
                       claim_keys=claim_keys, rejection=outcome.rejection or Rejection.OTHER)
    if not outcome.feasible:
        return Verdict(feasible=False, outcome=outcome, unresolvable=unresolvable,
                       reason=outcome.reason or "cannot allocate all claims",
                       claim_keys=claim_keys, rejection=outcome.rejection or Rejection.OTHER)
    return Verdict(feasible=True, outcome=outcome, priority=priority(outcome.score),
                    claim_keys=claim_keys)


def refused(reason: str, rejection: Rejection) -> Verdict:
    return Verdict(feasible=False, reason=reason, unresolvable=True, rejection=rejection)


@dataclass(slots=True)
class Answers:
    """Every node's verdict for one claim shape, as of inventory `sequence`,
    with the node's version it was computed at.
    `marks`: what the verbs read of each current verdict, one dictionary read
    per candidate: the priority of a feasible node, the `Failure` of one ruled
    out. At 100,000 nodes a candidate's read is a few cache misses, so the
    verbs' walk over 5,000 candidates costs what it reads, not what it runs.
    `stale`: nodes changed since their verdict, left out of `marks` until a
    verb asks about them again (`needs`)."""

    sequence: int = -1
    verdicts: dict[str, tuple[int, Verdict]] = field(default_factory=dict)
    marks: dict[str, int | Failure] = field(default_factory=dict)
    stale: set[str] = field(default_factory=set)
    refreshes: int = 0  # verdicts computed: a mark changes only with one, or goes stale
    _failures: dict[tuple[Any, ...], Failure] = field(default_factory=dict)

    def needs(self, name: str) -> bool:
        """Whether `name`'s verdict must be computed before it is read."""
        return name not in self.marks

    def failure(self, verdict: Verdict) -> Failure:
        """The shared `Failure` for an infeasible verdict's words."""
        key = (verdict.reason, verdict.error, verdict.unresolvable, verdict.rejection,
               verdict.claim_keys)
        hit = self._failures.get(key)
        if hit is None:
            if len(self._failures) >= _FAILURES_SHARED:
                # Texts naming a node can make every failure distinct; sharing is
                # only a saving, so the table starts over rather than grow.
                self._failures.clear()
            hit = self._failures[key] = Failure(*key)
        return hit


Wording = Callable[[Verdict | Failure], tuple[str | None, str | None]]


def wording(keys: tuple[str, ...]) -> Wording:
    """A verdict's reason and error as the pod with pending claims `keys` reads them.

    Cached texts name the claims of the pod that asked first; many nodes share
    one text, so each distinct text is reworded once per call.
    """
    reworded: dict[tuple[str | None, str | None, tuple[str, ...]],
                   tuple[str | None, str | None]] = {}

    def words(verdict: Verdict | Failure) -> tuple[str | None, str | None]:
        reason, error = verdict.reason, verdict.error
        if not (reason or error) or not verdict.claim_keys or verdict.claim_keys == keys:
            return reason, error
        text_key = (reason, error, verdict.claim_keys)
        hit = reworded.get(text_key)
        if hit is None:
            names = dict(zip(verdict.claim_keys, keys, strict=True))
            hit = reworded[text_key] = (rename_words(reason, names), rename_words(error, names))
        return hit

    return words


@dataclass(slots=True)
class CallState:
    """One verb call's state for a pod: its resolved claims, the pending ones and
    their request kinds, and the signatures met in this call. (The allocator's
    `Request` is one device request of a claim.)"""

    claims: PodClaims
    pending: tuple[ResourceClaim, ...] = ()
    kinds: tuple[Any, ...] = ()
    by_signature: dict[Hashable, tuple[NodeState, Verdict]] = field(default_factory=dict)
    pod: Pod | None = None  # the pod, when its extended resources need a claim per node
    special: ExtendedClaim | None = None  # this variant's claim for extended resources
    # the resources DRA serves on a node -> the request with that node's special claim
    variants: dict[tuple[str, ...], CallState] = field(default_factory=dict)


class DeadlineExceeded(Exception):
    """A verb's deadline passed; the argument is the last node computed."""


class AnswerBook:
    """Per claim shape, every asked node's verdict, kept current (see module doc)."""

    def __init__(self, inventory: Inventory, *, features: FeatureGates, mode: str,
                 topology_config: TopologyConfig, step_budget: int = DEFAULT_STEP_BUDGET,
                 stats: SearchStats | None = None) -> None:
        self._inventory = inventory
        self.stats = stats or SearchStats()
        self._features = features
        self._mode = mode
        self._topology = topology_config
        self._step_budget = step_budget
        # claim shape -> answers; emptied when too many shapes pile up.
        self._results: BoundedCache[Hashable, Answers] = BoundedCache(_SHAPES_CACHED)
        # (shape, signature) -> the representative's snapshot, held weakly, and its
        # verdict: a representative is only trusted while its snapshot is its node's
        # current one, and the inventory drops a snapshot when the node changes, so
        # the entry goes with it instead of pinning an old node view until evicted.
        self._by_signature: LRUCache[tuple[Hashable, Hashable],
                                     tuple[weakref.ref[NodeState], Verdict]] = \
            LRUCache(maxsize=_SIGNATURE_CACHE_SIZE)
        self.static = StaticSignatures()
        self.matches = MatchColumns()
        self._unfit_when_empty: LRUCache[Hashable, bool] = LRUCache(
            maxsize=_SIGNATURE_CACHE_SIZE)
        # time.monotonic() past which `refresh` raises DeadlineExceeded once it has
        # kept its node's verdict (a verb sets it while it runs): checked between
        # nodes, as one node's search is already bounded by the step budget.
        # Answers stay consistent: `current` records its sequence only once every
        # changed node is refreshed.
        self.deadline = math.inf

    @property
    def topology(self) -> TopologyConfig:
        """What the allocations' topology scores are computed with."""
        return self._topology

    @property
    def step_budget(self) -> int:
        """The allocator steps one allocation search may take."""
        return self._step_budget

    def current(self, request: CallState) -> Answers:
        """The shape's answers with every node that changed since the last call
        marked stale: a verb recomputes a stale node only when it asks about it
        (`Answers.needs`), so a cycle costs work for its changed candidates
        only. The scheduler offers a share of the nodes from a rotating start,
        so most nodes a bind changed are not among the next pod's candidates,
        and one that changes again before it is asked about costs nothing more."""
        answers = self.of_shape(request.claims.shape)
        inv = self._inventory
        sequence = inv.sequence
        if answers.sequence == sequence:
            return answers
        changed = inv.changed_since(answers.sequence)
        verdicts, marks, stale = answers.verdicts, answers.marks, answers.stale
        if changed is None:
            names = list(verdicts)
            for name, version in zip(names, inv.versions(names), strict=True):
                if verdicts[name][0] != version:
                    marks.pop(name, None)
                    stale.add(name)
        else:
            for name in changed:
                entry = verdicts.get(name)
                if entry is not None and entry[0] != inv.version(name):
                    marks.pop(name, None)
                    stale.add(name)
        answers.sequence = sequence
        return answers

    def of_shape(self, shape: Hashable) -> Answers:
        """The shape's answers; new ones start at the inventory's sequence: every
        verdict is computed after that, so only the changes after it can have
        made one stale, and the first call (after warming, say) catches up on
        those instead of comparing every node's version."""
        answers = self._results.get(shape)
        if answers is None:
            answers = self._results.put(shape, Answers(sequence=self._inventory.sequence))
        return answers

    def refresh(self, request: CallState, answers: Answers, name: str) -> None:
        self.stats.answers_computed += 1
        version = self._inventory.version(name)
        verdict = self._verdict_for(request, name)
        answers.refreshes += 1
        answers.verdicts[name] = (version, verdict)
        answers.stale.discard(name)
        answers.marks[name] = verdict.priority if verdict.feasible else answers.failure(verdict)
        if time.monotonic() > self.deadline:
            raise DeadlineExceeded(name)  # after keeping it: every attempt progresses

    def _verdict_for(self, request: CallState, name: str) -> Verdict:
        state = self._inventory.node_state(name)
        if state is None:
            return refused(f"node {name} is unknown to drax: no Node object and no "
                           "ResourceSlice names it", Rejection.UNKNOWN_NODE)
        elsewhere = allocated_elsewhere(request.claims, state)
        if elsewhere is not None:
            return refused(elsewhere, Rejection.ALLOCATED_ELSEWHERE)
        if request.claims.extended is not None:
            variant = self.variant(request, state.view.node)
            if isinstance(variant, str):
                return Verdict(feasible=False, reason=variant, rejection=Rejection.OTHER)
            request = variant
        if not request.pending:
            return NO_CLAIMS
        verdict = self._shared_or_computed(request, state)
        if request.special is not None and not verdict.feasible and verdict.error is None:
            verdict = self._extended_wording(verdict, request.special, state)
        return verdict

    def variant(self, request: CallState, node: Node) -> CallState | str:
        """The request with the special claim for what DRA serves on `node`, or why
        the node cannot hold the pod's extended resources."""
        needs = request.claims.extended
        assert needs is not None and request.pod is not None
        served = served_by_dra(needs, node)
        if isinstance(served, str):
            return served
        hit = request.variants.get(served)
        if hit is None:
            special = extended_claim(request.pod, needs, served) if served else None
            claims = request.claims.claims + ((special.claim,) if special else ())
            resolved = PodClaims(claims=claims, shape=(request.claims.shape, served),
                                 extended=needs)
            hit = request.variants[served] = CallState(
                claims=resolved, pending=resolved.pending,
                kinds=request_kinds(resolved.pending), pod=request.pod, special=special)
        return hit

    def _extended_wording(self, verdict: Verdict, special: ExtendedClaim,
                          state: NodeState) -> Verdict:
        """Name the extended resource when its class has too few free devices."""
        short = []
        for resource in special.served:
            wanted = requested_devices(special, resource)
            class_name = next(r.exactly.device_class_name for r in special.claim.spec.requests
                              if r.exactly is not None and any(
                                  m.request_name == r.name and m.resource_name == resource
                                  for m in special.mappings))
            free = self._free_devices(class_name, state)
            if wanted > free:
                short.append(f"{resource}: {wanted} requested, {free} "
                             f"device{'' if free == 1 else 's'} of class {class_name} "
                             "free on this node")
        if not short:
            return verdict
        return replace(verdict, reason="; ".join(short))

    def _free_devices(self, class_name: str, state: NodeState) -> int:
        device_class = self._inventory.classes.get(class_name)
        if device_class is None:
            return 0
        taken = state.allocated.devices
        count = 0
        for pool in state.view.pools:
            for device in pool.devices:
                if device.id not in taken:
                    with contextlib.suppress(CelCompileError, CelEvalError):
                        count += bool(self._inventory.class_matcher(device_class, device))
        return count

    def _shared_or_computed(self, request: CallState, state: NodeState) -> Verdict:
        shape = request.claims.shape
        signature, hardware = self._signature(request, state)
        rep = request.by_signature.get(signature) or self._representative((shape, signature))
        if rep is None or not _still_current(self._inventory, rep[0]):
            verdict = self._compute(request.pending, state, empty_key=(shape, hardware))
            rep = request.by_signature[signature] = (state, verdict)
            self._keep_representative((shape, signature), rep)
            return verdict
        request.by_signature[signature] = rep
        rep_state, rep_verdict = rep
        if rep_state.view is state.view:
            return rep_verdict
        assert rep_verdict.outcome is not None
        if rep_verdict.feasible:
            return Verdict(feasible=True, outcome=rep_verdict.outcome,
                           priority=rep_verdict.priority, claim_keys=rep_verdict.claim_keys,
                           source=rep_state.view, target=state.view)
        return from_outcome(map_outcome(rep_verdict.outcome, source=rep_state.view,
                                        target=state.view),
                            claim_keys=rep_verdict.claim_keys,
                            unresolvable=rep_verdict.unresolvable)

    def _representative(self, key: tuple[Hashable, Hashable]
                        ) -> tuple[NodeState, Verdict] | None:
        entry = self._by_signature.get(key)
        if entry is None:
            return None
        state = entry[0]()
        return None if state is None else (state, entry[1])

    def _keep_representative(self, key: tuple[Hashable, Hashable],
                             rep: tuple[NodeState, Verdict]) -> None:
        reps = self._by_signature

        def gone(ref: weakref.ref[NodeState]) -> None:
            if reps.get(key, (None,))[0] is ref:
                del reps[key]

        reps[key] = (weakref.ref(rep[0], gone), rep[1])

    def _signature(self, request: CallState, state: NodeState) -> tuple[Hashable, Hashable]:
        """(full signature, hardware signature), both including the selector matches."""
        return self._signatures(state, request.kinds)

    def equivalence(self, state: NodeState, kinds: Sequence[RequestKind]) -> Hashable:
        """Equal on two nodes exactly when requests of `kinds` face the same
        problem on them (hardware, usage, selector matches): the key answers are
        shared under, and the inventory observer's capacity counts."""
        return self._signatures(state, kinds)[0]

    def _signatures(self, state: NodeState, kinds: Sequence[RequestKind]
                    ) -> tuple[Hashable, Hashable]:
        static = self.static.of(state)
        matches = self.matches.signature(state.view, kinds, classes=self._inventory.classes,
                                         matcher=self._inventory.selectors.matches_shared,
                                         hardware=static.hardware)
        return (static.full, matches), (static.hardware, matches)

    def _compute(self, claims: Sequence[ResourceClaim], state: NodeState, *,
                 empty_key: Hashable) -> Verdict:
        # the special claim's key is the same for every pod of a namespace
        keys = tuple(c.key for c in claims if c.name != SPECIAL_CLAIM_NAME)
        outcome = self.allocate(claims, state, state.allocated)
        if outcome.feasible or outcome.error is not None:
            return from_outcome(outcome, claim_keys=keys)
        # Evicting pods frees devices; if the claims do not fit even on an empty
        # node, the scheduler must not try preemption here. A search cut short by
        # the step budget proves nothing, so that node stays resolvable. The answer
        # depends on the hardware only, so nodes of one kind share it.
        unresolvable = self._unfit_when_empty.get(empty_key)
        if unresolvable is None:
            on_empty = self.allocate(claims, state, AllocatedState())
            settled = on_empty.error is None and on_empty.steps < self._step_budget
            unresolvable = not on_empty.feasible and settled
            self._unfit_when_empty[empty_key] = unresolvable
        return from_outcome(outcome, claim_keys=keys, unresolvable=unresolvable)

    def allocate(self, claims: Sequence[ResourceClaim], state: NodeState,
                 allocated: AllocatedState) -> AllocationOutcome:
        objective = _LazyObjective(lambda: make_objective(
            node_view=state.view, allocated=allocated, config=self._topology, mode=self._mode),
            first_fit=self._mode == "advisor")
        outcome = allocate(claims, node_view=state.view, classes=self._inventory.classes,
                           allocated=allocated, features=self._features,
                           class_matcher=self._inventory.class_matcher,
                           selector_matches=self._inventory.selectors.selector_matches,
                           objective=objective, step_budget=self._step_budget,
                           known_matches=self.matches.known(state.view))
        self.stats.searched(outcome.steps, cut=outcome.steps >= self._step_budget
                            and not outcome.feasible and outcome.error is None)
        return outcome

    def answered(self, claims: PodClaims, node: str, state: NodeState, *,
                 pending: Sequence[ResourceClaim]) -> AllocationOutcome | None:
        """The allocation filter or prioritize found for this claim shape on `node`,
        if the node is still at the version it was found at."""
        answers = self._results.get(claims.shape)
        entry = answers.verdicts.get(node) if answers is not None else None
        if entry is None or entry[0] != state.view.version or not entry[1].feasible:
            return None
        outcome = entry[1].node_outcome()
        return None if outcome is None else with_claim_keys(outcome, pending)


class _LazyObjective:
    """The topology objective, built on first use: a node where nothing fits never
    asks for a score, so it never pays for its topology."""

    __slots__ = ("_build", "_built", "first_fit")

    def __init__(self, build: Callable[[], TopologyObjective], *, first_fit: bool) -> None:
        self._build = build
        self._built: TopologyObjective | None = None
        self.first_fit = first_fit

    def _objective(self) -> TopologyObjective:
        if self._built is None:
            self._built = self._build()
        return self._built

    def score(self, picks: Sequence[Device]) -> float:
        return self._objective().score(picks)

    def is_perfect(self, score: float) -> bool:
        return self._objective().is_perfect(score)

    def shape_unit(self, device: Device) -> Hashable | None:
        return self._objective().shape_unit(device)

    def twin_key(self, device: Device) -> Hashable | None:
        twin = getattr(self._objective(), "twin_key", None)
        return None if twin is None else twin(device)

    def score_class(self, device: Device) -> Hashable | None:
        return self._objective().score_class(device)

    def bound(self, picks: Sequence[Device], total: int, accelerators: int,
              rooted_nics: int) -> float:
        return self._objective().bound(picks, total, accelerators, rooted_nics)

    def bound_key(self, device: Device) -> tuple[Hashable, Hashable, Hashable] | None:
        return self._objective().bound_key(device)

    def blocks(self, total: int) -> list[frozenset[DeviceId]]:
        return self._objective().blocks(total)

    def reuse(self, units: Set[Hashable]) -> int:
        return self._objective().reuse(units)


def request_of(claims: PodClaims, *, pod: Pod | None = None) -> CallState:
    pending = claims.pending
    return CallState(claims=claims, pending=pending, kinds=request_kinds(pending),
                   pod=pod if claims.extended is not None else None)


def allocated_elsewhere(claims: PodClaims, state: NodeState) -> str | None:
    """Why an already-allocated claim rules the node out, if it does."""
    for claim in claims.allocated:
        selector = claim.allocation.node_selector if claim.allocation else None
        if selector is not None and not selector.matches(state.view.node):
            return (f"ResourceClaim {claim.key} is already allocated to devices that are "
                    f"not available on node {state.view.node.name}")
    return None


def _still_current(inventory: Inventory, state: NodeState) -> bool:
    """A representative is only trusted while its own snapshot is current: the
    allocator reads classes and selector results besides the snapshot."""
    return inventory.version(state.view.node.name) == state.view.version


def with_claim_keys(outcome: AllocationOutcome, claims: Sequence[ResourceClaim]
                    ) -> AllocationOutcome:
    """Re-key a (possibly shared) outcome to this pod's pending claims, in order."""
    keys = [c.key for c in claims]
    if [ca.claim_key for ca in outcome.claims] == keys[:len(outcome.claims)]:
        return outcome
    return AllocationOutcome(
        feasible=outcome.feasible, picks=outcome.picks, score=outcome.score,
        reason=outcome.reason, error=outcome.error, steps=outcome.steps,
        rejection=outcome.rejection,
        claims=tuple(ClaimAllocation(claim_key=k, allocation=ca.allocation)
                     for k, ca in zip(keys, outcome.claims, strict=False))
        + outcome.claims[len(keys):])
