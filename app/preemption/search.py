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
that releases the same claims as one already tried is not tried again. When
P's one claim keeps all its devices to one value of an attribute
(matchAttribute over every request, e.g. one PCIe root), victim sets are
enumerated per such part of the node, among the pods holding its devices
(`app.preemption.parts.part_groups` says why no smallest set is missed). Past
a budget of allocator runs a node settles for a minimal set (no victim can be
spared), reprieving pods highest priority first as kube-scheduler does.
Nodes whose problem is equal up to renaming (hardware, usage, which claims
hold which devices and whom they need to go) share one search: 500 full
nodes of one kind cost one search and 499 choices among its answers, whatever
their pods' priorities. Allocator runs are shared too, between any nodes and
problems that leave the node in the same state once their victims are gone
(hardware, usage, claim shape and matches, as the filter shares its answers);
a release of claims that each hold their devices alone is looked up by the
node's hardware and usage and the positions released, before the state it
leaves is read. Where victim sets are enumerated per part, a release that
changes one part only is shared by every node of the hardware alike in that
part, whatever the rest of it holds (`app.preemption.parts`), and where every
part's victim sets release claims of that part only, each part's smallest
sets that work are kept for nodes alike in that part (`_by_parts`).

Across nodes the answer is ranked as kube-scheduler's
`pickOneNodeForPreemption` ranks (`NodePreemption.rank_key`), then by
drax's topology score. When only the best node is wanted (the preemption
loop), each node first gets a floor by counting: the lowest highest victim
priority any answer there can have (releasing every pod up to some priority
must pass counting). Nodes are solved lowest floor first, and a node whose
floor already ranks below the best answer found is left unsolved: its answer
could not win, so the best node, its victims and its devices are those of
the full search. A node whose floor ties the best answer on every term but
the topology score is left unsolved too when the highest score any answer
there can have (`app.preemption.ceiling`) is lower, or equal and its name
later (the plan breaks full ties by name). Pure: reads the inventory,
changes nothing.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from app import garbage_collector
from app.allocator.constraints import SCALAR_KINDS, lookup_attribute
from app.allocator.types import AllocationOutcome, ClaimAllocation, NodeView
from app.bounded_cache import BoundedCache
from app.extender.answers import (
    AnswerBook,
    CallState,
    allocated_elsewhere,
    request_of,
    with_claim_keys,
)
from app.extender.claims import ClaimResolver
from app.extender.signature import HashedKey, flat_devices, map_outcome, usage_signature
from app.extender.verbs import Extender
from app.inventory import Inventory, NodeState
from app.inventory.occupants import Holder, preemption_policy_of, priority_of
from app.model import (
    Device,
    DeviceRequestAllocationResult,
    Pod,
    PodDisruptionBudget,
    ResourceClaim,
)
from app.model.objects import (
    ALLOCATION_MODE_EXACT_COUNT,
    POD_TERMINAL_PHASES,
    PREEMPT_NEVER,
)
from app.preemption.ceiling import UNBOUNDED, ceiling
from app.preemption.ceiling import Layout as CeilingLayout
from app.preemption.ceiling import layout as ceiling_layout
from app.preemption.fit import NodeFit
from app.preemption.importance import importance, pdb_violation_count, start_of
from app.preemption.parts import (
    PartLayout,
    PartNode,
    bits,
    held_positions,
    id_mask,
    mask_of,
    overcommitted,
    part_groups,
    part_layout,
    part_members,
    part_node,
    steps_bound,
)
from app.topology import priority as topology_priority
from app.topology.normalise import node_topology
from app.topology.score import ONE_ROOT, make_objective, node_fill, one_root_score

# Allocator runs one node's search may spend on exact search before it settles
# for a minimal (not necessarily smallest) set by reprieving pods one by one.
DEFAULT_TRIAL_BUDGET: Final = 512
# Victim sets looked at per allocator run allowed (most are ruled out by counting).
_ENUMERATED_PER_TRIAL: Final = 16
_SHARED_SEARCHES: Final = 4096
_NODE_FACTS: Final = 16384
_SHARED_RUNS: Final = 16384
_NOT_ENOUGH: Final = "too few devices the pod's requests match are free"
_UNKNOWN: Final = (-math.inf,) * 3  # a node's order when counting cannot tell
# kube-scheduler adds MaxInt32+1 to each victim's priority before summing, so
# every term is at least 0 and more victims of equal (even negative) priority
# never sum lower than fewer.
PRIORITY_OFFSET: Final = 2**31


# --------------------------------------------------------------------------- results


@dataclass(slots=True, frozen=True)
class Victim:
    """A pod to delete, its priority, and the claims it holds on the node;
    `for_room`: it goes for the preemptor's cpu, memory or pod count, not for
    devices (`app.preemption.fit`)."""

    pod: Pod
    priority: int
    claims: tuple[str, ...]
    for_room: bool = False


