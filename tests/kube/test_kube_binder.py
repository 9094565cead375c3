"""The binder's API writes against the API double, through the real kubernetes-asyncio client."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from app.allocator.types import ClaimAllocation
from app.binder import FINALIZER, RESERVED_FOR_MAX, BindMetrics, ClaimCopies, KubeBinder
from app.extender import BindCause, BindError
from app.model import (
    AllocationResult,
    DeviceRequestAllocationResult,
    NodeSelector,
    Pod,
    ResourceClaim,
    parse_object,
)
from app.model.objects import NodeSelectorRequirement, NodeSelectorTerm
from tests.kube.harness import DRIVER, KubeHarness, claim, pod, unstamped


def allocation(node: str, *devices: str) -> AllocationResult:
    return AllocationResult(
        results=tuple(DeviceRequestAllocationResult(request="gpus", driver=DRIVER, pool=node,
                                                    device=d) for d in devices),
        node_selector=NodeSelector((NodeSelectorTerm(match_fields=(
            NodeSelectorRequirement("metadata.name", "In", (node,)),)),)))


def allocated_claim(name: str, node: str, *, reserved_for: list[dict[str, str]]
                    ) -> dict[str, Any]:
    obj = claim(name)
    obj["metadata"]["finalizers"] = [FINALIZER]
    obj["status"] = {"allocation": allocation(node, "gpu-0").to_dict(),
                     "reservedFor": reserved_for}
    return obj


def consumer(name: str) -> dict[str, str]:
    return {"resource": "pods", "name": name, "uid": f"uid-{name}"}


class Setup:
    """A binder on the API double and pod p1 with claim c1, to be bound to node-a."""

    def __init__(self, h: KubeHarness, *, max_attempts: int = 5, request_timeout: float = 10.0,
                 allocation_timestamp: bool = True, copies: ClaimCopies | None = None) -> None:
        assert h.client is not None
        self.h = h
        self.binder = KubeBinder(h.client, metrics=BindMetrics(h.registry),
                                 max_attempts=max_attempts, request_timeout=request_timeout,
                                 allocation_timestamp=allocation_timestamp, copies=copies)
        self.pod: Pod = parse_object("Pod", h.server.create("pods", pod("p1", "c1")))

    async def bind(self, *devices: str, reserve: Sequence[ResourceClaim] = ()
                   ) -> AllocationResult:
        """Bind p1 to node-a, claim c1 allocated `devices` (none: c1 is not allocated
        here) and `reserve` reserved; the allocation written."""
        chosen = allocation("node-a", *devices)
        await self.binder.bind(pod=self.pod, node="node-a", reserve=list(reserve),
                               allocations=[ClaimAllocation("default/c1", chosen)] if devices
                               else [])
        return chosen

    def allocated_for_p1(self, chosen: AllocationResult) -> dict[str, Any]:
        """Claim c1 as written: the finalizer, `chosen`, reserved for p1."""
        written = self.claim_obj()
        assert written["metadata"]["finalizers"] == [FINALIZER]
        assert unstamped(written["status"]["allocation"]) == chosen.to_dict()
        assert written["status"]["reservedFor"] == [consumer("p1")]
        return written

    def claim_obj(self, name: str = "c1") -> dict[str, Any]:
        return self.h.server.get("resourceclaims", name, "default")

    def parsed(self, name: str) -> ResourceClaim:
        return parse_object("ResourceClaim", self.claim_obj(name))


async def test_bind_writes_finalizer_allocation_reservation_then_binding(tmp_path: Path
                                                                         ) -> None:
    async with KubeHarness(tmp_path) as h:
        s = Setup(h)
        h.server.create("resourceclaims", claim("c1"))
        s.allocated_for_p1(await s.bind("gpu-2"))
        assert h.server.bindings == [{
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": "p1", "namespace": "default", "uid": "uid-p1"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"}}]
        assert h.server.get("pods", "p1", "default")["spec"]["nodeName"] == "node-a"
        # Claims first, the pod last: kubelet must never see a bound pod with
        # claims that are not allocated and reserved for it.
        writes = [(m, p) for m, p in h.server.requests if m in ("PUT", "POST")]
        assert [p.rsplit("/", 1)[-1] for _, p in writes] == ["c1", "status", "binding"]
        assert h.metric("drax_bind_attempts_total", result="ok") == 1


async def watched_copies(h: KubeHarness, *names: str) -> ClaimCopies:
    """Copies fed by a real watch of the API double, holding `names`."""
    copies = ClaimCopies()
    h.watch(on_change=copies.on_change)
    await h.synced()
    await h.watching()
    for name in names:
        h.server.create("resourceclaims", claim(name))
    await h.caught_up()
    return copies


async def test_the_allocation_is_written_from_the_watch_copy_without_a_read(tmp_path: Path
                                                                            ) -> None:
    async with KubeHarness(tmp_path) as h:
        copies = await watched_copies(h, "c1")
        s = Setup(h, copies=copies)
        s.allocated_for_p1(await s.bind("gpu-2"))
        assert h.server.count("GET", "/resourceclaims/c1") == 0
        assert h.metric("drax_bind_conflicts_total") == 0
        assert len(h.server.bindings) == 1
        await h.caught_up()
        assert len(copies) == 0  # allocated now: a later bind only reserves it, and reads


async def test_a_stale_copy_costs_one_conflict_then_the_claim_is_read(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        copies = await watched_copies(h, "c1")
        assert h.source is not None
        await h.source.stop()  # the copy stays as it is while the claim changes
        changed = h.server.get("resourceclaims", "c1", "default")
        changed["metadata"]["annotations"] = {"test/concurrent": "x"}
        h.server.update("resourceclaims", changed)
        s = Setup(h, copies=copies)
        chosen = await s.bind("gpu-0")
        written = s.claim_obj()
        assert written["metadata"]["annotations"] == {"test/concurrent": "x"}  # kept
        assert written["metadata"]["finalizers"] == [FINALIZER]
        assert unstamped(written["status"]["allocation"]) == chosen.to_dict()
        assert h.metric("drax_bind_conflicts_total") == 1
        assert h.server.count("GET", "/resourceclaims/c1") == 1
        assert len(h.server.bindings) == 1


async def test_a_copy_of_a_claim_deleted_since_fails_as_not_found(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        copies = await watched_copies(h, "c1")
        assert h.source is not None
        await h.source.stop()
        h.server.delete("resourceclaims", "c1", "default")
        s = Setup(h, copies=copies)
        with pytest.raises(BindError, match="resourceclaim default/c1 not found") as failed:
            await s.bind("gpu-0")
        assert failed.value.cause is BindCause.CLAIM_NOT_FOUND
        assert h.server.bindings == []


@pytest.mark.parametrize("gate", [True, False])
async def test_a_new_allocation_is_stamped_as_the_in_tree_prebind_does(tmp_path: Path,
                                                                      gate: bool) -> None:
    async with KubeHarness(tmp_path) as h:
        s = Setup(h, allocation_timestamp=gate)  # DRADeviceBindingConditions
        h.server.create("resourceclaims", claim("c1"))
        before = datetime.now(UTC).replace(microsecond=0)
        await s.bind("gpu-2")
        written = s.claim_obj()["status"]["allocation"]
        if not gate:
            assert "allocationTimestamp" not in written
            return
        stamp = datetime.strptime(written["allocationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")
        assert before <= stamp.replace(tzinfo=UTC) <= datetime.now(UTC)


async def test_conflicts_are_retried_with_a_fresh_read(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        s = Setup(h)
        h.server.create("resourceclaims", claim("c1"))
        h.server.faults.status_conflicts = 2
        chosen = await s.bind("gpu-0")
        written = s.claim_obj()
        assert unstamped(written["status"]["allocation"]) == chosen.to_dict()
        assert written["metadata"]["annotations"] == {"test/concurrent": "x"}  # kept
        assert h.metric("drax_bind_conflicts_total") == 2
        assert len(h.server.bindings) == 1


async def test_endless_conflicts_fail_after_bounded_attempts_and_undo(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        s = Setup(h, max_attempts=3)
        h.server.create("resourceclaims", claim("c1"))
        h.server.faults.status_conflicts = 3
        with pytest.raises(BindError, match="still conflicting after 3 attempts"):
            await s.bind("gpu-0")
        written = s.claim_obj()
        assert "finalizers" not in written["metadata"]
        assert not written.get("status")
        assert h.server.bindings == []


async def test_claim_allocated_elsewhere_meanwhile_fails_as_upstream(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        s = Setup(h)
        h.server.create("resourceclaims", claim("c1"))
        theirs = allocation("node-b", "gpu-7").to_dict()

        def other_scheduler(namespace: str, name: str) -> None:
            h.server.before_status_put = None
            other = h.server.get("resourceclaims", name, namespace)
            other["status"] = {"allocation": theirs, "reservedFor": [consumer("other")]}
            h.server.update("resourceclaims", other)

        h.server.before_status_put = other_scheduler
        with pytest.raises(BindError, match="got allocated elsewhere in the meantime"):
            await s.bind("gpu-0")
        written = s.claim_obj()
        assert written["status"] == {"allocation": theirs, "reservedFor": [consumer("other")]}
        assert written["metadata"]["finalizers"] == [FINALIZER]  # still protects their allocation
        assert h.server.bindings == []


async def test_failed_binding_rolls_the_claims_back(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        s = Setup(h)
        h.server.create("resourceclaims", claim("c1"))
        h.server.create("resourceclaims",
                        allocated_claim("shared", "node-a", reserved_for=[consumer("other")]))
        h.server.faults.binding_failures = 5  # every attempt
        with pytest.raises(BindError, match="binding pod default/p1 to node node-a: HTTP 500"):
            await s.bind("gpu-1", reserve=[s.parsed("shared")])
        c1 = s.claim_obj("c1")
        assert "finalizers" not in c1["metadata"]
        assert c1["status"] == {}
        shared = s.claim_obj("shared")
        assert shared["status"]["reservedFor"] == [consumer("other")]
        assert shared["status"]["allocation"] == allocation("node-a", "gpu-0").to_dict()
        assert shared["metadata"]["finalizers"] == [FINALIZER]
        assert h.metric("drax_bind_rollbacks_total", result="ok") == 1
        assert h.metric("drax_bind_attempts_total", result="error") == 1
        assert "nodeName" not in h.server.get("pods", "p1", "default")["spec"]


async def test_shared_claim_only_gets_the_reservation(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        s = Setup(h)
        h.server.create("resourceclaims",
                        allocated_claim("c1", "node-a", reserved_for=[consumer("other")]))
        before = s.claim_obj()
        await s.bind(reserve=[s.parsed("c1")])
        after = s.claim_obj()
        assert after["status"]["allocation"] == before["status"]["allocation"]
        assert after["status"]["reservedFor"] == [consumer("other"), consumer("p1")]
        assert h.server.count("PUT", "/resourceclaims/c1") == 0  # no finalizer update


async def test_reserved_for_limit_is_enforced(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        s = Setup(h)
        full = [consumer(f"p{i}-other") for i in range(RESERVED_FOR_MAX)]
        h.server.create("resourceclaims", allocated_claim("c1", "node-a", reserved_for=full))
        with pytest.raises(BindError, match="already reserved for 256 consumers"):
            await s.bind(reserve=[s.parsed("c1")])
        assert len(s.claim_obj()["status"]["reservedFor"]) == RESERVED_FOR_MAX
        assert h.server.bindings == []


async def test_a_retried_bind_does_not_reserve_twice(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        s = Setup(h)
        h.server.create("resourceclaims",
                        allocated_claim("c1", "node-a", reserved_for=[consumer("p1")]))
        await s.bind(reserve=[s.parsed("c1")])
        assert s.claim_obj()["status"]["reservedFor"] == [consumer("p1")]
        assert h.server.status_writes == []
        assert len(h.server.bindings) == 1


async def test_missing_or_replaced_claims_fail_cleanly(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        s = Setup(h)
        with pytest.raises(BindError, match="resourceclaim default/c1 not found"):
            await s.bind("gpu-0")
        h.server.create("resourceclaims",
                        allocated_claim("c2", "node-a", reserved_for=[consumer("other")]))
        stale = s.parsed("c2")
        h.server.delete("resourceclaims", "c2", "default")
        h.server.create("resourceclaims",
                        allocated_claim("c2", "node-a", reserved_for=[consumer("other")]))
        with pytest.raises(BindError, match="resourceclaim default/c2 was replaced"):
            await s.bind(reserve=[stale])
        assert h.server.status_writes == [] and h.server.bindings == []


async def test_a_claim_being_deleted_is_not_reserved(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        s = Setup(h)
        deleting = allocated_claim("c1", "node-a", reserved_for=[consumer("other")])
        deleting["metadata"]["deletionTimestamp"] = "2026-12-02T12:00:00Z"
        h.server.create("resourceclaims", deleting)
        with pytest.raises(BindError, match="resourceclaim default/c1 is being deleted"):
            await s.bind(reserve=[s.parsed("c1")])
        assert s.claim_obj()["status"]["reservedFor"] == [consumer("other")]
        assert h.server.status_writes == [] and h.server.bindings == []


@pytest.mark.parametrize("fault", ["500", "429", "timeout", "lost-reply"])
async def test_a_passing_failure_of_every_write_is_retried(tmp_path: Path, fault: str) -> None:
    """Every other write fails: a 500, a 429 (sent again after its Retry-After),
    a timeout (nothing applied), or a reply lost after the write was applied (the
    repeat meets a 409, the re-read or the pod shows the write done)."""
    async with KubeHarness(tmp_path) as h:
        s = Setup(h, request_timeout=0.2)
        h.server.create("resourceclaims", claim("c1"))
        faults = h.server.faults
        faults.write_period, faults.write_kinds, faults.stall_seconds = 2, (fault,), 0.3
        chosen = await s.bind("gpu-0")
        assert faults.injected[fault] == 3  # finalizer, status, Binding
        s.allocated_for_p1(chosen)
        assert h.server.get("pods", "p1", "default")["spec"]["nodeName"] == "node-a"
        assert len(h.server.bindings) == 1
        assert h.metric("drax_bind_attempts_total", result="ok") == 1
        reason = fault if fault in ("500", "429") else "timeout"
        assert h.metric("drax_bind_retries_total", reason=reason) == 3
