"""The inventory: the only mutable state of drax.

Sources feed it add / update / delete events (`apply`, `replace`); the
extender reads per-node snapshots (`node_state`) and the allocated state.
Three ideas keep reads cheap and safe to cache:

- Versions. Every change gets a sequence number. A change that only one node
  can see (a node-local slice, a claim holding devices of a node-local pool, a
  Node's labels) stamps that node; a change that many nodes may see (a
  DeviceClass, a slice published with `allNodes`, a `nodeSelector` or per-device
  node selection, a claim on such a pool) stamps the global version. A node's
  version is the larger of the two, so it changes whenever anything it can see
  changes, in O(1) per event even with thousands of nodes.
- Lazy, cached node snapshots. A node's `NodeView` and `AllocatedState` are
  built on first use and kept until its version changes.
- Holdings per pool. Allocated and assumed results are indexed by pool, so a
  node's allocated state is summed from the few pools it sees rather than from
  every claim in the cluster.

Assumed allocations (made by bind before the API confirms them) count as
allocated until the claim arrives carrying an allocation, until
`forget_assumed`, or until their time-to-live passes.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from app.allocator.types import AllocatedState, ClaimAllocation, NodeView, PoolKey
from app.inventory.pools import (
    PoolInfo,
    build_pool_info,
    pool_view_for_node,
    upstream_pool_order,
)
from app.inventory.selectors import SelectorCache
from app.model import (
    Device,
    DeviceClass,
    DeviceRequestAllocationResult,
    InvalidObject,
    Node,
    Pod,
    Quantity,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    parse_object,
)

KINDS: Final = ("Node", "ResourceSlice", "DeviceClass", "ResourceClaim",
                "ResourceClaimTemplate", "Pod")
EVENT_TYPES: Final = ("ADDED", "MODIFIED", "DELETED")
POD_CLAIM_NAME_ANNOTATION: Final = "resource.kubernetes.io/pod-claim-name"

_CHANGE_LOG: Final = 4096
_CLAIM: Final = "claim:"
_ASSUMED: Final = "assumed:"


@dataclass(slots=True, frozen=True, weakref_slot=True)
class NodeState:
    """One node's snapshot: valid for as long as `view.version` is current."""

    view: NodeView
    allocated: AllocatedState


@dataclass(slots=True)
class _Assumption:
    pod_key: str
    claim_key: str
    results: tuple[DeviceRequestAllocationResult, ...]
    expires_at: float


@dataclass(slots=True, frozen=True)
class InventoryCounts:
    nodes: int
    devices: int
    allocated_devices: int


def _counted(results: Iterable[DeviceRequestAllocationResult]
             ) -> tuple[DeviceRequestAllocationResult, ...]:
    """Results that take something from others: admin access never does."""
    return tuple(r for r in results if not r.admin_access)


def _device_ids(results: Iterable[DeviceRequestAllocationResult]) -> list[str]:
    return sorted(r.device_id for r in results)