@dataclass(slots=True, frozen=True)
class NodePreemption:
    """What preempting on one node takes and gives.

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
    reserving them leaving (`victims`, `answer.terminating`) deallocates."""
    leaving = {v.pod.uid for v in victims} | {t.uid for t in answer.terminating}
    out = list(answer.released)
    seen = {c.key for c in out}
    for victim in victims:
        if not victim.for_room:
            continue
        for key in victim.claims:
            claim = claim_of(key)
            if key in seen or claim is None or claim.allocation is None or not claim.reserved_for \
                    or not {ref.uid for ref in claim.reserved_for} <= leaving:
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
    tie, by `_fewest` over what each pod can free at most), and the latest
    start."""

    top: float
    sum: float
    latest: float
    counting: _Counting | None = None
    check: _Check | None = None
    # per releasable claim (its highest priority, the devices it frees for
    # the pod, its reservers, the pods it needs gone (None: its one reserver),
    # the positions of the devices it holds plainly), and the pods that may go
    # (id -> priority)
    released: Sequence[tuple[int, int, Sequence[Pod | None], Collection[int] | None, int]] = ()
    eligible: Mapping[int, int] = field(default_factory=dict)
    _count: float | None = None
    # the search's `_fewest` answers, shared by nodes alike (`VictimSearch._fewest`)
    fewest: Callable[[_Counting, _Check, Iterable[int]], float] | None = field(
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
                    if reserver is not None and id(reserver) in self.eligible:
                        reach[id(reserver)] = reach.get(id(reserver), 0) | mask
            self._count = (self.fewest or _fewest)(self.counting, self.check, reach.values())
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

_Released = Callable[[Collection[int]], tuple[int, ...]]
_Pdbs = dict[str, list[PodDisruptionBudget]]  # namespace -> its PDBs, filled per search


@dataclass(slots=True)
class _Claim:
    """One claim held on the node: the eligible pods that must all go to release
    it (empty: released already), or None when someone who stays holds it."""

    claim: ResourceClaim
    needs: frozenset[int] | None
    relevant: bool
    places: tuple[int | None, ...] = ()  # per result, its device's position in the view
    # the positions of its devices when it holds them all plainly (only it
    # holds them, as a mask), else None
    plain: int | None = None

    def freeable(self, layout: _Layout) -> int:
        """Its devices the preemptor could use that its release frees (not
        those it shares with other claims), as a mask of positions."""
        if not self.relevant:
            return 0
        if self.plain is not None:
            return self.plain & layout.matched_mask
        return _freeable(self.claim, self.places, layout.matched)


def _alone(result: DeviceRequestAllocationResult) -> bool:
    """Whether the claim holding `result` holds its device alone, so that its
    release frees it: not shared (`shareID`, consumed capacity), and not by
    admin access (which takes nothing from others)."""
    return result.share_id is None and not result.admin_access and not result.consumed_capacity


def _freeable(claim: ResourceClaim, places: Sequence[int | None],
              matched: frozenset[int]) -> int:
    """The devices of `claim` (at `places` in the node's view, per result)
    among `matched` that its release frees (`_alone`). A mask of positions."""
    assert claim.allocation is not None
    mask = 0
    for at, r in zip(places, claim.allocation.results, strict=True):
        if at is not None and at in matched and _alone(r):
            mask |= 1 << at
    return mask


def _plain(claim: ResourceClaim, places: Sequence[int | None]) -> int:
    """The devices `claim` holds plainly (`_alone`), at `places` in the
    node's view, per result. A mask of positions."""
    assert claim.allocation is not None
    mask = 0
    for at, r in zip(places, claim.allocation.results, strict=True):
        if at is not None and _alone(r):
            mask |= 1 << at
    return mask




class _Candidate:
    """A pod a node's search may choose, its priority and the claims it holds
    there: a `Victim` once chosen (500 nodes' candidates are read, few chosen)."""

    __slots__ = ("claims", "pod", "priority")

    def __init__(self, pod: Pod, priority: int, claims: tuple[str, ...]) -> None:
        self.pod = pod
        self.priority = priority
        self.claims = claims

    def victim(self) -> Victim:
        return Victim(pod=self.pod, priority=self.priority, claims=self.claims)


# One candidate's index as a claim's `needs`: most claims need one pod gone.
_ONES: Final = tuple(frozenset((i,)) for i in range(64))


def _one(i: int) -> frozenset[int]:
    return _ONES[i] if i < 64 else frozenset((i,))


@dataclass(slots=True)
class _Holders:
    """Who holds what on a node, as the preemptor sees it (`VictimSearch._holders`):
    the pods that may go, with their priorities and holdings (by identity:
    the index hands out one object per pod), the pods already going, and
    every claim held: by key the claim (`held`), the pods it is reserved for
    (`reservers`) and its results' device ids (`devices`). Plain dicts, and
    no object per claim: the floors read 500 nodes' worth."""

    eligible: dict[int, int]
    holding: dict[int, Holder]
    terminating: list[Pod]
    held: dict[str, ResourceClaim]
    reservers: dict[str, tuple[Pod | None, ...]]
    devices: dict[str, tuple[str, ...]]

    def needs(self, reservers: Sequence[Pod | None]) -> set[int] | None:
        """The pods that may go that must all go to release a claim reserved
        for `reservers` (empty: released once the pods going are gone), or
        None when someone who stays holds it."""
        out: set[int] = set()
        for reserver in reservers:
            if reserver is not None and id(reserver) in self.eligible:
                out.add(id(reserver))
            elif reserver is None or not (reserver.deleting or reserver.terminal):
                return None
        return out


@dataclass(slots=True)
class _Problem:
    """One node's search problem, pods and claims in a canonical order."""

    state: NodeState
    pending: tuple[ResourceClaim, ...]
    pods: list[_Candidate]  # the candidates, canonical order
    claims: list[_Claim]
    terminating: tuple[Pod, ...]
    facts: _NodeFacts
    kinds: tuple[Hashable, ...] = ()  # the request kinds, in the facts' column order
    key: Hashable | None = None
    # What an allocator run reads besides the node's usage (claim shape, request
    # kinds' matches, hardware, mode): with the usage once victims are gone, it
    # keys runs shared between nodes and problems.
    base: Hashable | None = None
    # Positions of held devices that stay taken once every claim the node's
    # pods hold is released (a nomination's hold, an assumption, another claim):
    # the node's signature marks a device taken, not by how many.
    stuck: int = 0


@dataclass(slots=True, frozen=True)
class _Layout:
    """Which of a node's devices a shape's requests can use, by position in the
    node's view: the same on every node of equal hardware and selector
    matches, so found once per kind of node."""

    matched: frozenset[int]  # devices some request matches (or meets a CEL error on)
    matched_mask: int  # those, as a mask
    relevant: frozenset[int]  # those, and the devices drawing on the same counters
    kinds: tuple[int, ...]  # per request kind: the devices it matches, as a mask
    shared: bool  # some matched device takes several allocations: no counting


@dataclass(slots=True, frozen=True)
class _NodeFacts:
    """A node's devices as one shape's problems read them (`VictimSearch._facts`)."""

    view: NodeView
    kinds: HashedKey  # the match columns of the shape's request kinds
    signature: Hashable  # hardware and usage (`StaticSignatures`)
    hardware: Hashable  # hardware alone
    devices: tuple[Device, ...]  # in the view's order
    position: Mapping[str, int]  # device id -> index in `devices`
    layout: _Layout

    def attribute(self, at: int, name: str) -> Any:
        """(kind, value) of the attribute of the device at `at` as a constraint
        reads it (a name without a domain is the driver's), None when it has none."""
        value = lookup_attribute(self.devices[at], name)
        return None if value is None else (value.kind, value.value)


def _spots(results: Sequence[DeviceRequestAllocationResult],
           places: Sequence[int | None]) -> tuple[Hashable, ...]:
    """Where a claim's devices are, in node-independent terms: their places
    in the node's view (`places`, per result), plus what else a result takes
    when it is not plain."""
    if len(results) == 1:
        r, at = results[0], places[0]
        if at is not None and _alone(r):
            return (0, at)
    if None not in places and all(_alone(r) for r in results):
        return (0, *sorted(places))  # type: ignore[type-var]
    return (1, *sorted(repr((r.device_id if at is None else at, r.admin_access,
                             r.share_id is not None,
                             sorted((k, q.value) for k, q in r.consumed_capacity.items())))
                        for r, at in zip(results, places, strict=True)))


_FIRST_TWO: Final = operator.itemgetter(0, 1)


@dataclass(slots=True, frozen=True)
class _Option:
    """One smallest victim set (candidate indexes), the claims it releases, and
    the allocation then, in the names of the node it was found on (`source`)."""

    victims: tuple[int, ...]
    released: tuple[int, ...]
    outcome: AllocationOutcome
    source: NodeView


@dataclass(slots=True, frozen=True)
class _Run:
    """An allocator run's outcome, in the names of the node it ran on (`source`)."""

    outcome: AllocationOutcome
    source: NodeView

    def option(self, victims: tuple[int, ...], released: tuple[int, ...]) -> _Option:
        return _Option(victims, released, self.outcome, self.source)

    def text(self, view: NodeView) -> str:
        """Why it failed, in `view`'s names."""
        outcome = self.outcome
        text = outcome.error or outcome.reason or "cannot allocate all claims"
        return text if self.source is view else _renamed(text, self.source, view)


@dataclass(slots=True, frozen=True)
class _Sharing:
    """How one problem's parts share allocator runs (`VictimSearch._sharing`):
    its kind of node's parts, the node's use of them, the positions the base
    release frees, and the problem's own `attempt` for what is not shared."""

    layout: PartLayout
    node: PartNode
    base: int
    attempt: Callable[[tuple[int, ...]], _Run]


# A part's victim set that works (positions among the part's candidates), its
# shared run, and the intact share of its allocation.
_PartOption = tuple[tuple[int, ...], _Run, float | bool]


@dataclass(slots=True, frozen=True)
class _PartSolution:
    """A part's smallest victim sets that work, found on `view`: their size
    (None: no set of the part's candidates works) and each with its run."""

    view: NodeView
    size: int | None = None
    works: tuple[_PartOption, ...] = ()


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
        self._solved: BoundedCache[Hashable, _Solved] = BoundedCache(_SHARED_SEARCHES)
        # request kinds -> node -> its facts (checked against its view): no key
        # object per node, so a search over 500 nodes leaves less to collect
        self._node_facts: dict[Hashable, dict[str, _NodeFacts]] = {}
        self._facts_kept = 0
        # the match columns of request kinds, one object per value
        self._kinds: BoundedCache[HashedKey, HashedKey] = BoundedCache(_NODE_FACTS)
        self._runs: BoundedCache[Hashable, _Run] = BoundedCache(_SHARED_RUNS)
        self._layouts: BoundedCache[Hashable, _Layout] = BoundedCache(_SHARED_SEARCHES)
        self._ceilings: BoundedCache[Hashable, float] = BoundedCache(_SHARED_SEARCHES)
        self._shapes: BoundedCache[Hashable, CeilingLayout | None] = BoundedCache(
            _SHARED_SEARCHES)
        # per shape, its roots' ceilings (`ceiling`'s memo)
        self._root_ceilings: BoundedCache[Hashable, dict[Hashable, float | None]] = \
            BoundedCache(_SHARED_SEARCHES)
        self._values: BoundedCache[Hashable, tuple[tuple[int, ...] | None]] = BoundedCache(
            _SHARED_SEARCHES)
        self._quick_runs: BoundedCache[Hashable, _Run] = BoundedCache(_SHARED_RUNS)
        self._part_layouts: BoundedCache[Hashable, PartLayout | None] = BoundedCache(
            _SHARED_SEARCHES)
        self._needs_kept: BoundedCache[int, tuple[Any, Any, list[_Need] | None, _Check]] = \
            BoundedCache(_SHARED_SEARCHES)
        # per part's key: its smallest victim sets that work (`_part_solution`)
        self._part_solutions: BoundedCache[Hashable, _PartSolution] = BoundedCache(
            _SHARED_SEARCHES)
        # a shared run as scored on nodes of another fill: (the run, the run so scored)
        self._rescored: BoundedCache[tuple[int, float], tuple[_Run, _Run]] = BoundedCache(
            _SHARED_RUNS)
        self._unplaceable_runs: BoundedCache[Hashable, _Run] = BoundedCache(_SHARED_SEARCHES)
        self._part_shares: BoundedCache[Hashable, bool] = BoundedCache(_SHARED_SEARCHES)
        self._part_nodes: BoundedCache[Hashable, PartNode | None] = BoundedCache(_NODE_FACTS)
        # per part's run key: the run, and the intact share of its allocation
        # (True: it found none)
        self._part_runs: BoundedCache[Hashable, tuple[_Run, float | bool]] = BoundedCache(
            _SHARED_RUNS)
        self._countings: BoundedCache[Hashable, tuple[_Counting, bool]] = BoundedCache(
            _NODE_FACTS)
        self._shared_fewest = self._fewest  # one bound method for every floor
        # (counting, check, what each pod can free) -> `_fewest`: nodes alike
        # ask the same; the counting and check are held so their ids stay theirs
        self._fewests: BoundedCache[Hashable, tuple[_Counting, _Check, float]] = BoundedCache(
            _NODE_FACTS)
        # needs -> their key, hashed once (per request, while it is held)
        self._need_keys: BoundedCache[int, tuple[Sequence[_Need], HashedKey]] = BoundedCache(
            _SHARED_SEARCHES)
        # Whether anything besides the claims of the pods on nodes holds devices
        # (a nomination, an assumption): read once per search, for `_stuck`.
        self._others_hold = True
        self.trials = 0  # allocator runs so far (for benchmarks and tests)
        self.states_read = 0  # node states read once claims are released (for tests)
        self.countings = 0  # nodes as they are read by counting for floors (for tests)
        self.left_out = 0  # nodes a best-only search left unsolved (for tests)

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
        names = self._inventory.node_names() if node_names is None else node_names
        self._others_hold = bool(self._inventory.nominations()
                                 or self._inventory.assumed_claims())
        # None: no PDB anywhere, so no victim can violate one
        pdbs: _Pdbs | None = {} if self._inventory.occupants.pdb_table() else None
        fit = NodeFit(pod, self._inventory, allowed)
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
            checks: dict[int, tuple[list[_Need], _Check] | None] = {}
            wants: dict[int, tuple[int, ...] | None] = {}  # per request: `_wanted`
            for name in ready:
                state, node_request = states[name], requests[name]
                if id(node_request) not in checks:
                    needs = _needs(node_request.pending, node_request.kinds)
                    checks[id(node_request)] = None if needs is None else (needs, _check(needs))
                    wants[id(node_request)] = _wanted(node_request, checks[id(node_request)])
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
        problem = self._problem(request, state, holders)
        solved = self._solved.get(problem.key) if problem.key is not None else None
        if solved is None or not self._current(solved.view):
            solved = self._solve(problem)
            if problem.key is not None:
                self._solved.put(problem.key, solved)
        return self._express(solved, problem, pdbs, fit)

    def _floor(self, request: CallState, state: NodeState, holders: _Holders,
               needs: tuple[list[_Need], _Check] | None) -> _Floor | None:
        """Per term of `NodePreemption.rank_key` after the first two, the least
        any answer on the node can have (the highest victim priority, the
        priority sum, the victim count, the latest start), found by counting
        (`_plausible`); infinite terms when no set of pods that may go is
        enough. None when counting cannot show that the pod needs victims
        there (it may fit as the node is, or once pods already going are
        gone): only the search can tell.

        Releasing more never frees less, so the smallest t for which releasing
        every claim whose pods that may go all have priority t at most passes
        counting is a floor on the highest victim priority; the sum
        (`_priority_sum`) is at least that one victim's. The count: `_fewest`. The
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
        latest = max((start_of(holder.pod) for holder in holders.holding.values()),
                     default=-math.inf)
        # Per releasable claim: the highest priority among the pods it needs
        # gone, the devices its release frees for the pod, its reservers.
        released = []
        position = facts.position
        # Devices another holder keeps taken are neither freed for the pod nor
        # released from the fill a ceiling reads (`_frees`).
        kept = ~self._stuck(state, holders, position)
        reserved, devices = holders.reservers, holders.devices
        for claim_key, claim in holders.held.items():
            reservers, ids = reserved[claim_key], devices[claim_key]
            only = reservers[0] if len(reservers) == 1 else None
            if only is not None and id(only) in eligible:
                # one reserver that may go: the common case, without `needs`
                # (None: that reserver alone, without a collection per claim)
                gone: Collection[int] | None = None
                top = eligible[id(only)]
            else:
                found = holders.needs(reservers)
                if found is None:
                    continue
                if not found:
                    return None  # released once the pods going are gone
                gone, top = found, max(eligible[k] for k in found)
            if len(ids) == 1:
                # one device: `_plain` without its loop
                at = position.get(ids[0])
                result = claim.allocation.results[0]  # type: ignore[union-attr]
                plain = (1 << at) & kept if at is not None and result.share_id is None \
                    and not result.admin_access and not result.consumed_capacity else 0
            else:
                plain = _plain(claim, tuple(map(position.get, ids))) & kept
            released.append((top, plain & layout.matched_mask, reservers, gone, plain))
        # What counting reads of the node as it is: the same on nodes alike.
        counted_key = (facts.signature, facts.kinds, self._needs_key(needs_list))
        counted = self._countings.get(counted_key)
        if counted is None:
            self.countings += 1
            counting = _counted(facts, state.allocated.devices, (),
                                self._values_of(facts, needs_list))
            counted = self._countings.put(counted_key, (
                counting, _plausible_freed(counting, 0, check)))
        counting, enough = counted
        if enough:
            return None
        order = sorted(released, key=operator.itemgetter(0))
        freed = 0
        for i, (top, mask, _, _, _) in enumerate(order):
            freed |= mask
            if (i + 1 == len(order) or order[i + 1][0] != top) \
                    and _plausible_freed(counting, freed, check):
                return _Floor(top=top, sum=_priority_sum((top,)), latest=latest,
                              counting=counting, check=check, released=order,
                              eligible=eligible, fewest=self._shared_fewest)
        return _NOTHING_ENOUGH

    def _fewest(self, counting: _Counting, check: _Check, reach: Iterable[int]) -> float:
        """`_fewest`, shared by nodes whose pods can free the same (in any order)."""
        masks = tuple(sorted(reach))
        key = (id(counting), id(check), masks)
        hit = self._fewests.get(key)
        if hit is None or hit[0] is not counting or hit[1] is not check:
            hit = self._fewests.put(key, (counting, check, _fewest(counting, check, masks)))
        return hit[2]

    def _needs_key(self, needs: Sequence[_Need]) -> HashedKey:
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
        (`_wanted`)."""
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
            if memo is None or len(memo) >= _SHARED_SEARCHES:
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
        eligible: dict[int, int] = {}
        holding: dict[int, Holder] = {}
        held: dict[str, ResourceClaim] = {}
        reserved: dict[str, tuple[Pod | None, ...]] = {}
        devices: dict[str, tuple[str, ...]] = {}
        terminating: list[Pod] = []
        for holder in occupants.occupancy(state.view.node.name):
            other = holder.pod
            if other.uid == pod.uid and other.name == pod.name \
                    and other.namespace == pod.namespace:
                continue
            keys = holder.keys
            if len(keys) == 1:  # most pods hold one claim
                key = keys[0]
                held[key] = holder.claims[0]
                reserved[key] = holder.reservers[0]
                devices[key] = holder.devices[0]
            else:
                for key, claim, reservers, ids in zip(keys, holder.claims, holder.reservers,
                                                      holder.devices, strict=True):
                    held[key] = claim
                    reserved[key] = reservers
                    devices[key] = ids
            if other.deleting or other.phase in POD_TERMINAL_PHASES:
                terminating.append(other)
                continue
            priority = priority_of(other, occupants)
            if priority < p and (allow is None or other.uid in allow):
                eligible[id(other)] = priority
                holding[id(other)] = holder
        return _Holders(eligible=eligible, holding=holding, terminating=terminating, held=held,
                        reservers=reserved, devices=devices)

    def _problem(self, request: CallState, state: NodeState, holders: _Holders) -> _Problem:
        facts = self._facts(state, request)
        terminating = holders.terminating
        # Per claim, in the order of where its devices are: the eligible pods that
        # must all go to release it, or None when someone who stays holds it.
        entries = []
        position = facts.position
        relevant = facts.layout.relevant
        eligible = holders.eligible
        # whether no device is in two held claims, found on the way
        seen: set[int | None] = set()
        count = 0
        reserved, devices = holders.reservers, holders.devices
        for claim_key, claim in holders.held.items():
            reservers, ids = reserved[claim_key], devices[claim_key]
            # one reserver that may go: the common case, without `needs`
            needs = {id(reservers[0])} if len(reservers) == 1 and id(reservers[0]) in eligible \
                else holders.needs(reservers)
            allocation = claim.allocation
            assert allocation is not None
            if len(ids) == 1:
                # one device: `_spots` and the relevance test without their loops
                at = position.get(ids[0])
                places: tuple[int | None, ...] = (at,)
                result = allocation.results[0]
                spot = (0, at) if at is not None and result.share_id is None \
                    and not result.admin_access and not result.consumed_capacity \
                    else _spots(allocation.results, places)
                is_relevant = at in relevant
                seen.add(at)
                count += 1
            else:
                places = tuple(map(position.get, ids))
                spot = _spots(allocation.results, places)
                is_relevant = not relevant.isdisjoint(places)
                seen.update(places)
                count += len(places)
            entries.append((spot, claim_key, claim, needs, places, is_relevant))
        entries.sort(key=_FIRST_TWO)
        first_spot: dict[int, int] = {}
        useful: set[int] = set()
        for i, (_, _, _, needs, _, is_relevant) in enumerate(entries):
            if needs:
                for k in needs:
                    first_spot.setdefault(k, i)
                if is_relevant:
                    useful |= needs
        # Candidates: eligible pods that some releasable claim of use needs.
        holding = holders.holding
        # (the position in `useful` breaks full ties, as a stable sort would)
        order = sorted((first_spot[k], eligible[k], holding[k].pod.name, i, k)
                       for i, k in enumerate(useful))
        candidates = [_Candidate(holding[k].pod, eligible[k], holding[k].keys)
                      for _, _, _, _, k in order]
        index = {entry[4]: i for i, entry in enumerate(order)}
        claims = []
        shape = []
        once = len(seen) == count
        for spot, _, claim, needs, places, is_relevant in entries:
            if needs is None:
                needed: frozenset[int] | None = None
            elif len(needs) == 1:
                (k,) = needs
                needed = _one(index[k]) if k in index else None
            else:
                needed = frozenset(index[k] for k in needs) if needs <= index.keys() else None
            plain = None
            if spot[0] == 0 and once:
                if len(places) == 1:
                    plain = 1 << places[0]  # type: ignore[operator]
                else:
                    plain = 0
                    for place in places:
                        plain |= 1 << place  # type: ignore[operator]
            claims.append(_Claim(claim, needed, is_relevant, places, plain))
            shape.append((spot, needed, is_relevant))
        # The key holds everything the search reads, in node-independent terms,
        # but not the candidates' priorities or PDBs: those only choose among the
        # smallest sets, which each node does for itself (`_choose`).
        key: Hashable | None = None
        base: Hashable | None = None
        stuck = 0
        if request.special is None:
            stuck = self._stuck(state, holders, position)
            key = HashedKey((request.claims.shape, facts.signature, stuck, facts.kinds,
                             self._first_fit, len(candidates), tuple(shape)))
            base = (request.claims.shape, facts.kinds, facts.hardware, self._first_fit)
        return _Problem(state=state, pending=request.pending, pods=candidates, claims=claims,
                        terminating=tuple(terminating), facts=facts, kinds=request.kinds,
                        key=key, base=base, stuck=stuck)

    def _stuck(self, state: NodeState, holders: _Holders, position: Mapping[str, int]) -> int:
        """`_Problem.stuck` of the node, as a mask of positions."""
        if not holders.held or not self._others_hold:
            return 0
        left = self._inventory.allocated_without(state, holders.held).devices
        mask = 0
        for ids in holders.devices.values():
            for device in ids:
                at = position.get(device)
                if at is not None and device in left:
                    mask |= 1 << at
        return mask

    def _values_of(self, facts: _NodeFacts, needs: Sequence[_Need]
                   ) -> tuple[tuple[int, ...] | None, ...]:
        """`_values` per matchAttribute group of `needs`, kept per kind of node
        (the hardware holds the attribute values, the layout the positions)."""
        out = []
        for attribute in _attributes(needs):
            key = (facts.hardware, facts.kinds, attribute)
            hit = self._values.get(key)
            if hit is None:
                hit = self._values.put(key, (_values(facts, attribute),))
            out.append(hit[0])
        return tuple(out)

    def _current(self, view: NodeView) -> bool:
        """Whether an answer found on `view` still holds: the allocator also
        reads the DeviceClasses (their config goes into the allocation), and a
        class change moves every node's version."""
        return self._inventory.version(view.node.name) == view.version

    def _facts(self, state: NodeState, request: CallState) -> _NodeFacts:
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
        devices = flat_devices(view)
        layout_key = (static.hardware, kinds)
        layout = self._layouts.get(layout_key)
        if layout is None:
            layout = self._layouts.put(layout_key, _layout(kinds, devices))
        facts = _NodeFacts(view=view, kinds=kinds, signature=static.full,
                           hardware=static.hardware, devices=devices,
                           position={d.id: i for i, d in enumerate(devices)}, layout=layout)
        if hit is None:
            self._facts_kept += 1
            if self._facts_kept > _NODE_FACTS:
                self._node_facts.clear()
                self._facts_kept = 1
                per_node = self._node_facts[request.kinds] = {}
        per_node[name] = facts
        return facts

    def _solve(self, problem: _Problem) -> _Solved:
        view = problem.state.view
        attempt, released = self._attempts(problem)
        needs, check = self._needs_of(problem)
        if problem.facts.layout.shared:
            needs, check = None, _NO_CHECK
        counting = None
        if needs is not None:
            layout = problem.facts.layout
            counting = _counted(problem.facts, problem.state.allocated.devices,
                                tuple(c.freeable(layout) for c in problem.claims),
                                self._values_of(problem.facts, needs))

        def plausible(idx: tuple[int, ...]) -> bool:
            return counting is None or _plausible(counting, idx, check)

        base = released(())
        if not plausible(base):
            run = _Run(AllocationOutcome(feasible=False, reason=_NOT_ENOUGH), view)
        else:
            run = attempt(base)
        if run.outcome.error is not None:
            return _Solved(view=view, options=None,
                           reason=f"cannot allocate the pod's claims: {run.text(view)}")
        if run.outcome.feasible:
            return _Solved(view=view, options=(run.option((), base),))
        everyone = tuple(range(len(problem.pods)))
        if not everyone:
            # for the allocator's own words on why
            run = self._unplaceable(problem, needs) or attempt(base)
            return _Solved(view=view, options=None, reason=(
                "preempting cannot help: no lower-priority pod holds devices the pod could "
                f"use ({run.text(view)})"))
        def nothing_works(run: _Run) -> _Solved:
            return _Solved(view=view, options=None, reason=(
                f"even with all {len(everyone)} lower-priority pods holding devices the pod "
                f"could use gone: {run.text(view)}"))

        # With everyone gone is tried first only when counting cannot tell: a
        # smaller set that works proves it works, and saves that allocator run.
        if counting is None or not plausible(released(everyone)):
            all_gone = self._unplaceable(problem, needs) or attempt(released(everyone))
            if not all_gone.outcome.feasible:
                return nothing_works(all_gone)
        budget = self._trial_budget
        split = self._part_layout(problem, needs)
        if split is not None and self._over_limit(problem, split, released(())):
            split = None
        members = None if split is None else part_members(
            split, ((c.needs, c.places) for c in problem.claims if c.needs and c.relevant))
        sharing = None
        if split is not None and self._shares_parts(problem, needs):
            sharing = self._sharing(problem, split, attempt, released)
        if sharing is not None:
            assert members is not None
            solved = self._by_parts(problem, sharing, members, released, plausible, budget)
            if solved is not None:
                return solved
            part_run = functools.partial(self._part_run, problem, sharing)
            attempt = part_run
        groups = (None if members is None else part_groups(members)) or [everyone]
        for size in range(1, max(len(g) for g in groups) + 1):
            if sum(math.comb(len(g), size) for g in groups) > budget * _ENUMERATED_PER_TRIAL:
                return _Solved(view=view, options=None, cut=True)
            options = []
            seen: set[tuple[int, ...]] = set()
            for group in groups:
                for combo in itertools.combinations(group, size):
                    if combo in seen:
                        continue
                    seen.add(combo)
                    idx = released(combo)
                    if not plausible(idx):
                        continue  # counting rules it out: no allocator run
                    budget -= 1
                    if budget < 0:
                        return _Solved(view=view, options=None, cut=True)
                    result = attempt(idx)
                    if result.outcome.feasible:
                        options.append(result.option(combo, idx))
            if options:
                return _Solved(view=view, options=tuple(options))
        all_gone = attempt(released(everyone))
        if not all_gone.outcome.feasible:
            return nothing_works(all_gone)
        return _Solved(view=view, options=(all_gone.option(everyone, released(everyone)),))

    def _unplaceable(self, problem: _Problem, needs: Sequence[_Need] | None) -> _Run | None:
        """The allocator's answer, on any use of the node, when no device of the
        node passes the selectors of the pod's first request (known without a
        CEL error): the allocator fails there first and explains that request
        alone, by the node's hardware, so nodes of one kind share the run."""
        if problem.base is None or not needs or not problem.pending:
            return None
        first = problem.pending[0].spec.requests
        if not first or first[0].exactly is None or needs[0].count < 1:
            return None  # (a request of no device is never short)
        columns = problem.facts.kinds.value
        assert isinstance(columns, tuple)
        column = columns[needs[0].kind]
        if column is None or problem.facts.layout.kinds[needs[0].kind] or not all(
                type(m) is bool for m in column):
            return None
        hit = self._unplaceable_runs.get(problem.base)
        if hit is None or not self._current(hit.source):
            state = problem.state
            self.trials += 1
            hit = self._unplaceable_runs.put(problem.base, _Run(
                self._book.allocate(problem.pending, state, state.allocated), state.view))
        return hit

    def _needs_of(self, problem: _Problem) -> tuple[list[_Need] | None, _Check]:
        """`_needs` of the problem's claims and their `_check`, kept per request
        (every node of a search shares its claims and kinds)."""
        key = id(problem.pending)
        hit = self._needs_kept.get(key)
        if hit is None or hit[0] is not problem.pending or hit[1] is not problem.kinds:
            needs = _needs(problem.pending, problem.kinds)
            hit = self._needs_kept.put(key, (problem.pending, problem.kinds, needs,
                                             _check(needs or ())))
        return hit[2], hit[3]

    def _attempts(self, problem: _Problem) -> tuple[Callable[[tuple[int, ...]], _Run], _Released]:
        """The allocator over the node with the claims of given indexes released,
        and which claims a victim set releases. Runs are shared between nodes
        and problems whose node is the same once those claims are gone (same
        hardware, usage, claim shape and matches): a node's outcome is another's
        up to renaming, as the filter shares its answers."""
        claims = problem.claims
        state = problem.state
        outcomes: dict[tuple[int, ...], _Run] = {}

        # per releasable claim, the pods it needs gone as a mask of candidates
        needed = [(i, mask_of(c.needs)) for i, c in enumerate(claims) if c.needs is not None]

        def released(victims: Collection[int]) -> tuple[int, ...]:
            gone = mask_of(victims)
            return tuple(i for i, mask in needed if not mask & ~gone)

        def attempt(idx: tuple[int, ...]) -> _Run:
            hit = outcomes.get(idx)
            if hit is not None:
                return hit
            # Released claims that each hold their devices plainly leave a state
            # the node's own signature and their positions fix, so such a
            # release is looked up before the state it leaves is read.
            quick = _quick_key(problem, idx)
            if quick is not None:
                hit = self._quick_runs.get(quick)
                if hit is not None and self._current(hit.source):
                    outcomes[idx] = hit
                    return hit
            self.states_read += 1
            allocated = self._inventory.allocated_without(
                state, (claims[i].claim.key for i in idx))
            key = None
            hit = None
            if problem.base is not None:
                key = HashedKey((problem.base, usage_signature(
                    NodeState(view=state.view, allocated=allocated))))
                hit = self._runs.get(key)
            if hit is None or not self._current(hit.source):
                self.trials += 1
                hit = _Run(self._book.allocate(problem.pending, state, allocated), state.view)
                if key is not None:
                    self._runs.put(key, hit)
            if quick is not None:
                self._quick_runs.put(quick, hit)
            outcomes[idx] = hit
            return hit

        return attempt, released

    def _sharing(self, problem: _Problem, layout: PartLayout,
                 attempt: Callable[[tuple[int, ...]], _Run], released: _Released
                 ) -> _Sharing | None:
        """How the problem's parts share runs once nothing fits without victims
        (`app.preemption.parts`); None where they cannot (the node's use of a
        part's region, a hold that stays, a claim held otherwise than plainly)."""
        if problem.base is None or problem.stuck:
            return None
        facts = problem.facts
        node_key = (problem.base, layout, facts.signature)
        if node_key in self._part_nodes:
            node = self._part_nodes[node_key]
        else:
            node = self._part_nodes.put(node_key, part_node(
                layout, problem.state.allocated, facts.position, problem.state.view))
        base = _plain_release(problem, released(()))
        if node is None or base is None:
            return None
        return _Sharing(layout=layout, node=node, base=base, attempt=attempt)

    def _part_run(self, problem: _Problem, sharing: _Sharing, idx: tuple[int, ...]) -> _Run:
        """`attempt` for a victim set of one part: a release that changes one
        part only is looked up by the part's hardware and usage and what the
        score reads of the rest of the node, and its answer scored with the
        node's fill."""
        entry = self._part_entry(problem, sharing, idx)
        if entry is None:
            return sharing.attempt(idx)
        return self._scored(sharing, *entry)

    def _part_entry(self, problem: _Problem, sharing: _Sharing, idx: tuple[int, ...]
                    ) -> tuple[_Run, float | bool, int] | None:
        """The shared run of releasing the claims `idx`, the intact share of its
        allocation (True: none), and the units in use then on this node; None
        when the release does not change one part only."""
        freed = _plain_release(problem, idx)
        found = None if freed is None else sharing.node.key(freed, sharing.base)
        if found is None:
            return None
        key = (problem.base, found[0])
        hit = self._part_runs.get(key)
        if hit is None or not self._current(hit[0].source):
            run = sharing.attempt(idx)
            intact = self._intact_share_of(problem, idx, run)
            if intact is None:
                return None
            hit = self._part_runs.put(key, (run, intact))
        return hit[0], hit[1], found[1]

    def _scored(self, sharing: _Sharing, run: _Run, intact: float | bool, used: int) -> _Run:
        """A part's shared run with its allocation scored with the fill of a
        node with `used` units in use."""
        outcome = run.outcome
        if not outcome.feasible:
            return run
        assert isinstance(intact, float)
        score = one_root_score(self._book.topology, intact=intact,
                               fill=node_fill(used, len(sharing.layout.units)))
        if score == outcome.score:
            return run
        key = (id(run), score)
        hit = self._rescored.get(key)
        if hit is None or hit[0] is not run:
            hit = self._rescored.put(key, (run, _Run(replace(outcome, score=score),
                                                     run.source)))
        return hit[1]

    def _by_parts(self, problem: _Problem, sharing: _Sharing, members: list[set[int]],
                  released: _Released, plausible: Callable[[tuple[int, ...]], bool],
                  budget: int) -> _Solved | None:
        """The smallest victim sets when each part's victim sets change that part
        only: per part, its smallest sets that work are kept by what decides
        them (`_part_solution`), so nodes alike in a part share them too.
        None where a part's sets reach beyond it, or where the loop of
        `_solve` could run out of `budget` before the smallest size."""
        # per releasable claim: the candidates it needs (a mask), and where it holds
        claims = [(mask_of(c.needs), c.plain, c.needs) for c in problem.claims if c.needs]
        found: list[tuple[int, tuple[int, ...], tuple[_PartOption, ...]]] = []
        for i, cands in enumerate(members):
            if not cands:
                continue
            local = tuple(sorted(cands))
            solution = self._part_solution(problem, sharing, i, local, claims, released,
                                           plausible)
            if solution is None:
                return None
            if solution.size is not None:
                found.append((solution.size, local, solution.works))
        if not found:
            return None
        smallest = min(size for size, _, _ in found)
        groups = part_groups(members)
        if sum(math.comb(len(g), size) for g in groups
               for size in range(1, smallest + 1)) > budget:
            return None
        options = []
        for size, local, solved in found:
            if size != smallest:
                continue
            for chosen, run, intact in solved:
                combo = tuple(local[j] for j in chosen)
                idx = released(combo)
                freed = _plain_release(problem, idx)
                assert freed is not None
                used = sharing.node.used(freed)
                options.append(self._scored(sharing, run, intact, used).option(combo, idx))
        return _Solved(view=problem.state.view, options=tuple(options))

    def _part_solution(self, problem: _Problem, sharing: _Sharing, i: int,
                       local: tuple[int, ...],
                       claims: Sequence[tuple[int, int | None, frozenset[int]]],
                       released: _Released,
                       plausible: Callable[[tuple[int, ...]], bool]
                       ) -> _PartSolution | None:
        """Part `i`'s smallest victim sets among its candidates `local` that
        work (as positions in `local`), their shared runs and intact shares,
        and their size (None: none works); None when a set could release a
        claim beyond the part. Kept by the part's key and the claims its sets
        can release (whom they need, in `local`'s order, and where they hold),
        which fix every set's run key."""
        layout = sharing.layout
        cands = mask_of(local)
        index = {c: j for j, c in enumerate(local)}
        beyond = layout.relevant & ~sharing.base & ~layout.exclusive[i]
        shape = []
        reach = 0  # what the part's sets can free
        for needed, plain, needs in claims:
            if needed & ~cands:
                continue
            if plain is None or plain & beyond:
                return None
            reach |= plain
            # claims come in the order of where they hold: the same on nodes alike
            shape.append((tuple(sorted(index[k] for k in needs)), plain))
        node = sharing.node
        if not node.open[i]:
            return None
        taken = node.taken & ~sharing.base
        held = node.held & ~sharing.base
        # Of a group the score reads, a set's run reads only whether any unit
        # in it stays in use: those the sets can free, and whether others are.
        key = (problem.base, i, len(local), taken & layout.regions[i],
               tuple((held & group & reach, not held & group & ~reach)
                     for group in layout.groups[i]), tuple(shape))
        hit = self._part_solutions.get(key)
        if hit is not None and self._current(hit.view) and all(
                self._current(run.source) for _, run, _ in hit.works):
            return hit
        solution = _PartSolution(view=problem.state.view)
        for size in range(1, len(local) + 1):
            works = []
            for chosen in itertools.combinations(range(len(local)), size):
                idx = released(tuple(local[j] for j in chosen))
                if not plausible(idx):
                    continue
                entry = self._part_entry(problem, sharing, idx)
                if entry is None:
                    # A set releasing nothing in any region beyond what the base
                    # release frees leaves nothing that fits; any other is keyed.
                    freed = _plain_release(problem, idx)
                    if freed is None or (freed & ~sharing.base & layout.relevant):
                        return None
                    continue
                run, intact, _ = entry
                if run.outcome.feasible:
                    works.append((chosen, run, intact))
            if works:
                solution = _PartSolution(view=problem.state.view, size=size,
                                         works=tuple(works))
                break
        return self._part_solutions.put(key, solution)

    def _part_layout(self, problem: _Problem, needs: Sequence[_Need] | None
                     ) -> PartLayout | None:
        """`app.preemption.parts.part_layout` of the problem's kind of node when
        the pod's claims keep to one part (`app.preemption.parts.part_groups`), else None."""
        attribute = _part_attribute(problem, needs)
        if attribute is None:
            return None
        facts = problem.facts
        key = (facts.hardware, facts.kinds, attribute)
        if key in self._part_layouts:
            return self._part_layouts[key]
        return self._part_layouts.put(key, part_layout(
            facts.devices, facts.position, facts.layout.matched,
            lambda at: facts.attribute(at, attribute),
            node_topology(facts.view, self._book.topology)))

    def _over_limit(self, problem: _Problem, layout: PartLayout, base: tuple[int, ...]) -> bool:
        """Whether a pool with a device in a part's region is over its counters'
        limit once the claims `base` are released: the allocator then refuses
        the pool's devices until enough of it is released, by pods of any
        part, so victim sets are not enumerated per part (`app.preemption.parts.part_groups`).
        Releasing more only lowers a pool's use, so the base release decides."""
        state = problem.state
        pools = overcommitted(state.allocated, state.view)
        if pools and base:
            pools = overcommitted(self._inventory.allocated_without(
                state, (problem.claims[i].claim.key for i in base)), state.view)
        if not pools:
            return False
        devices = problem.facts.devices
        return any((devices[at].driver, devices[at].pool) in pools
                   for at in bits(layout.relevant))

    def _shares_parts(self, problem: _Problem, needs: Sequence[_Need] | None) -> bool:
        """Whether the problem's parts may share runs (`app.preemption.parts`):
        every request's matches are known without a CEL error, and no search
        on its kind of node can reach the allocator's step budget."""
        if problem.base is None or needs is None:
            return False
        key = problem.base
        if key in self._part_shares:
            return self._part_shares[key]
        facts = problem.facts
        columns = facts.kinds.value
        assert isinstance(columns, tuple)
        shares = False
        if all(column is not None and all(type(m) is bool for m in column)
               for column in columns):
            topology = node_topology(facts.view, self._book.topology)
            slots = [facts.layout.kinds[n.kind].bit_count() for n in needs if n.group < 0
                     for _ in range(n.count)]
            shares = steps_bound(slots, len(topology.roots) + len(topology.numa_nodes)) \
                < self._book.step_budget
        return self._part_shares.put(key, shares)

    def _intact_share_of(self, problem: _Problem, idx: tuple[int, ...], run: _Run
                         ) -> float | bool | None:
        """What a part's run shares: for an allocation, its score's intact share
        on this node (`Quality.intact`, the same on every node sharing the run),
        True when it found none; None when it is not to be shared (an error,
        not the one-root tier)."""
        outcome = run.outcome
        if outcome.error is not None:
            return None
        if not outcome.feasible:
            return True
        state = problem.state
        facts = problem.facts
        if run.source is not state.view:
            position = {d.id: i for i, d in enumerate(flat_devices(run.source))}
            picks = [facts.devices[position[d.id]] for d in outcome.picks]
        else:
            picks = list(outcome.picks)
        allocated = self._inventory.allocated_without(
            state, (problem.claims[i].claim.key for i in idx))
        quality = make_objective(node_view=state.view, allocated=allocated,
                                 config=self._book.topology,
                                 mode="advisor" if self._first_fit else "allocator"
                                 ).evaluate(picks)
        if quality.tier != ONE_ROOT or quality.score != outcome.score:
            return None
        return quality.intact

    def _reprieve(self, problem: _Problem) -> tuple[_Option, bool] | str:
        """Past the budget: start from every candidate gone and spare them one by
        one, highest priority first (as kube-scheduler reprieves), while the pod
        still fits. The set is minimal, not necessarily the smallest."""
        attempt, released = self._attempts(problem)
        view = problem.state.view
        victims = set(range(len(problem.pods)))
        run = attempt(released(tuple(victims)))
        if not run.outcome.feasible:
            return (f"even with all {len(victims)} lower-priority pods holding devices the "
                    f"pod could use gone: {run.text(view)}")
        for i in sorted(victims, key=lambda i: (-problem.pods[i].priority, i)):
            trial = tuple(sorted(victims - {i}))
            result = attempt(released(trial))
            if result.outcome.feasible:
                victims.discard(i)
                run = result
        chosen = tuple(sorted(victims))
        return run.option(chosen, released(chosen)), False

    def _choose(self, solved: _Solved, problem: _Problem, pdbs: _Pdbs | None,
                fit: NodeFit) -> tuple[_Option, bool]:
        """This node's pick among the shared options: one that needs the fewest
        further victims for the pod's cpu, memory and pods (`NodeFit.room`;
        none when one leaves it room), then in allocator mode
        the best topology score, then (both modes) fewest PDB violations,
        lowest priorities, canonical order; and whether the pick leaves the
        pod room (False: not asked, or it does not)."""
        assert solved.options
        if len(solved.options) == 1:
            return solved.options[0], False
        pods = problem.pods
        covered = False
        if pdbs is not None:
            namespaces = {v.pod.namespace for v in pods}
            self._pdbs_in(namespaces, pdbs)
            covered = any(pdbs[ns] for ns in namespaces)

        first_fit = self._first_fit

        def preference(option: _Option) -> tuple[float, int, int, int, tuple[int, ...]]:
            chosen = option.victims
            priorities = [pods[i].priority for i in chosen]
            return (0.0 if first_fit else -_score(option.outcome.score),
                    pdb_violations([pods[i].victim() for i in chosen], pdbs)
                    if covered and pdbs is not None else 0,
                    max(priorities, default=0), sum(priorities), chosen)

        node = problem.state.view.node.name

        def room(option: _Option) -> bool:
            return fit.fits(node, (pods[i].pod for i in option.victims), (v.pod for v in pods))

        def extra(option: _Option) -> float:
            found = fit.room(node, (pods[i].pod for i in option.victims), (v.pod for v in pods))
            return math.inf if isinstance(found, str) else len(found)

        chosen = min(solved.options, key=preference)
        if room(chosen):
            return chosen, True
        fitting = [option for option in solved.options if room(option)]
        if fitting:
            return min(fitting, key=preference), True
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

    def _express(self, solved: _Solved, problem: _Problem, pdbs: _Pdbs | None,
                 fit: NodeFit) -> tuple[NodePreemption | str, bool]:
        """A (possibly shared) canonical answer in this node's names, and
        whether the pick found that it leaves the pod room (`_choose`)."""
        view = problem.state.view
        roomy = False
        if solved.cut:
            reprieved = self._reprieve(problem)
            if isinstance(reprieved, str):
                return reprieved, False
            option, exact = reprieved
        elif solved.options is None:
            if solved.view is view:
                return solved.reason, False
            return _renamed(solved.reason, solved.view, view), False
        else:
            option, roomy = self._choose(solved, problem, pdbs, fit)
            exact = True
        outcome = option.outcome
        pods = problem.pods
        victims = tuple(sorted((pods[i].victim() for i in option.victims), key=_importance))
        released = tuple(problem.claims[i].claim for i in option.released)
        return NodePreemption(
            node=view.node.name, victims=victims,
            released_claims=tuple(c.key for c in released), released=released,
            pdb_violations=self._violations(victims, pdbs),
            score=outcome.score, priority=topology_priority(outcome.score),
            terminating=problem.terminating, exact=exact,
            candidates=tuple([c.pod for c in pods]),
            outcome=outcome, source=option.source, target=view,
            pending=problem.pending), roomy


@dataclass(slots=True, frozen=True)
class _Need:
    """A count every allocation needs, checked by counting before the allocator
    runs: `count` distinct devices matching request kind `kind`, all with one
    value of `attribute` when it is set (a matchAttribute constraint)."""

    kind: int
    count: int
    group: int = -1  # needs of one group share one attribute value
    attribute: str | None = None


def _needs(pending: Sequence[ResourceClaim], kinds: Sequence[Hashable]) -> list[_Need] | None:
    """What counting can rule out for these claims: per `exactly` request its
    count of its kind, and per matchAttribute constraint the same per value.
    None when nothing can be said plainly (admin access may share a taken
    device; an `All` request takes whatever there is)."""
    out: list[_Need] = []
    group = 0
    for claim in pending:
        by_name: dict[str, _Need] = {}
        for request in claim.spec.requests:
            exact = request.exactly
            if exact is None:
                continue  # firstAvailable: any one subrequest; no plain count
            if exact.allocation_mode != ALLOCATION_MODE_EXACT_COUNT or exact.admin_access:
                return None
            kind = kinds.index((exact.device_class_name, exact.selectors))
            need = _Need(kind=kind, count=exact.count)
            by_name[request.name] = need
            out.append(need)
        for constraint in claim.spec.constraints:
            if constraint.match_attribute is None:
                continue
            names = constraint.requests or tuple(r.name for r in claim.spec.requests)
            if not all(n in by_name for n in names):
                continue
            out += [_Need(kind=by_name[n].kind, count=by_name[n].count, group=group,
                          attribute=constraint.match_attribute) for n in names]
            group += 1
    return out


def _layout(kinds: HashedKey, devices: Sequence[Device]) -> _Layout:
    """The positions the preemptor's requests match (`kinds`: the match columns
    of its request kinds, over `devices`; a CEL error counts, the allocator
    must meet it), those plus the devices drawing on the same shared counters
    (freeing them frees counters it needs), and per kind the devices it
    matches plainly."""
    columns = kinds.value
    assert isinstance(columns, tuple)
    matched: set[int] = set()
    masks = []
    counter_sets = set()
    for column in columns:
        mask = 0
        if column is not None:
            for at, match in enumerate(column):
                if match is not False:
                    matched.add(at)
                    if match is True:
                        mask |= 1 << at
        masks.append(mask)
    for at in matched:
        device = devices[at]
        for use in device.consumes_counters:
            counter_sets.add((device.driver, device.pool, use.counter_set))
    relevant = set(matched)
    if counter_sets:
        for at, device in enumerate(devices):
            if any((device.driver, device.pool, use.counter_set) in counter_sets
                   for use in device.consumes_counters):
                relevant.add(at)
    matched_mask = 0
    for at in matched:
        matched_mask |= 1 << at
    return _Layout(matched=frozenset(matched), matched_mask=matched_mask,
                   relevant=frozenset(relevant),
                   kinds=tuple(masks),
                   shared=any(devices[at].allow_multiple_allocations for at in matched))


@dataclass(slots=True, frozen=True)
class _Counting:
    """What counting reads of one problem, as masks of device positions: per
    claim what its release frees of the devices the preemptor's requests
    match, per request kind (the devices nobody holds, those held), and per
    matchAttribute group the devices of each of its values (None: values
    counting cannot compare)."""

    freeable: tuple[int, ...]
    by_kind: tuple[tuple[int, int], ...]
    values: tuple[tuple[int, ...] | None, ...]


def _counted(facts: _NodeFacts, taken_ids: Collection[str], freeable: tuple[int, ...],
             values: tuple[tuple[int, ...] | None, ...]) -> _Counting:
    """Counting's reading of a node whose devices `taken_ids` are taken, with
    `freeable` per claim and `values` per matchAttribute group (`_values`)."""
    taken = id_mask(taken_ids, facts.position)
    return _Counting(freeable=freeable,
                     by_kind=tuple((mask & ~taken, mask & taken)
                                   for mask in facts.layout.kinds),
                     values=values)


def _attributes(needs: Sequence[_Need]) -> tuple[str, ...]:
    """The attribute of each matchAttribute group of `needs`, in group order."""
    groups: dict[int, str] = {}
    for need in needs:
        if need.group >= 0 and need.attribute is not None:
            groups[need.group] = need.attribute
    return tuple(groups[group] for group in range(len(groups)))


def _values(facts: _NodeFacts, attribute: str) -> tuple[int, ...] | None:
    """The devices the requests match, by their value of `attribute`, as masks;
    None when some value is not one counting can compare (a list, a version)."""
    by_value: dict[Any, int] = {}
    for at in facts.layout.matched:
        value = facts.attribute(at, attribute)
        if value is not None:
            by_value[value] = by_value.get(value, 0) | (1 << at)
    plain = all(kind in SCALAR_KINDS for kind, _ in by_value)
    return tuple(by_value.values()) if plain else None


@dataclass(slots=True, frozen=True)
class _Check:
    """`_Need`s arranged for `_plausible`: the plain needs as (kind, count),
    their total, and per matchAttribute group its index and members."""

    plain: tuple[tuple[int, int], ...]
    total: int
    groups: tuple[tuple[int, tuple[tuple[int, int], ...]], ...]


def _check(needs: Sequence[_Need]) -> _Check:
    groups: dict[int, list[tuple[int, int]]] = {}
    for need in needs:
        if need.group >= 0:
            groups.setdefault(need.group, []).append((need.kind, need.count))
    plain = tuple((n.kind, n.count) for n in needs if n.group < 0)
    return _Check(plain=plain, total=sum(count for _, count in plain),
                  groups=tuple((g, tuple(m)) for g, m in groups.items()))


_NO_CHECK: Final = _check(())


def _fewest(counting: _Counting, check: _Check, reach: Iterable[int]) -> int | float:
    """The fewest pods that may free enough, when pod i can free at most the
    devices `reach[i]` (those of every claim it is needed for): each check of
    `_plausible` needs its shortfall of free devices made up, and a set of
    pods frees no more than the sum of what each reaches."""
    reach = list(reach)
    held = [h for _, h in counting.by_kind]
    free = [f for f, _ in counting.by_kind]

    def least(short: int, within: int) -> int | float:
        if short <= 0:
            return 0
        gains = sorted(((m & within).bit_count() for m in reach), reverse=True)
        for i, gain in enumerate(itertools.accumulate(gains)):
            if gain >= short:
                return i + 1
        return math.inf

    fewest: int | float = 1
    if check.total:
        union_free = union_held = 0
        for f, h in counting.by_kind:
            union_free |= f
            union_held |= h
        fewest = max(fewest, least(check.total - union_free.bit_count(), union_held))
    for kind, count in check.plain:
        fewest = max(fewest, least(count - free[kind].bit_count(), held[kind]))
    for group, members in check.groups:
        values = counting.values[group]
        if values is not None:
            fewest = max(fewest, min((max(least(count - (free[kind] & mask).bit_count(),
                                                held[kind] & mask)
                                          for kind, count in members)
                                      for mask in values), default=math.inf))
    return fewest


def _plausible(counting: _Counting, released: tuple[int, ...], check: _Check) -> bool:
    """False when counting alone shows the preemptor cannot fit once the
    claims `released` go: too few free devices of a request's kind, or no
    value of a matchAttribute constraint with enough of them for every
    request it binds (a necessary condition; the allocator decides the rest)."""
    freeable = counting.freeable
    freed = 0
    for i in released:
        freed |= freeable[i]
    return _plausible_freed(counting, freed, check)


def _plausible_freed(counting: _Counting, freed: int, check: _Check) -> bool:
    """`_plausible` with the devices the released claims free (`freed`, a mask)."""
    available = [free | (held & freed) for free, held in counting.by_kind]
    if check.total:
        union = 0
        for mask in available:
            union |= mask
        if check.total > union.bit_count():
            return False
    for kind, count in check.plain:
        if available[kind].bit_count() < count:
            return False
    for group, members in check.groups:
        values = counting.values[group]
        if values is not None and not any(
                all((available[kind] & mask).bit_count() >= count for kind, count in members)
                for mask in values):
            return False
    return True


def _part_attribute(problem: _Problem, needs: Sequence[_Need] | None) -> str | None:
    """The attribute whose one value every allocation of the pod keeps to (its
    one claim binds all its requests with it), or None (`app.preemption.parts.part_groups`)."""
    if needs is None or len(problem.pending) != 1:
        return None
    requests = len(problem.pending[0].spec.requests)
    groups: dict[int, list[_Need]] = {}
    for need in needs:
        if need.group >= 0:
            groups.setdefault(need.group, []).append(need)
    return next((m[0].attribute for m in groups.values() if len(m) == requests), None)


def _wanted(request: CallState, needs: tuple[list[_Need], _Check] | None
            ) -> tuple[int, ...] | None:
    """Per request kind, how many devices the pod's requests of that kind
    take; None when counting cannot tell for some request."""
    if needs is None:
        return None
    plain = [n for n in needs[0] if n.group < 0]
    if len(plain) != sum(len(c.spec.requests) for c in request.pending):
        return None  # some request takes what counting cannot tell
    wanted = [0] * len(request.kinds)
    for need in plain:
        wanted[need.kind] += need.count
    return tuple(wanted)


def _plain_release(problem: _Problem, idx: tuple[int, ...]) -> int | None:
    """The positions the claims `idx` free, when each holds its devices plainly
    (`_Claim.plain`); None otherwise."""
    freed = 0
    for i in idx:
        plain = problem.claims[i].plain
        if plain is None:
            return None
        freed |= plain
    return freed


def _quick_key(problem: _Problem, idx: tuple[int, ...]) -> Hashable | None:
    """What fixes the node's state once the claims `idx` are gone, when each
    of them holds its devices plainly (`_Claim.plain`): the kind of run, the
    node's hardware and usage, the positions held by others too, and the
    positions released; None otherwise."""
    gone = None if problem.base is None else _plain_release(problem, idx)
    if gone is None:
        return None
    return (problem.base, problem.facts.signature, problem.stuck, gone)


def _frees(floor: _Floor) -> tuple[tuple[int, int], ...]:
    """Per position of a device some victim set can release (held plainly by
    a releasable claim, and by no nomination or assumption that stays), the
    devices surely released with it (a mask of positions): those its claim
    holds plainly, and those of every claim needing no pod beyond the ones
    that claim needs gone. In position order, so nodes alike share one
    ceiling."""
    by_pods: dict[frozenset[int], int] = {}
    claims = []
    for _, _, reservers, gone, plain in floor.released:
        pods = frozenset((id(reservers[0]),) if gone is None else gone)
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


def _renamed(text: str, source: NodeView, target: NodeView) -> str:
    outcome = map_outcome(AllocationOutcome(feasible=False, reason=text), source=source,
                          target=target)
    return outcome.reason or text
