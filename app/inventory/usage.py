"""What the live pods bound to each node request: kube-scheduler's `Requested`.

Preemption must know whether a pod fits a node's cpu, memory and pod count
once its victims are gone, so every live pod bound to a node is counted here,
with claims or without: its key, uid, whether it is already terminating, and
its request vector (`Resources`, shared between pods that request alike),
never the pod itself. Each node keeps running sums (all its pods, and those
already terminating), so a question about a node costs no walk over its pods.
Pods without a node add nothing. Changes here do not move node versions: the
filter's cached answers are about devices, which these do not change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from app.model.requests import NO_RESOURCES, Resources


class Usage(NamedTuple):
    uid: str
    requests: Resources
    deleting: bool


@dataclass(slots=True)
class NodeUsage:
    """One node's pods (key -> `Usage`) and their sums."""

    pods: dict[str, Usage] = field(default_factory=dict)
    requested: Resources = NO_RESOURCES
    going: Resources = NO_RESOURCES  # of the pods already terminating
    going_count: int = 0


class PodUsages:
    """Per node, the requests of its live pods (see the module doc)."""

    def __init__(self) -> None:
        self._node_of: dict[str, str] = {}
        self._nodes: dict[str, NodeUsage] = {}

    @property
    def keys(self) -> Mapping[str, str]:
        """Every pod counted, by key (its node as the value)."""
        return self._node_of

    def put(self, key: str, node: str, usage: Usage) -> None:
        """Count pod `key` on `node` (`node` empty: on no node, so not counted)."""
        self.remove(key)
        if not node:
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

    def remove(self, key: str) -> None:
        node = self._node_of.pop(key, None)
        if node is None:
            return
        held = self._nodes[node]
        usage = held.pods.pop(key)
        if not held.pods:
            del self._nodes[node]
            return
        held.requested = held.requested - usage.requests
        if usage.deleting:
            held.going = held.going - usage.requests
            held.going_count -= 1

    def on(self, node: str) -> NodeUsage:
        """The node's pods and sums (empty for a node with none)."""
        return self._nodes.get(node) or NodeUsage()
