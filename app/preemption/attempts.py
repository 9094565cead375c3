"""Tell a nominated preemptor's scheduling attempts apart from its filters.

drax sees kube-scheduler's attempts only as filter requests, and one attempt
of a pod with `status.nominatedNodeName` can make two of them: the
scheduler first tries the nominated node alone (`evaluateNominatedNode`: its
own filters, then each extender's filter with that one node), and only when
that leaves no node does it filter every node, the nominated one included,
in the same attempt (`findNodesThatFitPod`). So the filter that follows, for
the same pod, a filter of the nominated node alone that started an attempt
and that drax rejected is that attempt's second pass, whatever nodes it
lists: the nominated node alone again when it is the only one the
scheduler's own filters pass (a pinned pod, a one-node pool, the other nodes
full), and it reaches drax whenever the first pass did, as the scheduler's
filters pass that node again on the same snapshot. Every other filter starts
an attempt. A nominated node the scheduler's own filters refuse never
reaches drax; the attempt's one filter then lists the other nodes, and
starts the attempt as any other would. An attempt ended before any filter
reaches drax (the scheduler's own filters refuse every node) is not seen.

`Attempts` keeps, per preemptor, what its last filter was, and answers
whether the next one starts an attempt; pure logic, no I/O (`Catchup` feeds
it around each filter and counts the attempts by what it knew of the
victims' claims).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class _Last:
    uid: str
    nominated_alone_rejected: bool


def nominated_alone(nominated_node: str, node_names: Sequence[str]) -> bool:
    """Whether a filter lists the pod's nominated node and no other (the first
    filter of an attempt that tries the nominated node first)."""
    return bool(nominated_node) and len(node_names) == 1 and node_names[0] == nominated_node


class Attempts:
    def __init__(self) -> None:
        self._last: dict[str, _Last] = {}

    def starts_attempt(self, key: str, uid: str, nominated_node: str,
                       node_names: Sequence[str]) -> bool:
        """Whether a filter of pod `key` (`uid`), nominated to `nominated_node`
        ("" when not), over `node_names`, is the first of a scheduling attempt."""
        last = self._last.get(key)
        return not (last is not None and last.uid == uid and last.nominated_alone_rejected)

    def filtered(self, key: str, uid: str, nominated_node: str, node_names: Sequence[str],
                 passed: Collection[str], *, started: bool) -> None:
        """Note the answer drax gave that filter: the nodes that `passed`;
        `started`: whether it started an attempt (`starts_attempt`)."""
        alone = nominated_alone(nominated_node, node_names)
        self._last[key] = _Last(uid, started and alone and nominated_node not in passed)

    def forget(self, live: Callable[[str], bool]) -> None:
        """Forget every pod for which `live(key)` is False (its nomination ended)."""
        for key in [k for k in self._last if not live(k)]:
            del self._last[key]

    def __len__(self) -> int:
        return len(self._last)
