"""The highest topology score a node's preemption answer can have, found
without solving the node.

When only the best node is wanted, nodes whose victims tie the best answer
found on every term of kube-scheduler's ranking differ only in drax's
topology score (three PriorityClass levels make hundreds of such nodes). A
node whose ceiling cannot beat the best answer found (a lower score, or the
same score and a later name) is left unsolved, and the answer stays that of
the full search.

Why this is a bound although packing is not monotonic as victims go
(releasing more lowers the fill, and may leave a block wholly free that the
pod then breaks): fix one allocation A whose units are all free once the
victims are gone. Its locality tier and refinement read A alone. With
binpack packing its fill and its intact blocks only rise as more of the
node's other units stay used. So A scores at most as it would with the
fewest units released that A allows: those whose held devices all sit in
the claims A's devices sit in, or in claims their pods alone hold (any
victim set that frees A's devices releases these). Per PCIe root, every
set of held devices an allocation there can take (counting per request
kind, as the search's counting does) is tried with that least release; an
allocation not within one root scores below a one-root tier (2/3). Where
this reasoning does not reach (spread packing, a device without a PCIe
root or placed apart from its unit, a device whose unit may stay in use
once it is free, more than `_MOST_TAKEN` held devices on one root) there is
no bound (infinity), and the node is solved.

Pure arithmetic over bit masks (positions in the node's view, units by
index): the node's kind of hardware fixes its `Layout`, so nodes alike
share it. A one-root allocation's intact share is read off the masks
(`intact_share`, term for term as the objective reads it) and scored by
the score's own `app.topology.score.one_root_score`; tests pin the two to
`TopologyObjective.evaluate`'s score.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from app.model import Device
from app.topology import TopologyConfig
from app.topology.normalise import NodeTopology
from app.topology.score import (
    NODE_LEVEL,
    NUMA_LEVEL,
    ONE_NUMA,
    ROOT_LEVEL,
    TIERS,
    node_fill,
    one_root_score,
)

UNBOUNDED: Final = math.inf
# Every allocation spanning PCIe roots scores (tier + within) / 3 with tier <= 1
# and within < 1.
_LOWER_TIERS: Final = (ONE_NUMA + 1) / TIERS
# Held devices per root whose subsets are tried (2**n subsets).
_MOST_TAKEN: Final = 10
_MIXED: Final = -1  # a root whose devices lie in several NUMA nodes (or some in none)


@dataclass(slots=True, frozen=True)
class Root:
    """One PCIe root as `intact_share` reads it: its units and its NUMA
    node's (masks of unit indexes; `numa` 0: no NUMA node, `_MIXED`: several),
    and the positions behind it that the pod's requests match."""

    units: int
    numa: int
    positions: tuple[int, ...]


@dataclass(slots=True, frozen=True)
class Layout:
    """A node's topology for one pod's requests, by position and unit index:
    per position its unit, how many units, those with a topology (`placed`,
    a mask), and the PCIe roots holding a device the requests match."""

    unit: tuple[int, ...]
    units: int
    placed: int
    roots: tuple[Root, ...]


def layout(topology: NodeTopology, devices: Sequence[Device], matched: int) -> Layout | None:
    """The node's `Layout` for requests matching the positions `matched`;
    None when some matched device has no PCIe root or sits apart from its
    unit (a score would read the unit's place, not the device's)."""
    index = {unit: i for i, unit in enumerate(topology.units)}
    unit = tuple(index[topology.unit_of[d.id]] for d in devices)

    def units_of(members: Sequence[str]) -> int:
        mask = 0
        for member in members:
            mask |= 1 << index[member]
        return mask

    positions: dict[str, list[int]] = {}
    numas: dict[str, set[int | None]] = {}
    for at, device in enumerate(devices):
        if not matched >> at & 1:
            continue
        topo = topology.devices[device.id]
        if topo.pcie_root is None or any(
                (t := topology.devices[other]).pcie_root != topo.pcie_root
                or t.numa_node != topo.numa_node
                for other in topology.units[topology.unit_of[device.id]]):
            return None
        positions.setdefault(topo.pcie_root, []).append(at)
        numas.setdefault(topo.pcie_root, set()).add(topo.numa_node)
    roots = []
    for root, behind in positions.items():
        numa = numas[root]
        only = next(iter(numa)) if len(numa) == 1 else _MIXED
        roots.append(Root(units=units_of(topology.roots[root]), positions=tuple(behind), numa=(
            _MIXED if only == _MIXED else 0 if only is None
            else units_of(topology.numa_nodes[only]))))
    return Layout(unit=unit, units=len(topology.units), placed=units_of(topology.placed),
                  roots=tuple(roots))


