"""Which ResourceClaims a pod needs, looked up the way kube-scheduler does.

A pod names claims directly (`resourceClaimName`) or through a template
(`resourceClaimTemplateName`). Against a cluster, the template's claim is the
one the resourceclaim controller generated and recorded in
`pod.status.resourceClaimStatuses`; until it exists the pod cannot be
scheduled. In file mode nobody generates claims, so the pod is served as if
the claim had been generated from the template (and bind creates it).

The result also carries a `shape`: a key that is equal for two pods whose
claims ask for the same thing (the spec of each claim still to allocate, where
each allocated one is usable), so answers can be cached across pods created
from the same template. A pod whose containers request extended resources a
DeviceClass serves also carries those needs (`extended`); the special claim
they become depends on the node, so it is built per node (`extended` module).
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Final

from cachetools import LRUCache

from app.allocator.types import Rejection
from app.extender.extended import ExtendedNeeds, find_extended_claim, needs_of
from app.inventory import POD_CLAIM_NAME_ANNOTATION, Inventory
from app.model import NodeSelector, Pod, PodResourceClaim, ResourceClaim, ResourceClaimSpec

_SHAPE_CACHE_SIZE: Final = 4096
RESERVED_FOR_LIMIT: Final = 256  # status.reservedFor maximum in the API


@dataclass(slots=True, frozen=True)
class PodClaims:
    """A pod's claims in `spec.resourceClaims` order, or why they cannot be had.
    In file mode a template's claim may not exist in the inventory yet; bind
    creates it."""

    claims: tuple[ResourceClaim, ...] = ()
    problem: str | None = None
    rejection: Rejection | None = None  # the category of `problem`
    shape: Hashable = ()
    extended: ExtendedNeeds | None = None

    @property
    def pending(self) -> tuple[ResourceClaim, ...]:
        """Claims still to allocate: what the allocator is asked for."""
        return tuple(c for c in self.claims if c.allocation is None)

    @property
    def allocated(self) -> tuple[ResourceClaim, ...]:
        """Claims allocated already (shared): they only constrain the node."""
        return tuple(c for c in self.claims if c.allocation is not None)


def generated_claim_name(pod: Pod, entry: PodResourceClaim) -> str:
    """The name file mode gives a claim generated from a template. The controller
    adds a random suffix; a fixed name makes bind and the next lookup agree."""
    return f"{pod.name}-{entry.name}"


class ClaimResolver:
    """Resolves pods' claims against one inventory; `generate` selects file mode."""

    __slots__ = ("_extended", "_generate", "_inventory", "_shapes")

    def __init__(self, inventory: Inventory, *, generate: bool,
                 extended_resources: bool = True) -> None:
        self._inventory = inventory
        self._generate = generate
        self._extended = extended_resources  # the DRAExtendedResource gate
        # id(spec or node selector) -> (a weak reference to it, its repr): each is
        # immutable, so its text form is computed once. In file mode one spec is
        # shared by every claim made from a template; from a watch every claim
        # (and every update of it) brings its own, so an entry goes when its
        # object does, rather than keeping the specs of deleted claims alive.
        self._shapes: LRUCache[int, tuple[weakref.ref[object], str]] = LRUCache(
            maxsize=_SHAPE_CACHE_SIZE)

    def resolve(self, pod: Pod) -> PodClaims:
        claims: list[ResourceClaim] = []
        for entry in pod.resource_claims:
            claim = self._claim_for(pod, entry)
            if isinstance(claim, tuple):
                return PodClaims(problem=claim[0], rejection=claim[1])
            if claim is None:
                continue
            if claim.deleting:
                return PodClaims(problem=f"ResourceClaim {claim.key} is being deleted",
                                 rejection=Rejection.CLAIM_UNUSABLE)
            if len(claim.reserved_for) >= RESERVED_FOR_LIMIT and not any(
                    r.uid == pod.uid and r.name == pod.name for r in claim.reserved_for):
                return PodClaims(problem=f"ResourceClaim {claim.key} is already in use by "
                                         f"{RESERVED_FOR_LIMIT} consumers, the most allowed",
                                 rejection=Rejection.CLAIM_UNUSABLE)
            claims.append(claim)
        resolved = self.of_claims(claims)
        needs = needs_of(pod, self._inventory.classes) if (
            self._extended and pod.containers) else None
        if needs is None:
            return resolved
        stale = find_extended_claim(pod, self._inventory.claims())
        if stale is not None:
            # Upstream treats it as left from an earlier attempt and deletes it first.
            return PodClaims(problem=f"ResourceClaim {stale.key} for the pod's extended "
                                     "resources is left from an earlier attempt",
                             rejection=Rejection.CLAIM_UNUSABLE)
        return PodClaims(claims=resolved.claims, shape=(resolved.shape, needs),
                         extended=needs)

    def of_claims(self, claims: Sequence[ResourceClaim]) -> PodClaims:
        """`claims` with their shape (also used to precompute answers for known claims)."""
        return PodClaims(claims=tuple(claims),
                         shape=tuple(self._text(c.spec) if c.allocation is None
                                     else self._text(c.allocation.node_selector)
                                     for c in claims))

    def _claim_for(self, pod: Pod, entry: PodResourceClaim
                   ) -> ResourceClaim | tuple[str, Rejection] | None:
        """The claim, or why there is none; None when the entry needs no claim."""
        inv = self._inventory
        if entry.resource_claim_name:
            key = f"{pod.namespace}/{entry.resource_claim_name}"
            claim = inv.claim(key)
            if claim is None:
                return (f"ResourceClaim {key} (pod claim {entry.name!r}) does not exist",
                        Rejection.CLAIM_NOT_FOUND)
            return claim
        template_key = f"{pod.namespace}/{entry.resource_claim_template_name}"
        if entry.name in pod.claim_statuses:
            generated_name = pod.claim_statuses[entry.name]
            if generated_name is None:
                return None  # the controller decided this entry needs no claim
            claim = inv.claim(f"{pod.namespace}/{generated_name}")
            if claim is not None:
                return self._owned(pod, claim)
        if not self._generate:
            return (f"the ResourceClaim for pod claim {entry.name!r} (template "
                    f"{template_key}) is not created yet; waiting for the resourceclaim "
                    "controller"), Rejection.CLAIM_UNUSABLE
        claim = (inv.generated_claim(pod=pod, pod_claim_name=entry.name)
                 or inv.claim(f"{pod.namespace}/{generated_claim_name(pod, entry)}"))
        if claim is not None:
            return claim
        template = inv.template(template_key)
        if template is None:
            return (f"ResourceClaimTemplate {template_key} (pod claim {entry.name!r}) "
                    "does not exist"), Rejection.CLAIM_NOT_FOUND
        return ResourceClaim(
            namespace=pod.namespace, name=generated_claim_name(pod, entry),
            spec=template.spec, owner_pod_uid=pod.uid or None,
            annotations={**template.annotations, POD_CLAIM_NAME_ANNOTATION: entry.name})

    @staticmethod
    def _owned(pod: Pod, claim: ResourceClaim) -> ResourceClaim | tuple[str, Rejection]:
        if pod.uid and claim.owner_pod_uid and claim.owner_pod_uid != pod.uid:
            return (f"ResourceClaim {claim.key} was not created for pod {pod.key}",
                    Rejection.CLAIM_NOT_FOUND)
        return claim

    def _text(self, obj: ResourceClaimSpec | NodeSelector | None) -> str:
        if obj is None:
            return ""
        key = id(obj)
        hit = self._shapes.get(key)
        if hit is not None and hit[0]() is obj:
            return hit[1]
        text = repr(obj)
        shapes = self._shapes
        self._shapes[key] = (weakref.ref(obj, lambda _: shapes.pop(key, None)), text)
        return text
