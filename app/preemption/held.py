"""What a node's pods hold, in the victim search's canonical order.

The victim search (`app.preemption.search`) reads every candidate node's
holdings for every preemptor: which claims are held, where their devices sit
in the node's view, and which pods each is reserved for. None of that depends
on the preemptor, so it is found once per node and kept until the node's
pods, their claims or its devices change (`HeldIndex`, one per inventory,
beside the inventory's own index of who holds what, `Occupants.occupancy`).
A search then reads a node's holdings without a pass over its claims, and
nodes that hold alike (the same places taken, by claims reserved for pods in
the same pattern) carry equal `Held.shape`s, so the search builds one problem
skeleton for all of them (`VictimSearch._skeleton`). A node's candidates in a
given order, and its victims as a victim set names them, are kept with its
holdings too while their priorities are their spec's (`Held.candidates`),
and which claims need which pods gone once a given set of them may go is
kept per shape (`HeldIndex.release`): it depends on the pods' parts, not on
what the preemptor asks for.

Churn changes a node's pods one at a time, so when they change the node's
holdings are found again from the ones kept (`held_of`'s `previous`): a view
built again with the same devices keeps their positions, a claim object
already read keeps its reads, and a pod replaced by one holding claims at the
same places (a pod of a Job or a Deployment replaced on the devices its
predecessor freed) is put in its predecessor's slot, the shape unchanged.

Canonical order: claims by where their devices are (`spot`), then by key;
pods (slots) by the first claim reserved for them, then the node's other
holders. Pure: reads the objects it is given, changes nothing.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from app.allocator.types import NodeView
from app.bounded_cache import BoundedCache
from app.extender.signature import HashedKey, flat_devices
from app.inventory import Inventory
from app.inventory.occupants import Holder
from app.model import Device, DeviceRequestAllocationResult, Pod, ResourceClaim
from app.preemption.importance import importance
from app.preemption.problem import Candidate, Victim, alone, one_pod, plain_positions

# Nodes whose holdings are kept per inventory (an every-node search at 16,384
# nodes and beyond starts over, as the search's other per-node memos do).
_NODES_KEPT: Final = 16384
NO_POD: Final = -1  # a reserver slot for a consumer not known as a pod
_PICKS_KEPT: Final = 64  # per node, orders of its candidates and their victim sets
# a claim's reserver slots when one pod (slot i) holds it: one object per value
_ONE_SLOT: Final = tuple((i,) for i in range(64))


def _itself(value: Any) -> Any:
    return value


def spot(results: Sequence[DeviceRequestAllocationResult],
         places: Sequence[int | None]) -> tuple[Hashable, ...]:
    """Where a claim's devices are, in node-independent terms: their places
    in the node's view (`places`, per result), plus what else a result takes
    when it is not plain. `(0, ...)`: every result holds its placed device
    alone."""
    if len(results) == 1:
        r, at = results[0], places[0]
        if at is not None and alone(r):
            return (0, at)
    if None not in places and all(alone(r) for r in results):
        return (0, *sorted(places))  # type: ignore[type-var]
    return (1, *sorted(repr((r.device_id if at is None else at, r.admin_access,
                             r.share_id is not None,
                             sorted((k, q.value) for k, q in r.consumed_capacity.items())))
                        for r, at in zip(results, places, strict=True)))


@dataclass(slots=True)
class Held:
    """A node's holdings, per claim in canonical order and per pod (slot).

    Per claim: the claim and its key, its results' device ids (`ids`) and their positions
    in the view (`places`, None for a device not in it), the positions of
    all its placed devices (`spans`) and of those it holds alone (`alone`,
    `app.preemption.problem.alone`), those positions again when it holds
    every device plainly and no device is in two held claims (`plain`, else
    None), and the slots of the pods it is reserved for (`reservers`,
    `NO_POD` for a consumer not known as a pod). Per slot: the pod, its
    `Holder` on this node (None: a reserver holding nothing here); `going`:
    the slots going already (terminating or terminal), as a mask;
    `staying`: the slots of the holders not going, and `priorities`: each
    one's `spec.priority` (None when unset). `terminating`: the holders
    going, in the inventory's order.
    `shape`: the claims' spots and reservers, which slots hold here, and
    whether no device is in two held claims, in node-independent terms (no
    pod, claim or device names): equal on nodes that hold alike. `picks`:
    what `below`, `candidates` and `victims` keep (a memo of theirs, as the
    holdings are the node's)."""

    view: NodeView
    occupancy: tuple[Holder, ...]
    claims: tuple[ResourceClaim, ...]
    keys: tuple[str, ...]
    ids: tuple[tuple[str, ...], ...]
    places: tuple[tuple[int | None, ...], ...]
    spans: tuple[int, ...]
    alone: tuple[int, ...]
    plain: tuple[int | None, ...]
    reservers: tuple[tuple[int, ...], ...]
    pods: tuple[Pod, ...]
    holders: tuple[Holder | None, ...]
    going: int
    staying: tuple[int, ...]
    priorities: tuple[int | None, ...]
    terminating: tuple[Pod, ...]
    shape: HashedKey
    picks: dict[Hashable, Any] = field(default_factory=dict, compare=False, repr=False)

    def holds(self, pod: Pod) -> bool:
        """Whether `pod` (by UID, name and namespace) is one of the holders."""
        return any(
            h is not None and h.pod.uid == pod.uid and h.pod.name == pod.name
            and h.pod.namespace == pod.namespace for h in self.holders)

    def below(self, p: int) -> tuple[dict[int, int], int] | None:
        """The holders not going whose priority is below `p` (slot -> its
        priority) and their slots as a mask, kept per `p`; None when some
        holder's priority is its PriorityClass's (read at each search)."""
        hit = self.picks.get(p)
        if hit is None:
            if None in self.priorities:
                return None
            eligible = {slot: priority for slot, priority in zip(
                self.staying, self.priorities, strict=True) if priority < p}  # type: ignore[operator]
            mask = 0
            for slot in eligible:
                mask |= 1 << slot
            hit = self._keep(p, (eligible, mask))
        return hit

    def _keep(self, key: Hashable, value: Any) -> Any:
        if len(self.picks) >= _PICKS_KEPT:
            self.picks.clear()
        self.picks[key] = value
        return value

    def candidates(self, order: tuple[int, ...], eligible: Mapping[int, int]
                   ) -> tuple[list[Candidate], tuple[Pod, ...]]:
        """The candidates at slots `order` with their priorities (`eligible`:
        slot -> priority), and their pods; kept per order when each pod's
        priority is its spec's (a PriorityClass's value may change)."""
        hit = self.picks.get(order)
        if hit is not None:
            return hit
        pods, holders = self.pods, self.holders
        found = [Candidate(pods[s], eligible[s], holders[s].keys)  # type: ignore[union-attr]
                 for s in order]
        out = found, tuple([c.pod for c in found])
        if all(pods[s].priority is not None for s in order):
            self._keep(order, out)
        return out

    def victims(self, order: tuple[int, ...], candidates: Sequence[Candidate],
                chosen: tuple[int, ...]) -> tuple[Victim, ...]:
        """The `chosen` of `candidates` (at slots `order`, `candidates`' own)
        as victims, most important first; kept as `candidates` keeps them."""
        key = (order, chosen)
        hit = self.picks.get(key)
        if hit is not None:
            return hit
        if len(chosen) == 1:
            out: tuple[Victim, ...] = (candidates[chosen[0]].victim(),)
        else:
            out = tuple(sorted((candidates[i].victim() for i in chosen),
                               key=lambda v: importance(v.pod, v.priority)))
        if order in self.picks:
            self.picks[key] = out
        return out


def needed_gone(reservers: Sequence[int], may_go: int, going: int) -> set[int] | None:
    """The slots among `may_go` (a mask) that must all go to release a claim
    reserved for `reservers` (empty: released once the slots `going` are
    gone), or None when a reserver that stays holds it."""
    out: set[int] = set()
    for reserver in reservers:
        if reserver == NO_POD:
            return None
        if may_go >> reserver & 1:
            out.add(reserver)
        elif not going >> reserver & 1:
            return None
    return out


@dataclass(slots=True, frozen=True)
class Release:
    """What releasing a node's claims takes when the pods (slots) of a mask
    may go (`HeldIndex.release`): per claim the slots that must all go
    (`needs`: `needed_gone` as a frozenset), and per slot the first claim
    that needs it (`first`)."""

    needs: tuple[frozenset[int] | None, ...]
    first: Mapping[int, int]


def release_of(held: Held, may_go: int) -> Release:
    """`Release` of `held` when the slots of `may_go` may go."""
    needs: list[frozenset[int] | None] = []
    first: dict[int, int] = {}
    going = held.going
    for i, reservers in enumerate(held.reservers):
        if len(reservers) == 1 and reservers[0] != NO_POD and may_go >> reservers[0] & 1:
            # one reserver that may go: the common case, one shared set
            found: frozenset[int] | None = one_pod(reservers[0])
        else:
            gone = needed_gone(reservers, may_go, going)
            found = None if gone is None else frozenset(gone)
        needs.append(found)
        if found:
            for slot in found:
                first.setdefault(slot, i)
    return Release(needs=tuple(needs), first=first)


def held_of(view: NodeView, occupancy: tuple[Holder, ...], position: Mapping[str, int],
            shared: Callable[[Any], Any] = _itself, *, shapes: Callable[[Any], Any] = _itself,
            previous: Held | None = None) -> Held:
    """`Held` of a node whose view is `view` (`position`: device id -> its
    index in the view) and whose holders are `occupancy`; `shared`: one
    object per value for its small tuples (places, reservers, slots), which
    repeat across nodes, and `shapes` for its shape. `previous`: a `Held`
    built on the same `position`, whose reads of a claim (places, spot,
    masks) are taken for the same claim object, so a node where one pod
    changed reads only that pod's claims again."""
    if previous is not None:
        replaced = _one_replaced(view, occupancy, position, shared, previous)
        if replaced is not None:
            return replaced
    # per claim key: its index in `previous`, whose reads hold for the same claim object
    again: dict[str, int] = {}
    if previous is not None:
        again = {key: at for at, key in enumerate(previous.keys)}
        claims_before, places_before, spans_before, alone_before = (
            previous.claims, previous.places, previous.spans, previous.alone)
        spots_before = previous.shape.value[0]  # type: ignore[index]
    entries: dict[str, tuple[Any, ...]] = {}
    seen: set[int | None] = set()
    count = 0
    for holder in occupancy:
        for key, claim, reservers, ids in zip(holder.keys, holder.claims, holder.reservers,
                                              holder.devices, strict=True):
            if key in entries:
                continue  # a claim shared by several holders
            at = again.get(key)
            if at is not None and claims_before[at] is claim:
                where, places = spots_before[at], places_before[at]
                span, mask = spans_before[at], alone_before[at]
            else:
                allocation = claim.allocation
                assert allocation is not None
                places = shared(tuple(map(position.get, ids)))
                span = 0
                for place in places:
                    if place is not None:
                        span |= 1 << place
                where, mask = spot(allocation.results, places), plain_positions(claim, places)
            entries[key] = (where, key, claim, ids, places, reservers, span, mask)
            seen.update(places)
            count += len(places)
    # by spot, then key (unique: the rest is never compared); per read, its values
    columns = tuple(zip(*sorted(entries.values()), strict=True)) or ((),) * 8
    return _held_of(view, occupancy, columns, shared, shapes, once=len(seen) == count,
                    previous=previous)


def _one_replaced(view: NodeView, occupancy: tuple[Holder, ...], position: Mapping[str, int],
                  shared: Callable[[Any], Any], previous: Held) -> Held | None:
    """`held_of` where, of `previous`'s holders, one gave way to another, each
    holding claims reserved for it alone, the new claims at the spots of the
    old, neither pod going, on a node whose claims' spots are distinct (as
    churn replaces a pod): `previous` with the new claims, pod and priority in
    the old ones' places, and its shape; None in any other case."""
    before, count = previous.occupancy, len(occupancy)
    if len(before) != count:
        return None
    first = 0
    while first < count and before[first] is occupancy[first]:
        first += 1
    if first == count:
        return None
    old = before[first]
    if all(before[i] is occupancy[i] for i in range(first + 1, count)):
        new = occupancy[first]  # read again in its place
    elif all(before[i + 1] is occupancy[i] for i in range(first, count - 1)):
        new = occupancy[-1]  # come last, as a pod put again is
    else:
        return None
    if not (_alone(old) and _alone(new) and len(old.keys) == len(new.keys)):
        return None
    slot = next(at for at, h in enumerate(previous.holders) if h is old)
    spots = previous.shape.value[0]  # type: ignore[index]
    if previous.going >> slot & 1 or new.pod.deleting or new.pod.terminal or id(
            new.pod) in map(id, previous.pods) or len(set(spots)) != len(spots):
        return None
    # the old claims' indices, by spot; no other claim reserved for the old pod
    at_spot: dict[Hashable, int] = {}
    for index, (key, reservers) in enumerate(zip(previous.keys, previous.reservers,
                                                 strict=True)):
        if key in old.keys:
            at_spot[spots[index]] = index
        elif slot in reservers:
            return None
    if len(at_spot) != len(old.keys):
        return None
    claims, keys, ids, places = (list(previous.claims), list(previous.keys),
                                 list(previous.ids), list(previous.places))
    for key, claim, claim_ids in zip(new.keys, new.claims, new.devices, strict=True):
        allocation = claim.allocation
        assert allocation is not None
        claim_places = shared(tuple(map(position.get, claim_ids)))
        at = at_spot.pop(spot(allocation.results, claim_places), None)
        if at is None or plain_positions(claim, claim_places) != previous.alone[at]:
            return None
        claims[at], keys[at], ids[at], places[at] = claim, key, claim_ids, claim_places
    pods, holders = list(previous.pods), list(previous.holders)
    pods[slot], holders[slot] = new.pod, new
    priorities = list(previous.priorities)
    priorities[previous.staying.index(slot)] = new.pod.priority
    return Held(view=view, occupancy=occupancy, claims=tuple(claims), keys=tuple(keys),
                ids=tuple(ids), places=tuple(places), spans=previous.spans,
                alone=previous.alone, plain=previous.plain, reservers=previous.reservers,
                pods=tuple(pods), holders=tuple(holders), going=previous.going,
                staying=previous.staying, priorities=tuple(priorities),
                terminating=previous.terminating, shape=previous.shape)


def _alone(holder: Holder) -> bool:
    """Whether each of the holder's claims is reserved for its pod alone."""
    pod = holder.pod
    for reservers in holder.reservers:
        if len(reservers) != 1 or reservers[0] is not pod:
            return False
    return True


def _held_of(view: NodeView, occupancy: tuple[Holder, ...], columns: tuple[Any, ...],
             shared: Callable[[Any], Any], shapes: Callable[[Any], Any], *, once: bool,
             previous: Held | None) -> Held:
    """`held_of` once its claims' reads are in canonical order (`columns`: per
    read, its values per claim). Of `previous`, the tuples of values (no
    objects of the inventory's) equal to the new ones are kept: fewer objects
    for the collector to scan after a search that rebuilt many nodes."""
    spots, keys, claims, ids, places, reservers, spans, alones = columns
    slot_of: dict[int, int] = {}
    pods: list[Pod] = []
    reserved = []
    for claim_reservers in reservers:
        if len(claim_reservers) == 1 and claim_reservers[0] is not None:
            # one pod, as most claims: its slot's tuple is one object on every node
            pod_id = id(claim_reservers[0])
            at = slot_of.get(pod_id)
            if at is None:
                at = slot_of[pod_id] = len(pods)
                pods.append(claim_reservers[0])
            reserved.append(_ONE_SLOT[at] if at < len(_ONE_SLOT) else shared((at,)))
            continue
        slots = []
        for reserver in claim_reservers:
            if reserver is None:
                slots.append(NO_POD)
                continue
            at = slot_of.get(id(reserver))
            if at is None:
                at = slot_of[id(reserver)] = len(pods)
                pods.append(reserver)
            slots.append(at)
        reserved.append(shared(tuple(slots)))
    if once:
        plains = tuple([mask if where[0] == 0 else None
                        for where, mask in zip(spots, alones, strict=True)])
    else:
        plains = (None,) * len(spots)
    holders: list[Holder | None] = [None] * len(pods)
    for holder in occupancy:
        at = slot_of.get(id(holder.pod))
        if at is None:  # holds claims no reservation names it in (by identity)
            at = slot_of[id(holder.pod)] = len(pods)
            pods.append(holder.pod)
            holders.append(holder)
        else:
            holders[at] = holder
    going = 0
    for at, pod in enumerate(pods):
        if pod.deleting or pod.terminal:
            going |= 1 << at
    terminating = tuple([h.pod for h in occupancy if going >> slot_of[id(h.pod)] & 1])
    present = tuple([h is not None for h in holders])
    staying, priorities = [], []
    for at, h in enumerate(holders):
        if h is not None and not going >> at & 1:
            staying.append(at)
            priorities.append(h.pod.priority)
    reserved_t = tuple(reserved)
    shape = shapes(HashedKey((spots, reserved_t, present, once)))
    values: tuple[Any, ...] = (ids, places, spans, alones, plains, reserved_t, tuple(priorities))
    if previous is not None:
        values = tuple([old if old == new else new for new, old in zip(values, (
            previous.ids, previous.places, previous.spans, previous.alone, previous.plain,
            previous.reservers, previous.priorities), strict=True)])
    ids, places, spans, alones, plains, reserved_t, priorities_t = values
    return Held(view=view, occupancy=occupancy, claims=claims, keys=keys, ids=ids,
                places=places, spans=spans, alone=alones, plain=plains,
                reservers=reserved_t, pods=tuple(pods), holders=tuple(holders), going=going,
                staying=shared(tuple(staying)), priorities=priorities_t,
                terminating=terminating, shape=shape)


class HeldIndex:
    """Per node of one inventory: its devices in view order with their
    positions, and its `Held`, each kept until the node's view (its devices
    or their use) or its holders change."""

    __slots__ = ("_held", "_releases", "_shapes", "_tuples", "_views", "built", "releases")

    def __init__(self) -> None:
        self._views: BoundedCache[str, tuple[NodeView, tuple[Device, ...], dict[str, int]]] = \
            BoundedCache(_NODES_KEPT)
        # per node: its `Held` and the positions it was built on
        self._held: BoundedCache[str, tuple[Mapping[str, int], Held]] = BoundedCache(
            _NODES_KEPT)
        # one object per `Held.shape`: nodes holding alike key their skeleton
        # by it, and equal keys then compare by identity
        self._shapes: BoundedCache[HashedKey, HashedKey] = BoundedCache(_NODES_KEPT)
        # the holdings' small tuples, one object per value (`held_of`)
        self._tuples: BoundedCache[Any, Any] = BoundedCache(_NODES_KEPT)
        # per (shape, slots going, slots that may go): its `Release`
        self._releases: BoundedCache[tuple[HashedKey, int, int], Release] = BoundedCache(
            _NODES_KEPT)
        self.built = 0  # `Held`s built (for tests)
        self.releases = 0  # `Release`s built (for tests)

    def devices(self, view: NodeView) -> tuple[tuple[Device, ...], dict[str, int]]:
        """The node's devices in view order, and device id -> index: the same
        objects while its devices are (its view is built again whenever its
        devices' use changes, which moves none of them)."""
        hit = self._views.get(view.node.name)
        if hit is None or hit[0] is not view:
            if hit is not None and _same_devices(hit[0], view):
                hit = self._views.put(view.node.name, (view, hit[1], hit[2]))
            else:
                devices = flat_devices(view)
                hit = self._views.put(view.node.name, (
                    view, devices, {d.id: i for i, d in enumerate(devices)}))
        return hit[1], hit[2]

    def of(self, view: NodeView, occupancy: tuple[Holder, ...]) -> Held:
        """The node's `Held` with `occupancy` as its holders; built from the
        node's previous one (`held_of`'s `previous`) while its devices'
        positions stay."""
        name = view.node.name
        hit = self._held.get(name)
        if hit is not None and hit[1].view is view and hit[1].occupancy is occupancy:
            return hit[1]
        position = self.devices(view)[1]
        previous = None if hit is None or hit[0] is not position else hit[1]
        if previous is not None and previous.occupancy is occupancy:
            held = replace(previous, view=view)  # the same holders: their picks hold
        else:
            self.built += 1
            held = held_of(view, occupancy, position, self._tuples.intern,
                           shapes=self._shapes.intern, previous=previous)
        self._held.put(name, (position, held))
        return held

    def release(self, held: Held, may_go: int) -> Release:
        """`release_of(held, may_go)`, kept for every node holding alike."""
        key = (held.shape, held.going, may_go)
        hit = self._releases.get(key)
        if hit is None:
            self.releases += 1
            hit = self._releases.put(key, release_of(held, may_go))
        return hit


def _same_devices(old: NodeView, new: NodeView) -> bool:
    """Whether `new` has `old`'s devices in the same order (pool by pool: the
    same objects, as a view built again for a change of use has them)."""
    return len(old.pools) == len(new.pools) and all(
        a.devices == b.devices for a, b in zip(old.pools, new.pools, strict=True))


_INDEXES: weakref.WeakKeyDictionary[Inventory, HeldIndex] = weakref.WeakKeyDictionary()


def held_index(inventory: Inventory) -> HeldIndex:
    """The inventory's `HeldIndex`, shared by every search over it and gone with it."""
    index = _INDEXES.get(inventory)
    if index is None:
        index = _INDEXES[inventory] = HeldIndex()
    return index
