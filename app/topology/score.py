"""Locality and packing of one pod's devices on one node, as one number.

The score is `(tier + within) / 3` in [0, 1]:
- `tier` is the locality tier of all picked devices that have a topology:
  2 = one PCIe root, 1 = one NUMA node, 0 = spanning NUMA nodes. It comes
  first, whatever the weights: the requirement orders these strictly.
- `within` in [0, 1] orders allocations of the same tier. Below tier 2 it is
  the weighted mean of a locality refinement (GPUs paired with a same-root NIC
  of the pod; how many device pairs share a root / a NUMA node) and packing.
  At tier 2 the refinement is always perfect, so `within` is packing alone.
- packing: do not break a wholly free PCIe root, NUMA node or node when a
  partly used one can take the devices (later large pods need whole blocks),
  and prefer fuller nodes (binpack) or emptier ones (spread).

Everything here is pure arithmetic over precomputed `NodeTopology` groups,
because the allocator calls `score` once per candidate allocation.
docs/scoring.md has the formula with a worked example.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any, Final

from app.allocator.types import AllocatedState, DeviceId, NodeView
from app.model import Device
from app.topology.config import TopologyConfig
from app.topology.normalise import DeviceTopology, NodeTopology, node_topology

MODES: Final = ("allocator", "advisor")
TIERS: Final = 3
ONE_ROOT: Final = 2
ONE_NUMA: Final = 1
SPANNING: Final = 0
# Priority bands per tier, so a better tier always maps to a higher 0..10
# priority and packing still has a few steps inside each band.
_BANDS: Final = ((0, 2), (3, 5), (6, 10))
NEUTRAL_PRIORITY: Final = 0
SPREAD_INTACT: Final = 0.05
# Breaking a bigger free block costs more: in the layouts drax targets each
# level holds about twice the devices of the one below.
ROOT_LEVEL: Final = 1.0
NUMA_LEVEL: Final = 2.0
NODE_LEVEL: Final = 4.0
_EPS: Final = 1e-9
_BELOW_ONE: Final = 1 - 1e-6


@dataclass(slots=True, frozen=True)
class Quality:
    """An allocation's score and its parts, for display and tests."""

    tier: int
    refinement: float
    packing: float
    score: float
    intact: float  # the packing's share of free blocks left intact (`_intact`)

    @property
    def tier_name(self) -> str:
        return ("spanning NUMA nodes", "one NUMA node", "one PCIe root")[self.tier]


def _pairs(n: int) -> int:
    return n * (n - 1) // 2


def locality(topos: Sequence[DeviceTopology], *, accelerators: int = 0,
             paired_accelerators: int = 0) -> tuple[int, float]:
    """(tier, refinement in [0, 1]) of devices that all have some topology.

    `accelerators` is non-zero only for a pod that has both accelerators and
    NICs; `paired_accelerators` of them have a NIC of the pod on their root.

    Refinement: share of device pairs behind one root (plus half for pairs on
    one NUMA node, below tier 1), averaged with the share of accelerators that
    have a NIC of the pod behind their root when the pod has both kinds.
    """
    if len(topos) <= 1:
        return ONE_ROOT, 1.0
    roots = Counter(t.pcie_root for t in topos)
    numas = Counter(t.numa_node for t in topos)
    if None not in roots and len(roots) == 1:
        return ONE_ROOT, 1.0
    tier = ONE_NUMA if None not in numas and len(numas) == 1 else SPANNING
    same_root = sum(_pairs(n) for root, n in roots.items() if root is not None)
    same_numa = sum(_pairs(n) for numa, n in numas.items() if numa is not None)
    both = sum(_pairs(n) for (root, numa), n in
               Counter((t.pcie_root, t.numa_node) for t in topos).items()
               if root is not None and numa is not None)
    closeness = (same_root + 0.5 * (same_numa - both)) / _pairs(len(topos))
    if tier == ONE_NUMA:
        closeness = (closeness - 0.5) * 2  # every pair shares the NUMA node here
    if accelerators:
        return tier, 0.5 * closeness + 0.5 * paired_accelerators / accelerators
    return tier, closeness


