"""The allocation search for one pod on one node (upstream `incubating` semantics).

This is a port of the behaviour of `k8s.io/dynamic-resource-allocation/
structured` (incubating variant, Kubernetes 1.37): claims in pod order,
requests in claim order, one device slot after the other, depth-first with
backtracking. Devices are scanned in node-view order (pools, slices, devices);
a slot starts after the device of the previous slot of the same request, so
combinations are tried, never permutations. Every check a device must pass is
done in upstream order, because the order decides which CEL expressions get
evaluated and therefore which runtime errors surface.

The shape is driven by speed in Python: the usable devices are flattened once
into one list, all per-device state is kept in lists indexed by that position,
selector results are memoised per (request, device), consumed capacity per
(request, device), and counters live in running dicts per pool. Each device
tested in a slot is one step of the budget.

With an objective that is not first-fit, the search does not stop at the first
solution but keeps enumerating (same order, same pruning) and keeps the best
score. `firstAvailable` keeps its meaning there: the subrequest choices are
fixed first, to the earliest ones any valid allocation can have (compared in
the pod's claim and request order), then the best topology under them is
searched. Upstream's first fit settles a choice before it sees later claims,
so it can give a later claim its second choice although its first one fits
next to another choice for an earlier claim; a user listing subrequests by
preference wants the first one.
"""

from __future__ import annotations

import sys
from bisect import bisect_left
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final

from app.allocator.constraints import Constraint, applies, build_constraint, lookup_attribute
from app.allocator.consumable import consumed_capacity
from app.allocator.types import AllocatedState, KnownMatches, NodeView, Objective, Rejection
from app.cel import CelError
from app.features import FeatureGates
from app.model import (
    Device,
    DeviceClass,
    ExactDeviceRequest,
    Node,
    NodeSelector,
    Quantity,
    ResourceClaim,
    ResourceSlice,
    qualify,
)
from app.model.objects import (
    ALLOCATION_MODE_ALL,
    ALLOCATION_MODE_EXACT_COUNT,
    untolerated_taint,
)

RESULTS_MAX: Final = 32  # resourceapi.AllocationResultsMaxSize

# Return codes of one search step (upstream: done / not done / "max size exceeded").
FAIL: Final = 0
DONE: Final = 1
MAXED: Final = 2
_UNSET: Final = object()
_PROBE_STEPS: Final = 512  # steps of one first-fit probe inside a block


class AllocationError(Exception):
    """Allocation cannot be attempted (upstream returns an error, not "no fit");
    `rejection` says whether a CEL expression failed or something else did."""

    def __init__(self, message: str, *, rejection: Rejection = Rejection.OTHER) -> None:
        super().__init__(message)
        self.rejection = rejection


class BudgetExhausted(Exception):
    """The step budget ran out."""


@dataclass(slots=True, eq=False)
class Request:
    """One `exactly` request or one `firstAvailable` subrequest of a claim."""

    claim_index: int
    request_index: int
    sub_index: int
    name: str  # request name as written in results: `req` or `req/sub`
    base: str
    sub: str | None
    spec: ExactDeviceRequest
    device_class: DeviceClass
    num_devices: int
    all_devices: list[int] | None  # allocationMode All: the devices, in order
    constraints: tuple[int, ...]  # indices into the claim's constraints
    # class and request selectors per device of the node view, when the caller knew them
    known: Sequence[bool | str] | None = None
    memo: list[bool | None] = field(default_factory=list)  # selectable per device
    # the devices `known` accepts, when it holds no CEL error: the others fail
    # their selectors without an error, so a slot need not try them
    candidates: list[int] | None = None
    capacity: dict[int, dict[str, Quantity] | None] = field(default_factory=dict)

    @property
    def admin(self) -> bool:
        return self.spec.admin_access


@dataclass(slots=True, eq=False)
class Pick:
    request: Request
    device: int
    consumed: dict[str, Quantity] | None  # multi-allocatable devices only
    counted: bool  # counters were taken for this pick


@dataclass(slots=True)
class PoolCounters:
    available: dict[tuple[str, str], int | Fraction]
    overcommitted: bool  # allocated devices already exceed some counter
    used: dict[tuple[str, str], int | Fraction] = field(default_factory=dict)


@dataclass(slots=True)
class Solution:
    picks: tuple[tuple[Pick, ...], ...]
    chosen: dict[tuple[int, int], int]
    score: float | None


