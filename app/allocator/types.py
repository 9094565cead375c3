"""What goes into and comes out of one allocation attempt (one pod, one node).

These types are the contract between the inventory (which builds `NodeView`
and `AllocatedState` from what it holds), the allocator (pure search), the
topology scoring (an `Objective`), and the extender verbs (which turn an
`AllocationOutcome` into filter answers, scores and bind writes). They hold
only immutable model objects, so one `NodeView` can be reused across requests
for as long as its `version` is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from app.model import (
    AllocationResult,
    CounterSet,
    Device,
    DeviceClass,
    Node,
    Quantity,
    ResourceSlice,
)

DeviceId = str  # "driver/pool/device"
PoolKey = tuple[str, str]  # (driver, pool name)
CounterKey = tuple[str, str]  # (counter set name, counter name)


@dataclass(slots=True, frozen=True)
class PoolView:
    """One pool as the allocator sees it from one node.

    Only slices of the pool's newest generation are included, sorted by slice
    name; `devices` are those usable from the node, in slice order then
    published order. `counter_sets` come from every slice of the pool at that
    generation (shared counters may live in slices without devices).
    """

    driver: str
    name: str
    generation: int
    slices: tuple[ResourceSlice, ...]
    devices: tuple[Device, ...]
    counter_sets: Mapping[str, CounterSet]
    complete: bool = True
    invalid_reason: str | None = None
    has_binding_conditions: bool = False

    @property
    def key(self) -> PoolKey:
        return (self.driver, self.name)


@dataclass(slots=True, frozen=True)
class NodeView:
    """Everything on or reachable from one node, in upstream search order
    (pools by driver then name, pools with binding conditions last)."""

    node: Node
    version: int
    pools: tuple[PoolView, ...]


@dataclass(slots=True, frozen=True)
class AllocatedState:
    """What other claims (allocated, or assumed in flight) already hold.

    `devices`: exclusively allocated device ids (admin-access results and
    shared `shareID` results excluded). `consumed_counters`: per pool, per
    (counter set, counter), the sum consumed by allocated devices.
    `consumed_capacity`: per multi-allocatable device, per capacity name, the
    sum of consumedCapacity. `multi_allocated`: multi-allocatable devices that
    hold at least one allocation (their counters are already consumed).
    """

    devices: Set[DeviceId] = frozenset()
    consumed_counters: Mapping[PoolKey, Mapping[CounterKey, Quantity]] = field(
        default_factory=dict)
    consumed_capacity: Mapping[DeviceId, Mapping[str, Quantity]] = field(default_factory=dict)
    multi_allocated: Set[DeviceId] = frozenset()


class Objective(Protocol):
    """Chooses among valid allocations.

    With `first_fit` true the allocator returns the first complete allocation
    in upstream order (what the in-tree scheduler would pick) and only asks
    `score` to rate it. Otherwise it keeps enumerating, within its step budget,
    and returns the allocation with the highest score, stopping early once
    `is_perfect(score)`.
    """

    @property
    def first_fit(self) -> bool: ...

    def score(self, picks: Sequence[Device]) -> float: ...

    def is_perfect(self, score: float) -> bool: ...


# Evaluates a DeviceClass's selectors on a device (True/False), raising
# app.cel's evaluation error on a CEL runtime error. The inventory supplies a
# version that caches per (class, device).
ClassMatcher = Callable[[DeviceClass, Device], bool]

# Per (DeviceClass, request selectors): whether each device of the node view
# matches both, in view order (every pool's devices, pools in order), as True,
# False or the CEL error's text; None when not known. Selector results the
# caller already holds for the node, so the search need not ask per device.
KnownMatches = Callable[[DeviceClass, tuple[str, ...]], Sequence[bool | str] | None]


@dataclass(slots=True, frozen=True)
class ClaimAllocation:
    claim_key: str  # "namespace/name"
    allocation: AllocationResult


class Rejection(StrEnum):
    """Why a node cannot take a pod, as a small fixed set (the metric label of
    `drax_filter_node_rejections_total`). Each reason sentence is written
    together with its category, so rewording a sentence keeps its label."""

    NO_DEVICE_OF_CLASS = "no_device_of_class"
    SELECTORS = "selectors"
    NOT_ENOUGH_FREE = "not_enough_free"
    CONSTRAINT = "constraint"
    TAINT = "taint"
    COUNTERS_CAPACITY = "counters_capacity"
    INVALID_POOL = "invalid_pool"
    INCOMPLETE_POOL = "incomplete_pool"
    CEL_ERROR = "cel_error"
    CLAIM_NOT_FOUND = "claim_not_found"
    CLAIM_UNUSABLE = "claim_unusable"
    ALLOCATED_ELSEWHERE = "allocated_elsewhere"
    UNKNOWN_NODE = "unknown_node"
    OUTSIDE_POOL = "outside_pool"
    STEP_BUDGET = "step_budget"
    NOT_SYNCED = "not_synced"
    OTHER = "other"


@dataclass(slots=True, frozen=True)
class AllocationOutcome:
    """The answer for one pod on one node.

    Exactly one of: `feasible` with `claims` (one per unallocated claim, pod
    order) and `picks` (every allocated device, for scoring); not feasible with
    a user-actionable `reason`; or `error` (CEL runtime error, invalid input,
    feature off...), which upstream treats as an error, not as "does not fit".
    `rejection` is the category of the reason or error.
    `invalid_pools` names the invalid pools of an infeasible node: upstream's
    Allocate then returns "invalid resource pools were encountered", an error
    wrapping ErrFailedAllocationOnNode that the in-tree Filter reports as the
    node failing, so drax reports a failed node too (docs/decisions.md).
    """

    feasible: bool
    claims: tuple[ClaimAllocation, ...] = ()
    picks: tuple[Device, ...] = ()
    score: float | None = None
    reason: str | None = None
    error: str | None = None
    steps: int = 0
    invalid_pools: tuple[str, ...] = ()
    rejection: Rejection | None = None
