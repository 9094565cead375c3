"""Each time this replica becomes leader: finish what a killed bind left half written.

A bind writes a claim in two updates (the finalizer, then allocation and
reservation together; see `kube`), and its undo in two as well (status, then
the finalizer). A process killed between the two leaves a claim with the
`resource.kubernetes.io/delete-protection` finalizer but no allocation: it
protects nothing. The resourceclaim controller (1.37.2) removes it only once
the claim is being deleted, or when a last consumer leaves; a claim that was
never reserved keeps it until then. Such a claim is released here (the
finalizer removed, guarded by the resourceVersion just listed: a 409 means
someone is writing it now and it is left alone).

The other state a kill can leave, claims allocated and reserved for a pod
whose Binding was never created, is not undone: it is exactly what the
scheduler's retry of the pod needs (drax's bind finds the reservation and only
creates the Binding). The resourceclaim controller, too, keeps a reservation
while its pod exists and is not done; once the pod is deleted, replaced or
done, it drops the reservation and, with the last one, the allocation and the
finalizer.

Only the leader writes (`Leadership`: its kube-scheduler holds the Lease),
and it runs the pass each time it becomes leader, so the half-written binds of
a leader killed mid-bind are released by the replica taking over, not only by
a restart of the same process. The pass runs in the background until one has
gone through, and stops writing once this replica no longer leads; a bind
racing it is safe, as every write on both sides carries the resourceVersion it
read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Final

import aiohttp
from kubernetes_asyncio import client
from prometheus_client import CollectorRegistry, Counter

from app.binder.kube import FINALIZER
from app.sources.kube.client import ApiReadError, read_object
from app.sources.kube.lease import Leadership

log = logging.getLogger(__name__)

RETRY_SECONDS: Final = 5.0
PAGE_SIZE: Final = 500


class RepairMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.released = Counter("drax_bind_half_written_released_total",
                                "Claims found with drax's finalizer but no allocation "
                                "on becoming leader (a bind or undo killed half-way) "
                                "and released.",
                                registry=registry)


def half_written(claim: dict[str, Any]) -> bool:
    """The finalizer without an allocation to protect."""
    meta = claim.get("metadata") or {}
    status = claim.get("status") or {}
    return FINALIZER in (meta.get("finalizers") or []) and not status.get("allocation")


async def release_half_written(api_client: client.ApiClient, *, metrics: RepairMetrics,
                               request_timeout: float = 10.0,
                               may_write: Callable[[], bool] = lambda: True) -> int:
    """One pass over every claim; how many were released. Stops (RepairError)
    once `may_write()` turns False."""
    claims: Any = client.ResourceV1Api(api_client)
    timeout = aiohttp.ClientTimeout(total=request_timeout)
    released = 0
    token = ""
    while True:
        page = await read_object(claims.list_resource_claim_for_all_namespaces(
            limit=PAGE_SIZE, _continue=token or None, _preload_content=False,
            _request_timeout=timeout), what="listing resourceclaims")
        for claim in page.get("items") or []:
            if not half_written(claim):
                continue
            if not may_write():
                raise RepairError("no longer the leader")
            if await _release(claims, claim, timeout=timeout):
                released += 1
                metrics.released.inc()
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return released


async def keep_releasing(api_client: client.ApiClient, *, metrics: RepairMetrics,
                         leadership: Leadership) -> None:
    """`release_half_written` once in each term this replica leads, retried
    until a pass completes (the API may be down) or the term ends."""
    while True:
        await leadership.wait(True)
        term = leadership.term
        await _release_in_term(api_client, metrics=metrics, leadership=leadership, term=term)
        await leadership.wait(False)


async def _release_in_term(api_client: client.ApiClient, *, metrics: RepairMetrics,
                           leadership: Leadership, term: int) -> None:
    while leadership.still_leading(term):
        try:
            released = await release_half_written(
                api_client, metrics=metrics, may_write=lambda: leadership.still_leading(term))
        except (aiohttp.ClientError, TimeoutError, OSError, RepairError, ApiReadError) as exc:
            if not leadership.still_leading(term):
                return
            log.warning("releasing half-written claims failed, retrying in %.0f s: %s",
                        RETRY_SECONDS, exc)
            await asyncio.sleep(RETRY_SECONDS)
            continue
        log.info("released %d half-written claims (the finalizer without an allocation)",
                 released)
        return


class RepairError(Exception):
    """A pass stopped before its end: this replica no longer leads."""


async def _release(claims: Any, claim: dict[str, Any], *,
                   timeout: aiohttp.ClientTimeout) -> bool:
    meta = claim["metadata"]
    meta["finalizers"] = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
    resp = await claims.replace_namespaced_resource_claim(
        meta["name"], meta["namespace"], claim, _preload_content=False,
        _request_timeout=timeout)
    try:
        await resp.read()
    finally:
        resp.release()
    if resp.status == 200:
        log.info("released resourceclaim %s/%s: drax's finalizer without an allocation",
                 meta["namespace"], meta["name"])
        return True
    if resp.status not in (404, 409):  # gone, or being written by someone now
        log.warning("releasing resourceclaim %s/%s: HTTP %d", meta["namespace"], meta["name"],
                    resp.status)
    return False
