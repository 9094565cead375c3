"""How bind writes an allocation: the `Binder` protocol, and the file-mode binder.

The extender decides and assumes; a binder makes it real. Against a cluster
(`app.binder`) that is the claim status write plus the pod Binding. In file
mode there is no API server, so `MemoryBinder` writes the same facts into the
inventory: the claim gets its allocation and the pod in `reservedFor` (a
template's claim is created first), and the pod gets its node. The next filter
then sees those devices as taken, exactly as it would after a watch event.

A pod's extended resources served by DRA come as one more claim (`extended`):
the binder creates it as the scheduler does (a generated name, the
extended-resource annotation, the pod as controller owner, the allocation and
the pod in `reservedFor`) and records it in the pod's
`status.extendedResourceClaimStatus`; `bind` returns the created name.

A failed bind carries its category (`BindCause`) from where its message is
written, as filter's reasons carry a `Rejection`: the metric label of a bind
failure never depends on the wording.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Protocol

from app.allocator.types import ClaimAllocation
from app.extender.extended import ExtendedClaim
from app.inventory import POD_CLAIM_NAME_ANNOTATION, Inventory
from app.model import Pod, ResourceClaim
from app.model.objects import ExtendedResourceClaimStatus, ResourceClaimConsumerReference

# what the API server appends to a generateName
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


class BindCause(StrEnum):
    """Why bind answered with an error, as a small fixed set (the metric label of
    `drax_bind_failures_total`, docs/metrics.md)."""

    POD_UNKNOWN = "pod_unknown"
    NODE_UNKNOWN = "node_unknown"
    OUTSIDE_POOL = "outside_pool"
    NO_LONGER_FITS = "no_longer_fits"
    ALLOCATION_ERROR = "allocation_error"
    CLAIM_NOT_FOUND = "claim_not_found"
    CLAIM_TAKEN = "claim_taken"
    CONFLICT = "conflict"
    API_ERROR = "api_error"
    NOT_SYNCED = "not_synced"
    NOT_SERVED = "not_served"
    OTHER = "other"


@dataclass(slots=True, frozen=True)
class BindFailure:
    """A bind that did not happen: `message` goes to kube-scheduler as the bind
    error, `cause` to the metrics."""

    message: str
    cause: BindCause


class BindError(Exception):
    """Bind failed; the message is returned to kube-scheduler as the bind error."""

    def __init__(self, message: str, cause: BindCause = BindCause.OTHER) -> None:
        super().__init__(message)
        self.cause = cause

    @property
    def failure(self) -> BindFailure:
        return BindFailure(str(self), self.cause)


class Binder(Protocol):
    async def bind(self, *, pod: Pod, node: str, allocations: Sequence[ClaimAllocation],
                   reserve: Sequence[ResourceClaim],
                   extended: ExtendedClaim | None = None) -> str | None:
        """Write `allocations` into their claims, add `pod` to `reservedFor` of every
        claim in `reserve`, create the `extended` claim (its allocation is among
        `allocations`) and bind the pod to `node`; the created claim's name, or
        None. Raise BindError on failure."""


def pod_reference(pod: Pod) -> ResourceClaimConsumerReference:
    return ResourceClaimConsumerReference(resource="pods", name=pod.name, uid=pod.uid)


class MemoryBinder:
    """File mode's binder: records the allocation in the inventory (see module doc)."""

    def __init__(self, inventory: Inventory) -> None:
        self._inventory = inventory

    async def bind(self, *, pod: Pod, node: str, allocations: Sequence[ClaimAllocation],
                   reserve: Sequence[ResourceClaim],
                   extended: ExtendedClaim | None = None) -> str | None:
        by_claim = {ca.claim_key: ca.allocation for ca in allocations}
        updated = []
        for claim in reserve:
            current = self._inventory.claim(claim.key) or claim
            allocation = by_claim.get(claim.key, current.allocation)
            if allocation is None:
                raise BindError(f"ResourceClaim {claim.key} has no allocation to reserve")
            if (claim.key in by_claim and current.allocation is not None
                    and current.allocation != allocation):
                raise BindError(f"ResourceClaim {claim.key} was allocated by someone else",
                                BindCause.CLAIM_TAKEN)
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
        created = extended_status = None
        if extended is not None:
            allocation = by_claim.get(extended.claim.key)
            if allocation is None:
                raise BindError("the claim for the pod's extended resources has no allocation")
            name = generated_name(f"{pod.name}-extended-resources-")
            updated.append(replace(extended.claim, name=name, allocation=allocation,
                                   reserved_for=(pod_reference(pod),)))
            created = name
            extended_status = ExtendedResourceClaimStatus(
                resource_claim_name=name, request_mappings=extended.mappings)
        for claim in updated:
            self._inventory.upsert("ResourceClaim", claim)
        self._inventory.upsert("Pod", replace(
            pod, node_name=node, claim_statuses=statuses,
            extended_resource_claim_status=extended_status
            or pod.extended_resource_claim_status))
        return created


def generated_name(base: str) -> str:
    """`base` plus five random characters, as the API server completes generateName
    (the base cut to leave room within 63 characters)."""
    suffix = "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(5))
    return base[:58] + suffix