class Inventory:
    """Index of what exists and what is taken (see the module doc)."""

    def __init__(self, *, expected_kinds: Iterable[str] = KINDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        unknown = sorted(set(expected_kinds) - set(KINDS))
        if unknown:
            raise ValueError(f"unknown kind(s): {', '.join(unknown)}")
        self._expected = frozenset(expected_kinds)
        self._synced_kinds: set[str] = set()
        self._clock = clock
        self._seq = 0
        self._global_version = 0
        self._node_versions: dict[str, int] = {}
        # (sequence, nodes stamped or None for all): lets readers catch up on what
        # changed without comparing every node's version
        self._changes: deque[tuple[int, tuple[str, ...] | None]] = deque(maxlen=_CHANGE_LOG)
        self._nodes: dict[str, Node] = {}
        self._slices: dict[str, ResourceSlice] = {}
        self._pool_slices: dict[PoolKey, dict[str, ResourceSlice]] = {}
        self._pool_infos: dict[PoolKey, PoolInfo | None] = {}
        # devices per pool and their sum for `counts`, recounted only for the pools
        # changed since (at the next read, so a pool of many slices is not recounted
        # per slice while it is listed)
        self._pool_device_counts: dict[PoolKey, int] = {}
        self._device_count = 0
        self._uncounted_pools: set[PoolKey] = set()
        self._local_pools: dict[str, dict[PoolKey, int]] = {}  # node -> pool -> slice count
        # nodes named by local slices only, no Node object: with `_nodes`, the node
        # count of a scrape (a set union of 100,000 names took 40 ms per scrape)
        self._slice_only_nodes: set[str] = set()
        # `node_names`, kept until a node comes or goes: a full warming pass or
        # walk starts with it, and sorting 100,000 names is a step of its own
        self._sorted_names: tuple[str, ...] | None = None
        self._shared_pools: dict[PoolKey, int] = {}  # pool -> count of non-node-local slices
        self._classes: dict[str, DeviceClass] = {}
        self._claims: dict[str, ResourceClaim] = {}
        self._templates: dict[str, ResourceClaimTemplate] = {}
        # (namespace, owner pod uid, pod claim name) -> key of the claim generated for it
        self._generated: dict[tuple[str, str, str], str] = {}
        self._pods: dict[str, Pod] = {}
        self._holdings: dict[PoolKey, dict[str, tuple[DeviceRequestAllocationResult, ...]]] = {}
        self._holder_pools: dict[str, set[PoolKey]] = {}
        self._assumed: dict[str, _Assumption] = {}
        self._next_expiry = float("inf")
        self._states: dict[str, NodeState] = {}
        self.selectors = SelectorCache()

    # ------------------------------------------------------------------ event API

    def apply(self, kind: str, event_type: str, obj: Mapping[str, Any]) -> None:
        """Apply one watch event; raises InvalidObject and changes nothing on bad input."""
        if event_type not in EVENT_TYPES:
            raise InvalidObject(f"unknown event type {event_type!r}")
        parsed = parse_object(kind, obj)
        if event_type == "DELETED":
            self._delete(kind, _object_key(kind, parsed))
        else:
            self.upsert(kind, parsed)

    def replace(self, kind: str, objs: Iterable[Mapping[str, Any]]) -> None:
        """A relist: `kind` becomes exactly `objs`. Everything is parsed first."""
        for _ in self.replacing(kind, objs):
            pass

    def replacing(self, kind: str, objs: Iterable[Mapping[str, Any]], *,
                  step: int = 1) -> Iterator[None]:
        """`replace` in steps of `step` objects, so a caller on the event loop can
        let requests in between (a relist of 200,000 slices takes seconds; one
        slice of 64 MIG placements parses in 1-2 ms, so by default every object
        is a step and the caller groups steps by time). All objects are parsed
        before anything changes, so a bad one still changes nothing; between the
        later steps a reader sees some objects already as listed and others not
        yet, as while a watch catches up."""
        parsed = []
        for i, o in enumerate(objs):
            parsed.append(parse_object(kind, o))
            if i % step == step - 1:
                yield
        yield from self.replacing_parsed(kind, parsed, step=step)

    def replacing_parsed(self, kind: str, parsed: list[Any], *,
                         step: int = 1) -> Iterator[None]:
        """`replacing` with objects parsed already (`parse_object`): a source
        that parses a big list page by page need not hold every raw page.
        `parsed` is emptied as it is applied: an object equal to the one held is
        freed in its own step, not with all the others at the end (0.1-0.2 s
        for the slices of 1,000 nodes)."""
        keys = set()
        for i, obj in enumerate(parsed):
            keys.add(_object_key(kind, obj))
            if i % (step * 64) == step * 64 - 1:
                yield
        stale = []
        for i, key in enumerate(list(self._table(kind))):
            if key not in keys:
                stale.append(key)
            if i % (step * 64) == step * 64 - 1:
                yield
        for i, key in enumerate(stale):
            self._delete(kind, key)
            if i % step == step - 1:
                yield
        for i in range(len(parsed)):
            obj, parsed[i] = parsed[i], None
            self.upsert(kind, obj)
            del obj
            if i % step == step - 1:
                yield
        parsed.clear()
        # Counted here, in steps: left to the next scrape, the pools of a first
        # list (3.4 million devices at 100,000 nodes) were one step of about 1 s.
        for i, pool in enumerate(list(self._uncounted_pools)):
            self._uncounted_pools.discard(pool)
            self._recount(pool)
            if i % step == step - 1:
                yield

    def mark_synced(self, kind: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}")
        self._synced_kinds.add(kind)

    @property
    def synced(self) -> bool:
        return self._expected <= self._synced_kinds

    def upsert(self, kind: str, obj: Any) -> None:
        """Add or replace an already parsed object (the in-memory binder writes here)."""
        self._expire()
        if kind == "Node":
            if not _unchanged(self._nodes.get(obj.name), obj):
                if obj.name not in self._nodes and obj.name not in self._local_pools:
                    self._sorted_names = None
                self._nodes[obj.name] = obj
                self._slice_only_nodes.discard(obj.name)
                self._stamp_nodes([obj.name])
        elif kind == "ResourceSlice":
            if not _unchanged(self._slices.get(obj.name), obj):
                self._put_slice(obj)
        elif kind == "DeviceClass":
            if not _unchanged(self._classes.get(obj.name), obj):
                self._classes[obj.name] = obj
                self.selectors.forget_class(obj.name)
                self._stamp_all()
        elif kind == "ResourceClaim":
            self._put_claim(obj)
        elif kind == "ResourceClaimTemplate":
            self._templates[obj.key] = obj
        elif kind == "Pod":
            self._pods[obj.key] = obj
        else:
            raise InvalidObject(f"unsupported kind {kind!r}")

    def _table(self, kind: str) -> Mapping[str, Any]:
        tables: dict[str, Mapping[str, Any]] = {
            "Node": self._nodes, "ResourceSlice": self._slices, "DeviceClass": self._classes,
            "ResourceClaim": self._claims, "ResourceClaimTemplate": self._templates,
            "Pod": self._pods}
        if kind not in tables:
            raise InvalidObject(f"unsupported kind {kind!r}")
        return tables[kind]

    def _delete(self, kind: str, key: str) -> None:
        self._expire()
        if kind == "Node":
            if self._nodes.pop(key, None) is not None:
                if key in self._local_pools:
                    self._slice_only_nodes.add(key)
                else:
                    self._sorted_names = None
                self._stamp_nodes([key])
        elif kind == "ResourceSlice":
            self._remove_slice(key)
        elif kind == "DeviceClass":
            if self._classes.pop(key, None) is not None:
                self.selectors.forget_class(key)
                self._stamp_all()
        elif kind == "ResourceClaim":
            claim = self._claims.pop(key, None)
            if claim is not None:
                self._set_holding(_CLAIM + key, ())
                generated_for = _generated_for(claim)
                if generated_for is not None and self._generated.get(generated_for) == key:
                    del self._generated[generated_for]
            if key in self._assumed:
                self._drop_assumption(key)
        elif kind == "ResourceClaimTemplate":
            self._templates.pop(key, None)
        elif kind == "Pod":
            self._pods.pop(key, None)
        else:
            raise InvalidObject(f"unsupported kind {kind!r}")

    # ------------------------------------------------------------------ reads

    @property
    def classes(self) -> Mapping[str, DeviceClass]:
        return self._classes

    def claim(self, key: str) -> ResourceClaim | None:
        return self._claims.get(key)

    def claims(self) -> Iterable[ResourceClaim]:
        return self._claims.values()

    def templates(self) -> Iterable[ResourceClaimTemplate]:
        return self._templates.values()

    @property
    def sequence(self) -> int:
        """Grows with every change that can alter any node's view."""
        self._expire()
        return self._seq

    def changed_since(self, sequence: int) -> set[str] | None:
        """Nodes whose version moved after `sequence`; None when that is not known
        node by node (a change every node can see, or history too old)."""
        self._expire()
        if sequence >= self._seq:
            return set()
        if not self._changes or self._changes[0][0] > sequence + 1:
            return None
        changed: set[str] = set()
        for seq, names in reversed(self._changes):
            if seq <= sequence:
                break
            if names is None:
                return None
            changed.update(names)
        return changed

    def template(self, key: str) -> ResourceClaimTemplate | None:
        return self._templates.get(key)

    def pod(self, key: str) -> Pod | None:
        return self._pods.get(key)

    def generated_claim(self, *, pod: Pod, pod_claim_name: str) -> ResourceClaim | None:
        """The claim generated for `pod`'s entry `pod_claim_name`, found by owner and
        annotation as the resourceclaim controller marks it."""
        if not pod.uid:
            return None
        key = self._generated.get((pod.namespace, pod.uid, pod_claim_name))
        return self._claims.get(key) if key is not None else None

    def node_names(self) -> list[str]:
        """Every node known, sorted: Node objects plus nodes named by node-local slices."""
        if self._sorted_names is None:
            self._sorted_names = tuple(sorted(self._nodes.keys() | self._local_pools.keys()))
        return list(self._sorted_names)

    def version(self, node_name: str) -> int:
        self._expire()
        return max(self._node_versions.get(node_name, 0), self._global_version)

    def versions(self, node_names: Sequence[str]) -> list[int]:
        """`version` of many nodes at once (the extender asks for every candidate)."""
        self._expire()
        local, shared = self._node_versions, self._global_version
        return [max(local.get(name, 0), shared) for name in node_names]

    def node_state(self, node_name: str) -> NodeState | None:
        """The node's view and allocated state, rebuilt only when its version changed.
        None for a node the inventory does not know."""
        version = self.version(node_name)
        cached = self._states.get(node_name)
        if cached is not None and cached.view.version == version:
            return cached
        node = self._nodes.get(node_name)
        if node is None:
            if node_name not in self._local_pools:
                self._states.pop(node_name, None)
                return None
            node = Node(name=node_name)
        state = self._build_state(node, version)
        self._states[node_name] = state
        return state

    def class_matcher(self, device_class: DeviceClass, device: Device) -> bool:
        return self.selectors.class_matches(device_class, device)

    def counts(self) -> InventoryCounts:
        """Read at every metrics scrape, so only the pools changed since the last
        read are counted (walking every pool with no info built yet took
        0.14-0.31 s per scrape at 20,000 nodes, most of drax's CPU while a
        100,000-node cluster warmed)."""
        for key in self._uncounted_pools:
            self._recount(key)
        self._uncounted_pools.clear()
        taken = {r.device_id for holding in self._holdings.values()
                 for results in holding.values() for r in results}
        return InventoryCounts(nodes=len(self._nodes) + len(self._slice_only_nodes),
                               devices=self._device_count,
                               allocated_devices=len(taken))

    # ------------------------------------------------------------------ assumed allocations

    def assume(self, *, pod: Pod, allocations: Sequence[ClaimAllocation],
               ttl: float) -> None:
        """Hold `allocations` as taken until confirmed, forgotten, or `ttl` seconds pass."""
        self._expire()
        expires_at = self._clock() + ttl
        for ca in allocations:
            results = _counted(ca.allocation.results)
            self._assumed[ca.claim_key] = _Assumption(pod_key=pod.key, claim_key=ca.claim_key,
                                                      results=results, expires_at=expires_at)
            self._set_holding(_ASSUMED + ca.claim_key, results)
        self._next_expiry = min(self._next_expiry, expires_at)

    def forget_assumed(self, *, pod: Pod, claim_key: str | None = None) -> None:
        """Drop every assumption made for `pod` (its bind failed), or only the one
        for `claim_key`."""
        for key in [k for k, a in self._assumed.items()
                    if a.pod_key == pod.key and claim_key in (None, k)]:
            self._drop_assumption(key)

    def assumed_claims(self) -> list[str]:
        self._expire()
        return sorted(self._assumed)

    def _drop_assumption(self, claim_key: str) -> None:
        del self._assumed[claim_key]
        self._set_holding(_ASSUMED + claim_key, ())

    def _expire(self) -> None:
        now = self._clock()
        if now < self._next_expiry:
            return
        for key in [k for k, a in self._assumed.items() if a.expires_at <= now]:
            self._drop_assumption(key)
        self._next_expiry = min((a.expires_at for a in self._assumed.values()),
                                default=float("inf"))

    # ------------------------------------------------------------------ slices and pools

    def _put_slice(self, s: ResourceSlice) -> None:
        old = self._slices.get(s.name)
        if old is not None:
            self._unindex_slice(old)
        self._slices[s.name] = s
        self._index_slice(s)
        self._pool_changed((s.driver, s.pool.name), old)

    def _remove_slice(self, name: str) -> None:
        old = self._slices.pop(name, None)
        if old is None:
            return
        self._unindex_slice(old)
        self._pool_changed((old.driver, old.pool.name), old)

    def _index_slice(self, s: ResourceSlice) -> None:
        key = (s.driver, s.pool.name)
        self._pool_slices.setdefault(key, {})[s.name] = s
        if s.node_name is not None:
            if s.node_name not in self._local_pools and s.node_name not in self._nodes:
                self._slice_only_nodes.add(s.node_name)
                self._sorted_names = None
            per_node = self._local_pools.setdefault(s.node_name, {})
            per_node[key] = per_node.get(key, 0) + 1
        else:
            self._shared_pools[key] = self._shared_pools.get(key, 0) + 1

    def _unindex_slice(self, s: ResourceSlice) -> None:
        key = (s.driver, s.pool.name)
        slices = self._pool_slices[key]
        del slices[s.name]
        if not slices:
            del self._pool_slices[key]
        if s.node_name is not None:
            _decrement(self._local_pools[s.node_name], key)
            if not self._local_pools[s.node_name]:
                del self._local_pools[s.node_name]
                if s.node_name in self._slice_only_nodes:
                    self._slice_only_nodes.discard(s.node_name)
                    self._sorted_names = None
        else:
            _decrement(self._shared_pools, key)
        self.selectors.forget_devices(d.id for d in s.devices)

    def _pool_changed(self, key: PoolKey, old: ResourceSlice | None) -> None:
        """Recompute the pool and stamp every node that could see it before or after."""
        self._pool_infos.pop(key, None)
        self._uncounted_pools.add(key)
        nodes = self._pool_nodes(key)
        if old is not None and old.node_name is not None:
            nodes.add(old.node_name)
        if key in self._shared_pools or (old is not None and old.node_name is None):
            self._stamp_all()
        else:
            self._stamp_nodes(nodes)

    def _recount(self, key: PoolKey) -> None:
        slices = self._pool_slices.get(key)
        count = _newest_device_names(slices.values()) if slices else 0
        self._device_count += count - self._pool_device_counts.pop(key, 0)
        if slices:
            self._pool_device_counts[key] = count

    def _pool_nodes(self, key: PoolKey) -> set[str]:
        return {s.node_name for s in self._pool_slices.get(key, {}).values()
                if s.node_name is not None}

    def _pool_info(self, key: PoolKey) -> PoolInfo | None:
        if key not in self._pool_infos:
            self._pool_infos[key] = build_pool_info(key, self._pool_slices.get(key, {}).values())
        return self._pool_infos[key]

    def _build_state(self, node: Node, version: int) -> NodeState:
        keys = set(self._local_pools.get(node.name, ())) | self._shared_pools.keys()
        views = []
        for key in keys:
            info = self._pool_info(key)
            if info is None:
                continue
            view = pool_view_for_node(info, node)
            if view is not None:
                views.append(view)
        pools = upstream_pool_order(views)
        return NodeState(view=NodeView(node=node, version=version, pools=pools),
                         allocated=self._allocated_for(pools))

    # ------------------------------------------------------------------ claims and holdings

    def _put_claim(self, claim: ResourceClaim) -> None:
        self._claims[claim.key] = claim
        generated_for = _generated_for(claim)
        if generated_for is not None:
            self._generated[generated_for] = claim.key
        results = _counted(claim.allocation.results) if claim.allocation else ()
        self._set_holding(_CLAIM + claim.key, results)
        assumption = self._assumed.get(claim.key)
        # An allocation on the claim is the truth: it confirms the assumption when it
        # matches, and overrides it when someone else allocated the claim first.
        if assumption is not None and claim.allocation is not None:
            self._drop_assumption(claim.key)

    def _set_holding(self, holder: str, results: tuple[DeviceRequestAllocationResult, ...]
                     ) -> None:
        by_pool: dict[PoolKey, tuple[DeviceRequestAllocationResult, ...]] = {}
        for r in results:
            key = (r.driver, r.pool)
            by_pool[key] = (*by_pool.get(key, ()), r)
        previous = self._holder_pools.pop(holder, set())
        if all(self._holdings[k].get(holder) == by_pool.get(k) for k in previous) \
                and previous == by_pool.keys():
            if by_pool:
                self._holder_pools[holder] = previous
            return
        for key in previous:
            holding = self._holdings[key]
            del holding[holder]
            if not holding:
                del self._holdings[key]
        for key, rs in by_pool.items():
            self._holdings.setdefault(key, {})[holder] = rs
        if by_pool:
            self._holder_pools[holder] = set(by_pool)
        self._stamp_pools(previous | by_pool.keys())

    def _stamp_pools(self, keys: Iterable[PoolKey]) -> None:
        nodes: set[str] = set()
        for key in keys:
            if key in self._shared_pools:
                self._stamp_all()
                return
            nodes |= self._pool_nodes(key)
        self._stamp_nodes(nodes)

    def _allocated_for(self, pools: Sequence[Any]) -> AllocatedState:
        devices: set[str] = set()
        multi: set[str] = set()
        counters: dict[PoolKey, dict[tuple[str, str], Quantity]] = {}
        capacity: dict[str, dict[str, Quantity]] = {}
        for pool in pools:
            holding = self._holdings.get(pool.key)
            if not holding:
                continue
            info = self._pool_info(pool.key)
            by_name = info.devices_by_name if info is not None else {}
            counted: set[str] = set()
            for results in holding.values():
                for r in results:
                    if r.share_id is None:
                        devices.add(r.device_id)
                    else:
                        multi.add(r.device_id)
                        per_capacity = capacity.setdefault(r.device_id, {})
                        for name, amount in r.consumed_capacity.items():
                            per_capacity[name] = per_capacity[name] + amount \
                                if name in per_capacity else amount
                    device = by_name.get(r.device)
                    if device is None or not device.consumes_counters or r.device in counted:
                        continue
                    counted.add(r.device)
                    pool_counters = counters.setdefault(pool.key, {})
                    for use in device.consumes_counters:
                        for counter, amount in use.counters.items():
                            ck = (use.counter_set, counter)
                            pool_counters[ck] = pool_counters[ck] + amount \
                                if ck in pool_counters else amount
        return AllocatedState(devices=frozenset(devices), consumed_counters=counters,
                              consumed_capacity=capacity, multi_allocated=frozenset(multi))

    # ------------------------------------------------------------------ versions

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def _stamp_nodes(self, names: Iterable[str]) -> None:
        names = list(names)
        if not names:
            return
        seq = self._next()
        for name in names:
            self._node_versions[name] = seq
        self._changes.append((seq, tuple(names)))

    def _stamp_all(self) -> None:
        self._global_version = self._next()
        self._changes.append((self._global_version, None))


def _unchanged(old: Any, new: Any) -> bool:
    """True when `new` only differs from `old` in resourceVersion (a resync or a
    relist). Keeping the old object then keeps every cache keyed on it valid."""
    return old is not None and dataclasses.replace(
        new, resource_version=old.resource_version) == old


def _decrement(counts: dict[PoolKey, int], key: PoolKey) -> None:
    counts[key] -= 1
    if counts[key] == 0:
        del counts[key]


def _generated_for(claim: ResourceClaim) -> tuple[str, str, str] | None:
    entry = claim.annotations.get(POD_CLAIM_NAME_ANNOTATION)
    if entry is None or not claim.owner_pod_uid:
        return None
    return (claim.namespace, claim.owner_pod_uid, entry)


def _newest_device_names(slices: Iterable[ResourceSlice]) -> int:
    """Distinct device names in the newest generation of one pool's slices, as
    `build_pool_info` keeps them."""
    listed = tuple(slices)
    if not listed:
        return 0
    newest = max(s.pool.generation for s in listed)
    return len({d.name for s in listed if s.pool.generation == newest for d in s.devices})


def _object_key(kind: str, obj: Any) -> str:
    if kind in ("ResourceClaim", "ResourceClaimTemplate", "Pod"):
        return str(obj.key)
    return str(obj.name)
