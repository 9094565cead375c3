"""The capacity shapes the metrics count: the `capacity:` config section.

Each shape is a pod asking for `gpus` GPUs and `nics` NICs (optionally on one
PCIe root); `parse_capacity` reads the section with an error naming the bad
entry, and `DEFAULT_SHAPES` applies when it names none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from app.capacity.fits import GPU_CLASS, NIC_CLASS, ROOT_ATTRIBUTE, gpu_shape
from app.config import reject_unknown_keys
from app.model import ResourceClaim


@dataclass(slots=True, frozen=True)
class CapacityShape:
    """One entry of `capacity.shapes`: a pod asking for `gpus` GPUs and `nics` NICs."""

    name: str
    gpus: int
    nics: int = 0
    same_root: bool = False
    gpu_class: str = GPU_CLASS
    nic_class: str = NIC_CLASS

    def claim(self) -> ResourceClaim:
        return gpu_shape(gpus=self.gpus, nics=self.nics, same_root=self.same_root,
                         gpu_class=self.gpu_class, nic_class=self.nic_class,
                         root_attribute=ROOT_ATTRIBUTE)


DEFAULT_SHAPES: Final = (
    CapacityShape(name="1-gpu", gpus=1),
    CapacityShape(name="2-gpu-1-nic-same-root", gpus=2, nics=1, same_root=True),
    CapacityShape(name="8-gpu", gpus=8),
)
_SHAPE_KEYS: Final = ("name", "gpus", "nics", "same_root", "gpu_class", "nic_class")


def parse_capacity(section: Mapping[str, Any]) -> tuple[CapacityShape, ...]:
    """The `capacity:` config section; ValueError names the bad entry."""
    reject_unknown_keys("capacity", section, ("shapes",))
    raw = section.get("shapes")
    if raw is None:
        return DEFAULT_SHAPES
    if not isinstance(raw, list):
        raise ValueError(f"capacity.shapes: expected a list, got {raw!r}")
    shapes = []
    for i, entry in enumerate(raw):
        where = f"capacity.shapes[{i}]"
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where}: expected a mapping, got {entry!r}")
        reject_unknown_keys(where, entry, _SHAPE_KEYS)
        name, gpus, nics = entry.get("name"), entry.get("gpus"), entry.get("nics", 0)
        same_root = entry.get("same_root", False)
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}.name: expected a non-empty string, got {name!r}")
        if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
            raise ValueError(f"{where}.gpus: expected an integer >= 1, got {gpus!r}")
        if isinstance(nics, bool) or not isinstance(nics, int) or nics < 0:
            raise ValueError(f"{where}.nics: expected an integer >= 0, got {nics!r}")
        if not isinstance(same_root, bool) or (same_root and not nics):
            raise ValueError(f"{where}.same_root: expected true (with nics) or false, "
                             f"got {same_root!r}")
        shapes.append(CapacityShape(
            name=name, gpus=gpus, nics=nics, same_root=same_root,
            gpu_class=str(entry.get("gpu_class", GPU_CLASS)),
            nic_class=str(entry.get("nic_class", NIC_CLASS))))
    if len({s.name for s in shapes}) != len(shapes):
        raise ValueError("capacity.shapes: shape names must be unique")
    return tuple(shapes)
