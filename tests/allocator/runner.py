"""Runs one table case: parse the raw objects, build the node view and the
allocated state, call `allocate`, and compare with what the case expects."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.allocator import AllocationOutcome, Objective, allocate
from app.features import FeatureGates
from app.model import ResourceClaim, parse_object
from tests.allocator.helpers import (
    NODE,
    allocated_state,
    cls,
    node_obj,
    node_view,
    parse_classes,
)

DEFAULT_CLASSES = (
    cls("gpu", 'device.driver == "driver-a"'),
    cls("nic", 'device.driver == "driver-b"'),
    cls("any"),
)

# Expectation for an infeasible node (optionally with reason substrings).
INFEASIBLE = "infeasible"


@dataclass(slots=True)
class Case:
    name: str
    claims: Sequence[dict[str, Any]]
    slices: Sequence[dict[str, Any]] = ()
    # per claim: "request:pool/device" strings in result order; INFEASIBLE; or "error:<text>"
    expect: Sequence[Sequence[str]] | str = ()
    classes: Sequence[dict[str, Any]] = DEFAULT_CLASSES
    allocated: Sequence[dict[str, Any]] = ()
    features: Mapping[str, bool] = field(default_factory=dict)
    node: str = NODE
    labels: Mapping[str, str] = field(default_factory=dict)
    reason: Sequence[str] = ()  # substrings of the reason
    # extra checks: raise, or return a bool that must be true
    check: Callable[[AllocationOutcome], object] | None = None
    objective: Objective | None = None
    step_budget: int | None = None


def run(case: Case) -> AllocationOutcome:
    features = FeatureGates().with_overrides(dict(case.features))
    node = node_obj(case.node, case.labels)
    claims: list[ResourceClaim] = [parse_object("ResourceClaim", c) for c in case.claims]
    held = [parse_object("ResourceClaim", c) for c in case.allocated]
    counter = itertools.count()
    kwargs: dict[str, Any] = {}
    if case.step_budget is not None:
        kwargs["step_budget"] = case.step_budget
    return allocate(
        claims,
        node_view=node_view(case.slices, node, partitionable=features.partitionable_devices),
        classes=parse_classes(case.classes),
        allocated=allocated_state(held, case.slices),
        features=features,
        objective=case.objective,
        new_share_id=lambda: f"share-{next(counter)}",
        **kwargs,
    )


def summary(outcome: AllocationOutcome) -> list[list[str]]:
    return [[f"{r.request}:{r.pool}/{r.device}" for r in c.allocation.results]
            for c in outcome.claims]


def verify(case: Case) -> AllocationOutcome:
    outcome = run(case)
    if isinstance(case.expect, str) and case.expect.startswith("error:"):
        assert outcome.error is not None, f"expected an error, got {outcome}"
        assert case.expect.removeprefix("error:") in outcome.error, outcome.error
        assert not outcome.feasible
    elif case.expect == INFEASIBLE:
        assert outcome.error is None, outcome.error
        assert not outcome.feasible, summary(outcome)
        assert outcome.reason
        for text in case.reason:
            assert text in outcome.reason, outcome.reason
    else:
        assert outcome.error is None, outcome.error
        assert outcome.feasible, outcome.reason
        assert summary(outcome) == [list(c) for c in case.expect]
        assert len(outcome.picks) == sum(len(c) for c in case.expect)
    if case.check is not None:
        assert case.check(outcome) in (None, True), f"check failed: {outcome}"
    return outcome
