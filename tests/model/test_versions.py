"""resource.k8s.io/v1beta1 and v1beta2 objects read as the API server converts them to v1."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.model import InvalidObject, parse_object

V1 = "resource.k8s.io/v1"
V1BETA1 = "resource.k8s.io/v1beta1"
V1BETA2 = "resource.k8s.io/v1beta2"

ATTRS = {"model": {"string": "A100"}, "index": {"int": 0}}
CAPACITY = {"memory": {"value": "40Gi"}}
TAINT = {"key": "broken", "value": "yes", "effect": "NoSchedule",
         "timeAdded": "2026-01-01T00:00:00Z"}


def resource_slice(version: str, devices: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": version, "kind": "ResourceSlice", "metadata": {"name": "s"},
            "spec": {"driver": "gpu.example.com", "pool": {"name": "p", "resourceSliceCount": 1},
                     "devices": devices, **spec}}


def claim(version: str, requests: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": version, "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {"devices": {"requests": requests,
                                 "constraints": [{"requests": ["a"],
                                                  "matchAttribute": "gpu.example.com/model"}]}}}


def parse(obj: dict[str, Any]) -> Any:
    return parse_object(obj["kind"], obj)


def test_a_v1beta1_slice_reads_its_basic_devices() -> None:
    old = resource_slice(V1BETA1, [
        {"name": "gpu-0", "basic": {"attributes": ATTRS, "capacity": CAPACITY,
                                    "taints": [TAINT]}},
        {"name": "gpu-1", "basic": {"attributes": {}, "consumesCounters": [
            {"counterSet": "mem", "counters": {"memory": {"value": "10Gi"}}}]}},
        {"name": "gpu-2"},
    ], nodeName="n", sharedCounters=[{"name": "mem", "counters": {"memory": {"value": "80Gi"}}}])
    new = resource_slice(V1, [
        {"name": "gpu-0", "attributes": ATTRS, "capacity": CAPACITY, "taints": [TAINT]},
        {"name": "gpu-1", "consumesCounters": [
            {"counterSet": "mem", "counters": {"memory": {"value": "10Gi"}}}]},
        {"name": "gpu-2"},
    ], nodeName="n", sharedCounters=[{"name": "mem", "counters": {"memory": {"value": "80Gi"}}}])
    assert parse(old) == parse(new)
    assert parse(old).devices[0].attributes == parse(new).devices[0].attributes != {}


def test_a_v1beta1_slice_with_an_empty_node_name_is_not_node_local() -> None:
    # v1beta1's nodeName and allNodes are plain fields: "" and false mean unset
    old = resource_slice(V1BETA1, [{"name": "d", "basic": {}}], nodeName="", allNodes=True)
    assert parse(old) == parse(resource_slice(V1, [{"name": "d"}], allNodes=True))
    old = resource_slice(V1BETA1, [{"name": "d", "basic": {}}], nodeName="n", allNodes=False)
    assert parse(old) == parse(resource_slice(V1, [{"name": "d"}], nodeName="n"))


def test_a_v1beta1_request_becomes_exactly_with_v1beta1_defaults() -> None:
    old = claim(V1BETA1, [
        {"name": "a", "deviceClassName": "gpu",
         "selectors": [{"cel": {"expression": "true"}}], "adminAccess": False},
        {"name": "b", "deviceClassName": "gpu", "allocationMode": "All"},
        {"name": "c", "deviceClassName": "gpu", "count": 3,
         "tolerations": [{"key": "broken", "operator": "Exists"}],
         "capacity": {"requests": {"memory": "10Gi"}}},
        {"name": "d", "firstAvailable": [{"name": "big", "deviceClassName": "gpu", "count": 2},
                                         {"name": "small", "deviceClassName": "gpu"}]},
    ])
    new = claim(V1, [
        {"name": "a", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount",
                                  "count": 1, "selectors": [{"cel": {"expression": "true"}}],
                                  "adminAccess": False}},
        {"name": "b", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}},
        {"name": "c", "exactly": {"deviceClassName": "gpu", "count": 3,
                                  "tolerations": [{"key": "broken", "operator": "Exists"}],
                                  "capacity": {"requests": {"memory": "10Gi"}}}},
        {"name": "d", "firstAvailable": [{"name": "big", "deviceClassName": "gpu", "count": 2},
                                         {"name": "small", "deviceClassName": "gpu"}]},
    ])
    assert parse(old) == parse(new)


def test_a_v1beta1_template_converts_its_requests() -> None:
    old = {"apiVersion": V1BETA1, "kind": "ResourceClaimTemplate",
           "metadata": {"name": "t", "namespace": "default"},
           "spec": {"metadata": {"labels": {"a": "b"}},
                    "spec": {"devices": {"requests": [{"name": "g", "deviceClassName": "gpu",
                                                       "count": 2}]}}}}
    new = copy.deepcopy(old)
    new["apiVersion"] = V1
    new["spec"]["spec"]["devices"]["requests"] = [
        {"name": "g", "exactly": {"deviceClassName": "gpu", "count": 2}}]
    assert parse(old) == parse(new)


def test_a_request_with_both_forms_is_invalid_as_upstream_validation_finds() -> None:
    # upstream converts a main field next to firstAvailable into exactly, and
    # validation then rejects the request
    old = claim(V1BETA1, [{"name": "a", "count": 2,
                           "firstAvailable": [{"name": "x", "deviceClassName": "gpu"}]}])
    with pytest.raises(InvalidObject, match="exactly one of exactly, firstAvailable"):
        parse(old)


def test_v1beta2_is_v1s_schema() -> None:
    for obj in (resource_slice(V1, [{"name": "d", "attributes": ATTRS}], nodeName="n"),
                claim(V1, [{"name": "a", "exactly": {"deviceClassName": "gpu", "count": 2}}])):
        assert parse({**obj, "apiVersion": V1BETA2}) == parse(obj)


def test_v1_fields_in_a_v1beta1_object_are_unknown_fields() -> None:
    with pytest.raises(InvalidObject, match=r"ResourceClaim default/c spec.devices.requests\[0\]"
                                            r": unknown field\(s\) exactly in "
                                            r"resource.k8s.io/v1beta1"):
        parse(claim(V1BETA1, [{"name": "a", "exactly": {"deviceClassName": "gpu"}}]))
    with pytest.raises(InvalidObject, match=r"ResourceSlice s spec.devices\[0\]: unknown "
                                            r"field\(s\) attributes"):
        parse(resource_slice(V1BETA1, [{"name": "d", "attributes": ATTRS}], nodeName="n"))


@pytest.mark.parametrize("version", ["resource.k8s.io/v1alpha3", "resource.k8s.io/v2", "v1"])
def test_other_versions_are_unsupported(version: str) -> None:
    with pytest.raises(InvalidObject, match=f"ResourceSlice s: unsupported apiVersion "
                                            f"'{version}'; drax reads resource.k8s.io/v1, "
                                            "v1beta2 and v1beta1"):
        parse(resource_slice(version, [{"name": "d"}], nodeName="n"))


def test_device_classes_are_alike_in_every_version() -> None:
    new = {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": "gpu"},
           "spec": {"selectors": [{"cel": {"expression": "true"}}],
                    "extendedResourceName": "example.com/gpu"}}
    assert parse({**new, "apiVersion": V1BETA1}) == parse({**new, "apiVersion": V1BETA2}) \
        == parse(new)
