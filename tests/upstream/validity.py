"""Is an allocation valid? The rules of the DRA API, checked independently of the search.

Allocator mode may answer with other devices than upstream's first fit, so
its answer cannot be compared device by device; instead every rule a valid
allocation must satisfy is checked here from the claims and the node's view:
the device is usable on the node, matches its class and request selectors,
is free (or shareable), tolerates its taints, counts and subrequest choices
are right, constraints hold, shared counters and consumable capacity are not
exceeded. It reads the model and compiles CEL itself rather than calling into
the allocator's search, so a bug there cannot hide.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from fractions import Fraction

from app.allocator import AllocatedState, AllocationOutcome, NodeView
from app.allocator.constraints import as_set, lookup_attribute
from app.allocator.consumable import consumed_capacity
from app.cel import compile_selector
from app.model import Device, DeviceClass, ExactDeviceRequest, ResourceClaim
from app.model.objects import ALLOCATION_MODE_ALL

_BLOCKING = ("NoSchedule", "NoExecute")


def check(*, claims: Sequence[ResourceClaim], view: NodeView, allocated: AllocatedState,
          classes: Mapping[str, DeviceClass], outcome: AllocationOutcome,
          list_types: bool) -> list[str]:
    """Every rule the feasible `outcome` breaks ([] when valid)."""
    devices = {d.id: (pool_index, d) for pool_index, pool in enumerate(view.pools)
               if pool.complete and pool.invalid_reason is None for d in pool.devices}
    problems: list[str] = []
    exclusive: Counter[str] = Counter()
    shared_use: dict[str, dict[str, Fraction]] = defaultdict(dict)
    counted: set[str] = set()
    counters: dict[int, dict[tuple[str, str], Fraction]] = defaultdict(dict)
    if len(outcome.claims) != len(claims):
        return [f"{len(outcome.claims)} claim results for {len(claims)} claims"]
    for claim, result in zip(claims, outcome.claims, strict=True):
        picked: list[tuple[str, Device]] = []
        specs = _specs(claim)
        per_request: Counter[str] = Counter()
        chosen: dict[str, set[str]] = defaultdict(set)
        for r in result.allocation.results:
            where = f"claim {claim.key} request {r.request} device {r.device_id}"
            found = devices.get(r.device_id)
            spec = specs.get(r.request)
            if found is None or spec is None:
                problems.append(f"{where}: unknown device or request")
                continue
            pool_index, device = found
            picked.append((r.request, device))
            per_request[r.request] += 1
            chosen[r.request.split("/")[0]].add(r.request)
            problems.extend(f"{where}: {p}" for p in _device_problems(
                device, spec, classes[spec.device_class_name]))
            multi = device.allow_multiple_allocations
            if not r.admin_access:
                if multi:
                    amounts = consumed_capacity(spec.capacity_requests, device) or {}
                    for name, q in amounts.items():
                        use = shared_use[device.id]
                        use[name] = use.get(name, Fraction(0)) + q.value
                elif device.id in allocated.devices:
                    problems.append(f"{where}: already allocated")
                else:
                    exclusive[device.id] += 1
            fresh = not (multi and (device.id in allocated.multi_allocated
                                    or device.id in allocated.consumed_capacity))
            if device.id not in counted and fresh and not r.admin_access:
                counted.add(device.id)
                used = counters[pool_index]
                for consumption in device.consumes_counters:
                    for name, q in consumption.counters.items():
                        key = (consumption.counter_set, name)
                        used[key] = used.get(key, Fraction(0)) + q.value
        problems.extend(_count_problems(claim, specs, per_request, chosen))
        problems.extend(_constraint_problems(claim, picked, list_types=list_types))
    problems.extend(f"device {d} allocated {n} times" for d, n in exclusive.items() if n > 1)
    for device_id, use in shared_use.items():
        device = devices[device_id][1]
        before = allocated.consumed_capacity.get(device_id, {})
        for name, amount in use.items():
            prior = before.get(name) or before.get(name.split("/")[-1])
            total = amount + (prior.value if prior is not None else 0)
            if total > device.capacity[name].value.value:
                problems.append(f"device {device_id}: capacity {name} exceeded ({total})")
    for pool_index, used in counters.items():
        pool = view.pools[pool_index]
        before = allocated.consumed_counters.get(pool.key, {})
        for (set_name, name), amount in used.items():
            counter_set = pool.counter_sets.get(set_name)
            limit = counter_set.counters.get(name) if counter_set else None
            prior = before.get((set_name, name))
            total = amount + (prior.value if prior is not None else 0)
            if limit is None or total > limit.value:
                problems.append(f"pool {pool.key}: counter {set_name}/{name} exceeded ({total})")
    return problems


def _specs(claim: ResourceClaim) -> dict[str, ExactDeviceRequest]:
    out = {}
    for request in claim.spec.requests:
        if request.exactly is not None:
            out[request.name] = request.exactly
        for sub in request.first_available:
            out[f"{request.name}/{sub.name}"] = sub.request
    return out


def _device_problems(device: Device, spec: ExactDeviceRequest,
                     device_class: DeviceClass) -> list[str]:
    out = []
    for expression in (*device_class.selectors, *spec.selectors):
        if not compile_selector(expression).matches(device):
            out.append(f"selector {expression!r} does not match")
    for taint in device.taints:
        if taint.effect in _BLOCKING and not any(t.tolerates(taint) for t in spec.tolerations):
            out.append(f"taint {taint.key} not tolerated")
    if spec.capacity_requests and consumed_capacity(spec.capacity_requests, device) is None:
        out.append("capacity request does not fit the device's policy")
    return out


def _count_problems(claim: ResourceClaim, specs: Mapping[str, ExactDeviceRequest],
                    per_request: Counter[str], chosen: Mapping[str, set[str]]) -> list[str]:
    out = []
    for request in claim.spec.requests:
        names = chosen.get(request.name, set())
        if len(names) != 1:
            out.append(f"claim {claim.key} request {request.name}: results for {sorted(names)}")
            continue
        name = next(iter(names))
        spec = specs[name]
        if spec.allocation_mode == ALLOCATION_MODE_ALL:
            continue  # the set of all devices is compared in advisor mode
        if per_request[name] != spec.count:
            out.append(f"claim {claim.key} request {name}: {per_request[name]} devices, "
                       f"{spec.count} requested")
    return out


def _constraint_problems(claim: ResourceClaim, picked: list[tuple[str, Device]], *,
                         list_types: bool) -> list[str]:
    out = []
    for constraint in claim.spec.constraints:
        wanted = set(constraint.requests)
        members = [d for name, d in picked
                   if not wanted or name in wanted or name.split("/")[0] in wanted]
        attribute = constraint.match_attribute or constraint.distinct_attribute
        assert attribute is not None
        values = [lookup_attribute(d, attribute) for d in members]
        if any(v is None for v in values):
            out.append(f"claim {claim.key}: {attribute} missing on a constrained device")
        elif constraint.match_attribute:
            if list_types:
                sets = [as_set(v) for v in values if v is not None]
                if sets and not frozenset.intersection(*(s[1] for s in sets if s)):
                    out.append(f"claim {claim.key}: matchAttribute {attribute} no common value")
            elif len({(v.kind, str(v.value)) for v in values if v is not None}) > 1:
                out.append(f"claim {claim.key}: matchAttribute {attribute} differs")
        else:
            seen: list[frozenset[object]] = []
            for v in values:
                if v is None:
                    continue
                s = as_set(v)
                items = s[1] if (s and list_types) else frozenset({(v.kind, str(v.value))})
                if any(items & other for other in seen):
                    out.append(f"claim {claim.key}: distinctAttribute {attribute} repeats")
                seen.append(items)
    return out