class TopologyObjective:
    """The allocator's objective for one pod on one node (an
    `app.allocator.types.Objective`), plus `evaluate` for the score's parts."""

    __slots__ = ("_bounds", "_config", "_fill", "_first_fit", "_nested_roots",
                 "_node", "_node_used", "_numa_blocked", "_numa_free", "_numa_room", "_numa_used",
                 "_perfect", "_perfects", "_reusable", "_root_blocked", "_root_free",
                 "_root_room", "_root_used", "_topology", "_used")

    def __init__(self, *, topology: NodeTopology, used: Set[str], fill: float,
                 config: TopologyConfig, first_fit: bool,
                 reusable: Set[str] = frozenset()) -> None:
        self._topology = topology
        self._used = used
        # used units an allocation may take again (shared devices other pods use)
        self._reusable = reusable
        self._fill = fill
        self._config = config
        self._first_fit = first_fit
        self._root_used = {root: sum(1 for d in members if d in used)
                           for root, members in topology.roots.items()}
        self._numa_used = {numa: sum(1 for d in members if d in used)
                           for numa, members in topology.numa_nodes.items()}
        self._node = {"": topology.placed}
        self._node_used = {"": sum(1 for d in topology.placed if d in used)}
        self._root_free = max((len(m) - self._root_used[g] for g, m in topology.roots.items()),
                              default=0)
        self._numa_free = max((len(m) - self._numa_used[g]
                               for g, m in topology.numa_nodes.items()), default=0)
        # the same, counting the reusable units as room: for allocations that take some
        self._root_room = max((len(m) - self._root_used[g] + sum(1 for u in m if u in reusable)
                               for g, m in topology.roots.items()), default=0)
        self._numa_room = max((len(m) - self._numa_used[g] + sum(1 for u in m if u in reusable)
                               for g, m in topology.numa_nodes.items()), default=0)
        # units per group an allocation cannot take: `bound`'s room (see `reuse`)
        self._root_blocked = self._root_used
        self._numa_blocked = self._numa_used
        self._bounds: dict[tuple[int, int, int, int, bool], float] = {}
        self._perfects: dict[tuple[int, int, int, int, int, int, bool], float] = {}
        self._nested_roots: bool | None = None
        self._perfect = 1.0

    @property
    def first_fit(self) -> bool:
        return self._first_fit

    @property
    def topology(self) -> NodeTopology:
        return self._topology

    def score(self, picks: Sequence[Device]) -> float:
        return self.evaluate(picks).score

    def twin_key(self, device: Device) -> Hashable | None:
        """Devices with equal keys change no score when swapped in any allocation:
        same normalised topology, same role (accelerator, NIC), each its own
        unit in the same used state. None for devices sharing a unit (MIG
        partitions), whose swap changes which units an allocation touches."""
        topo = self._topology
        unit = topo.unit_of.get(device.id)
        if unit is not None and len(topo.units[unit]) != 1:
            return None
        return (topo.of(device), device.id in topo.accelerators, device.id in topo.nics,
                unit is not None, unit in self._used)

    def score_class(self, device: Device) -> Hashable | None:
        """What `score` reads of a device that is a unit of its own (its
        topology, its role, whether its unit is in use): an allocation of such
        devices, none twice, scores as the multiset of their classes does.
        None for a device sharing its unit (a partition)."""
        topo = self._topology
        unit = topo.unit_of.get(device.id)
        if unit is not None and len(topo.units[unit]) != 1:
            return None
        return (topo.of(device), device.id in topo.accelerators, device.id in topo.nics,
                unit is not None and unit in self._used)

    def shape_unit(self, device: Device) -> Hashable | None:
        """The unit the device adds to an allocation's shape (what `is_perfect`
        reads), where it adds what a whole device of its own on a PCIe root and
        a NUMA node adds; None for a device without one of them (the bound counts
        closeness in groups it is not in) or a partition of a GPU other pods
        use (taken, it is a unit in use, not a new one). A search
        whose candidates all have distinct such units makes allocations of one
        shape; others (two partitions of one GPU hold one unit) may beat the
        perfect score for the shape of the first, and do not stop early."""
        topo = self._topology
        unit = topo.unit_of.get(device.id)
        t = topo.of(device)
        if unit is None or t.pcie_root is None or t.numa_node is None or (
                device.consumes_counters and unit in self._used):
            return None
        return unit

    def bound_key(self, device: Device) -> tuple[Hashable, Hashable, Hashable] | None:
        """(its unit, what it adds to an allocation's shape, all `bound` reads
        of it) for a free device that counts as a new unit with a topology;
        None otherwise. An
        allocation's shape (units, new units, rooted, NUMA-placed, accelerators
        beside NICs) is the same for every allocation of a search when each
        request's candidates agree on the second part and no two share a unit."""
        topo = self._topology
        t = topo.of(device)
        unit = topo.unit_of.get(device.id)
        if not t.known or unit is None or (unit in self._used
                                           and not device.allow_multiple_allocations):
            return None
        accelerator, nic = device.id in topo.accelerators, device.id in topo.nics
        return unit, (t.pcie_root is None, t.numa_node is None, accelerator, nic), (
            t, accelerator, nic)

    def reuse(self, units: Set[Hashable]) -> int:
        """Declare the units of a search's candidates (see `bound_key`): those
        other pods already use are shared devices the search may pick again,
        so `bound` counts them as room in their groups. Returns how many."""
        topo = self._topology
        reused = {u for u in units if u in self._used}
        self._root_blocked = {g: n - sum(1 for u in topo.roots[g] if u in reused)
                              for g, n in self._root_used.items()}
        self._numa_blocked = {g: n - sum(1 for u in topo.numa_nodes[g] if u in reused)
                              for g, n in self._numa_used.items()}
        return len(reused)

    def bound(self, picks: Sequence[Device], total: int, accelerators: int,
              rooted_nics: int) -> float:
        """An upper bound of the score of every allocation of `total` units,
        `accelerators` of them accelerators and `rooted_nics` NICs with a PCIe
        root, that holds `picks`, each a unit of its own with a topology, free
        or declared to `reuse` (see `bound_key`): the locality tier the picks still allow,
        the most device pairs that can share a root and a NUMA node once the
        rest are placed where most pairs form, the most accelerators that can
        have a NIC of the pod on their root, and no free block broken.
        Computed with the score's own formulas, so rounding never puts a score
        above it."""
        topo = self._topology
        known = [topo.of(d) for d in picks]
        remaining = total - len(known)
        packing = self._packing(intact=self._most_intact(known, remaining))
        roots = Counter(t.pcie_root for t in known)
        numas = Counter(t.numa_node for t in known)
        if total <= 1 or (None not in roots and len(roots) <= 1 and any(
                self._fits(roots, root, members, self._root_blocked, total)
                for root, members in topo.roots.items())):
            return self._combine(ONE_ROOT, 1.0, packing)
        same_root = _most_pairs(roots, topo.roots, self._root_blocked, remaining)
        pairs = _pairs(total)
        if None not in numas and len(numas) <= 1 and any(
                self._fits(numas, numa, members, self._numa_blocked, total)
                for numa, members in topo.numa_nodes.items()):
            closeness = ((same_root + 0.5 * (pairs - same_root)) / pairs - 0.5) * 2
            tier = ONE_NUMA
        else:
            same_numa = _most_pairs(numas, topo.numa_nodes, self._numa_blocked, remaining)
            nested = 0.5 * (same_numa - same_root) if self._nested() else 0.5 * same_numa
            closeness = (same_root + nested) / pairs
            tier = SPANNING
        if accelerators and rooted_nics:
            refinement = 0.5 * closeness + 0.5 * self._most_paired(
                picks, accelerators, rooted_nics) / accelerators
        else:
            refinement = closeness
        return self._combine(tier, refinement, packing)

    def _most_paired(self, picks: Sequence[Device], accelerators: int,
                     rooted_nics: int) -> int:
        """The most accelerators with a NIC of the pod on their root: those of
        `picks` already paired, those on the roots the NICs still to come can
        reach most of, and every accelerator still to come."""
        topo = self._topology
        nic_roots: set[str | None] = set()
        accel_roots: Counter[str | None] = Counter()
        nics = 0
        for d in picks:
            root = topo.of(d).pcie_root
            if d.id in topo.accelerators:
                accel_roots[root] += 1
            elif d.id in topo.nics and root is not None:
                nic_roots.add(root)
                nics += 1
        paired = sum(n for root, n in accel_roots.items() if root in nic_roots)
        waiting = sorted((n for root, n in accel_roots.items() if root not in nic_roots),
                         reverse=True)
        paired += sum(waiting[:rooted_nics - nics])
        return min(accelerators, paired + accelerators - sum(accel_roots.values()))

    def _most_intact(self, known: Sequence[DeviceTopology], remaining: int) -> float:
        """An upper bound of `_intact` for the picks' units plus `remaining`
        more: per level, a wholly free group the picks broke stays broken
        unless the units still to come fill it (the smallest gaps first), and
        every unit still to come touches a group of its own. A level no pick
        reaches yet may be reached or not, so the most of both is taken."""
        topo = self._topology
        roots = Counter(t.pcie_root for t in known if t.pcie_root is not None)
        numas = Counter(t.numa_node for t in known if t.numa_node is not None)
        levels = [(_most_intact_share(counts, members, used, remaining), weight, bool(counts))
                  for counts, members, used, weight in (
                      (roots, topo.roots, self._root_used, ROOT_LEVEL),
                      (numas, topo.numa_nodes, self._numa_used, NUMA_LEVEL),
                      (Counter({"": len(known)} if known else {}), self._node,
                       self._node_used, NODE_LEVEL))]
        open_levels = sum(1 for share, _, reached in levels if share is not None and not reached)
        best = 0.0
        for present in itertools.product((True, False), repeat=open_levels):
            shown = iter(present)
            values = [(share, weight) for share, weight, reached in levels
                      if share is not None and (reached or next(shown))]
            best = max(best, _weighted_mean(values))
        return best

    def blocks(self, total: int) -> list[frozenset[DeviceId]]:
        """The devices of each PCIe root, then each NUMA node, with `total`
        free units or more: where an allocation of `total` units can reach the
        best locality tiers (a search looks there first for a score to beat)."""
        topo = self._topology
        out = [frozenset(i for i, t in topo.devices.items() if t.pcie_root == root)
               for root, units in topo.roots.items()
               if len(units) - self._root_used[root] >= total]
        out += [frozenset(i for i, t in topo.devices.items() if t.numa_node == numa)
                for numa, units in topo.numa_nodes.items()
                if len(units) - self._numa_used[numa] >= total]
        return out

    @staticmethod
    def _fits(counts: Mapping[Any, int], group: Any, members: Sequence[str],
              used: Mapping[Any, int], total: int) -> bool:
        """Whether all `total` units can be in `group`, given where `counts` are."""
        return (not counts or group in counts) and len(members) - used[group] >= total

    def _nested(self) -> bool:
        """Every device with a PCIe root has a NUMA node, one per root: two
        devices on one root then share their NUMA node too."""
        if self._nested_roots is None:
            self._nested_roots = self._roots_nest()
        return self._nested_roots

    def _roots_nest(self) -> bool:
        numa_of: dict[str, int | None] = {}
        for t in self._topology.devices.values():
            if t.pcie_root is not None and (
                    t.numa_node is None
                    or numa_of.setdefault(t.pcie_root, t.numa_node) != t.numa_node):
                return False
        return True

    def is_perfect(self, score: float) -> bool:
        """True when `score` reaches the upper bound for allocations shaped like
        the last one scored (the allocator asks right after `score`, and every
        allocation of one search has the same subrequests, so the same shape),
        or shaped like it but with other units reused (`_most_perfect`)."""
        return score >= self._perfect - _EPS

    def _most_perfect(self, total: int, placed: int, rooted: int, numa_placed: int,
                      reused_rooted: int, reused_numa: int, has_both: bool) -> float:
        """The upper bound for an allocation of `total` units, `placed` of them
        new (`rooted` on a PCIe root, `numa_placed` on a NUMA node) and the rest
        used units taken again (`reused_rooted`, `reused_numa`), and for every
        allocation of those units that takes up to all reusable units again
        instead of new ones: reusing a shared device may reach a better tier
        than new units alone, so only the most of these bounds is perfect."""
        best = self._upper_bound(total, placed, rooted, numa_placed, has_both)
        if not self._reusable:
            return best
        all_rooted, all_numa = rooted + reused_rooted, numa_placed + reused_numa
        for k in range(min(len(self._reusable), total) + 1):
            for k_root in range(max(0, k - (total - all_rooted)), min(k, all_rooted) + 1):
                for k_numa in range(max(0, k - (total - all_numa)), min(k, all_numa) + 1):
                    shape = (total, total - k, all_rooted - k_root, all_numa - k_numa,
                             has_both)
                    bound = self._bounds.get(shape)
                    if bound is None:
                        bound = self._bounds[shape] = self._upper_bound(*shape)
                    best = max(best, bound)
        return best

    def evaluate(self, picks: Sequence[Device]) -> Quality:
        topo = self._topology
        known = [(d.id, t) for d in picks if (t := topo.of(d)).known]
        accel = [t.pcie_root for i, t in known if i in topo.accelerators]
        nic_roots = {t.pcie_root for i, t in known if i in topo.nics and t.pcie_root}
        has_both = bool(accel) and bool(nic_roots)
        tier, refinement = locality(
            [t for _, t in known],
            accelerators=len(accel) if has_both else 0,
            paired_accelerators=sum(1 for r in accel if r in nic_roots))
        units = {topo.unit_of[i]: t for i, t in known}
        new = [(u, t) for u, t in units.items() if u not in self._used]
        reused = [t for u, t in units.items() if u in self._used]
        shape = (len(units), len(new), sum(1 for _, t in new if t.pcie_root is not None),
                 sum(1 for _, t in new if t.numa_node is not None),
                 sum(1 for t in reused if t.pcie_root is not None),
                 sum(1 for t in reused if t.numa_node is not None), has_both)
        perfect = self._perfects.get(shape)
        if perfect is None:
            perfect = self._perfects[shape] = self._most_perfect(*shape)
        self._perfect = perfect
        intact = self._intact([t for _, t in new])
        packing = self._packing(intact=intact)
        return Quality(tier=tier, refinement=refinement, packing=packing,
                       score=self._combine(tier, refinement, packing), intact=intact)

    def _combine(self, tier: int, refinement: float, packing: float) -> float:
        if tier == ONE_ROOT:
            return _one_root(packing)
        wl, wp = self._config.locality_weight, self._config.packing_weight
        # Capped below 1 so no weighting lets a lower tier reach the next one.
        within = min(_BELOW_ONE, (wl * refinement + wp * packing) / (wl + wp))
        return (tier + within) / TIERS

    def _upper_bound(self, known: int, placed: int, rooted: int, numa_placed: int,
                     has_both: bool) -> float:
        """The best score any allocation of this shape could reach here: lets
        the allocator stop early instead of spending its budget."""
        bounds = [(b, w) for b, w, present in (
            (_intact_bound(rooted, self._topology.roots, self._root_used), ROOT_LEVEL, rooted),
            (_intact_bound(numa_placed, self._topology.numa_nodes, self._numa_used), NUMA_LEVEL,
             numa_placed),
            (_intact_bound(placed, self._node, self._node_used), NODE_LEVEL, placed))
            if present]
        # Picks without a root or NUMA node skip a level, which can only raise
        # the mean; the max then stays an upper bound.
        intact = _weighted_mean(bounds) if rooted == numa_placed == placed else max(
            (b for b, _ in bounds), default=1.0)
        packing = self._packing(intact=intact)
        # units taken again count as room in their groups (an over-estimate:
        # all reusable ones, not only as many as the allocation reuses)
        root_free, numa_free = ((self._root_free, self._numa_free) if placed == known
                                else (self._root_room, self._numa_room))
        if known <= max(1, root_free):
            return self._combine(ONE_ROOT, 1.0, packing)
        same_root = _packed_pairs(known, root_free)
        if known <= numa_free:
            tier, closeness = ONE_NUMA, same_root / _pairs(known)
        else:
            # A pair on one root counts whole, a pair sharing only a NUMA node
            # half; where roots do not nest in NUMA nodes (a root without
            # one), a pair may share a root and no NUMA node.
            same_numa = _packed_pairs(known, numa_free)
            only_numa = (same_numa - same_root if self._nested()
                         else min(same_numa, _pairs(known) - same_root))
            tier, closeness = SPANNING, (same_root + 0.5 * only_numa) / _pairs(known)
        return self._combine(tier, 0.5 * closeness + 0.5 if has_both else closeness, packing)

    def _packing(self, *, intact: float) -> float:
        return _packing(self._config, intact=intact, fill=self._fill)

    def _intact(self, new: Sequence[DeviceTopology]) -> float:
        """Per level (roots, NUMA nodes, the node itself): 1 - the share of
        touched groups that were wholly free before and are neither wholly free
        nor wholly taken after; then the levels' mean weighted by block size."""
        if not new:
            return 1.0
        topo = self._topology
        roots = Counter(t.pcie_root for t in new)
        numas = Counter(t.numa_node for t in new)
        roots.pop(None, None)
        numas.pop(None, None)
        return _weighted_mean([(share, weight) for share, weight in (
            (_intact_share(roots, topo.roots, self._root_used), ROOT_LEVEL),
            (_intact_share(numas, topo.numa_nodes, self._numa_used), NUMA_LEVEL),
            (_intact_share({"": len(new)}, self._node, self._node_used), NODE_LEVEL))
            if share is not None])


