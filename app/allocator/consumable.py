"""Consumable capacity: what one request consumes of one device's capacities.

Upstream (KEP-5075) computes, per capacity of the device, the amount a
request consumes: the requested amount rounded up per the capacity's
`requestPolicy`, else the policy default, else the whole capacity. That amount
depends only on the request and the device, so the search computes it once per
(request, device) here and only adds running sums in its inner loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from app.model import Device, DeviceCapacity, Quantity, RequestPolicy, qualify
from app.model.quantity import BINARY_SI


def consumed_capacity(requests: Mapping[str, Quantity], device: Device
                      ) -> dict[str, Quantity] | None:
    """Per capacity name (qualified), the amount this request consumes of the
    device; None when the device cannot serve it: it lacks a requested
    capacity, or a rounded amount violates the capacity's policy."""
    wanted = {qualify(name, device.driver): q for name, q in requests.items()}
    if any(name not in device.capacity for name in wanted):
        return None
    out: dict[str, Quantity] = {}
    for name, cap in device.capacity.items():
        amount = _amount(wanted.get(name), cap)
        if cap.request_policy is not None and _violates(amount, cap.request_policy):
            return None
        out[name] = amount
    return out


def _amount(requested: Quantity | None, cap: DeviceCapacity) -> Quantity:
    policy = cap.request_policy
    if requested is None:
        if policy is not None and policy.default is not None:
            return policy.default
        return cap.value
    if policy is None:
        return requested
    if policy.valid_range_min is not None:
        return _round_up_range(requested, policy)
    if policy.valid_values:
        return next((v for v in policy.valid_values if requested <= v), requested)
    return requested


def _round_up_range(requested: Quantity, policy: RequestPolicy) -> Quantity:
    minimum = policy.valid_range_min
    assert minimum is not None
    if requested < minimum:
        return minimum
    step = policy.valid_range_step
    if step is None:
        return requested
    steps = -((minimum.value - requested.value) // step.value)
    return Quantity(minimum.value + steps * step.value, BINARY_SI)


def _violates(amount: Quantity, policy: RequestPolicy) -> bool:
    if policy.default is not None and amount == policy.default:
        return False
    if (policy.valid_range_min is not None or policy.valid_range_max is not None
            or policy.valid_range_step is not None):
        if policy.valid_range_max is not None and amount > policy.valid_range_max:
            return True
        if policy.valid_range_step is not None:
            base = policy.valid_range_min.value if policy.valid_range_min else Fraction(0)
            return (amount.value - base) % policy.valid_range_step.value != 0
        return False
    if policy.valid_values:
        return amount not in policy.valid_values
    return False
