"""The inventory: the only mutable state of drax, and its one writer.

Sources feed it add / update / delete events (`apply`, `replace`); the
extender reads per-node snapshots (`node_state`) and the allocated state.
`Inventory` is the only writer of three parts, one job each:

- `objects.Objects`: the objects by kind and the pools their slices make;
- `versions.Versions`: a sequence number per change and per node, so a node's
  version changes whenever anything it can see changes, and readers can ask
  which nodes changed since a sequence;
- `holdings.Holdings`: what allocated claims, assumed allocations and
  preemptors' nominations take, indexed by pool.

Each write updates the part it belongs to and stamps the versions of the
nodes it can alter. Node snapshots (`NodeState`: a node's `NodeView` and
`AllocatedState`) are built on first use and kept until the node's version
changes.

Assumed allocations (made by bind before the API confirms them) count as
allocated until the claim arrives carrying an allocation, until
`forget_assumed`, or until their time-to-live passes.

A claim can be newer in the inventory than in its watch: the preemption's
catch-up reads it from the API server (`delete` on a 404, `apply` of a newer
copy). So a claim's watch event not newer than the held copy is dropped
(resourceVersions compared as revisions, as kube-scheduler's assume cache
compares them, and only when both are integers), and a claim read as gone is
remembered by uid until its deletion arrives or the claims are listed again,
so that the watch's older events cannot bring it back.
"""

from __future__ import annotations

import time
from collections import ChainMap
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Final

from app.allocator.types import AllocatedState, ClaimAllocation, NodeView, PoolKey
from app.inventory.holdings import Holdings, Nomination, counted, waiting_ended
from app.inventory.nodepool import NodePool
from app.inventory.objects import (
    POD_CLAIM_NAME_ANNOTATION,
    Objects,
    object_key,
    raw_key,
    unchanged,
)
from app.inventory.occupants import Occupants, priority_of
from app.inventory.pools import pool_view_for_node, upstream_pool_order
from app.inventory.selectors import SelectorCache
from app.inventory.usage import PodUsages
from app.inventory.versions import Versions
from app.model import (
    Device,
    DeviceClass,
    InvalidObject,
    Node,
    Pod,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    parse_object,
)
from app.model.requests import PodUsage

# What the allocator needs; a default inventory waits for these to sync.
DEVICE_KINDS: Final = ("Node", "ResourceSlice", "DeviceClass", "ResourceClaim",
                       "ResourceClaimTemplate", "Pod")
# Plus what preemption reads (`occupants`).
KINDS: Final = (*DEVICE_KINDS, "PodDisruptionBudget", "PriorityClass")
EVENT_TYPES: Final = ("ADDED", "MODIFIED", "DELETED")

__all__ = ["DEVICE_KINDS", "EVENT_TYPES", "KINDS", "POD_CLAIM_NAME_ANNOTATION", "Inventory",
           "InventoryCounts", "NodeState", "compare_revisions"]


@dataclass(slots=True, frozen=True, weakref_slot=True)
class NodeState:
    """One node's snapshot: valid for as long as `view.version` is current."""

    view: NodeView
    allocated: AllocatedState


@dataclass(slots=True, frozen=True)
class InventoryCounts:
    nodes: int
    devices: int
    allocated_devices: int


