"""The validity checker must reject broken allocations (else the allocator-mode
half of the differential run could not fail)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.allocator import AllocationOutcome
from tests.upstream.differential import DEFAULT_FEATURES, Drax, run_drax
from tests.upstream.scenarios import generate
from tests.upstream.validity import check


def _feasible(*, min_devices: int) -> Drax:
    for seed in range(5_000):
        drax = run_drax(generate(seed, features=DEFAULT_FEATURES))
        devices = sum(len(c.allocation.results) for c in drax.allocator.claims)
        if drax.allocator.feasible and devices >= min_devices:
            return drax
    raise AssertionError("no feasible scenario")


def _check(drax: Drax, outcome: AllocationOutcome) -> list[str]:
    return check(claims=drax.claims, view=drax.state.view, allocated=drax.state.allocated,
                 classes=drax.classes, outcome=outcome,
                 list_types=drax.features.list_type_attributes)


def test_drax_allocations_pass() -> None:
    for seed in range(300):
        drax = run_drax(generate(seed, features=DEFAULT_FEATURES))
        if drax.allocator.feasible:
            assert _check(drax, drax.allocator) == [], seed


@pytest.mark.parametrize("breakage", ["unknown-device", "one-device-short", "wrong-request"])
def test_broken_allocations_fail(breakage: str) -> None:
    drax = _feasible(min_devices=1)
    first = drax.allocator.claims[0]
    results = list(first.allocation.results)
    if breakage == "unknown-device":
        results[0] = replace(results[0], device="no-such-device")
    elif breakage == "one-device-short":
        results.pop()
    else:
        results[0] = replace(results[0], request="no-such-request")
    broken = replace(first, allocation=replace(first.allocation, results=tuple(results)))
    outcome = replace(drax.allocator, claims=(broken, *drax.allocator.claims[1:]))
    assert _check(drax, outcome)


def test_a_device_given_twice_fails() -> None:
    drax = _feasible(min_devices=2)
    pairs = [(ci, ri) for ci, c in enumerate(drax.allocator.claims)
             for ri in range(len(c.allocation.results))]
    (c0, r0), (c1, r1) = pairs[0], pairs[1]
    claims = list(drax.allocator.claims)
    source = claims[c0].allocation.results[r0]
    target = claims[c1]
    results = list(target.allocation.results)
    results[r1] = replace(results[r1], driver=source.driver, pool=source.pool,
                          device=source.device)
    claims[c1] = replace(target, allocation=replace(target.allocation, results=tuple(results)))
    devices = drax.state.view.pools
    shared = {d.id for p in devices for d in p.devices if d.allow_multiple_allocations}
    if source.device_id in shared or source.admin_access:
        pytest.skip("the first device may be shared")
    assert _check(drax, replace(drax.allocator, claims=tuple(claims)))
