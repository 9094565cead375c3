"""How many more copies of one claim shape fit on one node, exactly.

A shape is the claims one pod would bring (its ResourceClaims, its templates'
specs, or the claim built for its extended resources). A node holds `k`
copies when all `k` copies can be allocated at the same time, disjointly, next
to what is already allocated: that is one `allocate` call with the `k` copies
as separate claims of one pod. The allocator's search is complete (depth-first
over device combinations with backtracking), so that answer is exact, not the
greedy "allocate, take, repeat", which can block a later copy with the
devices an earlier one chose (a GPU on the root the NIC copy needed).

Feasibility is monotone in `k`, so the count is found by binary search between
0 and an upper bound: per request, the free devices its class and selectors
accept divided by its count, and all requests of one copy together over the
union of their candidates. For shapes without constraints across requests the
bound is the answer and a single search confirms it; otherwise the search
tells. Copies are interchangeable; the bound keeps the number of infeasible
probes (where that symmetry costs) to about log2(bound). Each probe runs under
`step_budget`; when one runs out the answer is the largest count proven and
`exact` is False.

Pure: no I/O, the caller passes the node view and the allocated state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from app.allocator import DEFAULT_STEP_BUDGET, allocate
from app.allocator.constraints import as_set, lookup_attribute
from app.allocator.search import AllocationError, Search
from app.allocator.types import AllocatedState, ClassMatcher, NodeView
from app.cel import compile_selector
from app.features import FeatureGates
from app.model import (
    Device,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    ExactDeviceRequest,
    ResourceClaim,
    ResourceClaimSpec,
)
from app.model.objects import ALLOCATION_MODE_EXACT_COUNT

MAX_COPIES: Final = 1024  # a node answering more than this is reported as this
GPU_CLASS: Final = "gpu.nvidia.com"
NIC_CLASS: Final = "rdma.dra.net"
ROOT_ATTRIBUTE: Final = "resource.kubernetes.io/pcieRoot"


@dataclass(slots=True, frozen=True)
class FitCount:
    """`count` copies fit; `exact` is False when a probe ran out of budget or the
    count reached MAX_COPIES (then `count` is a proven lower bound)."""

    count: int
    exact: bool = True
    error: str | None = None  # the shape cannot be allocated at all (bad class, CEL error)


def max_fits(claims: Sequence[ResourceClaim], node_view: NodeView, *,
             classes: Mapping[str, DeviceClass], allocated: AllocatedState,
             features: FeatureGates, class_matcher: ClassMatcher | None = None,
             selector_matches: Callable[[str, Device], bool] | None = None,
             step_budget: int = DEFAULT_STEP_BUDGET) -> int:
    """The number of disjoint copies of `claims` the node holds now (see `count_fits`)."""
    return count_fits(claims, node_view, classes=classes, allocated=allocated,
                      features=features, class_matcher=class_matcher,
                      selector_matches=selector_matches, step_budget=step_budget).count


def count_fits(claims: Sequence[ResourceClaim], node_view: NodeView, *,
               classes: Mapping[str, DeviceClass], allocated: AllocatedState,
               features: FeatureGates, class_matcher: ClassMatcher | None = None,
               selector_matches: Callable[[str, Device], bool] | None = None,
               step_budget: int = DEFAULT_STEP_BUDGET) -> FitCount:
    """Binary search on the number of copies, each probe one joint allocation."""
    pending = [c for c in claims if c.allocation is None]
    if not pending:
        return FitCount(count=MAX_COPIES, exact=False)
    matches = selector_matches or _cel_matches
    matcher = class_matcher or (lambda cls, device: all(
        matches(expression, device) for expression in cls.selectors))
    try:
        bound = _upper_bound(pending, node_view, classes=classes, allocated=allocated,
                             features=features, class_matcher=matcher,
                             selector_matches=matches)
    except AllocationError as err:
        return FitCount(count=0, error=str(err))

    def fits(k: int) -> bool | None:
        outcome = allocate(_copies(pending, k), node_view=node_view, classes=classes,
                           allocated=allocated, features=features, class_matcher=matcher,
                           selector_matches=matches, step_budget=step_budget,
                           new_share_id=lambda: "fits")
        if outcome.feasible:
            return True
        return None if outcome.error is None and outcome.steps >= step_budget else False

    low, high, exact = 0, min(bound, MAX_COPIES), bound <= MAX_COPIES
    while low < high:
        middle = (low + high + 1) // 2
        answer = fits(middle)
        if answer:
            low = middle
        else:
            high = middle - 1
            exact = exact and answer is not None
    return FitCount(count=low, exact=exact)


def _upper_bound(claims: Sequence[ResourceClaim], node_view: NodeView, *,
                 classes: Mapping[str, DeviceClass], allocated: AllocatedState,
                 features: FeatureGates, class_matcher: ClassMatcher,
                 selector_matches: Callable[[str, Device], bool]) -> int:
    """No more copies than every request's free candidates allow, alone and together."""
    search = Search(claims=claims, node_view=node_view, classes=classes, allocated=allocated,
                    features=features, class_matcher=class_matcher,
                    selector_matches=selector_matches, objective=None, step_budget=0)
    search.prepare()
    bound = MAX_COPIES + 1
    union: set[int] = set()
    per_copy = 0
    for per_claim in search.requests:
        for subs in per_claim:
            # firstAvailable: a copy takes one of the subrequests, so the most
            # permissive one bounds it.
            best = 0
            fewest = min(r.num_devices for r in subs)
            for request in subs:
                free = {i for i in range(len(search.devices))
                        if search.selectable(request, i)
                        and (request.admin or request.spec.capacity_requests
                             or not search.static_used[i])}
                union |= free
                if request.num_devices > 0:
                    best = max(best, len(free) // request.num_devices)
                elif request.spec.allocation_mode == ALLOCATION_MODE_EXACT_COUNT:
                    best = MAX_COPIES + 1
            if fewest > 0 and not any(r.admin or r.spec.capacity_requests for r in subs):
                bound = min(bound, best)
                per_copy += fewest
    if per_copy:
        bound = min(bound, len(union) // per_copy)
    for ci in range(len(search.requests)):
        for k, spec in enumerate(search.constraint_specs[ci]):
            if spec.match_attribute:
                bound = min(bound, _matched_bound(search, ci=ci, constraint=k,
                                                  attribute=spec.match_attribute))
    return bound


def _matched_bound(search: Search, *, ci: int, constraint: int, attribute: str) -> int:
    """No more copies than the attribute's values can each hold: a copy puts every
    request under the matchAttribute on one value, so value `v` holds at most
    min over those requests of (free candidates with `v`) // count. Without this
    bound, proving the copy past it infeasible enumerates the copies' symmetric
    permutations (6 GPUs and 6 NICs over three roots, one pair per root, already
    ran out of budget). Only plain counted requests are bounded; anything else
    under the constraint leaves the bound open."""
    open_bound = MAX_COPIES + 1
    constrained = [subs for subs in search.requests[ci]
                   if any(constraint in r.constraints for r in subs)]
    if not constrained:
        return open_bound
    per_value: dict[object, list[int]] = {}
    for position, subs in enumerate(constrained):
        request = subs[0]
        if (len(subs) > 1 or request.sub is not None or request.num_devices <= 0
                or request.admin or request.spec.capacity_requests):
            return open_bound
        for i in range(len(search.devices)):
            if search.static_used[i] or not search.selectable(request, i):
                continue
            if search.multi(i):
                return open_bound  # shared by several copies: counting devices bounds nothing
            value = lookup_attribute(search.devices[i], attribute)
            found = as_set(value) if value is not None else None
            if found is None:
                continue  # never satisfies the constraint
            if len(found[1]) != 1:
                return open_bound  # a list value can match on any of its items
            counts = per_value.setdefault((found[0], *found[1]), [0] * len(constrained))
            counts[position] += 1
    return sum(min(n // r[0].num_devices for n, r in zip(counts, constrained, strict=True))
               for counts in per_value.values())


def _copies(claims: Sequence[ResourceClaim], k: int) -> list[ResourceClaim]:
    return [replace(claim, name=f"{claim.name}-copy-{i}", uid="")
            for i in range(k) for claim in claims]


def _cel_matches(expression: str, device: Device) -> bool:
    return compile_selector(expression).matches(device)


def gpu_shape(*, gpus: int, nics: int = 0, same_root: bool = False,
              gpu_class: str = GPU_CLASS, nic_class: str = NIC_CLASS,
              root_attribute: str = ROOT_ATTRIBUTE, namespace: str = "default"
              ) -> ResourceClaim:
    """The claim `--gpus N [--nics M --same-root]` stands for: N devices of the GPU
    class, M of the NIC class, all on one PCIe root when `same_root`."""
    if gpus < 1 or nics < 0:
        raise ValueError("gpus must be at least 1 and nics at least 0")
    if same_root and not nics:
        raise ValueError("same_root needs nics")
    requests = [DeviceRequest(name="gpu", exactly=ExactDeviceRequest(
        device_class_name=gpu_class, count=gpus))]
    constraints: tuple[DeviceConstraint, ...] = ()
    if nics:
        requests.append(DeviceRequest(name="nic", exactly=ExactDeviceRequest(
            device_class_name=nic_class, count=nics)))
        if same_root:
            constraints = (DeviceConstraint(requests=("gpu", "nic"),
                                            match_attribute=root_attribute),)
    return ResourceClaim(namespace=namespace, name="shape",
                         spec=ResourceClaimSpec(requests=tuple(requests),
                                                constraints=constraints))