def _packing(config: TopologyConfig, *, intact: float, fill: float) -> float:
    if config.packing == "spread":
        # Emptier nodes first; intact blocks only break ties inside a node
        # (where the fill is the same for every allocation).
        return SPREAD_INTACT * intact + (1 - SPREAD_INTACT) * (1.0 - fill)
    return 0.5 * intact + 0.5 * fill


def _one_root(packing: float) -> float:
    return (ONE_ROOT + packing) / TIERS


def one_root_score(config: TopologyConfig, *, intact: float, fill: float) -> float:
    """The score of an allocation whose devices with a topology all sit behind
    one PCIe root, from its two parts: `intact` (`Quality.intact`: the free
    blocks it leaves intact, read from the root, NUMA node and node it is
    in) and the node's `fill` (`node_fill`), which moves every such
    allocation's score alike. The same arithmetic as `TopologyObjective.score`."""
    return _one_root(_packing(config, intact=intact, fill=fill))


def node_fill(used: int, units: int) -> float:
    """The share of a node's units in use (`NodeTopology.units`, `used` of them)."""
    return used / units if units else 0.0


def _weighted_mean(values: Sequence[tuple[float, float]]) -> float:
    total = sum(w for _, w in values)
    return sum(v * w for v, w in values) / total if total else 1.0


