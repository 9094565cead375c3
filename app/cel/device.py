"""The CEL view of a device (`device.driver`, `.attributes`, `.capacity`, ...), built once.

The model keys attributes and capacities fully qualified
(`gpu.nvidia.com/productName`); CEL sees `domain -> id -> value`, split at the
first `/`. Values are converted before evaluation as the scheduler does:
versions become `Semver`, capacities `CelQuantity`. A device whose
attributes cannot be converted fails every expression, so the conversion
error is kept on the view instead of raising here.

The outer maps default to an empty map for unknown domains while `in`,
`size()` and iteration see only real domains (`DomainMap`). Views are cached
per Device object (`id()` plus a reference, so an id cannot be reused while
cached): a Device is immutable and a new version is a new object.
"""

from __future__ import annotations

import threading
from itertools import islice
from typing import Any, Final

from app.cel.quantity import from_model
from app.cel.semver import SemverError, parse_semver
from app.cel.values import StringKeyMap
from app.model import Device

VIEW_CACHE_SIZE: Final = 1 << 16
_EMPTY: Final = StringKeyMap()


class DomainMap(dict[str, StringKeyMap]):
    """`device.attributes` / `device.capacity`: unknown domains read as `{}`."""

    __slots__ = ()

    def __missing__(self, key: str) -> StringKeyMap:
        return _EMPTY


class DeviceView:
    __slots__ = ("allowMultipleAllocations", "attributes", "capacity", "device_id", "driver",
                 "error")

    CEL_KIND = "kubernetes.DRADevice"

    def __init__(self, device: Device) -> None:
        self.driver = device.driver
        self.device_id = device.id
        self.allowMultipleAllocations = device.allow_multiple_allocations
        self.error: str | None = None
        self.attributes = DomainMap()
        self.capacity = DomainMap()
        for name, attr in device.attributes.items():
            domain, _, ident = name.partition("/")
            try:
                value = _attribute_value(attr.kind, attr.value)
            except ValueError as exc:
                self.error = self.error or f"attribute {_display(name, device.driver)}: {exc}"
                continue
            self.attributes.setdefault(domain, StringKeyMap())[ident] = value
        for name, cap in device.capacity.items():
            domain, _, ident = name.partition("/")
            self.capacity.setdefault(domain, StringKeyMap())[ident] = from_model(cap.value)


def _display(name: str, driver: str) -> str:
    prefix = f"{driver}/"
    return name[len(prefix):] if name.startswith(prefix) else name


def _attribute_value(kind: str, value: Any) -> Any:
    if kind in ("int", "bool", "string"):
        return value
    if kind in ("ints", "bools", "strings"):
        return tuple(value)
    if kind == "version":
        return _version(value)
    if kind == "versions":
        return tuple(_version(v) for v in value)
    raise ValueError("unsupported attribute value")


def _version(text: str) -> Any:
    try:
        return parse_semver(text)
    except SemverError as exc:
        raise ValueError(f"parse semantic version: {exc}") from None


# id(device) -> (device, view). Reads are plain dict lookups (atomic under the GIL, no
# lock on the hot path); holding the device keeps its id from being reused while cached.
# When full, the oldest half goes: views are cheap to rebuild, lookups must be cheap.
_views: dict[int, tuple[Device, DeviceView]] = {}
_lock = threading.Lock()


def device_view(device: Device) -> DeviceView:
    hit = _views.get(id(device))
    if hit is not None and hit[0] is device:
        return hit[1]
    view = DeviceView(device)
    with _lock:
        if len(_views) >= VIEW_CACHE_SIZE:
            for key in list(islice(_views, VIEW_CACHE_SIZE // 2)):
                del _views[key]
        _views[id(device)] = (device, view)
    return view
