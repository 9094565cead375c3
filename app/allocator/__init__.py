"""Structured DRA allocation for one pod on one node (see `types` for the contract).

`allocate` is the only entry point: the inventory supplies the node view and
the allocated state, the extender verbs and `drax allocate` call it, the
topology objective rates what it finds. It never raises for bad input: an
outcome is feasible, infeasible with a reason, or an error, as upstream
distinguishes them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from app.allocator.reasons import budget_reason, explain
from app.allocator.results import claim_allocation
from app.allocator.search import AllocationError, BudgetExhausted, Search
from app.allocator.types import (
    AllocatedState,
    AllocationOutcome,
    ClaimAllocation,
    ClassMatcher,
    KnownMatches,
    NodeView,
    Objective,
    PoolView,
    Rejection,
)
from app.cel import compile_selector
from app.features import FeatureGates
from app.model import Device, DeviceClass, ResourceClaim

DEFAULT_STEP_BUDGET: Final = 200_000

__all__ = [
    "DEFAULT_STEP_BUDGET", "AllocatedState", "AllocationOutcome", "ClaimAllocation",
    "ClassMatcher", "KnownMatches", "NodeView", "Objective", "PoolView", "Rejection",
    "allocate",
]


def allocate(
    claims: Sequence[ResourceClaim],
    *,
    node_view: NodeView,
    classes: Mapping[str, DeviceClass],
    allocated: AllocatedState,
    features: FeatureGates,
    class_matcher: ClassMatcher | None = None,
    selector_matches: Callable[[str, Device], bool] | None = None,
    objective: Objective | None = None,
    step_budget: int = DEFAULT_STEP_BUDGET,
    new_share_id: Callable[[], str] | None = None,
    known_matches: KnownMatches | None = None,
) -> AllocationOutcome:
    """Allocate the pod's unallocated `claims` (pod order) on `node_view.node`.
    `known_matches`: selector results the caller holds for this node view; the
    matchers are asked only about devices it does not answer for."""
    matches = selector_matches or _cel_matches
    search = Search(
        claims=claims, node_view=node_view, classes=classes, allocated=allocated,
        features=features,
        class_matcher=class_matcher or (lambda cls, device: all(
            matches(expression, device) for expression in cls.selectors)),
        selector_matches=matches, objective=objective, step_budget=step_budget,
        known_matches=known_matches)
    try:
        search.prepare()
        try:
            solution = search.run()
        except AllocationError:
            if not search.best_mode or objective is None:
                raise
            # Looking past the first fit reached a device whose selector fails
            # at runtime; upstream never evaluates it, so its answer stands.
            return allocate(claims, node_view=node_view, classes=classes,
                            allocated=allocated, features=features,
                            class_matcher=class_matcher, selector_matches=selector_matches,
                            objective=_FirstFit(objective), step_budget=step_budget,
                            new_share_id=new_share_id, known_matches=known_matches)
        if solution is None:
            reason, rejection = explain(search)
            return AllocationOutcome(feasible=False, reason=reason, rejection=rejection,
                                     steps=search.steps,
                                     invalid_pools=tuple(
                                         f"{p.driver}/{p.name}" for p in node_view.pools
                                         if p.complete and p.invalid_reason is not None))
        share_id = new_share_id or _new_share_id
        allocations = tuple(
            ClaimAllocation(claim_key=claim.key, allocation=claim_allocation(
                search, ci, solution.picks[ci], solution.chosen, new_share_id=share_id))
            for ci, claim in enumerate(claims))
    except AllocationError as err:
        return AllocationOutcome(feasible=False, error=str(err), rejection=err.rejection,
                                 steps=search.steps)
    except BudgetExhausted:
        return AllocationOutcome(feasible=False, reason=budget_reason(search),
                                 rejection=Rejection.STEP_BUDGET,
                                 steps=search.steps)
    picks = tuple(search.devices[p.device] for claim_picks in solution.picks
                  for p in claim_picks)
    return AllocationOutcome(feasible=True, claims=allocations, picks=picks,
                             score=solution.score, steps=search.steps)


class _FirstFit:
    """An objective's scores, with upstream's first fit as the search."""

    __slots__ = ("_objective",)
    first_fit = True

    def __init__(self, objective: Objective) -> None:
        self._objective = objective

    def score(self, picks: Sequence[Device]) -> float:
        return self._objective.score(picks)

    def is_perfect(self, score: float) -> bool:
        return self._objective.is_perfect(score)


def _cel_matches(expression: str, device: Device) -> bool:
    return compile_selector(expression).matches(device)


def _new_share_id() -> str:
    return str(uuid.uuid4())
