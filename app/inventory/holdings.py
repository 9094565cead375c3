"""Holdings: what is taken, by allocated claims, assumed allocations and nominations.

Allocated and assumed results are indexed by pool, so a node's allocated
state is summed from the few pools it sees rather than from every claim in
the cluster. Assumed allocations (made by bind before the API confirms them)
count as allocated until the claim arrives carrying an allocation, until
`forget`, or until their time-to-live passes. Every change reports the pools
it touched to `on_change`, which the inventory turns into version stamps.

A nomination holds the devices chosen for a preemptor while its victims go:
they count as allocated for every pod, so no pod of the same or lower priority
is given them, until the nomination ends (the preemptor binds, goes, or is
bound elsewhere: `end_nomination`) or its time-to-live passes. `lifted_for`
takes out, for the span of one synchronous computation, the holds a pod may
use: its own, and those of lower priority than its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Set
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

from app.allocator.types import AllocatedState, ClaimAllocation, PoolKey
from app.model import Device, DeviceRequestAllocationResult, Pod, Quantity
from app.model.requests import PodUsage

_CLAIM: Final = "claim:"
_ASSUMED: Final = "assumed:"
_NOMINATED: Final = "nominated:"

Results = tuple[DeviceRequestAllocationResult, ...]


@dataclass(slots=True)
class _Assumption:
    pod_key: str
    claim_key: str
    results: Results
    expires_at: float


@dataclass(slots=True, frozen=True)
class Nomination:
    """Devices held for a preemptor (`pod_key`, `pod_uid`, `priority`) on `node`
    while `victims` (pod key, uid) terminate and `victim_claims` deallocate."""

    pod_key: str
    pod_uid: str
    priority: int
    node: str
    allocations: tuple[ClaimAllocation, ...]
    victims: tuple[tuple[str, str], ...]
    victim_claims: tuple[str, ...]
    started_at: float
    expires_at: float

    @property
    def device_ids(self) -> tuple[str, ...]:
        return tuple(sorted({r.device_id for ca in self.allocations
                             for r in ca.allocation.results}))


def waiting_ended(seen: Pod | PodUsage | None, uid: str) -> str:
    """How the preemptor of `uid`, as the watch sees it now (`seen`), no longer
    waits for its nomination: gone, replaced by a pod of another uid, bound (on
    its node or elsewhere) or deleting; "" while it waits."""
    if seen is None or seen.uid != uid:
        return "is gone or replaced"
    if seen.node_name:
        return f"is bound to node {seen.node_name}"
    if seen.deleting:
        return "is being deleted"
    return ""


def counted(results: Iterable[DeviceRequestAllocationResult]) -> Results:
    """Results that take something from others: admin access never does."""
    return tuple(r for r in results if not r.admin_access)


class Holdings:
    """Results per pool and holder (a claim's allocation or an assumption)."""

    def __init__(self, *, clock: Callable[[], float],
                 on_change: Callable[[set[PoolKey]], None]) -> None:
        self._clock = clock
        self._on_change = on_change
        self._by_pool: dict[PoolKey, dict[str, Results]] = {}
        self._holder_pools: dict[str, set[PoolKey]] = {}
        self._assumed: dict[str, _Assumption] = {}
        self._nominations: dict[str, Nomination] = {}
        self._next_expiry = float("inf")
        # per device id: how many allocated claims hold it, and how many of
        # them alone (no shareID); `_overlaps`: the devices held by two or more
        # claims, one of them alone (a state a consistent cluster never has)
        self._claims_on: dict[str, int] = {}
        self._alone_on: dict[str, int] = {}
        self._overlaps: set[str] = set()

    # ------------------------------------------------------------------ claims

    def claim_put(self, claim_key: str, results: Results, *, allocated: bool) -> None:
        self._set(_CLAIM + claim_key, results)
        # An allocation on the claim is the truth: it confirms the assumption when it
        # matches, and overrides it when someone else allocated the claim first.
        if allocated and claim_key in self._assumed:
            self._drop_assumption(claim_key)

    def claim_deleted(self, claim_key: str, *, held: bool) -> None:
        if held:
            self._set(_CLAIM + claim_key, ())
        if claim_key in self._assumed:
            self._drop_assumption(claim_key)

    # ------------------------------------------------------------------ assumptions

    def assume(self, *, pod_key: str, allocations: Sequence[ClaimAllocation],
               ttl: float) -> None:
        expires_at = self._clock() + ttl
        for ca in allocations:
            results = counted(ca.allocation.results)
            self._assumed[ca.claim_key] = _Assumption(pod_key=pod_key, claim_key=ca.claim_key,
                                                      results=results, expires_at=expires_at)
            self._set(_ASSUMED + ca.claim_key, results)
        self._next_expiry = min(self._next_expiry, expires_at)

    def forget(self, *, pod_key: str, claim_key: str | None = None) -> None:
        for key in [k for k, a in self._assumed.items()
                    if a.pod_key == pod_key and claim_key in (None, k)]:
            self._drop_assumption(key)

    def assumed_claims(self) -> list[str]:
        return sorted(self._assumed)

    def assumed_for(self, pod_key: str) -> bool:
        """Whether a bind of pod `pod_key` holds assumed devices (few binds are
        under way at a time: a walk over them is cheap)."""
        return any(a.pod_key == pod_key for a in self._assumed.values())

    def expire(self) -> None:
        """Drop the assumptions and nominations whose time-to-live has passed
        (cheap when none has)."""
        now = self._clock()
        if now < self._next_expiry:
            return
        for key in [k for k, a in self._assumed.items() if a.expires_at <= now]:
            self._drop_assumption(key)
        for key in [k for k, n in self._nominations.items() if n.expires_at <= now]:
            self.end_nomination(key)
        self._next_expiry = min([a.expires_at for a in self._assumed.values()]
                                + [n.expires_at for n in self._nominations.values()],
                                default=float("inf"))

    # ------------------------------------------------------------------ nominations

    def nominate(self, nomination: Nomination) -> None:
        """Hold `nomination`'s devices (replacing any earlier hold for its pod)."""
        self._nominations[nomination.pod_key] = nomination
        self._set(_NOMINATED + nomination.pod_key, _nominated_results(nomination))
        self._next_expiry = min(self._next_expiry, nomination.expires_at)

    def end_nomination(self, pod_key: str) -> Nomination | None:
        ended = self._nominations.pop(pod_key, None)
        if ended is not None:
            self._set(_NOMINATED + pod_key, ())
        return ended

    def nomination(self, pod_key: str) -> Nomination | None:
        return self._nominations.get(pod_key)

    def nominations(self) -> list[Nomination]:
        return sorted(self._nominations.values(), key=lambda n: n.pod_key)

    @contextmanager
    def lifted_for(self, *, pod_key: str, pod_uid: str, priority: int) -> Iterator[None]:
        """Within the block, the holds `pod_key` may use count as free: its own
        nomination (same uid) and those of a lower priority than `priority`.
        The block must not yield to the event loop: every other reader would see
        them free too."""
        lifted = [n for n in self._nominations.values()
                  if n.priority < priority or (n.pod_key == pod_key and n.pod_uid == pod_uid)]
        for n in lifted:
            self._set(_NOMINATED + n.pod_key, ())
        try:
            yield
        finally:
            for n in lifted:
                if self._nominations.get(n.pod_key) is n:
                    self._set(_NOMINATED + n.pod_key, _nominated_results(n))

    def _drop_assumption(self, claim_key: str) -> None:
        del self._assumed[claim_key]
        self._set(_ASSUMED + claim_key, ())

    # ------------------------------------------------------------------ reads

    def overlapping(self) -> bool:
        """Whether some device is allocated to two or more claims, one of them
        holding it alone: the watch between two of its events (a claim seen
        allocated before another's deallocation), a relist under way, a stale
        write. Kept as claims change, so the read is free."""
        return bool(self._overlaps)

    def taken_device_ids(self) -> set[str]:
        return {r.device_id for holding in self._by_pool.values()
                for results in holding.values() for r in results}

    def allocated_for(self, pools: Sequence[Any],
                      devices_of: Callable[[PoolKey], Mapping[str, Device]],
                      without: Set[str] = frozenset()) -> AllocatedState:
        """The allocated state of `pools` (one node's pool views); `devices_of`
        gives a pool's devices by name, for the counters they consume.
        `without`: claim keys to leave out, as if deallocated (preemption)."""
        skip = {_CLAIM + key for key in without}
        devices: set[str] = set()
        multi: set[str] = set()
        counters: dict[PoolKey, dict[tuple[str, str], Quantity]] = {}
        capacity: dict[str, dict[str, Quantity]] = {}
        for pool in pools:
            holding = self._by_pool.get(pool.key)
            if not holding:
                continue
            by_name = devices_of(pool.key)
            counted_devices: set[str] = set()
            for holder, results in holding.items():
                if skip and holder in skip:
                    continue
                for r in results:
                    if r.share_id is None:
                        devices.add(r.device_id)
                    else:
                        multi.add(r.device_id)
                        per_capacity = capacity.setdefault(r.device_id, {})
                        for name, amount in r.consumed_capacity.items():
                            per_capacity[name] = per_capacity[name] + amount \
                                if name in per_capacity else amount
                    device = by_name.get(r.device)
                    if device is None or not device.consumes_counters \
                            or r.device in counted_devices:
                        continue
                    counted_devices.add(r.device)
                    pool_counters = counters.setdefault(pool.key, {})
                    for use in device.consumes_counters:
                        for counter, amount in use.counters.items():
                            ck = (use.counter_set, counter)
                            pool_counters[ck] = pool_counters[ck] + amount \
                                if ck in pool_counters else amount
        return AllocatedState(devices=frozenset(devices), consumed_counters=counters,
                              consumed_capacity=capacity, multi_allocated=frozenset(multi))

    # ------------------------------------------------------------------ writes

    def _set(self, holder: str, results: Results) -> None:
        by_pool: dict[PoolKey, Results] = {}
        for r in results:
            key = (r.driver, r.pool)
            by_pool[key] = (*by_pool.get(key, ()), r)
        previous = self._holder_pools.pop(holder, set())
        if all(self._by_pool[k].get(holder) == by_pool.get(k) for k in previous) \
                and previous == by_pool.keys():
            if by_pool:
                self._holder_pools[holder] = previous
            return
        if holder.startswith(_CLAIM):
            self._count(_devices(r for k in previous for r in self._by_pool[k][holder]), -1)
            self._count(_devices(results), 1)
        for key in previous:
            holding = self._by_pool[key]
            del holding[holder]
            if not holding:
                del self._by_pool[key]
        for key, rs in by_pool.items():
            self._by_pool.setdefault(key, {})[holder] = rs
        if by_pool:
            self._holder_pools[holder] = set(by_pool)
        self._on_change(previous | by_pool.keys())

    def _count(self, devices: Mapping[str, bool], step: int) -> None:
        """Count one claim's `devices` (device id -> held alone) in or out."""
        claims_on, alone_on = self._claims_on, self._alone_on
        for device, alone in devices.items():
            claims = claims_on[device] = claims_on.get(device, 0) + step
            alones = alone_on[device] = alone_on.get(device, 0) + (step if alone else 0)
            if claims <= 0:
                del claims_on[device], alone_on[device]
            if claims > 1 and alones > 0:
                self._overlaps.add(device)
            else:
                self._overlaps.discard(device)


def _devices(results: Iterable[DeviceRequestAllocationResult]) -> dict[str, bool]:
    """Per device id of `results`: whether one of them holds it alone."""
    devices: dict[str, bool] = {}
    for r in results:
        devices[r.device_id] = devices.get(r.device_id, False) or r.share_id is None
    return devices


def _nominated_results(nomination: Nomination) -> Results:
    return tuple(r for ca in nomination.allocations for r in counted(ca.allocation.results))