def _intact_share(taken: Mapping[Any, int], members: Mapping[Any, tuple[DeviceId, ...]],
                  used: Mapping[Any, int]) -> float | None:
    if not taken:
        return None
    broken = sum(1 for group, n in taken.items() if used[group] == 0 and n < len(members[group]))
    return 1.0 - broken / len(taken)


def _intact_bound(count: int, members: Mapping[Any, tuple[DeviceId, ...]],
                  used: Mapping[Any, int]) -> float:
    """1 if `count` new devices could avoid breaking a free group: some group
    is already partly used, or `count` can fill a free group completely."""
    partly_used = any(0 < used[g] < len(m) for g, m in members.items())
    smallest_free = min((len(m) for g, m in members.items() if used[g] == 0), default=None)
    return 1.0 if partly_used or (smallest_free is not None and count >= smallest_free) else 0.0


def _most_intact_share(counts: Mapping[Any, int], members: Mapping[Any, tuple[DeviceId, ...]],
                       used: Mapping[Any, int], remaining: int) -> float | None:
    """The most `_intact_share` of one level once `remaining` more units are
    added to `counts`: a wholly free group the picks broke stays broken unless
    the units still to come fill it (the smallest gaps first), and each unit
    still to come may touch a group of its own. None: no group is touched."""
    gaps = sorted(len(members[g]) - n for g, n in counts.items()
                  if used[g] == 0 and n < len(members[g]))
    filled = fixed = 0
    for gap in gaps:
        if filled + gap > remaining:
            break
        filled += gap
        fixed += 1
    touched = min(len(counts) + remaining, len(members))
    return 1.0 - (len(gaps) - fixed) / touched if touched else None


