"""Bind of a pod whose extended resources DRA serves, against the API double:
the special claim is created as the scheduler creates it, the pod's status
names it, and a failed bind leaves neither behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.allocator.types import ClaimAllocation
from app.binder import FINALIZER, BindMetrics, KubeBinder
from app.extender import BindError
from app.extender.extended import (
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    ExtendedClaim,
    extended_claim,
    needs_of,
)
from app.model import Pod, parse_object
from app.model.parse import parse_device_class
from tests.kube.harness import KubeHarness, pod, unstamped
from tests.kube.test_kube_binder import allocation

GPU = "nvidia.com/gpu"


def gpu_pod() -> dict[str, Any]:
    obj = pod("p1")
    obj["spec"]["containers"] = [{"name": "train", "resources": {"limits": {GPU: "2"}}}]
    return obj


def special_for(p: Pod) -> ExtendedClaim:
    classes = {"gpu.nvidia.com": parse_device_class({
        "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
        "spec": {"extendedResourceName": GPU}})}
    needs = needs_of(p, classes)
    assert needs is not None
    return extended_claim(p, needs, (GPU,))


async def test_bind_creates_the_special_claim_and_writes_the_pod_status(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        assert h.client is not None
        binder = KubeBinder(h.client, metrics=BindMetrics(h.registry))
        p: Pod = parse_object("Pod", h.server.create("pods", gpu_pod()))
        special = special_for(p)
        chosen = allocation("node-a", "gpu-0", "gpu-1")
        name = await binder.bind(pod=p, node="node-a", reserve=[], extended=special,
                                 allocations=[ClaimAllocation(special.claim.key, chosen)])
        assert name is not None and name.startswith("p1-extended-resources-")
        [sent] = h.server.created
        assert sent["metadata"]["generateName"] == "p1-extended-resources-"
        assert "name" not in sent["metadata"]
        assert sent["metadata"]["annotations"] == {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"}
        assert sent["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Pod", "name": "p1", "uid": "uid-p1",
             "controller": True}]
        assert sent["spec"] == {"devices": {"requests": [{
            "name": "container-0-request-0", "exactly": {
                "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount",
                "count": 2}}]}}
        stored = h.server.get("resourceclaims", name, "default")
        assert stored["metadata"]["finalizers"] == [FINALIZER]
        assert unstamped(stored["status"]["allocation"]) == chosen.to_dict()
        assert stored["status"]["reservedFor"] == [
            {"resource": "pods", "name": "p1", "uid": "uid-p1"}]
        bound = h.server.get("pods", "p1", "default")
        assert bound["status"]["extendedResourceClaimStatus"] == {
            "resourceClaimName": name, "requestMappings": [{
                "containerName": "train", "resourceName": GPU,
                "requestName": "container-0-request-0"}]}
        assert bound["spec"]["nodeName"] == "node-a"
        parsed = parse_object("Pod", bound)
        assert parsed.extended_resource_claim_status is not None
        assert parsed.extended_resource_claim_status.resource_claim_name == name


async def test_a_failed_binding_deletes_the_claim_and_clears_the_status(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        assert h.client is not None
        binder = KubeBinder(h.client, metrics=BindMetrics(h.registry))
        p: Pod = parse_object("Pod", h.server.create("pods", gpu_pod()))
        special = special_for(p)
        h.server.faults.binding_failures = 5  # every attempt
        try:
            await binder.bind(pod=p, node="node-a", reserve=[], extended=special,
                              allocations=[ClaimAllocation(
                                  special.claim.key, allocation("node-a", "gpu-0", "gpu-1"))])
        except BindError as exc:
            assert "claim writes undone" in str(exc)
        else:
            raise AssertionError("bind succeeded although the binding failed")
        assert h.server.store["resourceclaims"] == {}
        [(_, _, deleted)] = h.server.deleted
        assert deleted.startswith("p1-extended-resources-")
        assert "extendedResourceClaimStatus" not in (
            h.server.get("pods", "p1", "default").get("status") or {})
        assert not h.server.get("pods", "p1", "default")["spec"].get("nodeName")


async def test_kube_mode_filter_and_bind_then_the_watch_brings_the_claim(tmp_path: Path
                                                                         ) -> None:
    from app.extender import Extender
    from app.features import FeatureGates
    from tests.kube.harness import device_class, eventually, gpu_slice, node

    async with KubeHarness(tmp_path) as h:
        assert h.client is not None
        ext = Extender(h.inventory, features=FeatureGates(), mode="allocator",
                       binder=KubeBinder(h.client, metrics=BindMetrics(h.registry)))
        h.server.create("nodes", node("node-a"))
        h.server.create("resourceslices", gpu_slice("node-a", 3))
        mapped = device_class()
        mapped["spec"]["extendedResourceName"] = GPU
        h.server.create("deviceclasses", mapped)
        first = parse_object("Pod", h.server.create("pods", gpu_pod()))
        second_obj = gpu_pod()
        second_obj["metadata"] = {"name": "p2", "namespace": "default", "uid": "uid-p2"}
        second = parse_object("Pod", h.server.create("pods", second_obj))
        h.watch()
        await h.synced()
        assert ext.filter(first, ["node-a"]).passed == ["node-a"]
        assert await ext.bind(namespace="default", name="p1", uid="uid-p1",
                              node="node-a") is None
        # held under the created name at once, then by the watched claim itself
        assert ext.filter(second, ["node-a"]).failed == {"node-a": (
            f"{GPU}: 2 requested, 1 device of class gpu free on this node")}
        [made] = [c for c in h.server.store["resourceclaims"].values()]
        key = f"default/{made['metadata']['name']}"
        await eventually(lambda: h.inventory.assumed_claims() == [],
                         "the watched allocation to confirm the assumption")
        watched = h.inventory.claim(key)
        assert watched is not None and watched.allocation is not None
        assert ext.filter(second, ["node-a"]).failed["node-a"].startswith(f"{GPU}: 2 requested")