class Inventory:
    """Index of what exists and what is taken (see the module doc)."""

    def __init__(self, *, expected_kinds: Iterable[str] = DEVICE_KINDS,
                 clock: Callable[[], float] = time.monotonic,
                 pool: NodePool | None = None) -> None:
        unknown = sorted(set(expected_kinds) - set(KINDS))
        if unknown:
            raise ValueError(f"unknown kind(s): {', '.join(unknown)}")
        self._expected = frozenset(expected_kinds)
        self._synced_kinds: set[str] = set()
        self._objects = Objects()
        self.occupants = Occupants(claim=self._objects.claims.get,
                                   pod=self._objects.pods.get)
        # Every live pod's requests on its node, with claims or without.
        self.usage = PodUsages()
        self._versions = Versions()
        self._holdings = Holdings(clock=clock, on_change=self._stamp_pools)
        self._states: dict[str, NodeState] = {}
        # Claims read as gone before their watch said so: key -> uid.
        self._gone_claims: dict[str, str] = {}
        self.selectors = SelectorCache()
        # With a pool, only its nodes and the slices they can use are held (`nodepool`).
        self.pool = pool

    # ------------------------------------------------------------------ event API

    def apply(self, kind: str, event_type: str, obj: Mapping[str, Any],
              parse: Callable[[str, Any], Any] = parse_object) -> None:
        """Apply one watch event, read by `parse` (the kind's own, e.g. a pod kept
        as its requests only); raises InvalidObject and changes nothing on bad
        input, but for a DELETED event: the object its metadata names is deleted
        however invalid the rest is, so no copy of a deleted object stays."""
        if event_type not in EVENT_TYPES:
            raise InvalidObject(f"unknown event type {event_type!r}")
        if not self.admits(kind, obj):
            # Outside the pool: never parsed, and gone if it was held.
            self._delete(kind, str(obj["metadata"]["name"]))
            return
        try:
            parsed = parse(kind, obj)
        except InvalidObject:
            key = raw_key(kind, obj) if event_type == "DELETED" else None
            if key is None:
                raise
            self._delete(kind, key)
            return
        self.apply_parsed(kind, event_type, parsed)

    def apply_parsed(self, kind: str, event_type: str, parsed: Any) -> None:
        """`apply` of an object parsed already (a slice decoded straight from
        its JSON); the pool's check is made on the parsed object (`upsert`)."""
        if kind == "ResourceClaim" and self._claim_event_stale(event_type, parsed):
            return
        if event_type == "DELETED":
            self._delete(kind, object_key(kind, parsed))
        else:
            self.upsert(kind, parsed)

    def replace(self, kind: str, objs: Iterable[Mapping[str, Any]]) -> None:
        """A relist: `kind` becomes exactly `objs`. Everything is parsed first."""
        for _ in self.replacing(kind, objs):
            pass

    def replacing(self, kind: str, objs: Iterable[Mapping[str, Any]], *,
                  step: int = 1) -> Iterator[None]:
        """`replace` in steps of `step` objects, so a caller on the event loop can
        let requests in between (a relist of a large cluster's slices takes
        seconds, while one slice of many MIG placements parses in a millisecond
        or two, so by default every object is a step and the caller groups steps
        by time). All objects are parsed before anything changes, so a bad one
        still changes nothing; between the later steps a reader sees some
        objects already as listed and others not yet, as while a watch catches up."""
        parsed = []
        for i, o in enumerate(objs):
            parsed.append(parse_object(kind, o))
            if i % step == step - 1:
                yield
        yield from self.replacing_parsed(kind, parsed, step=step)

    def replacing_parsed(self, kind: str, parsed: list[Any], *,
                         step: int = 1) -> Iterator[None]:
        """`replacing` with objects parsed already (`parse_object`). `parsed`
        is emptied as it is applied, so each object is freed in its own step."""
        listing = self.listing(kind)
        for i in range(len(parsed)):
            obj, parsed[i] = parsed[i], None
            listing.put(obj)
            del obj
            if i % step == step - 1:
                yield
        parsed.clear()
        yield from listing.finishing(step=step)

    def listing(self, kind: str) -> Listing:
        """A list applied as it is read: each object is put as it arrives, and
        `Listing.finishing` then deletes what the list did not hold. A source
        that parses a large list page by page never holds the parsed list
        beside the inventory (the objects the list repeats unchanged are freed
        as they are put), and a failed list has changed only what it read."""
        if kind == "ResourceClaim":
            self._gone_claims.clear()
        return Listing(self, kind)

    def delete(self, kind: str, key: str) -> None:
        """Remove the object `key` of `kind`, known gone without a watch event
        (a read answered 404); nothing when it is not held. A claim's watch
        events for the removed copy's uid are then ignored until its deletion
        arrives or the claims are listed again."""
        if kind not in KINDS:
            raise InvalidObject(f"unsupported kind {kind!r}")
        if kind == "ResourceClaim":
            held = self._objects.claims.get(key)
            if held is not None:
                self._gone_claims[key] = held.uid
        self._delete(kind, key)

    def _claim_event_stale(self, event_type: str, claim: ResourceClaim) -> bool:
        """Whether a claim's watch event is older than what the inventory holds:
        not newer than the held copy, or about a copy read as gone."""
        key = claim.key
        gone = self._gone_claims.get(key)
        if gone is not None and gone == claim.uid:
            if event_type == "DELETED":
                del self._gone_claims[key]
            return True
        held = self._objects.claims.get(key)
        if held is None:
            return False
        order = compare_revisions(claim.resource_version, held.resource_version)
        return order is not None and order <= 0

    def admits(self, kind: str, obj: Mapping[str, Any]) -> bool:
        """False for a raw object the pool leaves out without parsing it: a
        node-local ResourceSlice of a node outside the pool."""
        if self.pool is None or kind != "ResourceSlice":
            return True
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
            return True  # the parse says what is wrong with it
        return self.pool.admits_raw(obj) is not False

    def in_pool(self, node_name: str) -> bool:
        """Whether `node_name` is a node this inventory serves (every node without a pool)."""
        return self.pool is None or node_name in self.pool.members

    def mark_synced(self, kind: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}")
        self._synced_kinds.add(kind)

    @property
    def synced(self) -> bool:
        return self._expected <= self._synced_kinds

    def upsert(self, kind: str, obj: Any) -> None:
        """Add or replace an already parsed object (the in-memory binder writes here)."""
        self._holdings.expire()
        objects = self._objects
        pool = self.pool
        if kind == "Node":
            joined = False
            if pool is not None:
                if not pool.matches(obj):
                    pool.outside.add(obj.name)
                    self._delete(kind, obj.name)
                    return
                joined = obj.name not in pool.members
                pool.members.add(obj.name)
                pool.outside.discard(obj.name)
            if objects.put_node(obj):
                self._versions.stamp_nodes([obj.name])
            if joined and pool is not None and pool.on_join is not None:
                pool.on_join(obj.name)
        elif kind == "ResourceSlice":
            if pool is not None and not pool.admits(obj):
                self._delete(kind, obj.name)
            elif not unchanged(objects.slices.get(obj.name), obj):
                self._slice_changed(obj, objects.put_slice(obj))
        elif kind == "DeviceClass":
            if not unchanged(objects.classes.get(obj.name), obj):
                objects.classes[obj.name] = obj
                self.selectors.forget_class(obj.name)
                self._versions.stamp_all()
        elif kind == "ResourceClaim":
            self.occupants.claim_changed(objects.claims.get(obj.key), obj)
            objects.put_claim(obj)
            results = counted(obj.allocation.results) if obj.allocation else ()
            self._holdings.claim_put(obj.key, results, allocated=obj.allocation is not None)
        elif kind == "ResourceClaimTemplate":
            objects.templates[obj.key] = obj
        elif kind == "Pod":
            key = obj.key
            self.usage.put(key, obj.node_name, obj)
            if isinstance(obj, PodUsage):  # a pod without claims: only what it takes
                held = objects.pods.pop(key, None)
                if held is not None:
                    self.occupants.remove_pod(held)
            else:
                self.occupants.put_pod(objects.pods.get(key), obj)
                objects.pods[key] = obj
            self._nomination_seen(obj)
        elif kind == "PodDisruptionBudget":
            self.occupants.put_pdb(obj)
        elif kind == "PriorityClass":
            self.occupants.put_priority_class(obj)
        else:
            raise InvalidObject(f"unsupported kind {kind!r}")

    def _delete(self, kind: str, key: str) -> None:
        self._holdings.expire()
        objects = self._objects
        if kind == "Node":
            if self.pool is not None and key in self.pool.members:
                self.pool.members.discard(key)
                for name in self._local_slice_names(key):
                    self._delete("ResourceSlice", name)
            if objects.remove_node(key):
                self._versions.stamp_nodes([key])
        elif kind == "ResourceSlice":
            old = objects.remove_slice(key)
            if old is not None:
                self._slice_changed(old, old)
        elif kind == "DeviceClass":
            if objects.classes.pop(key, None) is not None:
                self.selectors.forget_class(key)
                self._versions.stamp_all()
        elif kind == "ResourceClaim":
            gone = objects.remove_claim(key)
            self.occupants.claim_changed(gone, None)
            held = gone is not None
            self._holdings.claim_deleted(key, held=held)
        elif kind == "ResourceClaimTemplate":
            objects.templates.pop(key, None)
        elif kind == "Pod":
            self.usage.remove(key)
            pod = objects.pods.pop(key, None)
            if pod is not None:
                self.occupants.remove_pod(pod)
            self._holdings.end_nomination(key)
        elif kind == "PodDisruptionBudget":
            self.occupants.remove_pdb(key)
        elif kind == "PriorityClass":
            self.occupants.remove_priority_class(key)
        else:
            raise InvalidObject(f"unsupported kind {kind!r}")

    def _local_slice_names(self, node_name: str) -> list[str]:
        objects = self._objects
        return [s.name for key in list(objects.local_pools.get(node_name, ()))
                for s in objects.pool_slices.get(key, {}).values() if s.node_name == node_name]

    # ------------------------------------------------------------------ reads

    @property
    def classes(self) -> Mapping[str, DeviceClass]:
        return self._objects.classes

    def claim(self, key: str) -> ResourceClaim | None:
        return self._objects.claims.get(key)

    def claims(self) -> Iterable[ResourceClaim]:
        return self._objects.claims.values()

    def templates(self) -> Iterable[ResourceClaimTemplate]:
        return self._objects.templates.values()

    def template(self, key: str) -> ResourceClaimTemplate | None:
        return self._objects.templates.get(key)

    def pod(self, key: str) -> Pod | None:
        return self._objects.pods.get(key)

    def pods(self) -> Iterable[Pod]:
        return self._objects.pods.values()

    def generated_claim(self, *, pod: Pod, pod_claim_name: str) -> ResourceClaim | None:
        """The claim generated for `pod`'s entry `pod_claim_name`, found by owner and
        annotation as the resourceclaim controller marks it."""
        return self._objects.generated_claim(pod=pod, pod_claim_name=pod_claim_name)

    def node_names(self) -> list[str]:
        """Every node known, sorted: Node objects plus nodes named by node-local slices."""
        return self._objects.node_names()

    @property
    def sequence(self) -> int:
        """Grows with every change that can alter any node's view."""
        self._holdings.expire()
        return self._versions.sequence

    def changed_since(self, sequence: int) -> set[str] | None:
        """Nodes whose version moved after `sequence`; None when that is not known
        node by node (a change every node can see, or history too old)."""
        self._holdings.expire()
        return self._versions.changed_since(sequence)

    def version(self, node_name: str) -> int:
        self._holdings.expire()
        versions = self._versions
        return max(versions.by_node.get(node_name, 0), versions.shared)

    def versions(self, node_names: Sequence[str]) -> list[int]:
        """`version` of many nodes at once (the extender asks for every candidate)."""
        self._holdings.expire()
        return self._versions.versions(node_names)

    def node_state(self, node_name: str) -> NodeState | None:
        """The node's view and allocated state, rebuilt only when its version changed.
        None for a node the inventory does not know."""
        version = self.version(node_name)
        cached = self._states.get(node_name)
        if cached is not None and cached.view.version == version:
            return cached
        node = self._objects.nodes.get(node_name)
        if node is None:
            if node_name not in self._objects.local_pools:
                self._states.pop(node_name, None)
                return None
            node = Node(name=node_name)
        state = self._build_state(node, version)
        self._states[node_name] = state
        return state

    def allocated_without(self, state: NodeState, claim_keys: Iterable[str]) -> AllocatedState:
        """`state.allocated` as if the claims `claim_keys` were deallocated: what
        preemption asks of a node for each set of victims it tries."""
        without = frozenset(claim_keys)
        if not without:
            return state.allocated
        return self._holdings.allocated_for(state.view.pools, self._objects.pool_devices,
                                            without)

    def _table(self, kind: str) -> Mapping[str, Any]:
        if kind == "PodDisruptionBudget":
            return self.occupants.pdb_table()
        if kind == "PriorityClass":
            return self.occupants.priority_classes
        if kind == "Pod":  # pods with claims, and the bound pods of every kind
            return ChainMap[str, Any](self._objects.pods, self.usage.keys)  # type: ignore[arg-type]
        return self._objects.table(kind)

    def class_matcher(self, device_class: DeviceClass, device: Device) -> bool:
        return self.selectors.class_matches(device_class, device)

    def counts(self) -> InventoryCounts:
        """Read at every metrics scrape, so only the pools changed since the last
        read are counted."""
        return InventoryCounts(nodes=self._objects.node_count(),
                               devices=self._objects.device_count(),
                               allocated_devices=len(self._holdings.taken_device_ids()))

    # ------------------------------------------------------------------ assumed allocations

    def assume(self, *, pod: Pod, allocations: Sequence[ClaimAllocation],
               ttl: float) -> None:
        """Hold `allocations` as taken until confirmed, forgotten, or `ttl` seconds pass."""
        self._holdings.expire()
        self._holdings.assume(pod_key=pod.key, allocations=allocations, ttl=ttl)

    def forget_assumed(self, *, pod: Pod, claim_key: str | None = None) -> None:
        """Drop every assumption made for `pod` (its bind failed), or only the one
        for `claim_key`."""
        self._holdings.forget(pod_key=pod.key, claim_key=claim_key)

    def assumed_claims(self) -> list[str]:
        self._holdings.expire()
        return self._holdings.assumed_claims()

    def binding(self, pod_key: str) -> bool:
        """Whether a bind of pod `pod_key` is under way: it assumed devices that
        the watch has not yet confirmed, and the pod is not seen bound yet."""
        self._holdings.expire()
        return self._holdings.assumed_for(pod_key)

    # ------------------------------------------------------------------ nominations

    def nominate(self, nomination: Nomination) -> None:
        """Hold devices for a preemptor (see `holdings`)."""
        self._holdings.expire()
        self._holdings.nominate(nomination)

    def end_nomination(self, pod_key: str) -> Nomination | None:
        return self._holdings.end_nomination(pod_key)

    def nomination(self, pod_key: str) -> Nomination | None:
        self._holdings.expire()
        return self._holdings.nomination(pod_key)

    def overlapping(self) -> bool:
        """Whether some device is allocated to two or more claims, one of them
        holding it alone (`Holdings.overlapping`)."""
        return self._holdings.overlapping()

    def nominations(self) -> list[Nomination]:
        self._holdings.expire()
        return self._holdings.nominations()

    def holds_lifted_for(self, pod: Pod) -> AbstractContextManager[None]:
        """The holds `pod` may take count as free within a synchronous block."""
        self._holdings.expire()
        return self._holdings.lifted_for(pod_key=pod.key, pod_uid=pod.uid,
                                         priority=priority_of(pod, self.occupants))

    def _nomination_seen(self, pod: Pod | PodUsage) -> None:
        """A preemptor's nomination ends once it is bound (on its node or
        elsewhere), deleting, or replaced by a pod of another uid."""
        held = self._holdings.nomination(pod.key)
        if held is not None and waiting_ended(pod, held.pod_uid):
            self._holdings.end_nomination(pod.key)

    # ------------------------------------------------------------------ stamping

    def _slice_changed(self, s: ResourceSlice, old: ResourceSlice | None) -> None:
        """Stamp every node that could see the slice's pool before or after."""
        if old is not None:
            self.selectors.forget_devices(d.id for d in old.devices)
        key = (s.driver, s.pool.name)
        nodes = self._objects.pool_nodes(key)
        if old is not None and old.node_name is not None:
            nodes.add(old.node_name)
        if key in self._objects.shared_pools or (old is not None and old.node_name is None):
            self._versions.stamp_all()
        else:
            self._versions.stamp_nodes(nodes)

    def _stamp_pools(self, keys: Iterable[PoolKey]) -> None:
        nodes: set[str] = set()
        for key in keys:
            if key in self._objects.shared_pools:
                self._versions.stamp_all()
                return
            nodes |= self._objects.pool_nodes(key)
        self._versions.stamp_nodes(nodes)

    def _build_state(self, node: Node, version: int) -> NodeState:
        views = []
        for key in self._objects.pools_seen_by(node.name):
            info = self._objects.pool_info(key)
            if info is None:
                continue
            view = pool_view_for_node(info, node)
            if view is not None:
                views.append(view)
        pools = upstream_pool_order(views)
        return NodeState(view=NodeView(node=node, version=version, pools=pools),
                         allocated=self._holdings.allocated_for(pools,
                                                                self._objects.pool_devices))