def _most_pairs(counts: Mapping[Any, int], members: Mapping[Any, tuple[DeviceId, ...]],
                used: Mapping[Any, int], remaining: int) -> int:
    """The most pairs sharing a group once `remaining` more units are added to
    `counts` (units per group so far), each group taking at most its free
    units: the pairs so far plus the `remaining` largest gains (a unit added
    to a group holding n gains n pairs; any placement takes, per group, a
    prefix of that group's gains)."""
    pairs = sum(_pairs(n) for group, n in counts.items() if group is not None)
    if remaining <= 0:
        return pairs
    gains = [n for group, units in members.items()
             for n in range(counts.get(group, 0),
                            len(units) - used[group])]
    gains.sort(reverse=True)
    return pairs + sum(gains[:remaining])


def _packed_pairs(count: int, group: int) -> int:
    """Most device pairs that can share a group when groups hold `group` devices."""
    if group <= 1:
        return 0
    return (count // group) * _pairs(group) + _pairs(count % group)


def make_objective(*, node_view: NodeView, allocated: AllocatedState, config: TopologyConfig,
                   mode: str) -> TopologyObjective:
    """The objective for one pod on one node: "allocator" searches for the best
    score, "advisor" takes upstream's first fit and only rates it."""
    if mode not in MODES:
        raise ValueError(f"mode: {mode!r} is not one of {', '.join(MODES)}")
    topology = node_topology(node_view, config)
    used = {topology.unit_of[i] for i in topology.devices
            if i in allocated.devices or i in allocated.multi_allocated}
    fill = node_fill(len(used), len(topology.units))
    reusable = {unit for pool in node_view.pools for d in pool.devices
                if d.allow_multiple_allocations and d.id not in allocated.devices
                and (unit := topology.unit_of.get(d.id)) in used}
    return TopologyObjective(topology=topology, used=frozenset(used), fill=fill,
                             config=config, first_fit=mode == "advisor",
                             reusable=frozenset(reusable))


def priority(score: float | None) -> int:
    """0..10 for the extender's prioritize answer.

    Each locality tier owns a band (spanning 0-2, one NUMA node 3-5, one PCIe
    root 6-10) and `within` picks the step inside it, so the mapping depends
    only on the score, never on node size. `None` (the pod needs no devices,
    or nothing was scored) is NEUTRAL_PRIORITY = 0: drax adds nothing and the
    scheduler's own plugins decide.
    """
    if score is None or math.isnan(score):
        return NEUTRAL_PRIORITY
    scaled = min(1.0, max(0.0, score)) * TIERS
    tier = min(ONE_ROOT, int(scaled + _EPS))
    within = min(1.0, max(0.0, scaled - tier))
    low, high = _BANDS[tier]
    return low + min(high - low, int(within * (high - low + 1) + _EPS))
