"""Solving one node's victim-search problem: its smallest victim sets that work.

The search (`app.preemption.search`) hands the solver a node's `Problem`
(candidates and held claims in canonical order); the solver tries victim
sets in increasing size and keeps every set of the smallest size that
works, each with the allocator's answer then (`Solved`), for the search to
pick among per node. The allocator is the filter's (`AnswerBook.allocate`:
CEL, constraints, counters, taints, extended resources, the topology
objective). A set that frees fewer matching devices than the preemptor's
requests take is ruled out by counting, without the allocator
(`app.preemption.counting`); a set that releases the same claims as one
already tried is not tried again. When the preemptor's one claim keeps all
its devices to one value of an attribute (matchAttribute over every
request, e.g. one PCIe root), victim sets are enumerated per such part of
the node, among the pods holding its devices (`app.preemption.parts.
part_groups` says why no smallest set is missed). Past a budget of
allocator runs a node settles for a minimal set (no victim can be spared),
reprieving pods highest priority first as kube-scheduler does (`reprieve`).

Work is shared as widely as it stays exact, because 500 nodes alike would
otherwise repeat one search 500 times. Problems equal up to renaming share
one solution (`solve`, by the problem's key); problems on nodes of one
hardware and usage share what the node is before any victim goes (its run,
its parts, whether a pool is over its counters' limit: `_ground`), and a
reason in the words of the node it was found on, renamed only for a node it
names something of. Allocator runs are shared
between any nodes and problems that leave the node in the same state once
their victims are gone (hardware, usage, claim shape and matches, as the
filter shares its answers); a release of claims that each hold their
devices alone is looked up by the node's hardware and usage and the
positions released, before the state it leaves is read. Where victim sets
are enumerated per part, a release that changes one part only is shared
by every node of the hardware alike in that part, whatever the rest of it
holds (`app.preemption.parts`), and where every part's victim sets release
claims of that part only, each part's smallest sets that work are kept for
nodes alike in that part (`_by_parts`). A search's problems mostly differ
from one another in a part or two, so a problem whose node was solved as it
is and whose every part's smallest sets are known is solved from them before
its claims are read (`known_parts`). The solver is one object per
`VictimSearch` because these caches outlive one preemptor; whether what they
hold still holds is read once per node and search (`current`). Pure: reads
the inventory, changes nothing.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from app.allocator.types import AllocationOutcome, NodeView
from app.bounded_cache import BoundedCache
from app.extender.answers import AnswerBook
from app.extender.signature import HashedKey, flat_devices, usage_signature
from app.inventory import Inventory, NodeState
from app.preemption.counting import (
    NO_CHECK,
    Check,
    Counting,
    Need,
    check_of,
    counting_of,
    group_attributes,
    needs_for,
    plausible_freed,
    plausible_release,
    values_by,
)
from app.preemption.parts import (
    PartLayout,
    PartNode,
    bits,
    mask_of,
    overcommitted,
    part_groups,
    part_layout,
    part_members,
    part_node,
    steps_bound,
)
from app.preemption.problem import NodeFacts, Option, Problem, Run, Solved
from app.topology.normalise import node_topology
from app.topology.score import ONE_ROOT, make_objective, node_fill, one_root_score

# Allocator runs one node's search may spend on exact search before it settles
# for a minimal (not necessarily smallest) set by reprieving pods one by one.
DEFAULT_TRIAL_BUDGET: Final = 512
# Victim sets looked at per allocator run allowed (most are ruled out by counting).
_ENUMERATED_PER_TRIAL: Final = 16
# Bounds of the caches shared across nodes and preemptors: problems and
# kinds of node, allocator runs, nodes.
SHARED_SEARCHES: Final = 4096
SHARED_RUNS: Final = 16384
NODE_FACTS: Final = 16384
_NOT_ENOUGH_OUTCOME: Final = AllocationOutcome(
    feasible=False, reason="too few devices the pod's requests match are free")

_Released = Callable[[Collection[int]], tuple[int, ...]]


@dataclass(slots=True, frozen=True)
class _Ground:
    """What solving reads of a node before any victim goes (`Solver._ground`):
    the allocator's run there (or counting's word that too few devices are
    free), the part layout where victim sets are enumerated per part (None:
    they are not), and the node's use of its parts where their runs are
    shared (None: they are not)."""

    run: Run
    split: PartLayout | None
    node: PartNode | None


@dataclass(slots=True, eq=False)
class _Sharing:
    """How one problem's parts share allocator runs (`Solver._ground`):
    its kind of node's parts, the node's use of them, the positions the base
    release frees, and the problem's own `attempt` for what is not shared."""

    layout: PartLayout
    node: PartNode
    base: int
    attempt: Callable[[tuple[int, ...]], Run]


