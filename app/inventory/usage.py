"""What the live pods bound to each node request: kube-scheduler's `Requested`.

Preemption must know whether a pod fits a node's cpu, memory and pod count
once its victims are gone, so every live pod bound to a node is counted here,
with claims or without, as the object the inventory keeps for it (the `Pod`
of a pod with claims, the `PodUsage` of any other: key, uid, whether it is
terminating, its request vector shared between pods that request alike, and
what choosing it as a victim reads), never the pod as the API server sent it.
Each node keeps running sums (all its pods, and those already terminating),
so a question about a node costs no walk over its pods. Pods without a node
add nothing there; those nominated to a node (`status.nominatedNodeName`,
not deleting) are indexed by that node, as kube-scheduler's nominator counts
them against pods of no higher priority.

Changes here do not move node versions: the filter's cached answers are
about devices, which these do not change. They have their own sequence
instead (`sequence`, and per node the last change to a pod bound or
nominated there), so that the preemption loop repeats a search refused for
room only when a pod where room was short changed (`changed_since`).
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TypeAlias

from app.model import Pod
from app.model.requests import NO_RESOURCES, PodUsage, Resources

Usage: TypeAlias = Pod | PodUsage


@dataclass(slots=True)
class NodeUsage:
    """One node's pods (key -> `Usage`) and their sums."""

    pods: dict[str, Usage] = field(default_factory=dict)
    requested: Resources = NO_RESOURCES
    going: Resources = NO_RESOURCES  # of the pods already terminating
    going_count: int = 0


_EMPTY: Mapping[str, Usage] = {}


class PodUsages:
    """Per node, the requests of its live pods (see the module doc)."""

    def __init__(self) -> None:
        self._node_of: dict[str, str] = {}
        self._nodes: dict[str, NodeUsage] = {}
        self._nominated_to: dict[str, str] = {}
        self._nominated: dict[str, dict[str, Usage]] = {}
        self.sequence = 0
        self._changed: dict[str, int] = {}  # node -> sequence of its last change
        self._claims_changed = 0  # sequence of the last change to a pod with claims

    @property
    def keys(self) -> Mapping[str, str]:
        """Every pod counted, by key (its node, or where it is nominated, as the
        value)."""
        return ChainMap(self._node_of, self._nominated_to)

    def put(self, key: str, node: str, usage: Usage) -> None:
        """Count pod `key` on `node` (`node` empty: on no node, so not counted
        there; indexed where it is nominated, if anywhere)."""
        self.remove(key)
        if not node:
            nominated = usage.nominated_node_name
            if nominated and not usage.deleting:
                self._nominated_to[key] = nominated
                self._nominated.setdefault(nominated, {})[key] = usage
                self._mark(nominated, usage)
            return
        self._node_of[key] = node
        held = self._nodes.get(node)
        if held is None:
            held = self._nodes[node] = NodeUsage()
        held.pods[key] = usage
        held.requested = held.requested + usage.requests
        if usage.deleting:
            held.going = held.going + usage.requests
            held.going_count += 1
        self._mark(node, usage)

    def remove(self, key: str) -> None:
        nominated = self._nominated_to.pop(key, None)
        if nominated is not None:
            pods = self._nominated[nominated]
            self._mark(nominated, pods.pop(key))
            if not pods:
                del self._nominated[nominated]
        node = self._node_of.pop(key, None)
        if node is None:
            return
        held = self._nodes[node]
        usage = held.pods.pop(key)
        self._mark(node, usage)
        if not held.pods:
            del self._nodes[node]
            return
        held.requested = held.requested - usage.requests
        if usage.deleting:
            held.going = held.going - usage.requests
            held.going_count -= 1

    def _mark(self, node: str, usage: Usage) -> None:
        self.sequence += 1
        self._changed[node] = self.sequence
        if isinstance(usage, Pod):
            self._claims_changed = self.sequence

    def on(self, node: str) -> NodeUsage:
        """The node's pods and sums (empty for a node with none)."""
        return self._nodes.get(node) or NodeUsage()

    def nominated(self, node: str) -> Mapping[str, Usage]:
        """The pods not bound whose `status.nominatedNodeName` is `node`, by key."""
        return self._nominated.get(node, _EMPTY)

    def changed_since(self, sequence: int, nodes: Collection[str]) -> bool:
        """Whether, after `sequence`, a pod bound or nominated to one of `nodes`
        changed, or any pod with claims did (its devices, priority or going
        may change any node's victims)."""
        if self._claims_changed > sequence:
            return True
        changed = self._changed
        return any(changed.get(node, 0) > sequence for node in nodes)
