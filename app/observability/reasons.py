"""Bounded categories for the free-text reasons drax answers with.

Filter and bind explain themselves in sentences (app/allocator/reasons.py,
the claim resolver, the binder); a metric needs a small fixed label set.
Each sentence carries its category from where it is written: filter's
reasons a `Rejection` (`app.allocator.types`), bind's errors a `BindCause`
(`app.extender.binder`). `FILTER_REASONS` and `BIND_CAUSES` are those sets,
so rewording a sentence keeps its label.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

from app.allocator.types import Rejection
from app.extender.binder import BindCause
from app.model import Pod, ResourceClaim

# Filter rejections are typed where each reason is written (`Rejection`).
FILTER_REASONS: Final = tuple(r.value for r in Rejection)
# Bind failures are typed where each error is written (`BindCause`).
BIND_CAUSES: Final = tuple(c.value for c in BindCause)

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
