"""Older resource.k8s.io versions, read as the API server converts them to v1.

Files (a `kubectl get -o yaml` of an older cluster, manifests written for an
older release) may carry DRA objects of `resource.k8s.io/v1beta1` or
`v1beta2`. The API server keeps one internal form and serves every version
by conversion (k8s.io/kubernetes v1.37.2, pkg/apis/resource/v1beta1 and
v1beta2: `conversion.go`, `defaults.go`); the same mapping applied to the raw
object here lets the one v1 parser read them all:

- `v1beta2` has v1's schema field for field (its conversions are all
  generated, none by hand): read as is.
- `v1beta1` differs in three places, converted as upstream's hand-written
  functions do:
  - a device's fields sit under `basic` (`Convert_v1beta1_Device_To_resource_Device`);
  - a request's exact-count fields sit on the request itself; when any is
    set they become its `exactly`, after v1beta1's own defaulting
    (`allocationMode: ExactCount` and `count: 1` when a class is named);
  - a slice's `nodeName: ""` and `allNodes: false` mean unset.
  A v1 field in a v1beta1 object (`exactly`, a device attribute outside
  `basic`) is an unknown field there: an error, as with the API server's
  strict field validation, rather than silently dropped.

Any other version of the group is unsupported, and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from app.model.objects import InvalidObject

GROUP: Final = "resource.k8s.io"
V1BETA1: Final = f"{GROUP}/v1beta1"
READ_AS_V1: Final = frozenset({f"{GROUP}/v1", f"{GROUP}/v1beta2"})
DRA_KINDS: Final = frozenset({"DeviceClass", "ResourceSlice", "ResourceClaim",
                              "ResourceClaimTemplate"})
SUPPORTED: Final = "resource.k8s.io/v1, v1beta2 and v1beta1"

# BasicDevice's fields that Convert_v1beta1_Device_To_resource_Device lifts.
_BASIC_FIELDS: Final = ("attributes", "capacity", "consumesCounters", "nodeName",
                        "nodeSelector", "allNodes", "taints", "bindsToNode",
                        "bindingConditions", "bindingFailureConditions",
                        "allowMultipleAllocations", "nodeAllocatableResources")
_DEVICE_FIELDS: Final = frozenset({"name", "basic"})
# The v1beta1 request fields that make up v1's ExactDeviceRequest.
_EXACT_FIELDS: Final = ("deviceClassName", "selectors", "allocationMode", "count",
                        "adminAccess", "tolerations", "capacity", "derivedAttributes")
_REQUEST_FIELDS: Final = frozenset({"name", "firstAvailable", *_EXACT_FIELDS})
_EXACT_COUNT: Final = "ExactCount"


def as_v1(kind: str, obj: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    """`obj` in resource.k8s.io/v1's schema; raises InvalidObject for a version
    drax does not read. Objects without an apiVersion (list items) are v1."""
    version = obj.get("apiVersion")
    if kind not in DRA_KINDS or version is None or version in READ_AS_V1:
        return obj
    if version == V1BETA1:
        return _FROM_V1BETA1[kind](obj, where)
    raise InvalidObject(f"{where}: unsupported apiVersion {version!r}; drax reads "
                        f"{SUPPORTED}")


def _resource_slice(obj: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return obj
    out = dict(spec)
    if out.get("nodeName") == "":
        del out["nodeName"]
    if out.get("allNodes") is False:
        del out["allNodes"]
    devices = out.get("devices")
    if isinstance(devices, list):
        out["devices"] = [_device(d, f"{where} spec.devices[{i}]")
                          for i, d in enumerate(devices)]
    return {**obj, "spec": out}


def _device(raw: Any, what: str) -> Any:
    if not isinstance(raw, Mapping):
        return raw
    _no_unknown(raw, _DEVICE_FIELDS, what)
    out = {"name": raw["name"]} if "name" in raw else {}
    basic = raw.get("basic")
    if isinstance(basic, Mapping):
        for field in _BASIC_FIELDS:
            value = basic.get(field)
            if value is not None and (value or field not in ("attributes", "capacity")):
                out[field] = value
    return out


def _resource_claim(obj: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return obj
    return {**obj, "spec": _claim_spec(spec, f"{where} spec")}


def _resource_claim_template(obj: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    spec = obj.get("spec")
    inner = spec.get("spec") if isinstance(spec, Mapping) else None
    if not isinstance(spec, Mapping) or not isinstance(inner, Mapping):
        return obj
    return {**obj, "spec": {**spec, "spec": _claim_spec(inner, f"{where} spec.spec")}}


def _claim_spec(spec: Mapping[str, Any], what: str) -> Mapping[str, Any]:
    devices = spec.get("devices")
    requests = devices.get("requests") if isinstance(devices, Mapping) else None
    if not isinstance(devices, Mapping) or not isinstance(requests, list):
        return spec
    converted = [_request(r, f"{what}.devices.requests[{i}]") for i, r in enumerate(requests)]
    return {**spec, "devices": {**devices, "requests": converted}}


def _request(raw: Any, what: str) -> Any:
    """Convert_v1beta1_DeviceRequest_To_resource_DeviceRequest, after SetDefaults_DeviceRequest."""
    if not isinstance(raw, Mapping):
        return raw
    _no_unknown(raw, _REQUEST_FIELDS, what)
    out = {k: raw[k] for k in ("name", "firstAvailable") if k in raw}
    exact = {k: raw[k] for k in _EXACT_FIELDS if raw.get(k) is not None}
    if exact.get("deviceClassName"):
        exact.setdefault("allocationMode", _EXACT_COUNT)
        if exact["allocationMode"] == _EXACT_COUNT and not exact.get("count"):
            exact["count"] = 1
    if _any_set(exact):
        out["exactly"] = exact
    return out


def _any_set(exact: Mapping[str, Any]) -> bool:
    """hasAnyMainRequestFieldsSet: strings and the count count when not empty or
    zero, the others (selectors, adminAccess, ...) whenever present."""
    return any(value not in ("", 0) if key in ("deviceClassName", "allocationMode", "count")
               else True for key, value in exact.items())


def _no_unknown(raw: Mapping[str, Any], known: frozenset[str], what: str) -> None:
    unknown = sorted(str(k) for k in raw if k not in known)
    if unknown:
        raise InvalidObject(f"{what}: unknown field(s) {', '.join(unknown)} in {V1BETA1} "
                            "(a v1 object? set apiVersion: resource.k8s.io/v1)")


def _device_class(obj: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    return obj


_FROM_V1BETA1: Final[dict[str, Callable[[Mapping[str, Any], str], Mapping[str, Any]]]] = {
    "DeviceClass": _device_class,
    "ResourceSlice": _resource_slice,
    "ResourceClaim": _resource_claim,
    "ResourceClaimTemplate": _resource_claim_template,
}
