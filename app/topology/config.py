"""What the topology scoring reads from the `topology:` section of the config.

Drivers name NUMA differently (the standard `resource.kubernetes.io/numaNode`
is new; dranet, the CPU and memory drivers and NVIDIA VFIO devices each have
their own name), so NUMA and PCIe-root attributes are alias lists tried in
order. How a NIC is told from an accelerator is configurable for the same
reason. Validation happens here, once, so the scorer never meets a bad value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from app.config import reject_unknown_keys

PACKING_POLICIES: Final = ("binpack", "spread")

# A name without a domain ("numaNode") means "<the device's driver>/numaNode":
# AMD's GPU driver and others publish it unqualified.
DEFAULT_NUMA_ATTRIBUTES: Final = (
    "resource.kubernetes.io/numaNode",
    "dra.net/numaNode",
    "gpu.nvidia.com/numa",
    "numaNode",
    "dra.cpu/numaNodeID",
    "dra.memory/numaNode",
)
DEFAULT_PCIE_ROOT_ATTRIBUTES: Final = ("resource.kubernetes.io/pcieRoot",)
# Any of these attributes marks a network device, whatever its driver.
DEFAULT_NIC_ATTRIBUTES: Final = ("dra.net/rdma", "dra.net/rdmaDevice", "dra.net/ifName")
DEFAULT_NIC_DRIVERS: Final = ("dra.net",)

_KEYS: Final = ("numa_attributes", "pcie_root_attributes", "nic_attributes", "nic_drivers",
                "weights", "packing")


@dataclass(slots=True, frozen=True)
class TopologyConfig:
    """Alias tables, NIC detection, and the scoring policy.

    `locality_weight` and `packing_weight` trade the finer locality measures
    (GPU↔NIC pairing, how close the devices are) against packing inside one
    locality tier; the tier itself (one PCIe root > one NUMA node > spanning)
    always comes first (see docs/scoring.md).
    """

    numa_attributes: tuple[str, ...] = DEFAULT_NUMA_ATTRIBUTES
    pcie_root_attributes: tuple[str, ...] = DEFAULT_PCIE_ROOT_ATTRIBUTES
    nic_attributes: tuple[str, ...] = DEFAULT_NIC_ATTRIBUTES
    nic_drivers: tuple[str, ...] = DEFAULT_NIC_DRIVERS
    locality_weight: float = 1.0
    packing_weight: float = 1.0
    packing: str = "binpack"

    def __post_init__(self) -> None:
        if self.packing not in PACKING_POLICIES:
            raise ValueError(f"topology.packing: {self.packing!r} is not one of "
                             f"{', '.join(PACKING_POLICIES)}")
        for name in ("locality_weight", "packing_weight"):
            value = getattr(self, name)
            if not value >= 0:
                raise ValueError(f"topology.weights: {name.removesuffix('_weight')} must be "
                                 f">= 0, got {value!r}")
        if self.locality_weight + self.packing_weight == 0:
            raise ValueError("topology.weights: locality and packing cannot both be 0")

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> TopologyConfig:
        """Build from the `topology:` config section; missing keys keep their
        defaults, unknown keys and wrong types raise ValueError naming the key."""
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise ValueError(f"topology: expected a mapping, got {type(raw).__name__}")
        reject_unknown_keys("topology", raw, _KEYS)
        values: dict[str, Any] = {}
        for key in ("numa_attributes", "pcie_root_attributes", "nic_attributes", "nic_drivers"):
            if key in raw:
                values[key] = _names(raw[key], f"topology.{key}")
        if "weights" in raw:
            values.update(_weights(raw["weights"]))
        if "packing" in raw:
            if not isinstance(raw["packing"], str):
                raise ValueError("topology.packing: expected a string")
            values["packing"] = raw["packing"]
        return cls(**values)


def _names(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(
            isinstance(v, str) and v for v in value):
        raise ValueError(f"{where}: expected a list of attribute/driver names")
    return tuple(value)


def _weights(value: Any) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise ValueError("topology.weights: expected a mapping with locality and packing")
    reject_unknown_keys("topology.weights", value, ("locality", "packing"))
    out: dict[str, float] = {}
    for key in ("locality", "packing"):
        if key in value:
            weight = value[key]
            if isinstance(weight, bool) or not isinstance(weight, int | float):
                raise ValueError(f"topology.weights.{key}: expected a number")
            out[f"{key}_weight"] = float(weight)
    return out
