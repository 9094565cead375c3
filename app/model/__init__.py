"""Typed views of the Kubernetes objects drax reads, and exact quantities.

Everything past the parsing edge (`parse`, and `typed` for ResourceSlices)
works on these types (`objects`);
`interning` shares the values that repeat across objects, `quantity` holds
exact quantities, `times` writes and reads RFC 3339 times as the API does.
"""

from app.model.objects import (
    AllocationResult,
    AttributeValue,
    CounterSet,
    Device,
    DeviceCapacity,
    DeviceClass,
    DeviceConstraint,
    DeviceCounterConsumption,
    DeviceRequest,
    DeviceRequestAllocationResult,
    DeviceSubRequest,
    DeviceTaint,
    DeviceToleration,
    ExactDeviceRequest,
    InvalidObject,
    LabelSelector,
    Node,
    NodeSelector,
    Pod,
    PodDisruptionBudget,
    PodResourceClaim,
    PriorityClass,
    RequestPolicy,
    ResourceClaim,
    ResourceClaimSpec,
    ResourceClaimTemplate,
    ResourcePool,
    ResourceSlice,
    qualify,
)
from app.model.quantity import Quantity, QuantityError, parse_quantity
from app.model.typed import decode_listed_slice, decode_resource_slice, parse_object

__all__ = [
    "AllocationResult", "AttributeValue", "CounterSet", "Device", "DeviceCapacity",
    "DeviceClass", "DeviceConstraint", "DeviceCounterConsumption", "DeviceRequest",
    "DeviceRequestAllocationResult", "DeviceSubRequest", "DeviceTaint", "DeviceToleration",
    "ExactDeviceRequest", "InvalidObject", "LabelSelector", "Node", "NodeSelector", "Pod",
    "PodDisruptionBudget", "PodResourceClaim", "PriorityClass",
    "Quantity", "QuantityError", "RequestPolicy", "ResourceClaim", "ResourceClaimSpec",
    "ResourceClaimTemplate", "ResourcePool", "ResourceSlice", "decode_listed_slice",
    "decode_resource_slice",
    "parse_object", "parse_quantity",
    "qualify",
]
