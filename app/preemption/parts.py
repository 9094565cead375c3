"""Allocator runs of the victim search shared per part of a node.

When the preemptor's one claim binds all its requests with one matchAttribute
constraint over plain values, every allocation of it lies in one part of the
node: the devices its requests match that have one value of the attribute
(one PCIe root, say). A part's region adds the devices drawing on the same
shared counters as those (freeing them frees counters the part needs). The
victim search enumerates victim sets per part where no pool of a region's
devices is over its counters' limit, and only once the pod fits nowhere
without victims (`app.preemption.solve`).

A victim set whose release changes devices of one part's region only, and
none that another region holds, leaves every other part as it was, where
nothing fits: each allocation the allocator can find lies in that part. What
it returns (the best score, the first in the allocator's order among equal
ones; in advisor mode the first in order) is then fixed by:

- the node's hardware (positions, order, attributes, selector matches, all in
  the search's `base` key), so answers are renamed by position as for any
  run shared between nodes;
- which devices of the region are taken (a part is not shared on a node where
  one of its region's devices is shared or has capacity consumed, nor where a
  pool's counters are overcommitted, which refuses the whole pool);
- and of the rest of the node only what the topology score reads of an
  allocation in the part. Where every device of the part with a topology is
  behind one PCIe root, every allocation there has the one-root tier, scored
  `one_root_score(intact, fill)`: `intact` reads whether each root and NUMA
  node the part's devices are in, and the node, has a unit in use (in the key),
  while the node's fill moves every such score alike, keeping their order and
  their ties (two intact shares differ by far more than rounding). So the
  allocation does not depend on the fill, and its score is recomputed with
  the node's own fill.

The allocator's twins (which compare constrained attribute values, so never
pair devices of two parts), bounds and early stops change which allocations it
scores, never which it returns; its step budget could, so parts are shared
only where no search on the node can reach the budget (`steps_bound`), and a
CEL error met anywhere on the node could, so only where every request's
selector results are known without one. A run
shared this way never reads the node's state: the node's usage as masks, and
the claims the victims release, give its key.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from math import prod

from app.allocator.constraints import SCALAR_KINDS
from app.allocator.types import AllocatedState, NodeView
from app.model import Device, Quantity
from app.topology.normalise import NodeTopology


@dataclass(slots=True, frozen=True, eq=False)
class PartLayout:
    """One kind of node's parts for one claim shape, as masks of positions in
    the node's view: per part its region, the region's devices in no other
    region, the devices of each PCIe root and NUMA node its devices are in and
    of the node's placed units (the groups whose use the score reads), and
    whether every device of it with a topology is behind one root; per unit
    of the node (`NodeTopology.units`), its devices. One object per kind of
    node and shape (compared by identity)."""

    regions: tuple[int, ...]
    exclusive: tuple[int, ...]
    relevant: int  # every region
    groups: tuple[tuple[int, ...], ...]
    one_root: tuple[bool, ...]
    units: tuple[int, ...]
    # the positions of every unit when each unit is one device (so the units
    # in use are counted by bits), else None
    single: int | None = None


def part_layout(devices: Sequence[Device], position: Mapping[str, int], matched: Iterable[int],
                value_of: Callable[[int], tuple[str, Hashable] | None],
                topology: NodeTopology) -> PartLayout | None:
    """The parts of a node whose devices (in view order) the requests match at
    `matched`, by `value_of` (an attribute's (kind, value) per position, None
    when the device has none). None when a value is not a plain one."""
    members: dict[Hashable, int] = {}
    sets: dict[Hashable, set[tuple[str, str, str]]] = {}
    for at in matched:
        value = value_of(at)
        if value is None:
            continue  # in no allocation: the constraint needs the attribute
        if value[0] not in SCALAR_KINDS:
            return None
        members[value] = members.get(value, 0) | (1 << at)
        device = devices[at]
        sets.setdefault(value, set()).update(
            (device.driver, device.pool, use.counter_set) for use in device.consumes_counters)
    values = sorted(members, key=repr)
    regions = []
    for part in values:
        region = members[part]
        if sets[part]:
            for at, device in enumerate(devices):
                if any((device.driver, device.pool, use.counter_set) in sets[part]
                       for use in device.consumes_counters):
                    region |= 1 << at
        regions.append(region)
    exclusive = []
    for i, region in enumerate(regions):
        others = 0
        for j, other in enumerate(regions):
            if j != i:
                others |= other
        exclusive.append(region & ~others)
    unit_masks: dict[str, int] = {}
    for device_id, unit in topology.unit_of.items():
        found = position.get(device_id)
        if found is not None:
            unit_masks[unit] = unit_masks.get(unit, 0) | (1 << found)

    def mask(units: Iterable[str]) -> int:
        out = 0
        for unit in units:
            out |= unit_masks.get(unit, 0)
        return out

    placed = mask(topology.placed)
    groups = []
    one_root = []
    for part in values:
        topos = [topology.of(devices[at]) for at in bits(members[part])]
        roots = {t.pcie_root for t in topos if t.known}
        numas = {n for t in topos if (n := t.numa_node) is not None}
        one_root.append(len(roots) == 1 and None not in roots)
        groups.append((*(mask(topology.roots[r]) for r in sorted(r for r in roots if r)),
                       *(mask(topology.numa_nodes[n]) for n in sorted(numas)), placed))
    relevant = 0
    for region in regions:
        relevant |= region
    unit_positions = tuple(unit_masks[u] for u in topology.units if u in unit_masks)
    single: int | None = None
    every = 0
    for unit_mask in unit_positions:
        if unit_mask.bit_count() != 1:
            break
        every |= unit_mask
    else:
        single = every
    return PartLayout(regions=tuple(regions), exclusive=tuple(exclusive), relevant=relevant,
                      groups=tuple(groups), one_root=tuple(one_root), units=unit_positions,
                      single=single)


def steps_bound(slots: Sequence[int], blocks: int) -> int:
    """The most steps one allocator search can take for one claim whose device
    slots have `slots` candidates each, on a node with `blocks` PCIe roots and
    NUMA nodes: a slot scans at most its candidates once per way of filling
    the slots before it, and each block probe is such a search too."""
    scans = sum(prod(slots[:depth + 1]) for depth in range(len(slots)))
    return (1 + blocks) * scans


@dataclass(slots=True, frozen=True)
class PartNode:
    """One node's usage as a part's run reads it: the positions taken
    exclusively, those in use in any way (what makes a unit used), and the
    parts it may share (no shared or capacity-consuming use in their region)."""

    layout: PartLayout
    taken: int
    held: int
    open: tuple[bool, ...]

    def key(self, freed: int, base: int) -> tuple[Hashable, int] | None:
        """For a release freeing the positions `freed` (`base` of them freed by
        the search's base release, where nothing fits): the run's key in
        node-independent terms and the units in use then (for the fill); None
        when what it changes in the regions is not within one part this node
        may share."""
        layout = self.layout
        changed = freed & ~base & layout.relevant
        if not changed:
            return None
        i = next((i for i, exclusive in enumerate(layout.exclusive)
                  if changed & ~exclusive == 0), None)
        if i is None:
            return None
        if not self.open[i]:
            return None
        held = self.held & ~freed
        key = (i, self.taken & ~freed & layout.regions[i],
               tuple(held & group == 0 for group in layout.groups[i]))
        return key, self.used(freed)

    def used(self, freed: int) -> int:
        """The units in use once the positions `freed` are free."""
        held = self.held & ~freed
        single = self.layout.single
        if single is not None:
            return (held & single).bit_count()
        return sum(1 for unit in self.layout.units if unit & held)


def part_node(layout: PartLayout, allocated: AllocatedState, position: Mapping[str, int]
              ) -> PartNode:
    """`PartNode` of a node in state `allocated`, where no pool's counters are
    overcommitted (the allocator would refuse the whole pool: `overcommitted`)."""
    held, shared = held_positions(allocated, position)
    taken = id_mask(allocated.devices, position)
    not_plain = shared | id_mask(allocated.consumed_capacity, position)
    return PartNode(layout=layout, taken=taken, held=held,
                    open=tuple(one and not region & not_plain
                               for one, region in zip(layout.one_root, layout.regions,
                                                      strict=True)))


def part_members(layout: PartLayout, claims: Iterable[tuple[Iterable[int], int]]
                 ) -> list[set[int]]:
    """Per part of `layout`, the candidates that some releasable claim holding
    devices of its region needs, from each such claim's candidates and the
    positions of its devices in the node's view (a mask) (`part_groups`)."""
    regions = layout.regions
    members: list[set[int]] = [set() for _ in regions]
    for needs, held in claims:
        if held & layout.relevant:
            for i, region in enumerate(regions):
                if held & region:
                    members[i].update(needs)
    return members


def part_groups(members: Sequence[set[int]]) -> list[tuple[int, ...]]:
    """The candidates per part of the node (`members`, per part of its
    `PartLayout`), as groups to enumerate victim sets in: every allocation of
    the pod lies in one part, since its one claim binds all its requests with
    a matchAttribute constraint, so the devices it takes share one value of
    that attribute, and every value is a plain one (no lists, whose values
    may overlap). A part's region holds the devices the requests match with
    that value, and those drawing on the same shared counters as them; its
    candidates are those that some releasable claim on its region's devices
    needs.

    Exact where no pool with a device in a region is over its counters'
    limit once the pods already going release their claims (the allocator
    refuses such a pool's devices until enough of it is released, by pods of
    any part; the search then enumerates all candidates together): take a
    smallest victim set and an allocation it makes possible, in part v. Its
    pods outside v's candidates release nothing on v's devices or counters,
    and no pool of v's devices is over its limit with or without them, so
    without them the allocation is still possible: the set lies within v's
    candidates. Enumerating victim sets per part finds every smallest set,
    and only those."""
    return sorted({tuple(sorted(m)) for m in members if m})


def held_positions(allocated: AllocatedState, position: Mapping[str, int]) -> tuple[int, int]:
    """The positions of the devices in use as the topology score reads them
    (`make_objective`: held exclusively or shared), and of those held
    shared, as masks."""
    shared = id_mask(allocated.multi_allocated, position)
    return id_mask(allocated.devices, position) | shared, shared


def overcommitted(allocated: AllocatedState, view: NodeView) -> set[tuple[str, str]]:
    """The pools (driver, name) whose counters `allocated` consumes beyond
    their limit: the allocator picks no device of such a pool that consumes
    counters until enough of the pool is released."""
    out = set()
    by_pool = allocated.consumed_counters
    for pool in view.pools:
        consumed = by_pool.get(pool.key)
        if not consumed:
            continue
        for set_name, counter_set in pool.counter_sets.items():
            if _beyond(consumed, set_name, counter_set.counters):
                out.add(pool.key)
                break
    return out


def _beyond(consumed: Mapping[tuple[str, str], Quantity], set_name: str,
            limits: Mapping[str, Quantity]) -> bool:
    """Whether `consumed` ((set, counter) -> use) exceeds a limit of the
    counter set `set_name`. Whole numbers are compared as integers: a
    `Fraction` comparison costs far more, and nodes alike ask alike."""
    for counter, limit in limits.items():
        used = consumed.get((set_name, counter))
        if used is None:
            continue
        a, b = used.value, limit.value
        if a.denominator == 1 and b.denominator == 1:
            if a.numerator > b.numerator:
                return True
        elif a > b:
            return True
    return False


def id_mask(device_ids: Iterable[str], position: Mapping[str, int]) -> int:
    """The positions (`position`) of the devices `device_ids` in the node's
    view, as a mask; devices not in it are left out."""
    out = 0
    for device_id in device_ids:
        at = position.get(device_id)
        if at is not None:
            out |= 1 << at
    return out


def mask_of(positions: Iterable[int]) -> int:
    """`positions` as a mask."""
    out = 0
    for at in positions:
        out |= 1 << at
    return out


def bits(mask: int) -> Iterable[int]:
    """The positions set in `mask`, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low
