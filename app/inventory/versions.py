"""Versions and change tracking: which nodes a change can alter, as numbers.

Every change gets a sequence number. A change that only one node can see (a
node-local slice, a claim holding devices of a node-local pool, a Node's
labels) stamps that node; a change that many nodes may see (a DeviceClass, a
slice published with `allNodes`, a `nodeSelector` or per-device node
selection, a claim on such a pool) stamps the shared version. A node's
version is the larger of the two, so it changes whenever anything it can see
changes, in O(1) per event even with thousands of nodes. A bounded log of
recent stamps lets readers catch up on what changed without comparing every
node's version.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Final

CHANGE_LOG: Final = 4096


class Versions:
    """Sequence numbers per node and shared; written only by the inventory."""

    __slots__ = ("by_node", "changes", "sequence", "shared")

    def __init__(self) -> None:
        self.sequence = 0
        self.shared = 0
        self.by_node: dict[str, int] = {}
        # (sequence, nodes stamped or None for all)
        self.changes: deque[tuple[int, tuple[str, ...] | None]] = deque(maxlen=CHANGE_LOG)

    def stamp_nodes(self, names: Iterable[str]) -> None:
        names = list(names)
        if not names:
            return
        self.sequence += 1
        seq = self.sequence
        for name in names:
            self.by_node[name] = seq
        self.changes.append((seq, tuple(names)))

    def stamp_all(self) -> None:
        self.sequence += 1
        self.shared = self.sequence
        self.changes.append((self.shared, None))

    def version(self, node_name: str) -> int:
        return max(self.by_node.get(node_name, 0), self.shared)

    def versions(self, node_names: Sequence[str]) -> list[int]:
        local, shared = self.by_node, self.shared
        return [max(local.get(name, 0), shared) for name in node_names]

    def changed_since(self, sequence: int) -> set[str] | None:
        """Nodes whose version moved after `sequence`; None when that is not known
        node by node (a change every node can see, or history too old)."""
        if sequence >= self.sequence:
            return set()
        if not self.changes or self.changes[0][0] > sequence + 1:
            return None
        changed: set[str] = set()
        for seq, names in reversed(self.changes):
            if seq <= sequence:
                break
            if names is None:
                return None
            changed.update(names)
        return changed
