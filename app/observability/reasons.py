"""Bounded categories for the free-text reasons drax answers with.

Filter and bind explain themselves in sentences (app/allocator/reasons.py,
the claim resolver, the binder); a metric needs a small fixed label set. The
sentences are built from a few fixed templates, so a category is read off the
template's wording. Each distinct text is classified once and remembered: one
filter answers thousands of nodes with a handful of distinct texts.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Final

from app.bounded_cache import BoundedCache
from app.model import Pod, ResourceClaim

FILTER_REASONS: Final = (
    "no_device_of_class", "selectors", "not_enough_free", "constraint", "taint",
    "counters_capacity", "invalid_pool", "incomplete_pool", "cel_error", "claim_not_found",
    "claim_unusable", "allocated_elsewhere", "unknown_node", "step_budget", "not_synced",
    "other")
BIND_CAUSES: Final = (
    "pod_unknown", "node_unknown", "no_longer_fits", "allocation_error", "claim_not_found",
    "claim_taken", "conflict", "api_error", "not_synced", "not_served", "other")

_REQUEST: Final = re.compile(
    r"(\d+) devices match class \S+, (\d+) pass the request selectors, (\d+) free")
_CACHE_LIMIT: Final = 4096
_filter_cache: BoundedCache[str, str] = BoundedCache(_CACHE_LIMIT)
_bind_cache: BoundedCache[str, str] = BoundedCache(_CACHE_LIMIT)


def filter_reason(text: str) -> str:
    """One of FILTER_REASONS for a node's filter reason or error text."""
    hit = _filter_cache.get(text)
    if hit is None:
        hit = _filter_cache.put(text, _classify_filter(text))
    return hit


def _classify_filter(text: str) -> str:
    if text.startswith("error:"):
        return "cel_error" if "CEL" in text or "cel" in text else "other"
    if "not synced" in text:
        return "not_synced"
    if "is unknown to drax" in text:
        return "unknown_node"
    if "already allocated to devices that are not available" in text:
        return "allocated_elsewhere"
    if "does not exist" in text or "was not created for pod" in text:
        return "claim_not_found"
    if text.startswith(("ResourceClaim", "the ResourceClaim", "ResourceClaimTemplate")):
        return "claim_unusable"
    if "gave up after" in text:
        return "step_budget"
    match = _REQUEST.search(text)
    if match is not None:
        matched, selected, _ = (int(g) for g in match.groups())
        if matched == 0:
            return "no_device_of_class"
        if selected == 0:
            return "selectors"
        tail = text[match.end():].split(";", 2)
        detail = tail[1] if len(tail) > 1 else ""
        if "untolerated taints" in detail:
            return "taint"
        if "shared counters" in detail or "capacity left" in detail:
            return "counters_capacity"
        return "not_enough_free"
    if "satisfies constraint" in text:
        return "constraint"
    if "compete for the same devices" in text:
        return "counters_capacity"
    if "invalid resource pool" in text:
        return "invalid_pool"
    if "incomplete" in text:
        return "incomplete_pool"
    return "other"


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
        ("is unknown to drax", "node_unknown"),
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