class Search:
    """State of one allocate call; `run` returns the best solution or None."""

    def __init__(self, *, claims: Sequence[ResourceClaim], node_view: NodeView,
                 classes: Mapping[str, DeviceClass], allocated: AllocatedState,
                 features: FeatureGates,
                 class_matcher: Callable[[DeviceClass, Device], bool],
                 selector_matches: Callable[[str, Device], bool],
                 objective: Objective | None, step_budget: int,
                 known_matches: KnownMatches | None = None) -> None:
        self.claims = claims
        self.node_view = node_view
        self.classes = classes
        self.allocated = allocated
        self.features = features
        self.class_matcher = class_matcher
        self.selector_matches = selector_matches
        self.known_matches = known_matches
        self.objective = objective
        self.best_mode = objective is not None and not objective.first_fit
        self.budget = step_budget
        self.steps = 0

        self.devices: list[Device] = []
        self.view_position: list[int] = []  # index in the view's devices (`KnownMatches`)
        self.device_pool: list[int] = []
        self.pool_ranges: list[range] = []
        self.slices: list[dict[str, ResourceSlice]] = []
        self._flatten()
        n = len(self.devices)
        self.static_used = [d.id in allocated.devices for d in self.devices]
        self.node_ok = [self._node_selects(i) for i in range(n)]
        self.holders: list[list[int]] = [[] for _ in range(n)]
        self.shares = [0] * n
        self.multi_static = [d.id in allocated.multi_allocated or d.id in
                             allocated.consumed_capacity for d in self.devices]
        self.capacity_static: dict[int, dict[str, Fraction]] = {}
        self.capacity_used: dict[int, dict[str, Fraction]] = {}
        self.counters: dict[int, PoolCounters] = {}
        self._consumed: dict[int, list[tuple[tuple[str, str], int | Fraction]]] = {}
        self.class_cache: dict[tuple[str, int], bool] = {}
        self.selector_cache: dict[tuple[str, int], bool] = {}

        self.requests: list[list[list[Request]]] = []  # claim -> request -> subrequests
        self.constraint_specs = [c.spec.constraints for c in claims]
        self.constraints: list[list[Constraint]] = []
        self.rejections: list[list[int]] = []  # per claim, per constraint
        self.picks: list[list[Pick]] = [[] for _ in claims]
        self.chosen: dict[tuple[int, int], int] = {}
        self.frozen: dict[tuple[int, int], int] | None = None
        self.best: Solution | None = None
        # Symmetry: when looking for a better allocation, a device that is a twin
        # of one already tried in the same slot cannot lead anywhere new.
        self._twin: Callable[[Device], Hashable | None] | None = (
            getattr(objective, "twin_key", None) if self.best_mode else None)
        self._twin_static: dict[int, Hashable | None] = {}
        # Bound: a branch whose picks cannot lead to a better score than the
        # best allocation's is skipped (see `_below_best`).
        self._bound: Callable[[Sequence[Device], int, int, int], float] | None = (
            getattr(objective, "bound", None) if self.best_mode else None)
        self._bounded: bool | None = None  # decided at the first solution
        self._shape = (0, 0, 0)  # every allocation's units, accelerators, rooted NICs
        self._floor = -1.0  # a score some allocation is known to reach
        self._stops: bool | None = None  # whether a perfect score may end it (`_one_shape`)
        # per candidate device, its class for the bound (where it is, its role);
        # the bound of a branch depends on its picks' classes only
        self._bound_class: dict[int, int] = {}
        self._bounds: dict[tuple[int, ...], float] = {}
        # placement (the picks' score classes) -> (its score, whether it is perfect)
        self._scores: dict[tuple[int, ...], tuple[float, bool]] = {}
        self._score_class: dict[int, int | None] = {}
        self._score_classes: dict[Hashable, int] = {}
        self._mask: list[bool] | None = None  # devices a probe may pick
        self._all_requests: list[Request] = []
        self._constrained: tuple[str, ...] = ()

    # ------------------------------------------------------------------ setup

    def _flatten(self) -> None:
        position = 0
        for pool_index, pool in enumerate(self.node_view.pools):
            start = len(self.devices)
            self.slices.append({s.name: s for s in pool.slices})
            if pool.complete and pool.invalid_reason is None:
                self.devices.extend(pool.devices)
                self.device_pool.extend([pool_index] * len(pool.devices))
                self.view_position.extend(range(position, position + len(pool.devices)))
            position += len(pool.devices)
            self.pool_ranges.append(range(start, len(self.devices)))

    def slice_of(self, index: int) -> ResourceSlice | None:
        device = self.devices[index]
        return self.slices[self.device_pool[index]].get(device.slice_name)

    def _node_selects(self, index: int) -> bool:
        slice_ = self.slice_of(index)
        if slice_ is None or not slice_.per_device_node_selection:
            return True
        if not self.features.partitionable_devices:
            return False
        device = self.devices[index]
        return node_matches(self.node_view.node, name=device.node_name,
                            all_nodes=device.all_nodes, selector=device.node_selector)

    def prepare(self) -> None:
        """Upstream's pre-checks; raises AllocationError for what it treats as errors."""
        for ci, claim in enumerate(self.claims):
            per_request: list[list[Request]] = []
            min_devices = 0
            for ri, request in enumerate(claim.spec.requests):
                where = f"claim {claim.key}, request {request.name}"
                if request.first_available and not self.features.prioritized_list:
                    raise AllocationError(f"{where}: has subrequests, but the "
                                          "DRAPrioritizedList feature is disabled")
                if not self.features.consumable_capacity:
                    if request.exactly is not None and request.exactly.capacity_requests:
                        raise AllocationError(f"{where}: has capacity requests, but the "
                                              "DRAConsumableCapacity feature is disabled")
                    for sub in request.first_available:
                        if sub.request.capacity_requests:
                            raise AllocationError(
                                f"claim {claim.key}, subrequest {sub.name}: has capacity "
                                "requests, but the DRAConsumableCapacity feature is disabled")
                if request.exactly is not None:
                    subs = [self._request(ci, ri, 0, request.name, None, request.exactly)]
                else:
                    subs = [self._request(ci, ri, si, request.name, sub.name, sub.request)
                            for si, sub in enumerate(request.first_available)]
                per_request.append(subs)
                min_devices += min(r.num_devices for r in subs)
            if min_devices > RESULTS_MAX:
                raise AllocationError(f"claim {claim.key}: number of requested devices "
                                      f"{min_devices} exceeds the claim limit of {RESULTS_MAX}")
            trackers = []
            for i, spec in enumerate(claim.spec.constraints):
                tracker = build_constraint(spec, list_types=self.features.list_type_attributes)
                if tracker is None:
                    raise AllocationError(f"claim {claim.key}, constraint #{i}: empty "
                                          "constraint (unsupported constraint type?)")
                trackers.append(tracker)
            self.requests.append(per_request)
            self.constraints.append(trackers)
            self.rejections.append([0] * len(trackers))
        self._all_requests = [r for per_claim in self.requests for subs in per_claim
                              for r in subs]
        self._constrained = tuple(sorted({name for specs in self.constraint_specs
                                          for c in specs
                                          for name in (c.match_attribute, c.distinct_attribute)
                                          if name}))

    def _request(self, ci: int, ri: int, si: int, base: str, sub: str | None,
                 spec: ExactDeviceRequest) -> Request:
        claim = self.claims[ci]
        name = base if sub is None else f"{base}/{sub}"
        where = f"claim {claim.key}, request {name if sub is None else sub}"
        if spec.admin_access and not self.features.admin_access:
            raise AllocationError(f"{where}: admin access is requested, but the feature "
                                  "is disabled")
        if not spec.device_class_name:
            raise AllocationError(f"{where}: missing device class name "
                                  "(unsupported request type?)")
        device_class = self.classes.get(spec.device_class_name)
        if device_class is None:
            raise AllocationError(f"{where}: could not retrieve device class "
                                  f"{spec.device_class_name}: not found")
        constraints = tuple(i for i, c in enumerate(claim.spec.constraints)
                            if applies(c, base, sub))
        request = Request(claim_index=ci, request_index=ri, sub_index=si, name=name, base=base,
                          sub=sub, spec=spec, device_class=device_class, num_devices=0,
                          all_devices=None, constraints=constraints,
                          known=(self.known_matches(device_class, spec.selectors)
                                 if self.known_matches is not None else None),
                          memo=[None] * len(self.devices))
        if request.known is not None and str not in set(map(type, request.known)):
            known = request.known
            request.candidates = [i for i, position in enumerate(self.view_position)
                                  if known[position] is True]
        if spec.allocation_mode == ALLOCATION_MODE_EXACT_COUNT:
            request.num_devices = spec.count
        elif spec.allocation_mode == ALLOCATION_MODE_ALL:
            request.all_devices = self._all_devices(request, where)
            request.num_devices = len(request.all_devices)
        else:
            raise AllocationError(f"{where}: unsupported count mode {spec.allocation_mode}")
        return request

    def _all_devices(self, request: Request, where: str) -> list[int]:
        out = []
        for pool_index, pool in enumerate(self.node_view.pools):
            pool_id = f"{pool.driver}/{pool.name}"
            if not pool.complete:
                raise AllocationError(f"{where}: asks for all devices, but resource pool "
                                      f"{pool_id} is currently being updated")
            if pool.invalid_reason is not None:
                raise AllocationError(f"{where}: asks for all devices, but resource pool "
                                      f"{pool_id} is currently invalid")
            for index in self.pool_ranges[pool_index]:
                # Only the device's own capacity decides membership: one that
                # other allocations filled stays in the set and fails it, as upstream.
                if self.selectable(request, index) and (
                        not self.features.consumable_capacity
                        or self.capacity_fits(request, index, alone=True)):
                    out.append(index)
        return out

    # ------------------------------------------------------------------ per-device checks

    def selectable(self, request: Request, index: int) -> bool:
        """Binding-condition gate, class selectors, request selectors, per-device
        node selection; memoised per (request, device). Raises AllocationError on
        a CEL error (asked again through the matchers, which word it)."""
        known = request.memo[index]
        if known is not None:
            return known
        device = self.devices[index]
        matched = (request.known[self.view_position[index]]
                   if request.known is not None else None)
        if not self.features.device_binding_conditions and device.binding_conditions:
            result = False
        elif matched is True or matched is False:
            result = matched and self.node_ok[index]
        else:
            result = (self.class_matches(request.device_class, index)
                      and self._request_selectors_match(request, index)
                      and self.node_ok[index])
        request.memo[index] = result
        return result

    def class_matches(self, device_class: DeviceClass, index: int) -> bool:
        key = (device_class.name, index)
        known = self.class_cache.get(key)
        if known is None:
            try:
                known = self.class_matcher(device_class, self.devices[index])
            except CelError as err:
                raise AllocationError(f"class {device_class.name}: {err}",
                                      rejection=Rejection.CEL_ERROR) from err
            self.class_cache[key] = known
        return known

    def _request_selectors_match(self, request: Request, index: int) -> bool:
        for expression in request.spec.selectors:
            key = (expression, index)
            known = self.selector_cache.get(key)
            if known is None:
                try:
                    known = self.selector_matches(expression, self.devices[index])
                except CelError as err:
                    raise AllocationError(f"claim {self.claims[request.claim_index].key}, "
                                          f"request {request.name}: {err}",
                                          rejection=Rejection.CEL_ERROR) from err
                self.selector_cache[key] = known
            if not known:
                return False
        return True

    def consumed(self, request: Request, index: int) -> dict[str, Quantity] | None:
        if index not in request.capacity:
            request.capacity[index] = consumed_capacity(request.spec.capacity_requests,
                                                        self.devices[index])
        return request.capacity[index]

    def capacity_fits(self, request: Request, index: int, *, alone: bool = False) -> bool:
        """Already consumed + consumed in this attempt + this request within every
        capacity; with `alone`, this request on the empty device."""
        amounts = self.consumed(request, index)
        if amounts is None:
            return False
        device = self.devices[index]
        static = {} if alone else self._capacity_static(index)
        used = None if alone else self.capacity_used.get(index)
        for name, amount in amounts.items():
            total = amount.value + static.get(name, 0)
            if used:
                total += used.get(name, 0)
            if total > device.capacity[name].value.value:
                return False
        return True

    def _capacity_static(self, index: int) -> dict[str, Fraction]:
        known = self.capacity_static.get(index)
        if known is None:
            device = self.devices[index]
            raw = self.allocated.consumed_capacity.get(device.id, {})
            known = {qualify(k, device.driver): q.value for k, q in raw.items()}
            self.capacity_static[index] = known
        return known

    def _pool_counters(self, pool_index: int) -> PoolCounters:
        known = self.counters.get(pool_index)
        if known is None:
            pool = self.node_view.pools[pool_index]
            consumed = self.allocated.consumed_counters.get(pool.key, {})
            available = {}
            for set_name, counter_set in pool.counter_sets.items():
                for counter, quantity in counter_set.counters.items():
                    key = (set_name, counter)
                    used = consumed.get(key)
                    available[key] = _exact(quantity.value - (used.value if used else 0))
            known = PoolCounters(available=available,
                                 overcommitted=any(v < 0 for v in available.values()))
            self.counters[pool_index] = known
        return known

    def _consumption(self, index: int) -> list[tuple[tuple[str, str], int | Fraction]]:
        """The device's counter consumption, whole amounts as ints: counters are
        summed at every pick and undo, and Fraction arithmetic is slow."""
        known = self._consumed.get(index)
        if known is None:
            known = self._consumed[index] = [
                ((consumption.counter_set, counter), _exact(quantity.value))
                for consumption in self.devices[index].consumes_counters
                for counter, quantity in consumption.counters.items()]
        return known

    def counters_fit(self, index: int) -> bool:
        pool = self._pool_counters(self.device_pool[index])
        if pool.overcommitted:
            return False
        for key, amount in self._consumption(index):
            available = pool.available.get(key)
            if available is not None and pool.used.get(key, 0) + amount > available:
                return False
        return True

    def _take_counters(self, index: int, sign: int) -> None:
        used = self._pool_counters(self.device_pool[index]).used
        for key, amount in self._consumption(index):
            used[key] = used.get(key, 0) + sign * amount

    def tolerated(self, request: Request, device: Device) -> bool:
        return not device.taints or untolerated_taint(device.taints,
                                                      request.spec.tolerations) is None

    def in_use(self, request: Request, index: int, claim_index: int) -> bool:
        if request.admin:
            return claim_index in self.holders[index]
        return self.static_used[index] or bool(self.holders[index])

    def multi(self, index: int) -> bool:
        return self.features.consumable_capacity and self.devices[index].allow_multiple_allocations

    def try_pick(self, request: Request, index: int, *, must: bool) -> Pick | None:
        """Upstream `allocateDevice`: take the (selectable) device for the request
        if it is free, fits counters, capacity and taints and every constraint
        accepts it. With `must`, a constraint rejection is an error."""
        ci = request.claim_index
        device = self.devices[index]
        multi = self.multi(index)
        if not multi and request.admin and ci in self.holders[index]:
            return None
        if not request.admin and (self.static_used[index] or self.holders[index]):
            return None
        counters = bool(device.consumes_counters)
        if counters and not self.features.partitionable_devices:
            return None
        count = counters and not (multi and (self.multi_static[index] or self.shares[index]))
        if count and not self.counters_fit(index):
            return None
        if self.features.device_taints and not self.tolerated(request, device):
            return None
        trackers = self.constraints[ci]
        for n, k in enumerate(request.constraints):
            if not trackers[k].add(device):
                self.rejections[ci][k] += 1
                for j in request.constraints[:n]:
                    trackers[j].remove()
                if must:
                    raise AllocationError(
                        f"claim {self.claims[ci].key}, request {request.name}: cannot add "
                        f"device {device.id} because a claim constraint would not be satisfied")
                return None
        # Capacity after the constraints, as upstream: for `All` a constraint
        # rejection is an error even when the capacity would not fit either.
        if self.features.consumable_capacity and not self.capacity_fits(request, index):
            for k in request.constraints:
                trackers[k].remove()
            return None
        consumed = None
        if multi:
            consumed = self.consumed(request, index)
            assert consumed is not None
            used = self.capacity_used.setdefault(index, {})
            for name, amount in consumed.items():
                used[name] = used.get(name, 0) + amount.value
            self.shares[index] += 1
        else:
            self.holders[index].append(ci)
        if count:
            self._take_counters(index, 1)
        pick = Pick(request=request, device=index, consumed=consumed, counted=count)
        self.picks[ci].append(pick)
        return pick

    def undo(self, pick: Pick) -> None:
        request = pick.request
        ci = request.claim_index
        self.picks[ci].pop()
        trackers = self.constraints[ci]
        for k in request.constraints:
            trackers[k].remove()
        index = pick.device
        if pick.consumed is not None:
            used = self.capacity_used[index]
            for name, amount in pick.consumed.items():
                used[name] -= amount.value
            self.shares[index] -= 1
        else:
            self.holders[index].remove(ci)
        if pick.counted:
            self._take_counters(index, -1)

    # ------------------------------------------------------------------ symmetry

    def twin_key(self, index: int) -> Hashable | None:
        """Equal keys: the two devices are interchangeable in every allocation
        of this search (same pool, selector results for every request,
        constrained attribute values, capacity, taints, binding fields, the
        same to the objective, and for a shared device the same shares and
        capacity taken, by other pods and by this search's picks so far). None:
        never treated as a twin (counter-consuming devices, selector results
        not all known)."""
        static = self._twin_static.get(index, _UNSET)
        if static is _UNSET:
            static = self._twin_static[index] = self._static_twin_key(index)
        if static is None:
            return None
        memos = tuple(self._known_selectable(r, index) for r in self._all_requests)
        if None in memos:
            return None
        if self.devices[index].allow_multiple_allocations:
            used = self.capacity_used.get(index)
            return static, memos, self.shares[index], (
                tuple(sorted(used.items())) if used else ())
        return static, memos

    def _known_selectable(self, request: Request, index: int) -> bool | None:
        """`selectable` where it is known without evaluating CEL (tried before,
        or the request's known selector results hold no error for the device):
        a slot skips the devices its known results refuse, so their memo stays
        unset although the answer is known."""
        memo = request.memo[index]
        if memo is None and request.known is not None and isinstance(
                request.known[self.view_position[index]], bool):
            return self.selectable(request, index)
        return memo

    def _static_twin_key(self, index: int) -> Hashable | None:
        device = self.devices[index]
        if self._twin is None or device.consumes_counters:
            return None
        objective_key = self._twin(device)
        if objective_key is None:
            return None
        shared = (self.static_used[index], self.multi_static[index],
                  tuple(sorted(self._capacity_static(index).items()))
                  if device.allow_multiple_allocations else ())
        return (self.device_pool[index], device.driver, self.node_ok[index], objective_key,
                shared,
                tuple(lookup_attribute(device, name) for name in self._constrained),
                tuple(sorted((name, c.value.text or str(c.value), repr(c.request_policy))
                             for name, c in device.capacity.items())),
                tuple((t.key, t.value, t.effect) for t in device.taints),
                device.binds_to_node, device.binding_conditions,
                device.binding_failure_conditions)

    # ------------------------------------------------------------------ search

    def run(self) -> Solution | None:
        """Search; raises BudgetExhausted only when nothing usable was found."""
        # The search recurses once or twice per device slot; a pod may have 32
        # claims of 32 devices each, more than Python's default limit allows.
        # Python-to-Python calls do not use the C stack (3.11+), so raising the
        # limit is safe; it is never lowered, other threads may rely on it.
        depth = sum(3 + sum(2 * max(r.num_devices for r in subs) + 3 for subs in requests)
                    for requests in self.requests)
        if depth + 200 > sys.getrecursionlimit():
            sys.setrecursionlimit(depth + 200 + sys.getrecursionlimit())
        fallback: Solution | None = None
        try:
            outcome = DONE
            if self.best_mode and any(subs[0].sub is not None for requests in self.requests
                                      for subs in requests):
                outcome, fallback = self._earliest_choices()
            if outcome == DONE:
                outcome = self._one(0, 0, 0, 0, False, 0)
        except BudgetExhausted:
            if self.best is None:
                self.best = fallback
            if self.best is None:
                raise
            return self.best
        if outcome == MAXED and self.best is None:
            # Upstream returns its internal "max size exceeded" as the error.
            raise AllocationError(f"allocation max size exceeded: no combination of "
                                  f"subrequests fits in {RESULTS_MAX} devices per claim")
        return self.best

    def _earliest_choices(self) -> tuple[int, Solution | None]:
        """Freeze, per firstAvailable request in pod order, the earliest
        subrequest that still leaves a valid allocation, probing with first-fit
        searches. Returns the first probe's outcome when nothing fits, else DONE
        and an allocation with those choices (kept in case the budget runs out
        in the best search that follows)."""
        outcome, witness = self._probe({})
        if witness is None:
            return outcome, None
        fixed: dict[tuple[int, int], int] = {}
        try:
            for key in sorted(witness.chosen):
                for si in range(witness.chosen[key]):
                    found = self._probe({**fixed, key: si})[1]
                    if found is not None:
                        witness = found
                        break
                fixed[key] = witness.chosen[key]
        except BudgetExhausted:
            fixed = witness.chosen
        self.frozen = dict(fixed)
        return DONE, witness

    def _probe(self, fixed: dict[tuple[int, int], int]) -> tuple[int, Solution | None]:
        """One first-fit search with the subrequests in `fixed` frozen; leaves
        the search state as it found it."""
        self.frozen, self.best_mode, self.best = fixed, False, None
        try:
            outcome = self._one(0, 0, 0, 0, False, 0)
            return outcome, self.best if outcome == DONE else None
        finally:
            self.best_mode, self.best = True, None
            self._undo_all()

    def _undo_all(self) -> None:
        for claim_picks in reversed(self.picks):
            for pick in reversed(list(claim_picks)):
                self.undo(pick)

    def _tick(self) -> None:
        if self.steps >= self.budget:
            raise BudgetExhausted
        self.steps += 1

    def _one(self, ci: int, ri: int, si: int, di: int, in_sub: bool, start: int) -> int:
        if ci >= len(self.claims):
            return self._leaf()
        requests = self.requests[ci]
        if ri >= len(requests):
            outcome = self._one(ci + 1, 0, 0, 0, False, 0)
            return FAIL if outcome == MAXED else outcome
        subs = requests[ri]
        if not in_sub and subs[0].sub is not None:
            return self._first_available(ci, ri, di, len(subs))
        request = subs[si]
        if request.all_devices is not None and not request.all_devices:
            return FAIL
        if di >= request.num_devices:
            return self._one(ci, ri + 1, 0, 0, False, 0)
        if len(self.picks[ci]) + request.num_devices - di > RESULTS_MAX:
            return MAXED
        if request.all_devices is not None:
            return self._all_slot(request, si, di, in_sub)
        # Every later device is tried, even where too few remain for the
        # request's later slots: upstream evaluates their selectors, and a CEL
        # runtime error there is its answer.
        twins: set[Hashable] | None = (
            set() if self._twin is not None and not request.admin else None)
        key = None
        mask = self._mask
        candidates = request.candidates
        tried = (range(start, len(self.devices)) if candidates is None
                 else candidates[bisect_left(candidates, start):])
        # Where the known selector results name every device that can match
        # (no CEL runs), a slot stops once too few of them are left for the
        # request's remaining slots; only once a solution exists, so an
        # infeasible search still counts every rejection as upstream does.
        last = len(tried) - (request.num_devices - di)
        for position, index in enumerate(tried):
            if position > last and candidates is not None and self.best is not None:
                break
            if mask is not None and not mask[index]:
                continue
            self._tick()
            if self.in_use(request, index, ci) or not self.selectable(request, index):
                continue
            if twins is not None:
                key = self.twin_key(index)
                # Only once a solution exists: an infeasible search stays
                # exhaustive, so its rejection counts (the reason) are upstream's.
                if key is not None and key in twins and self.best is not None:
                    continue
            pick = self.try_pick(request, index, must=False)
            if pick is None:
                continue
            # a branch the bound rules out fails as a searched one would
            outcome = (FAIL if self.best is not None and self._bound is not None
                       and self._below_best()
                       else self._one(ci, ri, si, di + 1, in_sub, index + 1))
            if outcome == DONE:
                return DONE
            self.undo(pick)
            if outcome == MAXED:
                return MAXED
            if twins is not None:
                # its selector results are all known now, whatever they were before
                key = self.twin_key(index)
                if key is not None:
                    twins.add(key)
        return FAIL

    def _first_available(self, ci: int, ri: int, di: int, count: int) -> int:
        all_maxed = True
        for si in range(count):
            if self.frozen is not None and self.frozen.get((ci, ri), si) != si:
                continue
            self.chosen[(ci, ri)] = si
            outcome = self._one(ci, ri, si, di, True, 0)
            if outcome == MAXED:
                continue
            all_maxed = False
            if outcome == DONE:
                return DONE
        return MAXED if all_maxed else FAIL

    def _all_slot(self, request: Request, si: int, di: int, in_sub: bool) -> int:
        assert request.all_devices is not None
        self._tick()
        pick = self.try_pick(request, request.all_devices[di], must=True)
        if pick is None:
            return FAIL
        outcome = self._one(request.claim_index, request.request_index, si, di + 1, in_sub, 0)
        if outcome != DONE:
            self.undo(pick)
        return outcome

    def _picked(self) -> list[Device]:
        return [self.devices[p.device] for c in self.picks for p in c]

    def _below_best(self) -> bool:
        """Whether no allocation holding the current picks can change the
        result, so the branch can be skipped: the objective's bound for them
        is at most the best score found (a later allocation replaces the best
        only when it scores higher) or below a score some allocation reaches
        (`_floor`). An allocation there where the search would stop early
        scores at least every allocation of the search (`is_perfect`, which
        counts the units it may take again, and every allocation has one
        shape but for those: `_boundable`), so it scores as the best and
        changes nothing either; a branch whose bound is perfect is still
        searched, so the search stops where it would. Skipping must also skip
        no error: every request's selector results are known without CEL
        errors, and no request is `All` or admin access."""
        if self._bounded is None:
            self._bounded = self._boundable()
            if self._bounded:
                self._floor = self._probe_blocks()
        if not self._bounded:
            return False
        assert self._bound is not None and self.best is not None and self.objective is not None
        best = self.best.score
        key = self._class_key()
        bound = self._bounds.get(key)
        if bound is None:
            bound = self._bounds[key] = self._bound(self._picked(), *self._shape)
        return (best is not None and (bound <= best or bound < self._floor)
                and not self.objective.is_perfect(bound))

    def _probe_blocks(self) -> float:
        """The best score of a first fit inside one PCIe root or NUMA node
        that can hold the whole allocation (each probe at most `_PROBE_STEPS`
        steps, counted in the search's budget): a score some allocation
        reaches, so that branches that cannot reach it are skipped before the
        search meets it in its order."""
        blocks = getattr(self.objective, "blocks", None)
        assert self.objective is not None
        if blocks is None:
            return -1.0
        floor = -1.0
        saved = (self.best, self.best_mode, self.budget, dict(self.chosen))
        steps, budget = self.steps, self.budget
        # the branch being searched is set aside, and taken up again after
        held = [pick for claim_picks in self.picks for pick in claim_picks]
        self._undo_all()
        self.best_mode = False
        try:
            for block in blocks(self._shape[0]):
                self.best, self.steps, self.budget = None, 0, min(_PROBE_STEPS, budget - steps)
                self._mask = [d.id in block for d in self.devices]
                try:
                    found = self._one(0, 0, 0, 0, False, 0) == DONE
                except BudgetExhausted:
                    found = False
                finally:
                    steps += self.steps
                    self._undo_all()
                if found and self.best is not None and self.best.score is not None:
                    floor = max(floor, self.best.score)
        finally:
            self._mask = None
            self.best, self.best_mode, self.budget, self.chosen = saved
            self.steps = steps
            for pick in held:
                again = self.try_pick(pick.request, pick.device, must=False)
                assert again is not None and again.counted == pick.counted
        return floor

    def _score_key(self) -> tuple[int, ...] | None:
        """The picks' placement as the objective's score sees it (its
        `score_class` of each pick), when the score depends on nothing else:
        no device picked twice, each a unit of its own. None otherwise."""
        score_class = getattr(self.objective, "score_class", None)
        if score_class is None:
            return None
        classes = self._score_class
        key = []
        seen = set()
        for claim_picks in self.picks:
            for pick in claim_picks:
                index = pick.device
                if index in seen:
                    return None
                seen.add(index)
                known = classes.get(index, -1)
                if known == -1:
                    value = score_class(self.devices[index])
                    known = classes[index] = (None if value is None else
                                              self._score_classes.setdefault(
                                                  value, len(self._score_classes)))
                if known is None:
                    return None
                key.append(known)
        key.sort()
        return tuple(key)

    def _class_key(self) -> tuple[int, ...]:
        classes = self._bound_class
        return tuple(sorted([classes[p.device] for c in self.picks for p in c]))

    def _boundable(self) -> bool:
        """Every allocation has the same shape: each request's candidates (the
        devices its known selector results accept) agree on what they add to
        it, no two candidates share a unit, and no shared device is a candidate
        of two requests (so none is picked twice). Shared devices other pods
        already use are declared to the objective (`reuse`); allocations then
        differ only in how many new units they take."""
        bound_key = getattr(self.objective, "bound_key", None)
        reuse = getattr(self.objective, "reuse", None)
        if bound_key is None or self.frozen is None:
            return False
        units: dict[int, Hashable] = {}
        profiles: dict[int, tuple[bool, bool, bool, bool] | None] = {}
        kinds: dict[Hashable, int] = {}
        shared_of: dict[int, int] = {}  # shared candidate -> the request it is one of
        for request in self._all_requests:
            known = request.known
            if request.admin or request.all_devices is not None or known is None:
                return False
            adds: set[tuple[bool, bool, bool, bool]] = set()
            for index, position in enumerate(self.view_position):
                matched = known[position]
                if matched is False or self.static_used[index] or self._never_fits(index):
                    continue
                if matched is not True:
                    return False
                if self.devices[index].allow_multiple_allocations and (
                        reuse is None or shared_of.setdefault(index, id(request))
                        != id(request)):
                    return False
                key = bound_key(self.devices[index])
                if key is None:
                    return False
                units[index] = key[0]
                adds.add(key[1])
                self._bound_class[index] = kinds.setdefault(key[2], len(kinds))
            if len(adds) > 1:
                return False
            profiles[id(request)] = adds.pop() if adds else None
        if len(set(units.values())) != len(units):
            return False
        total = accelerators = rooted_nics = 0
        for ci, per_claim in enumerate(self.requests):
            for ri, subs in enumerate(per_claim):
                request = subs[self.frozen.get((ci, ri), 0)]
                profile = profiles[id(request)]
                if profile is None:
                    return False
                no_root, _, accelerator, nic = profile
                total += request.num_devices
                accelerators += request.num_devices * accelerator
                rooted_nics += request.num_devices * (nic and not no_root)
        self._shape = (total, accelerators, rooted_nics)
        if reuse is not None:
            reuse(set(units.values()))
        return True

    def _never_fits(self, index: int) -> bool:
        """The device's counters exceed what its pool has left before any pick
        of this search: it is never picked (a whole GPU beside a partition in use)."""
        device = self.devices[index]
        consumes = device.consumes_counters
        if not consumes or device.allow_multiple_allocations:
            return False  # a shared device may be picked without counting again
        pool = self._pool_counters(self.device_pool[index])
        if pool.overcommitted:
            return True
        return any((available := pool.available.get(key)) is not None and amount > available
                   for key, amount in self._consumption(index))

    def _leaf(self) -> int:
        picks = tuple(tuple(p) for p in self.picks)
        score = None
        perfect = False
        if self.objective is not None:
            key = self._score_key()
            hit = self._scores.get(key) if key is not None else None
            if hit is None:
                score = self.objective.score(self._picked())
                perfect = self.objective.is_perfect(score)
                if key is not None:
                    self._scores[key] = (score, perfect)
            else:
                score, perfect = hit
        if self.best is None or (score is not None and self.best.score is not None
                                 and score > self.best.score):
            self.best = Solution(picks=picks, chosen=dict(self.chosen), score=score)
        if not self.best_mode:
            return DONE
        if self.frozen is None:
            self.frozen = dict(self.chosen)
        if perfect and self._stops is None:
            self._stops = self._one_shape()
        return DONE if perfect and self._stops else FAIL

    def _one_shape(self) -> bool:
        """Whether every allocation of the search has the shape of the one just
        scored, so that the objective's perfect score for it is the most any
        reaches. Not where a candidate (a device some request may take and
        that fits) varies the shape (the objective's `shape_unit` is None: no
        PCIe root or NUMA node) or shares its unit with another candidate (partitions
        of one GPU: an allocation of both holds fewer units), nor where a
        shared device (`allowMultipleAllocations`) can serve two of the
        search's requests (an allocation taking it twice holds fewer units).
        There the search does not stop early."""
        assert self.frozen is not None
        requests = [subs[self.frozen.get((ci, ri), 0)]
                    for ci, per_claim in enumerate(self.requests)
                    for ri, subs in enumerate(per_claim)]
        shape_unit = getattr(self.objective, "shape_unit", None)
        units: set[Hashable] = set()
        for index, device in enumerate(self.devices):
            position = self.view_position[index]
            takers = sum(1 for r in requests
                         if r.known is None or r.known[position] is not False)
            if not takers or self._never_fits(index):
                continue
            if shape_unit is not None:
                unit = shape_unit(device)
                if unit is None or unit in units:
                    return False
                units.add(unit)
            if takers > 1 and device.allow_multiple_allocations and not self.static_used[index]:
                return False
        return True


def _exact(value: Fraction) -> int | Fraction:
    return value.numerator if value.denominator == 1 else value


def node_matches(node: Node, *, name: str | None, all_nodes: bool,
                 selector: NodeSelector | None) -> bool:
    """Upstream `NodeMatches` for a slice's or device's node selection fields."""
    if name:
        return node.name == name
    if all_nodes:
        return True
    if selector is not None:
        return selector.matches(node)
    return False