# A part's victim set that works (positions among the part's candidates), its
# shared run, and the intact share of its allocation.
_PartOption = tuple[tuple[int, ...], Run, float | bool]


@dataclass(slots=True, frozen=True)
class _PartSolution:
    """A part's smallest victim sets that work, found on `view`: their size
    (None: no set of the part's candidates works) and each with its run;
    `views`: `view` and the nodes the runs ran on, each once (what must be
    unchanged for it to hold)."""

    view: NodeView
    size: int | None = None
    works: tuple[_PartOption, ...] = ()
    views: tuple[NodeView, ...] = ()


def _part_attribute(problem: Problem, needs: Sequence[Need] | None) -> str | None:
    """The attribute whose one value every allocation of the pod keeps to (its
    one claim binds all its requests with it), or None (`app.preemption.parts.part_groups`)."""
    if needs is None or len(problem.pending) != 1:
        return None
    requests = len(problem.pending[0].spec.requests)
    groups: dict[int, list[Need]] = {}
    for need in needs:
        if need.group >= 0:
            groups.setdefault(need.group, []).append(need)
    return next((m[0].attribute for m in groups.values() if len(m) == requests), None)


def _plain_release(problem: Problem, idx: tuple[int, ...]) -> int | None:
    """The positions the claims `idx` free, when each holds its devices plainly
    (`HeldClaim.plain`); None otherwise."""
    freed = 0
    for i in idx:
        plain = problem.claims[i].plain
        if plain is None:
            return None
        freed |= plain
    return freed


def _quick_key(problem: Problem, idx: tuple[int, ...]) -> Hashable | None:
    """What fixes the node's state once the claims `idx` are gone, when each
    of them holds its devices plainly (`HeldClaim.plain`): the kind of run, the
    node's hardware and usage, the positions held by others too, and the
    positions released; None otherwise."""
    gone = None if problem.base is None else _plain_release(problem, idx)
    if gone is None:
        return None
    return (problem.base, problem.facts.signature, problem.stuck, gone)


def _unsolved(idx: tuple[int, ...]) -> Run:
    """`_Sharing.attempt` where only what is solved already is read (`Solver.known_parts`)."""
    raise AssertionError("known_parts runs no allocator")


