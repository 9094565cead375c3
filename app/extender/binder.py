"""How bind writes an allocation: the `Binder` protocol, and the file-mode binder.

The extender decides and assumes; a binder makes it real. Against a cluster
(`app.binder`) that is the claim status write plus the pod Binding. In file
mode there is no API server, so `MemoryBinder` writes the same facts into the
inventory: the claim gets its allocation and the pod in `reservedFor` (a
template's claim is created first), and the pod gets its node. The next filter
then sees those devices as taken, exactly as it would after a watch event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from app.allocator.types import ClaimAllocation
from app.inventory import POD_CLAIM_NAME_ANNOTATION, Inventory
from app.model import Pod, ResourceClaim
from app.model.objects import ResourceClaimConsumerReference


class BindError(Exception):
    """Bind failed; the message is returned to kube-scheduler as the bind error."""


class Binder(Protocol):
    async def bind(self, *, pod: Pod, node: str, allocations: Sequence[ClaimAllocation],
                   reserve: Sequence[ResourceClaim]) -> None:
        """Write `allocations` into their claims, add `pod` to `reservedFor` of every
        claim in `reserve`, and bind the pod to `node`; raise BindError on failure."""


def pod_reference(pod: Pod) -> ResourceClaimConsumerReference:
    return ResourceClaimConsumerReference(resource="pods", name=pod.name, uid=pod.uid)


class MemoryBinder:
    """File mode's binder: records the allocation in the inventory (see module doc)."""

    def __init__(self, inventory: Inventory) -> None:
        self._inventory = inventory

    async def bind(self, *, pod: Pod, node: str, allocations: Sequence[ClaimAllocation],
                   reserve: Sequence[ResourceClaim]) -> None:
        by_claim = {ca.claim_key: ca.allocation for ca in allocations}
        updated = []
        for claim in reserve:
            current = self._inventory.claim(claim.key) or claim
            allocation = by_claim.get(claim.key, current.allocation)
            if allocation is None:
                raise BindError(f"ResourceClaim {claim.key} has no allocation to reserve")
            if (claim.key in by_claim and current.allocation is not None
                    and current.allocation != allocation):
                raise BindError(f"ResourceClaim {claim.key} was allocated by someone else")
            reference = pod_reference(pod)
            reserved = current.reserved_for if any(
                r.name == pod.name and r.uid == pod.uid for r in current.reserved_for
            ) else (*current.reserved_for, reference)
            updated.append(replace(current, allocation=allocation, reserved_for=reserved))
        statuses = dict(pod.claim_statuses)
        for claim in updated:
            entry = claim.annotations.get(POD_CLAIM_NAME_ANNOTATION)
            if entry is not None and claim.owner_pod_uid == (pod.uid or None):
                statuses[entry] = claim.name
        for claim in updated:
            self._inventory.upsert("ResourceClaim", claim)
        self._inventory.upsert("Pod", replace(pod, node_name=node, claim_statuses=statuses))
