"""Bounded categories for the free-text reasons drax answers with.

Filter and bind explain themselves in sentences (app/allocator/reasons.py,
the claim resolver, the binder); a metric needs a small fixed label set.
Filter's reasons carry their category from where they are written
(`app.allocator.types.Rejection`), so `FILTER_REASONS` is that set. Bind's
errors come from a few fixed templates, and `bind_cause` reads the category
off the wording, once per distinct text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

from app.allocator.types import Rejection
from app.bounded_cache import BoundedCache
from app.model import Pod, ResourceClaim

# Filter rejections are typed where each reason is written (`Rejection`).
FILTER_REASONS: Final = tuple(r.value for r in Rejection)
BIND_CAUSES: Final = (
    "pod_unknown", "node_unknown", "outside_pool", "no_longer_fits", "allocation_error",
    "claim_not_found", "claim_taken", "conflict", "api_error", "not_synced", "not_served", "other")

_CACHE_LIMIT: Final = 4096
_bind_cache: BoundedCache[str, str] = BoundedCache(_CACHE_LIMIT)


def bind_cause(text: str) -> str:
    """One of BIND_CAUSES for the error text bind answered with."""
    hit = _bind_cache.get(text)
    if hit is None:
        hit = _bind_cache.put(text, _classify_bind(text))
    return hit


def _classify_bind(text: str) -> str:
    lowered = text.lower()
    if lowered.startswith("pod ") and "is unknown to drax" in lowered:
        return "pod_unknown"
    rules = (
        ("not synced", "not_synced"), ("not ready", "not_synced"),
        ("bind is not served", "not_served"), ("not connected", "not_served"),
        ("is unknown to drax", "node_unknown"), ("outside this drax's node pool", "outside_pool"),
        ("can no longer hold", "no_longer_fits"), ("cannot allocate on node", "allocation_error"),
        ("conflict", "conflict"),
        ("not found", "claim_not_found"), ("does not exist", "claim_not_found"),
        ("allocated by someone else", "claim_taken"), ("allocated elsewhere", "claim_taken"),
        ("already reserved", "claim_taken"), ("already in use", "claim_taken"),
        ("http ", "api_error"),
    )
    for needle, cause in rules:
        if needle in lowered:
            return cause
    return "other"


# A shape label is the pod's template names; claims without a template are
# named by a hash of their spec. Past MAX_SHAPES distinct labels every new one
# is "other", so a cluster of one-off claims cannot grow the series count.
MAX_SHAPES: Final = 32
_shapes: set[str] = set()


def claim_shape(pod: Pod, claims: Sequence[ResourceClaim]) -> str:
    """The bounded label for the claim shape of `pod` (see MAX_SHAPES)."""
    parts = []
    for entry in pod.resource_claims:
        if entry.resource_claim_template_name:
            parts.append(entry.resource_claim_template_name)
    if not parts:
        digest = hashlib.sha256(
            repr(sorted(repr(c.spec) for c in claims)).encode()).hexdigest()[:8]
        parts.append(f"spec-{digest}" if claims else "none")
    label = "+".join(sorted(parts))
    if label in _shapes:
        return label
    if len(_shapes) >= MAX_SHAPES:
        return "other"
    _shapes.add(label)
    return label
