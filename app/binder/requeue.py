"""Have kube-scheduler retry the pods drax rejected once devices may have appeared.

kube-scheduler (1.37.2) keeps a pod an extender rejected among its
unschedulable pods until an event of the wildcard set its pseudo-plugin
`Extender` registers moves it (framework.UnrollWildCardResource); that set
has no ResourceSlice, and the DynamicResources plugin, which registers it, is
off in the drax profile, so without help such a pod waits for the periodic
flush, 5 minutes by default (`--pod-max-in-unschedulable-pods-duration`,
deprecated). An update of the pod itself does move it: `PriorityQueue.Update`
asks the rejector's queueing hint for the TargetPod/Update event, and
Extender's always queues the pod, after its backoff (1 s doubling to 10 s).

So when the watches bring something that can add capacity (`may_add_capacity`:
a ResourceSlice or DeviceClass added or changed, a Node added, a claim
deallocated or deleted, a relist), the leader patches the status of each pod
in `Extender.waiting` with its own condition `drax.dev/DevicesChanged` (status
True, the time in lastTransitionTime and the message, so each patch is a
change the scheduler's informer sees). Changes are gathered for `settle`
seconds and rounds are at least `min_interval` apart, so a burst of slices
costs each waiting pod one write. A pod gone (404) or replaced (the uid
precondition fails) is forgotten; a pod stays waiting until filter passes it
or it is bound. Only the leader writes: the standby's scheduler is not
scheduling, and its drax has nobody waiting.

RBAC (manifests/rbac.yaml): `patch` on pods/status.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

import aiohttp
from kubernetes_asyncio import client
from prometheus_client import CollectorRegistry, Counter, Gauge

from app.binder.kube import call_with_retries
from app.extender.waiting import WaitingPod, WaitingPods
from app.model.times import format_time
from app.sources.kube.lease import Leadership

log = logging.getLogger(__name__)

CONDITION: Final = "drax.dev/DevicesChanged"
CONCURRENCY: Final = 8
ATTEMPTS: Final = 3


def may_add_capacity(kind: str, event_type: str, obj: Mapping[str, Any] | None) -> bool:
    """Whether a watch event (or a completed list: "LIST") can make devices free."""
    if event_type == "LIST":
        return kind != "Pod"
    if kind in ("ResourceSlice", "DeviceClass"):
        return event_type in ("ADDED", "MODIFIED")
    if kind == "Node":
        return event_type == "ADDED"
    if kind == "ResourceClaim":
        if event_type == "DELETED":
            return True
        status = (obj or {}).get("status") or {}
        return event_type == "MODIFIED" and not status.get("allocation")
    return False


class RequeueMetrics:
    def __init__(self, registry: CollectorRegistry, waiting: WaitingPods) -> None:
        self.nudges = Counter(
            "drax_requeue_nudges_total",
            "Status patches of pods drax rejected, made when devices may have appeared so "
            "that kube-scheduler tries them again; by result (ok, gone, failed).",
            ["result"], registry=registry)
        for result in ("ok", "gone", "failed"):
            self.nudges.labels(result=result)
        self.waiting = Gauge("drax_pods_waiting_for_devices",
                             "Pods drax's filter left without a node, not yet bound.",
                             registry=registry)
        self.waiting.set_function(lambda: float(len(waiting)))


class Requeuer:
    def __init__(self, api_client: client.ApiClient, *, waiting: WaitingPods,
                 leadership: Leadership, metrics: RequeueMetrics, settle: float = 0.2,
                 min_interval: float = 1.0, request_timeout: float = 10.0) -> None:
        self._core: Any = client.CoreV1Api(api_client)
        self._waiting = waiting
        self._leadership = leadership
        self._metrics = metrics
        self._settle = settle
        self._min_interval = min_interval
        self._timeout = aiohttp.ClientTimeout(total=request_timeout)
        self._changed = asyncio.Event()

    def on_change(self, kind: str, event_type: str, obj: Mapping[str, Any] | None) -> None:
        """The watch source's change hook."""
        if may_add_capacity(kind, event_type, obj):
            self._changed.set()

    async def run(self) -> None:
        """Nudge the waiting pods after each gathered change, until cancelled."""
        while True:
            await self._changed.wait()
            await asyncio.sleep(self._settle)
            self._changed.clear()
            if self._leadership.leading and len(self._waiting):
                await self.nudge_all()
            await asyncio.sleep(self._min_interval)

    async def nudge_all(self) -> None:
        pods = self._waiting.snapshot()
        limit = asyncio.Semaphore(CONCURRENCY)
        now = datetime.now(UTC)

        async def one(pod: WaitingPod) -> None:
            async with limit:
                await self._nudge(pod, now)

        await asyncio.gather(*(one(p) for p in pods))
        log.info("asked kube-scheduler to retry %d pod(s) drax rejected: devices may have "
                 "appeared", len(pods))

    async def _nudge(self, pod: WaitingPod, now: datetime) -> None:
        stamp = format_time(now)
        condition = {"type": CONDITION, "status": "True", "reason": "DevicesChanged",
                     "message": f"devices may have appeared at {now.isoformat()}; "
                                "drax asked the scheduler to try this pod again",
                     "lastTransitionTime": stamp}
        body: dict[str, Any] = {"status": {"conditions": [condition]}}
        if pod.uid:
            body["metadata"] = {"uid": pod.uid}
        try:
            code, answer = await call_with_retries(
                lambda: self._core.patch_namespaced_pod_status(
                    pod.name, pod.namespace, body,
                    _content_type="application/strategic-merge-patch+json",
                    _preload_content=False, _request_timeout=self._timeout),
                attempts=ATTEMPTS)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            self._metrics.nudges.labels(result="failed").inc()
            log.warning("asking the scheduler to retry pod %s/%s failed: %s", pod.namespace,
                        pod.name, exc)
            return
        if code in (404, 409, 422):  # gone, or another pod under that name now
            self._waiting.discard(pod.namespace, pod.name)
            self._metrics.nudges.labels(result="gone").inc()
            return
        if code != 200:
            self._metrics.nudges.labels(result="failed").inc()
            log.warning("asking the scheduler to retry pod %s/%s: HTTP %d: %s", pod.namespace,
                        pod.name, code, answer.get("message", ""))
            return
        self._metrics.nudges.labels(result="ok").inc()
        if (answer.get("spec") or {}).get("nodeName"):
            self._waiting.discard(pod.namespace, pod.name)  # bound meanwhile
