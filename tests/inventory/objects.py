"""Raw API objects for inventory and extender tests, in the shape sources deliver."""

from __future__ import annotations

from typing import Any


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name, "labels": labels}}


def device(name: str, **attributes: Any) -> dict[str, Any]:
    attrs = {}
    for key, value in attributes.items():
        kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) \
            else "string"
        attrs[key] = {kind: value}
    return {"name": name, "attributes": attrs}


def resource_slice(name: str, *, driver: str = "gpu.example.com", pool: str | None = None,
                   node_name: str | None = None, generation: int = 1, count: int = 1,
                   devices: list[dict[str, Any]] | None = None,
                   shared_counters: list[dict[str, Any]] | None = None,
                   **selection: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool or name, "generation": generation,
                 "resourceSliceCount": count},
        "devices": devices if devices is not None else [],
    }
    if shared_counters:
        spec["sharedCounters"] = shared_counters
    if node_name is not None:
        spec["nodeName"] = node_name
    spec.update(selection)
    return {"kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def device_class(name: str, *expressions: str) -> dict[str, Any]:
    return {"kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]}}


def result(request: str, device_id: str, **extra: Any) -> dict[str, Any]:
    driver, pool, name = device_id.rsplit("/", 2)
    return {"request": request, "driver": driver, "pool": pool, "device": name, **extra}


def claim(name: str, *, namespace: str = "default", requests: list[dict[str, Any]] | None = None,
          constraints: list[dict[str, Any]] | None = None,
          results: list[dict[str, Any]] | None = None,
          node_selector: dict[str, Any] | None = None,
          reserved_for: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "kind": "ResourceClaim", "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": requests or [], "constraints": constraints or []}},
    }
    if results is not None:
        allocation: dict[str, Any] = {"devices": {"results": results}}
        if node_selector is not None:
            allocation["nodeSelector"] = node_selector
        obj["status"] = {"allocation": allocation, "reservedFor": reserved_for or []}
    return obj


def exactly(name: str, device_class_name: str, *, count: int = 1,
            selectors: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": device_class_name, "count": count, **extra}
    if selectors:
        body["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": body}


def template(name: str, *, namespace: str = "default",
             requests: list[dict[str, Any]] | None = None,
             constraints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"kind": "ResourceClaimTemplate", "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": requests or [],
                                          "constraints": constraints or []}}}}


def pod(name: str, *, namespace: str = "default", uid: str = "",
        claims: dict[str, str] | None = None, templates: dict[str, str] | None = None,
        statuses: dict[str, str | None] | None = None) -> dict[str, Any]:
    entries = [{"name": k, "resourceClaimName": v} for k, v in (claims or {}).items()]
    entries += [{"name": k, "resourceClaimTemplateName": v}
                for k, v in (templates or {}).items()]
    obj: dict[str, Any] = {"kind": "Pod",
                           "metadata": {"name": name, "namespace": namespace, "uid": uid},
                           "spec": {"resourceClaims": entries}}
    if statuses is not None:
        obj["status"] = {"resourceClaimStatuses": [
            {"name": k, "resourceClaimName": v} for k, v in statuses.items()]}
    return obj