def ceiling(shape: Layout | None, config: TopologyConfig, *, kinds: Sequence[int],
            wanted: Sequence[int], total: int, taken: int, shared: int,
            frees: Mapping[int, int], memo: dict[Hashable, float | None] | None = None
            ) -> float:
    """The highest score any allocation of the pod can have on the node once
    some of its victims are gone.

    `kinds`: per request kind, the positions it matches (a mask); `wanted`:
    per kind, how many devices the pod's requests of that kind take, `total`
    in all; `taken`: the positions of the devices held now, `shared` those
    of them held by several claims; `frees`: per held position that some
    victim set can release, the positions surely released with it (a mask):
    its claim's, and those of every claim held only by the pods that claim
    needs gone. `memo`: per root, its best score, kept by the caller for
    one `shape`, `config` and `kinds` (nodes alike differ in what they hold on
    their other roots, not on this one)."""
    if shape is None or config.packing != "binpack" or not shape.units:
        return UNBOUNDED
    # per unit in use, the positions of its devices held (-1: one is shared,
    # so releasing claims never surely frees the unit)
    held: dict[int, int] = {}
    unit = shape.unit
    rest = taken
    while rest:
        low = rest & -rest
        at = low.bit_length() - 1
        rest ^= low
        u = unit[at]
        held[u] = -1 if shared & low or held.get(u) == -1 else held.get(u, 0) | low
    used = 0
    for u in held:
        used |= 1 << u
    best = _LOWER_TIERS
    for index, root in enumerate(shape.roots):
        for at in root.positions:
            mask = held.get(unit[at])
            if mask is not None and (not taken >> at & 1 or (at in frees and (
                    mask == -1 or mask & ~frees[at]))):
                # taking it may leave its unit in use (another device of it
                # held): the allocation is then not one of new units
                return UNBOUNDED
        if memo is None:
            score = _root_ceiling(shape, config, root, kinds, wanted, total, held, used, taken,
                                  frees)
        else:
            # what `_root_ceiling` reads: the node's holdings (`held`, `used`
            # follow from them) and what releasing this root's devices frees
            key = (tuple(wanted), index, taken, shared,
                   tuple([(at, frees[at]) for at in root.positions if at in frees]))
            if key in memo:
                score = memo[key]
            else:
                score = memo[key] = _root_ceiling(shape, config, root, kinds, wanted, total,
                                                  held, used, taken, frees)
        if score is None:
            return UNBOUNDED
        best = max(best, score)
    return best


def _root_ceiling(shape: Layout, config: TopologyConfig, root: Root, kinds: Sequence[int],
                  wanted: Sequence[int],
                  total: int, held: Mapping[int, int], used: int, taken_now: int,
                  frees: Mapping[int, int]) -> float | None:
    """The most an allocation within `root` can score (-inf when none fits
    there); None when too many held devices could be taken to try them all.
    `held`: per used unit, the positions of its devices held (-1: never
    surely freed); `used`: the units in use (a mask)."""
    free = 0
    takeable: list[int] = []
    for at in root.positions:
        if not taken_now >> at & 1:
            free |= 1 << at
        elif at in frees:
            takeable.append(at)
        # a held device that no victim set releases is never the pod's
    n = len(takeable)
    if n > _MOST_TAKEN:
        return None
    shortfalls = [(mask, need) for mask, count in zip(kinds, wanted, strict=True)
                  if (need := count - (mask & free).bit_count()) > 0]
    union = 0
    for mask in kinds:
        union |= mask
    short = total - (union & free).bit_count()
    unit = shape.unit
    # per pick (a subset of `takeable`, as bits), the positions it takes and
    # those it surely releases, each from the pick without its lowest member
    taken_by = [0] * (1 << n)
    released_by = [0] * (1 << n)
    for pick in range(1, 1 << n):
        low = pick & -pick
        at = takeable[low.bit_length() - 1]
        rest = pick ^ low
        taken_by[pick] = taken_by[rest] | 1 << at
        released_by[pick] = released_by[rest] | frees[at]
    best = -math.inf
    scores: dict[int, float] = {}  # per units left in use, its score
    # Fewest taken first: a pick containing one found enough releases at
    # least as much, so it scores no higher and is skipped (`covered`: it,
    # or a pick it contains, was found enough).
    covered = bytearray(1 << n)
    for pick in _by_size(n):
        rest = pick
        while rest:
            low = rest & -rest
            rest ^= low
            if covered[pick ^ low]:
                covered[pick] = 1
                break
        if covered[pick]:
            continue
        taken = taken_by[pick]
        if taken.bit_count() < short or any((mask & taken).bit_count() < need
                                            for mask, need in shortfalls):
            continue
        covered[pick] = 1
        released = released_by[pick]
        after = used
        rest = released
        while rest:
            low = rest & -rest
            rest ^= low
            u = unit[low.bit_length() - 1]
            devices = held.get(u)
            if devices is not None and devices != -1 and not devices & ~released:
                after &= ~(1 << u)  # all its held devices go
        score = scores.get(after)
        if score is None:
            score = scores[after] = one_root_score(
                config, intact=intact_share(shape, root, after, total),
                fill=node_fill(after.bit_count(), shape.units))
        if score > best:
            best = score
    return best


@functools.cache
def _by_size(n: int) -> tuple[int, ...]:
    """The subsets of n members (as bits), fewest members first."""
    return tuple(sorted(range(1 << n), key=int.bit_count))


def intact_share(shape: Layout, root: Root, used: int, count: int) -> float:
    """The intact share (`Quality.intact`) of `count` free units, all behind
    `root` (and in its NUMA node, unless it spans several), with the units
    `used` in use (a mask): what `TopologyObjective` computes for such an
    allocation, in the same order of operations. A root spanning NUMA nodes
    counts its blocks intact, the most they can be."""
    if root.numa == _MIXED:
        return 1.0
    levels = [(_share(count, root.units, used), ROOT_LEVEL)]
    if root.numa:
        levels.append((_share(count, root.numa, used), NUMA_LEVEL))
    levels.append((_share(count, shape.placed, used), NODE_LEVEL))
    return sum(v * w for v, w in levels) / sum(w for _, w in levels)


def _share(count: int, members: int, used: int) -> float:
    """One level's intact share when `count` new units go into one group
    (`members`, a mask): broken when it was wholly free and is not filled."""
    broken = count < members.bit_count() and not members & used
    return 1.0 - broken / 1
