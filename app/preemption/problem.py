"""One node's victim-search problem in canonical terms, and its solutions.

The search (`app.preemption.search`) builds a `Problem` per node: the
candidates that may go and the claims held there, in an order that is the
same on every node holding alike, with the node's devices as the
preemptor's requests match them (`NodeFacts`, `MatchLayout`). The solver
(`app.preemption.solve`) turns a problem into a `Solved`: every smallest
victim set that works, each an `Option` with its allocator `Run`, in the
names of the node it was found on; the search then names it for each node
sharing it. These types live below both so that the search can hold a
solver and the solver can read problems, with imports running one way.
Pure data and mask arithmetic, no I/O.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from app.allocator.constraints import lookup_attribute
from app.allocator.types import AllocationOutcome, NodeView
from app.extender.signature import HashedKey, map_outcome
from app.inventory import NodeState
from app.model import Device, DeviceRequestAllocationResult, Pod, ResourceClaim


@dataclass(slots=True, frozen=True)
class Victim:
    """A pod to delete, its priority, and the claims it holds on the node;
    `for_room`: it goes for the preemptor's cpu, memory or pod count, not for
    devices (`app.preemption.fit`)."""

    pod: Pod
    priority: int
    claims: tuple[str, ...]
    for_room: bool = False


@dataclass(slots=True)
class HeldClaim:
    """One claim held on the node: the eligible pods that must all go to release
    it (empty: released already), or None when someone who stays holds it."""

    claim: ResourceClaim
    needs: frozenset[int] | None
    relevant: bool
    places: tuple[int | None, ...] = ()  # per result, its device's position in the view
    # the positions of its devices when it holds them all plainly (only it
    # holds them, as a mask), else None
    plain: int | None = None

    def freeable(self, layout: MatchLayout) -> int:
        """Its devices the preemptor could use that its release frees (not
        those it shares with other claims), as a mask of positions."""
        if not self.relevant:
            return 0
        if self.plain is not None:
            return self.plain & layout.matched_mask
        return freeable_positions(self.claim, self.places, layout.matched)


def alone(result: DeviceRequestAllocationResult) -> bool:
    """Whether the claim holding `result` holds its device alone, so that its
    release frees it: not shared (`shareID`, consumed capacity), and not by
    admin access (which takes nothing from others)."""
    return result.share_id is None and not result.admin_access and not result.consumed_capacity


def freeable_positions(claim: ResourceClaim, places: Sequence[int | None],
                       matched: frozenset[int]) -> int:
    """The devices of `claim` (at `places` in the node's view, per result)
    among `matched` that its release frees (`alone`). A mask of positions."""
    assert claim.allocation is not None
    mask = 0
    for at, r in zip(places, claim.allocation.results, strict=True):
        if at is not None and at in matched and alone(r):
            mask |= 1 << at
    return mask


def plain_positions(claim: ResourceClaim, places: Sequence[int | None]) -> int:
    """The devices `claim` holds plainly (`alone`), at `places` in the
    node's view, per result. A mask of positions."""
    assert claim.allocation is not None
    mask = 0
    for at, r in zip(places, claim.allocation.results, strict=True):
        if at is not None and alone(r):
            mask |= 1 << at
    return mask


class Candidate:
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


def one_pod(i: int) -> frozenset[int]:
    return _ONES[i] if i < 64 else frozenset((i,))


@dataclass(slots=True)
class Problem:
    """One node's search problem, pods and claims in a canonical order."""

    state: NodeState
    pending: tuple[ResourceClaim, ...]
    pods: list[Candidate]  # the candidates, canonical order
    claims: list[HeldClaim]
    terminating: tuple[Pod, ...]
    facts: NodeFacts
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
    # Whether solving by parts was tried with every part known and found no
    # answer (`Solver.known_parts`): solving need not try it again.
    parts_settled: bool = False


@dataclass(slots=True, frozen=True)
class MatchLayout:
    """Which of a node's devices a shape's requests can use, by position in the
    node's view: the same on every node of equal hardware and selector
    matches, so found once per kind of node."""

    matched: frozenset[int]  # devices some request matches (or meets a CEL error on)
    matched_mask: int  # those, as a mask
    relevant: frozenset[int]  # those, and the devices drawing on the same counters
    kinds: tuple[int, ...]  # per request kind: the devices it matches, as a mask
    shared: bool  # some matched device takes several allocations: no counting


@dataclass(slots=True, eq=False)
class NodeFacts:
    """A node's devices as one shape's problems read them (`VictimSearch._facts`).
    Never changed once made; not a frozen dataclass (see `Option`), as a
    search makes one per node."""

    view: NodeView
    kinds: HashedKey  # the match columns of the shape's request kinds
    signature: Hashable  # hardware and usage (`StaticSignatures`)
    hardware: Hashable  # hardware alone
    devices: tuple[Device, ...]  # in the view's order
    position: Mapping[str, int]  # device id -> index in `devices`
    layout: MatchLayout

    def attribute(self, at: int, name: str) -> Any:
        """(kind, value) of the attribute of the device at `at` as a constraint
        reads it (a name without a domain is the driver's), None when it has none."""
        value = lookup_attribute(self.devices[at], name)
        return None if value is None else (value.kind, value.value)


def match_layout(kinds: HashedKey, devices: Sequence[Device]) -> MatchLayout:
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
    return MatchLayout(matched=frozenset(matched), matched_mask=matched_mask,
                       relevant=frozenset(relevant),
                       kinds=tuple(masks),
                       shared=any(devices[at].allow_multiple_allocations for at in matched))


@dataclass(slots=True, eq=False)
class Option:
    """One smallest victim set (candidate indexes), the claims it releases, and
    the allocation then, in the names of the node it was found on (`source`).
    Never changed once made; not a frozen dataclass, whose construction costs
    about twice as much, as a search makes several per problem."""

    victims: tuple[int, ...]
    released: tuple[int, ...]
    outcome: AllocationOutcome
    source: NodeView


@dataclass(slots=True, frozen=True)
class Run:
    """An allocator run's outcome, in the names of the node it ran on (`source`)."""

    outcome: AllocationOutcome
    source: NodeView

    def option(self, victims: tuple[int, ...], released: tuple[int, ...]) -> Option:
        return Option(victims, released, self.outcome, self.source)

    @property
    def own_text(self) -> str:
        """Why it failed, in the names of the node it ran on."""
        outcome = self.outcome
        return outcome.error or outcome.reason or "cannot allocate all claims"

    def text(self, view: NodeView) -> str:
        """Why it failed, in `view`'s names."""
        text = self.own_text
        return text if self.source is view else renamed(text, self.source, view)


@dataclass(slots=True, eq=False)
class Solved:
    """A node's problem solved in canonical terms, shared by nodes with an equal
    problem: every smallest victim set that works (`options`), so each node
    picks among them by its own pods' priorities and PDBs. `options` None:
    nothing works (`reason`); `cut`: the budget ran out before the smallest
    size was settled, so each node reprieves on its own. Never changed once
    made (not a frozen dataclass: see `Option`)."""

    view: NodeView
    options: tuple[Option, ...] | None
    reason: str = ""
    cut: bool = False


def renamed(text: str, source: NodeView, target: NodeView) -> str:
    outcome = map_outcome(AllocationOutcome(feasible=False, reason=text), source=source,
                          target=target)
    return outcome.reason or text
