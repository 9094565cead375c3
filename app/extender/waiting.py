"""The pods drax's filter left without a node, until they pass or are bound.

kube-scheduler parks a pod an extender rejected among its unschedulable pods
and moves it back to its queue on the events its rejector registered: the
pseudo-plugin `Extender`, with the wildcard set of 1.37
(`framework.UnrollWildCardResource`: pods, Nodes, storage kinds,
ResourceClaim, DeviceClass, not ResourceSlice). So a pod rejected for want of
devices waits for the periodic flush (5 minutes by default) after a driver
publishes them, but an update of the pod itself moves it back; drax remembers
whom it rejected and the requeuer (app/binder/requeue.py) touches their
status when devices may have appeared.

Pure bookkeeping: insertion-ordered, bounded (the oldest is forgotten past
`capacity`; it still gets kube-scheduler's periodic flush).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

from app.model import Pod

DEFAULT_CAPACITY: Final = 10_000


@dataclass(slots=True, frozen=True)
class WaitingPod:
    namespace: str
    name: str
    uid: str


class WaitingPods:
    def __init__(self, *, capacity: int = DEFAULT_CAPACITY) -> None:
        self._capacity = capacity
        self._pods: OrderedDict[str, WaitingPod] = OrderedDict()

    def rejected(self, pod: Pod) -> None:
        key = f"{pod.namespace}/{pod.name}"
        known = self._pods.get(key)
        if known is not None and known.uid == pod.uid:
            return
        self._pods[key] = WaitingPod(namespace=pod.namespace, name=pod.name, uid=pod.uid)
        while len(self._pods) > self._capacity:
            self._pods.popitem(last=False)

    def discard(self, namespace: str, name: str) -> None:
        self._pods.pop(f"{namespace}/{name}", None)

    def snapshot(self) -> list[WaitingPod]:
        return list(self._pods.values())

    def __len__(self) -> int:
        return len(self._pods)
