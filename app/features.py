"""DRA feature gates, named and defaulted as in Kubernetes 1.36.

The allocator's behaviour depends on which DRA features the cluster runs with
(a `firstAvailable` request is an error when DRAPrioritizedList is off, ...).
drax must mirror the scheduler's gates, so they use the upstream names and are
set the same way: `--feature-gates Name=true,Name=false` or a config map.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Final

# Gate name -> attribute of FeatureGates.
GATE_NAMES: Final = {
    "DRAPrioritizedList": "prioritized_list",
    "DRAAdminAccess": "admin_access",
    "DRAPartitionableDevices": "partitionable_devices",
    "DRADeviceTaints": "device_taints",
    "DRAConsumableCapacity": "consumable_capacity",
    "DRADeviceBindingConditions": "device_binding_conditions",
    "DRAListTypeAttributes": "list_type_attributes",
}


@dataclass(slots=True, frozen=True)
class FeatureGates:
    prioritized_list: bool = True  # GA in 1.36
    admin_access: bool = True  # GA in 1.36
    partitionable_devices: bool = True  # beta, on by default in 1.36
    device_taints: bool = True  # beta, on by default in 1.36
    consumable_capacity: bool = True  # beta, on by default in 1.36
    device_binding_conditions: bool = True  # beta, on by default in 1.36
    list_type_attributes: bool = False  # alpha in 1.36

    def with_overrides(self, overrides: Mapping[str, bool]) -> FeatureGates:
        unknown = sorted(set(overrides) - set(GATE_NAMES))
        if unknown:
            raise ValueError(f"unknown feature gate(s): {', '.join(unknown)}; "
                             f"known: {', '.join(GATE_NAMES)}")
        return replace(self, **{GATE_NAMES[k]: v for k, v in overrides.items()})

    def as_dict(self) -> dict[str, bool]:
        by_attr = {attr: name for name, attr in GATE_NAMES.items()}
        return {by_attr[f.name]: getattr(self, f.name) for f in fields(self)}


def parse_feature_gates(text: str) -> dict[str, bool]:
    """Parse `Name=true,Name=false` as kube components do."""
    out: dict[str, bool] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or value.strip().lower() not in ("true", "false"):
            raise ValueError(f"invalid feature gate {item!r}: expected Name=true or Name=false")
        out[name.strip()] = value.strip().lower() == "true"
    return out
