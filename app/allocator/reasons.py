"""Why a pod does not fit on a node, in words a user can act on.

Upstream only says "cannot allocate all claims". drax explains: which request
falls short, how many devices match its class, pass its selectors and are
free, and what holds the others (allocated, untolerated taints, exhausted
counters or capacity); or which constraint no combination satisfies. Each
reason comes with its `Rejection` category, decided where the sentence is
written. This runs only after a failed search, so it may re-scan every device.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from app.allocator.search import AllocationError, Request, Search
from app.allocator.types import Rejection

# What holds a device, as `_blocker` words it and `_shortage` categorizes it.
_TAINTED = "with untolerated taints"
_NO_COUNTERS = "without enough shared counters left"
_NO_CAPACITY = "without enough capacity left"


@dataclass(slots=True)
class RequestStats:
    matched_class: int = 0
    passed_selectors: int = 0
    free: int = 0
    blocked: Counter[str] = field(default_factory=Counter)


def explain(search: Search) -> tuple[str, Rejection]:
    """The reason for a search that found nothing (its state is fully undone),
    and its category."""
    notes = _pool_notes(search)
    reason, rejection = _short_request(search) or _constraint(search) or _together(search)
    return "; ".join([reason, *notes]), rejection


def budget_reason(search: Search) -> str:
    return (f"gave up after {search.steps} steps (step budget {search.budget}) without "
            "finding an allocation; the claims' requests and constraints leave too many "
            "combinations to try")


def _pool_notes(search: Search) -> list[str]:
    notes = []
    for pool in search.node_view.pools:
        if not pool.complete:
            notes.append(f"resource pool {pool.driver}/{pool.name} is currently being "
                         "updated (incomplete), its devices were not considered")
        elif pool.invalid_reason is not None:
            notes.append(f"invalid resource pool {pool.driver}/{pool.name} was encountered "
                         f"({pool.invalid_reason}), its devices were not considered")
    return notes


def stats(search: Search, request: Request) -> RequestStats:
    """Counts over every usable device of the node, each device judged alone."""
    out = RequestStats()
    for index in range(len(search.devices)):
        try:
            selectable = search.selectable(request, index)
        except AllocationError:
            selectable = False
        if not selectable:
            if _matches_class(search, request, index):
                out.matched_class += 1
            continue
        out.matched_class += 1
        out.passed_selectors += 1
        blocker = _blocker(search, request, index)
        if blocker is None:
            out.free += 1
        else:
            out.blocked[blocker] += 1
    return out


def _matches_class(search: Search, request: Request, index: int) -> bool:
    device = search.devices[index]
    if not search.features.device_binding_conditions and device.binding_conditions:
        return False
    try:
        return search.node_ok[index] and search.class_matches(request.device_class, index)
    except AllocationError:
        return False


def _blocker(search: Search, request: Request, index: int) -> str | None:
    device = search.devices[index]
    features = search.features
    multi = search.multi(index)
    if not request.admin and search.static_used[index]:
        return "allocated"
    if device.consumes_counters and not features.partitionable_devices:
        return "partitionable (DRAPartitionableDevices off)"
    if features.device_taints and not search.tolerated(request, device):
        return _TAINTED
    if device.consumes_counters and not (multi and search.multi_static[index]) \
            and not search.counters_fit(index):
        return _NO_COUNTERS
    if features.consumable_capacity and not search.capacity_fits(request, index):
        return _NO_CAPACITY
    return None


def _describe(search: Search, request: Request, st: RequestStats) -> str:
    if request.all_devices is not None:
        need = "all of them needed" if st.passed_selectors else "at least one needed"
    else:
        need = f"{request.num_devices} needed"
    text = (f'request "{request.name}": {st.matched_class} devices match class '
            f"{request.device_class.name}, {st.passed_selectors} pass the request selectors, "
            f"{st.free} free; {need}")
    if st.blocked:
        text += " (" + ", ".join(f"{n} {what}" for what, n in st.blocked.items()) + ")"
    return text


def _is_short(request: Request, st: RequestStats) -> bool:
    if request.all_devices is not None:
        return st.passed_selectors == 0 or st.free < st.passed_selectors
    return st.free < request.num_devices


def _shortage(request: Request, st: RequestStats) -> Rejection:
    """What keeps `request` short: no device of its class, its selectors, what
    holds the devices that pass them (taints; counters or capacity), or too
    few free."""
    if st.matched_class == 0:
        return Rejection.NO_DEVICE_OF_CLASS
    if st.passed_selectors == 0:
        return Rejection.SELECTORS
    if _TAINTED in st.blocked:
        return Rejection.TAINT
    if st.blocked.keys() & {_NO_COUNTERS, _NO_CAPACITY}:
        return Rejection.COUNTERS_CAPACITY
    return Rejection.NOT_ENOUGH_FREE


def _short_request(search: Search) -> tuple[str, Rejection] | None:
    for ci, requests in enumerate(search.requests):
        key = search.claims[ci].key
        for subs in requests:
            described = [(r, stats(search, r)) for r in subs]
            if not all(_is_short(r, st) for r, st in described):
                continue
            rejection = _shortage(*described[0])
            if subs[0].sub is None:
                request, st = described[0]
                return f"claim {key}: {_describe(search, request, st)}", rejection
            alternatives = "; ".join(_describe(search, r, st) for r, st in described)
            return (f'claim {key}: request "{subs[0].base}": no subrequest can be '
                    f"satisfied: {alternatives}"), rejection
    return None


def _constraint(search: Search) -> tuple[str, Rejection] | None:
    # The last claim that met rejections is the one the search could not place;
    # within it, the constraint that rejected most.
    best: tuple[int, int, int] | None = None
    for ci, counts in enumerate(search.rejections):
        for k, n in enumerate(counts):
            if n and (best is None or (ci, n) > (best[0], best[1])):
                best = (ci, n, k)
    if best is None:
        return None
    ci, _, k = best
    spec = search.constraint_specs[ci][k]
    tracker = search.constraints[ci][k]
    scope = ", ".join(spec.requests) if spec.requests else "all requests"
    free = ", ".join(f'"{r.name}" {r.num_devices} needed, {stats(search, r).free} free'
                     for subs in search.requests[ci] for r in subs if k in r.constraints)
    others = " alongside the pod's other claims" if len(search.claims) > 1 else ""
    return (f"claim {search.claims[ci].key}: no combination of free devices satisfies "
            f"constraint {tracker.describe()} ({scope}){others}: {free}"), Rejection.CONSTRAINT


def _together(search: Search) -> tuple[str, Rejection]:
    parts = []
    for ci, requests in enumerate(search.requests):
        for subs in requests:
            for r in subs:
                st = stats(search, r)
                parts.append(f'{search.claims[ci].key} "{r.name}" {r.num_devices} needed, '
                             f"{st.free} free")
    return ("the requests cannot be satisfied together (they compete for the same devices, "
            "shared counters or capacity): " + "; ".join(parts)), Rejection.COUNTERS_CAPACITY
