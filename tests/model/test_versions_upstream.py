"""drax's reading of resource.k8s.io/v1beta1 and v1beta2 against the API server's own.

`upstream_conversion` runs a thin Go main over k8s.io/kubernetes v1.37.2's
scheme: it decodes an object of any served version (with that version's
defaults) and encodes it as v1, as the API server serves it. Every object below, parsed
by drax from its own version, must equal the same object parsed from
upstream's v1. Skips only where `go` is missing.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.model import parse_object
from tests.e2e.build import go_available
from tests.model.upstream_conversion import binary, to_v1

V1BETA1 = "resource.k8s.io/v1beta1"
V1BETA2 = "resource.k8s.io/v1beta2"
TAINT = {"key": "broken", "value": "yes", "effect": "NoSchedule",
         "timeAdded": "2026-01-01T00:00:00Z"}
SELECTOR = {"nodeSelectorTerms": [{"matchExpressions": [
    {"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}


def basic_slice(name: str, *, devices: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": V1BETA1, "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": "gpu.example.com",
                     "pool": {"name": "p", "generation": 3, "resourceSliceCount": 2},
                     "devices": devices, **spec}}


def claim(name: str, requests: list[dict[str, Any]], *, version: str = V1BETA1,
          **devices: Any) -> dict[str, Any]:
    return {"apiVersion": version, "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": requests, **devices}}}


OBJECTS: list[dict[str, Any]] = [
    basic_slice("node-local", nodeName="n1", devices=[
        {"name": "gpu-0", "basic": {
            "attributes": {"model": {"string": "A100"}, "index": {"int": 0},
                           "mig": {"bool": False}, "driverVersion": {"version": "1.2.3"},
                           "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"}},
            "capacity": {"memory": {"value": "40Gi"}},
            "taints": [TAINT]}},
        {"name": "gpu-1", "basic": {"attributes": {}, "capacity": {}}},
        {"name": "gpu-2"},
    ]),
    basic_slice("partitionable", nodeName="n1", sharedCounters=[
        {"name": "gpu-0-counters", "counters": {"memory": {"value": "80Gi"},
                                                "slices": {"value": "7"}}}],
        devices=[
            {"name": f"gpu-0-mig-{i}", "basic": {
                "attributes": {"profile": {"string": "1g.10gb"}},
                "consumesCounters": [{"counterSet": "gpu-0-counters", "counters": {
                    "memory": {"value": "10Gi"}, "slices": {"value": "1"}}}]}}
            for i in range(3)]),
    basic_slice("per-device", perDeviceNodeSelection=True, devices=[
        {"name": "a", "basic": {"nodeName": "n2", "attributes": {"x": {"int": 1}}}},
        {"name": "b", "basic": {"allNodes": True}},
        {"name": "c", "basic": {"nodeSelector": SELECTOR, "bindsToNode": True,
                                "bindingConditions": ["ready"],
                                "bindingFailureConditions": ["failed"],
                                "allowMultipleAllocations": True,
                                "capacity": {"bandwidth": {"value": "100G", "requestPolicy": {
                                    "default": "10G", "validRange": {
                                        "min": "1G", "max": "100G", "step": "1G"}}}}}},
    ]),
    basic_slice("everywhere", nodeName="", allNodes=True, devices=[{"name": "d", "basic": {}}]),
    basic_slice("selected", nodeSelector=SELECTOR, allNodes=False,
                devices=[{"name": "d", "basic": {"attributes": {"k": {"string": "v"}}}}]),
    claim("plain", [{"name": "gpu", "deviceClassName": "gpu"}]),
    claim("everything", [
        {"name": "a", "deviceClassName": "gpu", "count": 3,
         "selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}],
         "tolerations": [{"key": "broken", "operator": "Exists", "effect": "NoSchedule"}],
         "capacity": {"requests": {"memory": "10Gi"}}},
        {"name": "b", "deviceClassName": "gpu", "allocationMode": "All", "adminAccess": True},
        {"name": "c", "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu", "count": 4},
            {"name": "small", "deviceClassName": "gpu", "allocationMode": "ExactCount"},
            {"name": "any", "deviceClassName": "gpu", "allocationMode": "All",
             "selectors": [{"cel": {"expression": "true"}}]}]},
        {"name": "d", "deviceClassName": "gpu", "selectors": []},
    ], constraints=[{"requests": ["a", "c"], "matchAttribute": "gpu.example.com/model"},
                    {"distinctAttribute": "gpu.example.com/index"}],
        config=[{"requests": ["a"], "opaque": {"driver": "gpu.example.com",
                                               "parameters": {"sharing": "time"}}}]),
    {**claim("allocated", [{"name": "gpu", "deviceClassName": "gpu", "count": 2}]),
     "metadata": {"name": "allocated", "namespace": "default", "uid": "u1",
                  "resourceVersion": "7"},
     "status": {"allocation": {
         "devices": {"results": [
             {"request": "gpu", "driver": "gpu.example.com", "pool": "p", "device": "gpu-0"},
             {"request": "gpu", "driver": "gpu.example.com", "pool": "p", "device": "gpu-1",
              "adminAccess": False}]},
         "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
             {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}},
         "reservedFor": [{"resource": "pods", "name": "p", "uid": "pod-uid"}]}},
    {"apiVersion": V1BETA1, "kind": "ResourceClaimTemplate",
     "metadata": {"name": "t", "namespace": "default"},
     "spec": {"metadata": {"labels": {"team": "a"}}, "spec": {"devices": {"requests": [
         {"name": "g", "deviceClassName": "gpu", "count": 2},
         {"name": "n", "firstAvailable": [{"name": "x", "deviceClassName": "nic"}]}]}}}},
    {"apiVersion": V1BETA1, "kind": "DeviceClass", "metadata": {"name": "gpu"},
     "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}],
              "extendedResourceName": "example.com/gpu",
              "config": [{"opaque": {"driver": "gpu.example.com", "parameters": {}}}]}},
    {"apiVersion": V1BETA2, "kind": "ResourceSlice", "metadata": {"name": "b2"},
     "spec": {"driver": "gpu.example.com", "nodeName": "n1",
              "pool": {"name": "p", "resourceSliceCount": 1},
              "devices": [{"name": "d", "attributes": {"a": {"int": 1}},
                           "capacity": {"memory": {"value": "1Gi"}}, "taints": [TAINT]}]}},
    claim("b2", [{"name": "a", "exactly": {"deviceClassName": "gpu", "count": 2}},
                 {"name": "b", "firstAvailable": [{"name": "x", "deviceClassName": "gpu"}]}],
          version=V1BETA2),
    {"apiVersion": V1BETA2, "kind": "DeviceClass", "metadata": {"name": "b2"},
     "spec": {"selectors": [{"cel": {"expression": "true"}}]}},
]


@pytest.fixture(scope="module")
def oracle() -> None:
    if not go_available():
        pytest.skip("the conversion oracle needs `go` on PATH to build upstream's scheme")
    binary()


@pytest.mark.usefixtures("oracle")
def test_every_object_reads_as_the_api_server_converts_it() -> None:
    converted = to_v1(OBJECTS)
    assert len(converted) == len(OBJECTS)
    for ours, theirs in zip(OBJECTS, converted, strict=True):
        assert "error" not in theirs, (ours, theirs)
        assert theirs["apiVersion"] == "resource.k8s.io/v1"
        kind = ours["kind"]
        assert parse_object(kind, ours) == parse_object(kind, theirs), ours["metadata"]
