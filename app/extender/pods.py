"""The pods bind will ask for: what filter and prioritize saw, until the pod is bound.

kube-scheduler's bind names the pod only (namespace, name, UID) and the node.
The pod drax's watch holds can trail the one the scheduler decided on, a pod
without claims is held there only as its requests, and file mode has no
watch; so bind finds the pod's claim references in the `Pod` filter or
prioritize parsed from the request, the scheduler's own copy. A pod is
remembered by UID when a verb sees it (a new attempt replaces the entry) and
forgotten once its bind succeeded: no later verb of that UID needs it, and a
failed bind sends the pod through filter again, which remembers it anew.

What stays are pods the scheduler filtered but did not bind (no node fitted,
rejected in Reserve or Permit, deleted meanwhile). They go after `ttl`
seconds, far above the time between filter and bind (seconds, longer only
while a Permit plugin holds the pod; a pod that outlives its entry gets a
clear bind error and is scheduled again), and at most `size` are held.
Forgetting a pod at its bind keeps the memory to the pods still waiting: a
bound pod's entry would stay for `ttl`, and a steady stream of binds would
fill every entry.
"""

from __future__ import annotations

from typing import Final

from cachetools import TTLCache

from app.model import Pod

POD_MEMORY_SIZE: Final = 10_000
POD_MEMORY_TTL_SECONDS: Final = 600.0


class PodMemory:
    """Pods by UID from filter and prioritize, for bind (see module doc)."""

    __slots__ = ("_pods",)

    def __init__(self, *, size: int = POD_MEMORY_SIZE,
                 ttl: float = POD_MEMORY_TTL_SECONDS) -> None:
        self._pods: TTLCache[str, Pod] = TTLCache(maxsize=size, ttl=ttl)

    def __len__(self) -> int:
        return len(self._pods)

    def remember(self, pod: Pod) -> None:
        if pod.uid:
            self._pods[pod.uid] = pod

    def recall(self, *, namespace: str, name: str, uid: str) -> Pod | None:
        pod = self._pods.get(uid) if uid else None
        if pod is not None and pod.namespace == namespace and pod.name == name:
            return pod
        return None

    def forget(self, uid: str) -> None:
        self._pods.pop(uid, None)
