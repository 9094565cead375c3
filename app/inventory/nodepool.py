"""The node pool one drax serves: the Nodes whose labels match a selector.

Kubernetes shards scheduling by running several schedulers, each with its
own pool of nodes and pods that name their scheduler. With a pool, drax's
inventory holds only the pool's Nodes, their node-local ResourceSlices, and
the network-attached slices whose node selection can reach a pool node, so
its memory and start-up follow the pool, not the cluster.

Membership follows the Nodes: a Node whose labels stop matching leaves the
pool and takes its node-local slices with it; a Node that starts matching
joins, and whoever feeds the inventory must then supply that node's slices
(`on_join`: the kube source relists its slices, since it dropped them while
the node was outside). A node-local slice is decided from its raw
`spec.nodeName` before the per-device parse, the costly part of a slice.

A network-attached slice's node selector is decided once, from the selector
alone: a term that requires a pool label to hold another value (or to be
absent) can never match a pool node; any other term might, since the labels
outside the selector are not known in advance. Such slices are kept whatever
the Nodes do, so they need no following.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from app.model import Node, NodeSelector, ResourceSlice
from app.model.objects import NodeSelectorTerm

__all__ = ["NodePool"]


class NodePool:
    """Which nodes, and so which slices, the inventory keeps (see the module doc)."""

    def __init__(self, labels: Mapping[str, str]) -> None:
        if not labels:
            raise ValueError("a node pool needs at least one label")
        self.labels: dict[str, str] = dict(labels)
        self.members: set[str] = set()
        # Nodes seen with other labels: only a source that sees every Node
        # (files) fills it, so a slice read before its Node can be told apart.
        self.outside: set[str] = set()
        self.on_join: Callable[[str], None] | None = None
        self._items = tuple(self.labels.items())

    def describe(self) -> str:
        """The selector as `drax serve --node-selector` and a label selector take it."""
        return ",".join(f"{k}={v}" for k, v in sorted(self.labels.items()))

    def matches(self, node: Node) -> bool:
        labels = node.labels
        return all(labels.get(k) == v for k, v in self._items)

    def knows(self, node_name: str) -> bool:
        return node_name in self.members or node_name in self.outside

    def admits_raw(self, obj: Mapping[str, Any]) -> bool | None:
        """For a raw ResourceSlice: True or False when its `spec.nodeName`
        decides it, None when only the parsed slice can tell."""
        spec = obj.get("spec")
        if not isinstance(spec, Mapping):
            return None
        node_name = spec.get("nodeName")
        if isinstance(node_name, str) and node_name:
            return node_name in self.members
        return None

    def admits(self, s: ResourceSlice) -> bool:
        """Whether the inventory keeps the parsed slice `s`."""
        if s.node_name:
            return s.node_name in self.members
        if s.all_nodes:
            return True
        if s.node_selector is not None:
            return self.can_match(s.node_selector)
        if s.per_device_node_selection:
            for d in s.devices:
                if d.all_nodes or (d.node_name and d.node_name in self.members):
                    return True
                if d.node_selector is not None and self.can_match(d.node_selector):
                    return True
            return False
        return True

    def can_match(self, selector: NodeSelector) -> bool:
        """Whether some node with the pool's labels could match `selector`."""
        return any(self._term_can_match(t) for t in selector.terms)

    def _term_can_match(self, term: NodeSelectorTerm) -> bool:
        if not term.match_expressions and not term.match_fields:
            return False  # an empty term matches nothing
        for req in term.match_expressions:
            if req.key in self.labels and not req.matches(self.labels[req.key]):
                return False
        return True