class Solver:
    """Solves victim-search problems over one inventory with the filter's
    allocator (`book`), keeping what nodes alike share."""

    def __init__(self, inventory: Inventory, *, book: AnswerBook, first_fit: bool,
                 trial_budget: int = DEFAULT_TRIAL_BUDGET) -> None:
        self._inventory = inventory
        self._book = book
        self._first_fit = first_fit
        self._trial_budget = trial_budget
        self._solved: BoundedCache[Hashable, Solved] = BoundedCache(SHARED_SEARCHES)
        self._runs: BoundedCache[Hashable, Run] = BoundedCache(SHARED_RUNS)
        self._values: BoundedCache[Hashable, tuple[tuple[int, ...] | None]] = BoundedCache(
            SHARED_SEARCHES)
        self._quick_runs: BoundedCache[Hashable, Run] = BoundedCache(SHARED_RUNS)
        self._part_layouts: BoundedCache[Hashable, PartLayout | None] = BoundedCache(
            SHARED_SEARCHES)
        self._needs_kept: BoundedCache[int, tuple[Any, Any, list[Need] | None, Check]] = \
            BoundedCache(SHARED_SEARCHES)
        # per part's key: its smallest victim sets that work (`_part_solution`)
        self._part_solutions: BoundedCache[Hashable, _PartSolution] = BoundedCache(
            SHARED_SEARCHES)
        # a shared run as scored on nodes with so many units in use: (the run,
        # the run so scored)
        self._rescored: BoundedCache[tuple[int, float, int], tuple[Run, Run]] = BoundedCache(
            SHARED_RUNS)
        self._unplaceable_runs: BoundedCache[Hashable, Run] = BoundedCache(SHARED_SEARCHES)
        self._part_shares: BoundedCache[Hashable, bool] = BoundedCache(SHARED_SEARCHES)
        self._part_nodes: BoundedCache[Hashable, PartNode | None] = BoundedCache(NODE_FACTS)
        # per part's run key: the run, and the intact share of its allocation
        # (True: it found none)
        self._part_runs: BoundedCache[Hashable, tuple[Run, float | bool]] = BoundedCache(
            SHARED_RUNS)
        # per request's run key, node signature and holds: `_ground`
        self._grounds: BoundedCache[Hashable, _Ground] = BoundedCache(NODE_FACTS)
        # per node signature: `_over`, and per it and request kinds `_by_kind`
        self._over_masks: BoundedCache[Hashable, tuple[bool, int]] = BoundedCache(NODE_FACTS)
        self._by_kinds: BoundedCache[Hashable, tuple[tuple[int, int], ...]] = BoundedCache(
            NODE_FACTS)
        # per node view (held, so its id stays its own): whether answers found
        # on it still hold (`current`), for one search (`begin`)
        self._current: dict[int, tuple[NodeView, bool]] = {}
        self._unknown_parts = 0  # parts `known_parts` found not solved yet
        self.trials = 0  # allocator runs so far (for benchmarks and tests)
        self.limit_checks = 0  # node usages read for counters over their limit (for tests)
        self.grounds = 0  # nodes read before any victim goes (`_ground`, for tests)
        self.states_read = 0  # node states read once claims are released (for tests)

    @property
    def problems(self) -> int:
        """Distinct problems solved and kept (for benchmarks)."""
        return len(self._solved)

    def solve(self, problem: Problem) -> Solved:
        """The problem's solution, shared by problems with its key while the
        node it was found on is unchanged."""
        solved = self.known(problem.key)
        if solved is None:
            solved = self._solve(problem)
            if problem.key is not None:
                self._solved.put(problem.key, solved)
        return solved

    def known(self, key: Hashable | None) -> Solved | None:
        """The solution kept for problems with `key` (`solve`), or None: what
        is read of a problem before its claims are (`Problem.claims`)."""
        solved = self._solved.get(key) if key is not None else None
        return solved if solved is not None and self.current(solved.view) else None

    def known_parts(self, problem: Problem, needs_of: Sequence[frozenset[int] | None],
                    relevant: Sequence[bool], plain_of: Sequence[int | None],
                    places: Sequence[Sequence[int | None]]) -> Solved | None:
        """The problem's solution (`solve`) read from what nodes alike solved
        already, before its claims are (`Problem.claims`; here per claim its
        `HeldClaim` fields): where no claim is released already, its kind of
        node as it is was solved (`_ground`) and victim sets are enumerated
        per part, and each part's smallest sets that work are known
        (`_by_parts`). Most problems of a search differ from the others in
        one part or two, so most are solved so. None: `solve` it. Kept as
        `solve` keeps it."""
        if problem.base is None or not problem.pods or problem.facts.layout.shared:
            return None
        for needs in needs_of:
            if needs is not None and not needs:
                return None  # a base release: `_ground` keeps none
        ground = self._grounds.get((problem.base, problem.facts.signature, problem.stuck))
        if ground is None or not self.current(ground.run.source):
            ground = self._ground_as_is(problem)
        outcome = ground.run.outcome
        split, node = ground.split, ground.node
        if outcome.error is not None or outcome.feasible or split is None or node is None:
            return None
        held: list[tuple[frozenset[int], int]] = []
        for c, needs in enumerate(needs_of):
            if needs and relevant[c]:
                plain = plain_of[c]
                held.append((needs, mask_of(at for at in places[c] if at is not None)
                             if plain is None else plain))
        members = part_members(split, held)
        sharing = _Sharing(layout=split, node=node, base=0, attempt=_unsolved)
        unknown = self._unknown_parts
        solved = self._by_parts(problem, sharing, members, needs_of, plain_of, None, None,
                                self._trial_budget)
        if solved is not None:
            self._solved.put(problem.key, solved)
        elif unknown == self._unknown_parts:
            # every part was known: asking again with the claims read finds no
            # more (no part works, or one reaches beyond itself)
            problem.parts_settled = True
        return solved

    def _ground_as_is(self, problem: Problem) -> _Ground:
        """`_ground` of a problem none of whose claims is released already:
        it reads the node as it is, none of the claims (`Problem.claims` may
        be left out)."""
        needs, check = self._needs_of(problem)
        attempt, _ = self._attempts(problem)

        def plausible(idx: tuple[int, ...]) -> bool:
            assert not idx
            return needs is None or plausible_freed(Counting(
                freeable=(), by_kind=self._by_kind(problem),
                values=self.values_of(problem.facts, needs)), 0, check)

        return self._ground(problem, needs, attempt, plausible, ())

    def values_of(self, facts: NodeFacts, needs: Sequence[Need]
                 ) -> tuple[tuple[int, ...] | None, ...]:
        """`values_by` per matchAttribute group of `needs`, kept per kind of node
        (the hardware holds the attribute values, the layout the positions)."""
        out = []
        for attribute in group_attributes(needs):
            key = (facts.hardware, facts.kinds, attribute)
            hit = self._values.get(key)
            if hit is None:
                hit = self._values.put(key, (values_by(facts, attribute),))
            out.append(hit[0])
        return tuple(out)

    def begin(self) -> None:
        """A search starts: what `current` found for the last one is forgotten."""
        self._current = {}

    def current(self, view: NodeView) -> bool:
        """Whether an answer found on `view` still holds: the allocator also
        reads the DeviceClasses (their config goes into the allocation), and a
        class change moves every node's version. Asked a few times per node
        and search, so kept per view until the next search (`begin`): one
        search reads the nodes' states as they were when it started."""
        hit = self._current.get(id(view))
        if hit is not None and hit[0] is view:
            return hit[1]
        found = self._inventory.version(view.node.name) == view.version
        self._current[id(view)] = (view, found)
        return found

    def _all_current(self, views: Sequence[NodeView]) -> bool:
        """Whether answers found on each of `views` still hold (`current`)."""
        return all(map(self.current, views))

    def _solve(self, problem: Problem) -> Solved:
        view = problem.state.view
        attempt, released = self._attempts(problem)
        needs, check = self._needs_of(problem)
        if problem.facts.layout.shared:
            needs, check = None, NO_CHECK
        counting: Counting | None = None  # built when first asked

        def plausible(idx: tuple[int, ...]) -> bool:
            nonlocal counting
            if needs is None:
                return True
            if counting is None and not idx:
                # the node as it is (most problems ask nothing more): no claim's
                # devices read
                return plausible_freed(Counting(
                    freeable=(), by_kind=self._by_kind(problem),
                    values=self.values_of(problem.facts, needs)), 0, check)
            if counting is None:
                layout = problem.facts.layout
                counting = Counting(freeable=tuple([c.freeable(layout) for c in problem.claims]),
                                    by_kind=self._by_kind(problem),
                                    values=self.values_of(problem.facts, needs))
            return plausible_release(counting, idx, check)

        base = released(())
        ground = self._ground(problem, needs, attempt, plausible, base)
        run = ground.run
        # A reason is kept in the words of the node its run was found on (the
        # solution's `view`), renamed only for a node it names something of.
        if run.outcome.error is not None:
            return Solved(view=run.source, options=None,
                          reason=f"cannot allocate the pod's claims: {run.own_text}")
        if run.outcome.feasible:
            return Solved(view=view, options=(run.option((), base),))
        everyone = tuple(range(len(problem.pods)))
        if not everyone:
            # for the allocator's own words on why
            run = self._unplaceable(problem, needs) or attempt(base)
            return Solved(view=run.source, options=None, reason=(
                "preempting cannot help: no lower-priority pod holds devices the pod could "
                f"use ({run.own_text})"))
        def nothing_works(run: Run) -> Solved:
            return Solved(view=run.source, options=None, reason=(
                f"even with all {len(everyone)} lower-priority pods holding devices the pod "
                f"could use gone: {run.own_text}"))

        budget = self._trial_budget
        split = ground.split
        members = None if split is None else part_members(split, [
            (c.needs, mask_of(at for at in c.places if at is not None) if c.plain is None
             else c.plain) for c in problem.claims if c.needs and c.relevant])
        sharing = None
        if split is not None and ground.node is not None:
            freed = _plain_release(problem, base)
            if freed is not None:
                sharing = _Sharing(layout=split, node=ground.node, base=freed, attempt=attempt)
        if sharing is not None and not problem.parts_settled:
            assert members is not None
            # Before the check with everyone gone: a set that works proves that
            # everyone gone works too (releasing more never frees less), and a
            # set counting rules out costs no allocator run.
            solved = self._by_parts(problem, sharing, members,
                                    [c.needs for c in problem.claims],
                                    [c.plain for c in problem.claims],
                                    released, plausible, budget)
            if solved is not None:
                return solved
        # With everyone gone is tried first only when counting cannot tell: a
        # smaller set that works proves it works, and saves that allocator run.
        if needs is None or not plausible(released(everyone)):
            all_gone = self._unplaceable(problem, needs) or attempt(released(everyone))
            if not all_gone.outcome.feasible:
                return nothing_works(all_gone)
        if sharing is not None:
            attempt = functools.partial(self._part_run, problem, sharing)
        groups = (None if members is None else part_groups(members)) or [everyone]
        for size in range(1, max(len(g) for g in groups) + 1):
            if sum(math.comb(len(g), size) for g in groups) > budget * _ENUMERATED_PER_TRIAL:
                return Solved(view=view, options=None, cut=True)
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
                        return Solved(view=view, options=None, cut=True)
                    result = attempt(idx)
                    if result.outcome.feasible:
                        options.append(result.option(combo, idx))
            if options:
                return Solved(view=view, options=tuple(options))
        all_gone = attempt(released(everyone))
        if not all_gone.outcome.feasible:
            return nothing_works(all_gone)
        return Solved(view=view, options=(all_gone.option(everyone, released(everyone)),))

    def _unplaceable(self, problem: Problem, needs: Sequence[Need] | None) -> Run | None:
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
        if hit is None or not self.current(hit.source):
            state = problem.state
            self.trials += 1
            hit = self._unplaceable_runs.put(problem.base, Run(
                self._book.allocate(problem.pending, state, state.allocated), state.view))
        return hit

    def _needs_of(self, problem: Problem) -> tuple[list[Need] | None, Check]:
        """`needs_for` of the problem's claims and their `check_of`, kept per request
        (every node of a search shares its claims and kinds)."""
        key = id(problem.pending)
        hit = self._needs_kept.get(key)
        if hit is None or hit[0] is not problem.pending or hit[1] is not problem.kinds:
            needs = needs_for(problem.pending, problem.kinds)
            hit = self._needs_kept.put(key, (problem.pending, problem.kinds, needs,
                                             check_of(needs or ())))
        return hit[2], hit[3]

    def _attempts(self, problem: Problem) -> tuple[Callable[[tuple[int, ...]], Run], _Released]:
        """The allocator over the node with the claims of given indexes released,
        and which claims a victim set releases. Runs are shared between nodes
        and problems whose node is the same once those claims are gone (same
        hardware, usage, claim shape and matches): a node's outcome is another's
        up to renaming, as the filter shares its answers."""
        claims = problem.claims
        state = problem.state
        outcomes: dict[tuple[int, ...], Run] = {}

        # The claims released already (needing no pod gone), those every
        # candidate gone releases (every releasable claim), and, once a victim
        # set asks, per candidate the other releasable claims needing it, with
        # the pods each needs gone as a mask of candidates: a victim set
        # releases those of its pods' claims whose pods all go.
        always: list[int] = []
        releasable: list[int] = []
        for i, claim in enumerate(claims):
            needs = claim.needs
            if needs is not None:
                releasable.append(i)
                if not needs:
                    always.append(i)
        base, every = tuple(always), tuple(releasable)
        candidates = len(problem.pods)
        by_pod: dict[int, list[tuple[int, int]]] | None = None

        def needing() -> dict[int, list[tuple[int, int]]]:
            nonlocal by_pod
            if by_pod is None:
                by_pod = {}
                for i in releasable:
                    needs = claims[i].needs
                    assert needs is not None
                    if len(needs) == 1:
                        (k,) = needs
                        by_pod.setdefault(k, []).append((i, 1 << k))
                    elif needs:
                        mask = mask_of(needs)
                        for k in needs:
                            by_pod.setdefault(k, []).append((i, mask))
            return by_pod

        def released(victims: Collection[int]) -> tuple[int, ...]:
            if not victims:
                return base
            if len(victims) == candidates:  # (distinct candidates: all of them)
                return every
            gone = mask_of(victims)
            found = set(always)
            claims_of = needing()
            for k in victims:
                for i, mask in claims_of.get(k, ()):
                    if not mask & ~gone:
                        found.add(i)
            return tuple(sorted(found))

        def attempt(idx: tuple[int, ...]) -> Run:
            hit = outcomes.get(idx)
            if hit is not None:
                return hit
            # Released claims that each hold their devices plainly leave a state
            # the node's own signature and their positions fix, so such a
            # release is looked up before the state it leaves is read.
            quick = _quick_key(problem, idx)
            if quick is not None:
                hit = self._quick_runs.get(quick)
                if hit is not None and self.current(hit.source):
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
            if hit is None or not self.current(hit.source):
                self.trials += 1
                hit = Run(self._book.allocate(problem.pending, state, allocated), state.view)
                if key is not None:
                    self._runs.put(key, hit)
            if quick is not None:
                self._quick_runs.put(quick, hit)
            outcomes[idx] = hit
            return hit

        return attempt, released

    def _ground(self, problem: Problem, needs: Sequence[Need] | None,
                attempt: Callable[[tuple[int, ...]], Run],
                plausible: Callable[[tuple[int, ...]], bool], base: tuple[int, ...]
                ) -> _Ground:
        """`_Ground` of the problem's node with the claims `base` released
        (those released already), kept for nodes of its hardware, usage and
        holds for one request where `base` is empty: they read the same."""
        key = None if base or problem.base is None else (
            problem.base, problem.facts.signature, problem.stuck)
        if key is not None:
            hit = self._grounds.get(key)
            if hit is not None and self.current(hit.run.source):
                return hit
        self.grounds += 1
        run = attempt(base) if plausible(base) else Run(_NOT_ENOUGH_OUTCOME, problem.state.view)
        split = self._part_layout(problem, needs)
        if split is not None and self._over_limit(problem, split, base):
            split = None
        node = None
        if split is not None and self._shares_parts(problem, needs):
            node = self._part_node(problem, split)
        ground = _Ground(run=run, split=split, node=node)
        if key is not None:
            self._grounds.put(key, ground)
        return ground

    def _part_node(self, problem: Problem, layout: PartLayout) -> PartNode | None:
        """The node's use of its parts as their shared runs read it
        (`app.preemption.parts`); None where they cannot share (a hold that
        stays, a pool over its counters' limit)."""
        if problem.base is None or problem.stuck:
            return None
        facts = problem.facts
        key = (problem.base, layout, facts.signature)
        if key in self._part_nodes:
            return self._part_nodes[key]
        return self._part_nodes.put(key, None if self._over(problem)[0] else part_node(
            layout, problem.state.allocated, facts.position))

    def _part_run(self, problem: Problem, sharing: _Sharing, idx: tuple[int, ...]) -> Run:
        """`attempt` for a victim set of one part: a release that changes one
        part only is looked up by the part's hardware and usage and what the
        score reads of the rest of the node, and its answer scored with the
        node's fill."""
        entry = self._part_entry(problem, sharing, idx)
        if entry is None:
            return sharing.attempt(idx)
        return self._scored(sharing, *entry)

    def _part_entry(self, problem: Problem, sharing: _Sharing, idx: tuple[int, ...]
                   ) -> tuple[Run, float | bool, int] | None:
        """The shared run of releasing the claims `idx`, the intact share of its
        allocation (True: none), and the units in use then on this node; None
        when the release does not change one part only."""
        freed = _plain_release(problem, idx)
        found = None if freed is None else sharing.node.key(freed, sharing.base)
        if found is None:
            return None
        key = (problem.base, found[0])
        hit = self._part_runs.get(key)
        if hit is None or not self.current(hit[0].source):
            run = sharing.attempt(idx)
            intact = self._intact_share_of(problem, idx, run)
            if intact is None:
                return None
            hit = self._part_runs.put(key, (run, intact))
        return hit[0], hit[1], found[1]

    def _scored(self, sharing: _Sharing, run: Run, intact: float | bool, used: int) -> Run:
        """A part's shared run with its allocation scored with the fill of a
        node with `used` units in use."""
        outcome = run.outcome
        if not outcome.feasible:
            return run
        assert isinstance(intact, float)
        # (the units a node has come with the run's kind of node)
        key = (id(run), intact, used)
        hit = self._rescored.get(key)
        if hit is None or hit[0] is not run:
            score = one_root_score(self._book.topology, intact=intact,
                                   fill=node_fill(used, len(sharing.layout.units)))
            hit = self._rescored.put(key, (run, run if score == outcome.score else Run(
                replace(outcome, score=score), run.source)))
        return hit[1]

    def _by_parts(self, problem: Problem, sharing: _Sharing, members: list[set[int]],
                  needs_of: Sequence[frozenset[int] | None], plain_of: Sequence[int | None],
                  released: _Released | None,
                  plausible: Callable[[tuple[int, ...]], bool] | None,
                  budget: int) -> Solved | None:
        """The smallest victim sets when each part's victim sets change that part
        only: per part, its smallest sets that work are kept by what decides
        them (`_part_solution`), so nodes alike in a part share them too.
        None where a part's sets reach beyond it, or where the loop of
        `_solve` could run out of `budget` before the smallest size.
        `needs_of` and `plain_of`: per claim of the problem, `HeldClaim.needs`
        and `HeldClaim.plain`. `released` and `plausible` None: only parts
        solved already are read, and a part not yet solved gives None too
        (`known_parts`)."""
        # the parts with candidates (index, candidates in order), and per
        # candidate the parts it is in (a mask over that list)
        parts: list[tuple[int, tuple[int, ...]]] = []
        in_parts: dict[int, int] = {}
        for i, cands in enumerate(members):
            if cands:
                bit = 1 << len(parts)
                local = tuple(sorted(cands))
                parts.append((i, local))
                for k in local:
                    in_parts[k] = in_parts.get(k, 0) | bit
        if not parts:
            return None
        # per part, the releasable claims whose candidates are all its own, in
        # the problem's order (the order of where they hold)
        claims_of: list[list[tuple[int, frozenset[int], int | None]]] = [[] for _ in parts]
        for c, needs in enumerate(needs_of):
            if not needs:
                continue
            if len(needs) == 1:  # most claims: one pod's
                (k,) = needs
                within = in_parts.get(k, 0)
            else:
                within = -1
                for k in needs:
                    within &= in_parts.get(k, 0)
            while within:
                low = within & -within
                claims_of[low.bit_length() - 1].append((c, needs, plain_of[c]))
                within ^= low
        node = sharing.node
        unshared = ~sharing.base
        taken, held = node.taken & unshared, node.held & unshared
        found: list[tuple[int, tuple[int, ...], tuple[_PartOption, ...],
                          list[tuple[int, int, int]]]] = []
        smallest = 0
        total = 0  # the parts' candidates, counted once per part
        for (i, local), claims in zip(parts, claims_of, strict=True):
            total += len(local)
            solved = self._part_solution(problem, sharing, i, local, claims, taken, held,
                                         released, plausible)
            if solved is None:
                return None
            solution, entries = solved
            size = solution.size
            if size is not None:
                found.append((size, local, solution.works, entries))
                if not smallest or size < smallest:
                    smallest = size
        if not found:
            return None
        # (the parts' candidates counted once per part bound the groups' count;
        # no more sets than (1 << total) - 1 at all)
        if (1 << total) - 1 > budget and (total if smallest == 1 else sum(
                math.comb(len(local), size) for _, local in parts
                for size in range(1, smallest + 1))) > budget and sum(
                math.comb(len(g), size) for g in part_groups(members)
                for size in range(1, smallest + 1)) > budget:
            return None
        # A set of a part's candidates releases the claims released already and
        # the part's claims whose candidates it holds all (`entries`): no other
        # claim needs only its pods.
        always = () if released is None else released(())
        options = []
        for size, local, works, entries in found:
            if size != smallest:
                continue
            for chosen, run, intact in works:
                gone = 0
                for j in chosen:
                    gone |= 1 << j
                freed = sharing.base
                own = []
                for mask, c, plain in entries:
                    if not mask & ~gone:
                        own.append(c)
                        freed |= plain
                idx = tuple(sorted((*always, *own))) if always else tuple(own)
                options.append(self._scored(sharing, run, intact, node.used(freed)).option(
                    tuple([local[j] for j in chosen]), idx))
        return Solved(view=problem.state.view, options=tuple(options))

    def _part_solution(self, problem: Problem, sharing: _Sharing, i: int,
                       local: tuple[int, ...],
                       claims: Sequence[tuple[int, frozenset[int], int | None]],
                       taken: int, held: int, released: _Released | None,
                       plausible: Callable[[tuple[int, ...]], bool] | None
                       ) -> tuple[_PartSolution, list[tuple[int, int, int]]] | None:
        """Part `i`'s smallest victim sets among its candidates `local` that
        work (as positions in `local`), their shared runs and intact shares,
        and their size (None: no set of the part's candidates works), with
        per claim the candidates it needs (as a mask of positions in `local`),
        its index and its devices; None when a set could release a claim
        beyond the part, or when it is not known yet and `released` is None.
        `claims`: the releasable claims whose candidates are all in `local`,
        each its index, needs and plain devices (`HeldClaim`); `taken` and
        `held`: the node's use
        beyond what the base release frees. Kept by the part's key and the
        claims its sets can release (whom they need, in `local`'s order, and
        where they hold), which fix every set's run key."""
        node = sharing.node
        if not node.open[i]:
            return None
        layout = sharing.layout
        beyond = layout.relevant & ~sharing.base & ~layout.exclusive[i]
        # per claim, whom it needs (a position in `local`, or minus their count
        # and their positions) and where it holds, flat: the key is hashed
        # and compared for every part of every problem
        shape: list[int] = []
        entries: list[tuple[int, int, int]] = []
        reach = 0  # what the part's sets can free
        for c, needs, plain in claims:
            if plain is None or plain & beyond:
                return None
            reach |= plain
            if len(needs) == 1:
                (k,) = needs
                j = local.index(k)
                shape += (j, plain)
                entries.append((1 << j, c, plain))
            else:
                # claims come in the order of where they hold: the same on nodes alike
                positions = sorted(local.index(k) for k in needs)
                shape.append(-len(positions))
                shape += positions
                shape.append(plain)
                entries.append((mask_of(positions), c, plain))
        # Of a group the score reads, a set's run reads only whether any unit
        # in it stays in use: those the sets can free, and whether others are
        # (the part's groups are as many on every node of its kind).
        head: list[Hashable] = [problem.base, i, len(local), taken & layout.regions[i]]
        for group in layout.groups[i]:
            head += (held & group & reach, not held & group & ~reach)
        key = (*head, *shape)
        hit = self._part_solutions.get(key)
        if hit is not None and self._all_current(hit.views):
            return hit, entries
        if released is None or plausible is None:
            self._unknown_parts += 1
            return None
        view = problem.state.view
        solution = _PartSolution(view=view, views=(view,))
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
                views = {id(view): view}
                for _, run, _ in works:
                    views.setdefault(id(run.source), run.source)
                solution = _PartSolution(view=view, size=size, works=tuple(works),
                                         views=tuple(views.values()))
                break
        return self._part_solutions.put(key, solution), entries

    def _part_layout(self, problem: Problem, needs: Sequence[Need] | None
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

    def _over_limit(self, problem: Problem, layout: PartLayout, base: tuple[int, ...]) -> bool:
        """Whether a pool with a device in a part's region is over its counters'
        limit once the claims `base` are released: the allocator then refuses
        the pool's devices until enough of it is released, by pods of any
        part, so victim sets are not enumerated per part (`app.preemption.parts.part_groups`).
        Releasing more only lowers a pool's use, so the base release decides,
        and a node over no limit as it is stays so (`_over`)."""
        if not self._over(problem)[1] & layout.relevant:
            return False
        if not base:
            return True
        pools = overcommitted(self._inventory.allocated_without(
            problem.state, (problem.claims[i].claim.key for i in base)), problem.state.view)
        devices = problem.facts.devices
        return any((devices[at].driver, devices[at].pool) in pools
                   for at in bits(layout.relevant))

    def _over(self, problem: Problem) -> tuple[bool, int]:
        """Whether a pool of the node is over its counters' limit as the node
        is (`app.preemption.parts.overcommitted`), and the positions of the
        devices of such pools. The
        node's hardware and usage (its signature: the counters each pool
        holds and uses, the devices of each pool) decide, so nodes alike read
        their counters once."""
        facts = problem.facts
        hit = self._over_masks.get(facts.signature)
        if hit is None:
            self.limit_checks += 1
            pools = overcommitted(problem.state.allocated, problem.state.view)
            mask = 0
            if pools:
                for at, device in enumerate(facts.devices):
                    if (device.driver, device.pool) in pools:
                        mask |= 1 << at
            hit = self._over_masks.put(facts.signature, (bool(pools), mask))
        return hit

    def _by_kind(self, problem: Problem) -> tuple[tuple[int, int], ...]:
        """`Counting.by_kind` of the node as it is, the same on nodes of its
        hardware, usage and request kinds."""
        facts = problem.facts
        key = (facts.signature, facts.kinds)
        hit = self._by_kinds.get(key)
        if hit is None:
            hit = self._by_kinds.put(key, counting_of(
                facts, problem.state.allocated.devices, (), ()).by_kind)
        return hit

    def _shares_parts(self, problem: Problem, needs: Sequence[Need] | None) -> bool:
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

    def _intact_share_of(self, problem: Problem, idx: tuple[int, ...], run: Run
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

    def reprieve(self, problem: Problem) -> tuple[Option, bool] | str:
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