def compare_revisions(version: str, than: str) -> int | None:
    """-1, 0 or 1 as resourceVersion `version` is older than, the same as or
    later than `than`; None when either is not an integer. They are opaque
    strings by contract, but every API server serves etcd revisions, and
    kube-scheduler's assume cache compares them as integers to tell a late
    event from a newer copy."""
    if not (version.isdigit() and than.isdigit()):
        return None
    a, b = int(version), int(than)
    return (a > b) - (a < b)


class Listing:
    """One list of `kind` being applied to an inventory (`Inventory.listing`)."""

    def __init__(self, inventory: Inventory, kind: str) -> None:
        self._inventory = inventory
        self.kind = kind
        self.keys: set[str] = set()  # of every object put

    def put(self, obj: Any) -> None:
        """Add or replace one listed, parsed object."""
        self.keys.add(object_key(self.kind, obj))
        self._inventory.upsert(self.kind, obj)

    def keep(self, obj: Mapping[str, Any]) -> None:
        """A listed object the parse refused: the copy held of it, if any, stays
        (as a refused watch event leaves it), so `finishing` does not delete it."""
        key = raw_key(self.kind, obj)
        if key is not None:
            self.keys.add(key)

    def finishing(self, *, step: int = 1) -> Iterator[None]:
        """Delete every object of the kind the list did not hold, in steps of
        `step` deletions (the held keys are compared 64 steps at a time), then
        recount the pools in steps: left to the next scrape, the pools of a
        first list of a large cluster would be one long step."""
        inventory = self._inventory
        stale = []
        for i, key in enumerate(list(inventory._table(self.kind))):
            if key not in self.keys:
                stale.append(key)
            if i % (step * 64) == step * 64 - 1:
                yield
        for i, key in enumerate(stale):
            inventory._delete(self.kind, key)
            if i % step == step - 1:
                yield
        yield from inventory._objects.recounting(step=step)
