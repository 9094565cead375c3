"""The objects the inventory holds, by kind, and the pools their slices make.

Plain tables keyed like the API (name, or namespace/name), plus the indexes
the inventory reads on every verb: which pools each node sees (its local
pools, and the shared ones), each pool's `PoolInfo` (rebuilt only when a slice
of the pool changes), the claim generated for a pod's claim entry, the sorted
node names and the device count. Every write goes through `Inventory`, which
turns what changed here into version stamps.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

from app.allocator.types import PoolKey
from app.inventory.pools import PoolInfo, build_pool_info
from app.model import (
    Device,
    DeviceClass,
    InvalidObject,
    Node,
    Pod,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)

POD_CLAIM_NAME_ANNOTATION: Final = "resource.kubernetes.io/pod-claim-name"


class Objects:
    """Tables of parsed objects and the node and pool indexes over them."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.slices: dict[str, ResourceSlice] = {}
        self.classes: dict[str, DeviceClass] = {}
        self.claims: dict[str, ResourceClaim] = {}
        self.templates: dict[str, ResourceClaimTemplate] = {}
        self.pods: dict[str, Pod] = {}
        # (namespace, owner pod uid, pod claim name) -> key of the claim generated for it
        self.generated: dict[tuple[str, str, str], str] = {}
        self.pool_slices: dict[PoolKey, dict[str, ResourceSlice]] = {}
        self.local_pools: dict[str, dict[PoolKey, int]] = {}  # node -> pool -> slice count
        self.shared_pools: dict[PoolKey, int] = {}  # pool -> count of non-node-local slices
        self._pool_infos: dict[PoolKey, PoolInfo | None] = {}
        # devices per pool and their sum for `device_count`, recounted only for
        # the pools changed since (at the next read, so a pool of many slices is
        # not recounted per slice while it is listed)
        self._pool_device_counts: dict[PoolKey, int] = {}
        self._device_count = 0
        self._uncounted_pools: set[PoolKey] = set()
        # nodes named by local slices only, no Node object: with `nodes`, the node
        # count of a scrape without a set union of every name
        self._slice_only_nodes: set[str] = set()
        # `node_names`, kept until a node comes or goes: a full warming pass or
        # walk starts with it, and sorting a large cluster's names is a step of its own
        self._sorted_names: tuple[str, ...] | None = None

    def table(self, kind: str) -> Mapping[str, Any]:
        tables: dict[str, Mapping[str, Any]] = {
            "Node": self.nodes, "ResourceSlice": self.slices, "DeviceClass": self.classes,
            "ResourceClaim": self.claims, "ResourceClaimTemplate": self.templates,
            "Pod": self.pods}
        if kind not in tables:
            raise InvalidObject(f"unsupported kind {kind!r}")
        return tables[kind]

    # ------------------------------------------------------------------ nodes

    def put_node(self, node: Node) -> bool:
        """True when the node changed (not only its resourceVersion)."""
        if unchanged(self.nodes.get(node.name), node):
            return False
        if node.name not in self.nodes and node.name not in self.local_pools:
            self._sorted_names = None
        self.nodes[node.name] = node
        self._slice_only_nodes.discard(node.name)
        return True

    def remove_node(self, name: str) -> bool:
        if self.nodes.pop(name, None) is None:
            return False
        if name in self.local_pools:
            self._slice_only_nodes.add(name)
        else:
            self._sorted_names = None
        return True

    def node_names(self) -> list[str]:
        """Every node known, sorted: Node objects plus nodes named by node-local slices."""
        if self._sorted_names is None:
            self._sorted_names = tuple(sorted(self.nodes.keys() | self.local_pools.keys()))
        return list(self._sorted_names)

    def node_count(self) -> int:
        return len(self.nodes) + len(self._slice_only_nodes)

    def knows_node(self, name: str) -> bool:
        return name in self.nodes or name in self.local_pools

    # ------------------------------------------------------------------ claims

    def put_claim(self, claim: ResourceClaim) -> None:
        self.claims[claim.key] = claim
        generated_for = _generated_for(claim)
        if generated_for is not None:
            self.generated[generated_for] = claim.key

    def remove_claim(self, key: str) -> ResourceClaim | None:
        claim = self.claims.pop(key, None)
        if claim is not None:
            generated_for = _generated_for(claim)
            if generated_for is not None and self.generated.get(generated_for) == key:
                del self.generated[generated_for]
        return claim

    def generated_claim(self, *, pod: Pod, pod_claim_name: str) -> ResourceClaim | None:
        if not pod.uid:
            return None
        key = self.generated.get((pod.namespace, pod.uid, pod_claim_name))
        return self.claims.get(key) if key is not None else None

    # ------------------------------------------------------------------ slices and pools

    def put_slice(self, s: ResourceSlice) -> ResourceSlice | None:
        """Index `s`; returns the slice it replaces, if any."""
        old = self.slices.get(s.name)
        if old is not None:
            self._unindex_slice(old)
        self.slices[s.name] = s
        self._index_slice(s)
        self._pool_changed((s.driver, s.pool.name))
        return old

    def remove_slice(self, name: str) -> ResourceSlice | None:
        old = self.slices.pop(name, None)
        if old is not None:
            self._unindex_slice(old)
            self._pool_changed((old.driver, old.pool.name))
        return old

    def pool_nodes(self, key: PoolKey) -> set[str]:
        return {s.node_name for s in self.pool_slices.get(key, {}).values()
                if s.node_name is not None}

    def pools_seen_by(self, node_name: str) -> set[PoolKey]:
        return set(self.local_pools.get(node_name, ())) | self.shared_pools.keys()

    def pool_info(self, key: PoolKey) -> PoolInfo | None:
        if key not in self._pool_infos:
            self._pool_infos[key] = build_pool_info(key, self.pool_slices.get(key, {}).values())
        return self._pool_infos[key]

    def pool_devices(self, key: PoolKey) -> Mapping[str, Device]:
        info = self.pool_info(key)
        return info.devices_by_name if info is not None else {}

    def device_count(self) -> int:
        for key in self._uncounted_pools:
            self._recount(key)
        self._uncounted_pools.clear()
        return self._device_count

    def recounting(self, *, step: int) -> Iterator[None]:
        """Count the pools changed since the last count, yielding every `step` pools."""
        for i, pool in enumerate(list(self._uncounted_pools)):
            self._uncounted_pools.discard(pool)
            self._recount(pool)
            if i % step == step - 1:
                yield

    def _pool_changed(self, key: PoolKey) -> None:
        self._pool_infos.pop(key, None)
        self._uncounted_pools.add(key)

    def _index_slice(self, s: ResourceSlice) -> None:
        key = (s.driver, s.pool.name)
        self.pool_slices.setdefault(key, {})[s.name] = s
        if s.node_name is not None:
            if s.node_name not in self.local_pools and s.node_name not in self.nodes:
                self._slice_only_nodes.add(s.node_name)
                self._sorted_names = None
            per_node = self.local_pools.setdefault(s.node_name, {})
            per_node[key] = per_node.get(key, 0) + 1
        else:
            self.shared_pools[key] = self.shared_pools.get(key, 0) + 1

    def _unindex_slice(self, s: ResourceSlice) -> None:
        key = (s.driver, s.pool.name)
        slices = self.pool_slices[key]
        del slices[s.name]
        if not slices:
            del self.pool_slices[key]
        if s.node_name is not None:
            _decrement(self.local_pools[s.node_name], key)
            if not self.local_pools[s.node_name]:
                del self.local_pools[s.node_name]
                if s.node_name in self._slice_only_nodes:
                    self._slice_only_nodes.discard(s.node_name)
                    self._sorted_names = None
        else:
            _decrement(self.shared_pools, key)

    def _recount(self, key: PoolKey) -> None:
        slices = self.pool_slices.get(key)
        count = _newest_device_names(slices.values()) if slices else 0
        self._device_count += count - self._pool_device_counts.pop(key, 0)
        if slices:
            self._pool_device_counts[key] = count


def unchanged(old: Any, new: Any) -> bool:
    """True when `new` only differs from `old` in resourceVersion (a resync or a
    relist). Keeping the old object then keeps every cache keyed on it valid."""
    return old is not None and dataclasses.replace(
        new, resource_version=old.resource_version) == old


NAMESPACED_KINDS: Final = frozenset({"ResourceClaim", "ResourceClaimTemplate", "Pod",
                                      "PodDisruptionBudget"})


def object_key(kind: str, obj: Any) -> str:
    if kind in NAMESPACED_KINDS:
        return str(obj.key)
    return str(obj.name)


def raw_key(kind: str, obj: Any) -> str | None:
    """The `object_key` an unparsed object would have, read from its metadata
    alone (an object refused by the parse still names what it replaces or
    deletes); None when its metadata names nothing."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        return None
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return None
    if kind not in NAMESPACED_KINDS:
        return name
    namespace = meta.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        return None
    return f"{namespace or 'default'}/{name}"


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
