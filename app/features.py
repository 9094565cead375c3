"""DRA feature gates, named, defaulted and staged as in Kubernetes 1.37.2.

The allocator's behaviour depends on which DRA features the cluster runs with
(a `firstAvailable` request is an error when DRAPrioritizedList is off, ...).
drax must mirror the scheduler's gates, so they use the upstream names and are
set the same way: `--feature-gates Name=true,Name=false` or a config map.
`GATES` records each gate's 1.37 stage so the table in the docs and the
oracle's `features` come from one place.

Kubernetes refuses to move a gate that is locked to its default (GA and
LockToDefault). drax accepts it: turning a GA feature off is how the upstream
allocator's own test table exercises version skew, and drax replays it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Final


@dataclass(slots=True, frozen=True)
class GateSpec:
    attr: str
    default: bool
    stage: str  # "Alpha", "Beta" or "GA" at 1.37
    locked: bool = False  # LockToDefault in 1.37


# Gate name -> its FeatureGates attribute and 1.37.2 stage (pkg/features/kube_features.go).
GATES: Final = {
    "DRAPrioritizedList": GateSpec("prioritized_list", True, "GA", locked=True),
    "DRAAdminAccess": GateSpec("admin_access", True, "GA", locked=True),
    "DRAPartitionableDevices": GateSpec("partitionable_devices", True, "Beta"),
    "DRADeviceTaints": GateSpec("device_taints", True, "GA"),
    "DRAConsumableCapacity": GateSpec("consumable_capacity", True, "Beta"),
    "DRADeviceBindingConditions": GateSpec("device_binding_conditions", True, "Beta"),
    "DRAListTypeAttributes": GateSpec("list_type_attributes", False, "Alpha"),
    "DRAExtendedResource": GateSpec("extended_resource", True, "GA", locked=True),
}

# Gate name -> attribute of FeatureGates.
GATE_NAMES: Final = {name: spec.attr for name, spec in GATES.items()}


@dataclass(slots=True, frozen=True)
class FeatureGates:
    prioritized_list: bool = GATES["DRAPrioritizedList"].default
    admin_access: bool = GATES["DRAAdminAccess"].default
    partitionable_devices: bool = GATES["DRAPartitionableDevices"].default
    device_taints: bool = GATES["DRADeviceTaints"].default
    consumable_capacity: bool = GATES["DRAConsumableCapacity"].default
    device_binding_conditions: bool = GATES["DRADeviceBindingConditions"].default
    list_type_attributes: bool = GATES["DRAListTypeAttributes"].default
    extended_resource: bool = GATES["DRAExtendedResource"].default

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
