"""Counting: what rules a victim set out before the allocator runs.

The preemptor's claims need so many distinct devices of each request kind,
and under a matchAttribute constraint so many with one value of the
attribute (`Need`). Once some claims are released, a node with fewer free
devices of a kind, or no value with enough of them, cannot hold the pod
(`plausible_release`), whatever the allocator would try: a necessary
condition, cheap on bit masks of device positions, so most victim sets are
ruled out without an allocator run. The same counts give the fewest pods
that can free enough (`fewest_pods`), which the search's floors read. Here
because both the search's per-node floors and the solver read it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from app.allocator.constraints import SCALAR_KINDS
from app.extender.answers import CallState
from app.model import ResourceClaim
from app.model.objects import ALLOCATION_MODE_EXACT_COUNT
from app.preemption.parts import id_mask
from app.preemption.problem import NodeFacts


@dataclass(slots=True, frozen=True)
class Need:
    """A count every allocation needs, checked by counting before the allocator
    runs: `count` distinct devices matching request kind `kind`, all with one
    value of `attribute` when it is set (a matchAttribute constraint)."""

    kind: int
    count: int
    group: int = -1  # needs of one group share one attribute value
    attribute: str | None = None


def needs_for(pending: Sequence[ResourceClaim], kinds: Sequence[Hashable]) -> list[Need] | None:
    """What counting can rule out for these claims: per `exactly` request its
    count of its kind, and per matchAttribute constraint the same per value.
    None when nothing can be said plainly (admin access may share a taken
    device; an `All` request takes whatever there is)."""
    out: list[Need] = []
    group = 0
    for claim in pending:
        by_name: dict[str, Need] = {}
        for request in claim.spec.requests:
            exact = request.exactly
            if exact is None:
                continue  # firstAvailable: any one subrequest; no plain count
            if exact.allocation_mode != ALLOCATION_MODE_EXACT_COUNT or exact.admin_access:
                return None
            kind = kinds.index((exact.device_class_name, exact.selectors))
            need = Need(kind=kind, count=exact.count)
            by_name[request.name] = need
            out.append(need)
        for constraint in claim.spec.constraints:
            if constraint.match_attribute is None:
                continue
            names = constraint.requests or tuple(r.name for r in claim.spec.requests)
            if not all(n in by_name for n in names):
                continue
            out += [Need(kind=by_name[n].kind, count=by_name[n].count, group=group,
                         attribute=constraint.match_attribute) for n in names]
            group += 1
    return out


@dataclass(slots=True, frozen=True)
class Counting:
    """What counting reads of one problem, as masks of device positions: per
    claim what its release frees of the devices the preemptor's requests
    match, per request kind (the devices nobody holds, those held), and per
    matchAttribute group the devices of each of its values (None: values
    counting cannot compare)."""

    freeable: tuple[int, ...]
    by_kind: tuple[tuple[int, int], ...]
    values: tuple[tuple[int, ...] | None, ...]


def counting_of(facts: NodeFacts, taken_ids: Collection[str], freeable: tuple[int, ...],
                values: tuple[tuple[int, ...] | None, ...]) -> Counting:
    """Counting's reading of a node whose devices `taken_ids` are taken, with
    `freeable` per claim and `values` per matchAttribute group (`values_by`)."""
    taken = id_mask(taken_ids, facts.position)
    return Counting(freeable=freeable,
                    by_kind=tuple((mask & ~taken, mask & taken)
                                  for mask in facts.layout.kinds),
                    values=values)


def group_attributes(needs: Sequence[Need]) -> tuple[str, ...]:
    """The attribute of each matchAttribute group of `needs`, in group order."""
    groups: dict[int, str] = {}
    for need in needs:
        if need.group >= 0 and need.attribute is not None:
            groups[need.group] = need.attribute
    return tuple(groups[group] for group in range(len(groups)))


def values_by(facts: NodeFacts, attribute: str) -> tuple[int, ...] | None:
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
class Check:
    """`Need`s arranged for `plausible_release`: the plain needs as (kind, count),
    their total, and per matchAttribute group its index and members."""

    plain: tuple[tuple[int, int], ...]
    total: int
    groups: tuple[tuple[int, tuple[tuple[int, int], ...]], ...]


def check_of(needs: Sequence[Need]) -> Check:
    groups: dict[int, list[tuple[int, int]]] = {}
    for need in needs:
        if need.group >= 0:
            groups.setdefault(need.group, []).append((need.kind, need.count))
    plain = tuple((n.kind, n.count) for n in needs if n.group < 0)
    return Check(plain=plain, total=sum(count for _, count in plain),
                 groups=tuple((g, tuple(m)) for g, m in groups.items()))


NO_CHECK: Final = check_of(())


def fewest_pods(counting: Counting, check: Check, reach: Iterable[int]) -> int | float:
    """The fewest pods that may free enough, when pod i can free at most the
    devices `reach[i]` (those of every claim it is needed for): each check of
    `plausible_release` needs its shortfall of free devices made up, and a set of
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


def plausible_release(counting: Counting, released: tuple[int, ...], check: Check) -> bool:
    """False when counting alone shows the preemptor cannot fit once the
    claims `released` go: too few free devices of a request's kind, or no
    value of a matchAttribute constraint with enough of them for every
    request it binds (a necessary condition; the allocator decides the rest)."""
    freeable = counting.freeable
    freed = 0
    for i in released:
        freed |= freeable[i]
    return plausible_freed(counting, freed, check)


def plausible_freed(counting: Counting, freed: int, check: Check) -> bool:
    """`plausible_release` with the devices the released claims free (`freed`, a mask)."""
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


def wanted_counts(request: CallState, needs: tuple[list[Need], Check] | None
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
