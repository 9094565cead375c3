"""The extender verbs over a watched inventory, binding through the API double.

Everything here is real except the API server: the kube source fills the
inventory through kubernetes-asyncio, `Extender` answers filter and bind, and
`KubeBinder` writes through the same client.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from app.binder import BindMetrics, KubeBinder
from app.extender import BindCause, Extender
from app.features import FeatureGates
from app.model import Pod, parse_object
from tests.kube.harness import (
    DRIVER,
    KubeHarness,
    claim,
    device_class,
    eventually,
    gpu_slice,
    node,
    pod,
    unstamped,
)

H100 = f'device.attributes["{DRIVER}"].productName == "H100"'


def extender_for(h: KubeHarness) -> Extender:
    assert h.client is not None
    binder = KubeBinder(h.client, metrics=BindMetrics(h.registry))
    return Extender(h.inventory, features=FeatureGates(), mode="allocator", binder=binder)


def add_pod(h: KubeHarness, obj: dict[str, Any]) -> Pod:
    return parse_object("Pod", h.server.create("pods", obj))


def rack_slice(name: str, rack: str, count: int) -> dict[str, Any]:
    """GPUs reachable from every node labelled `rack` (a network-attached pool)."""
    s = gpu_slice(name, count, name=f"{name}-gpus")
    del s["spec"]["nodeName"]
    s["spec"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "rack", "operator": "In", "values": [rack]}]}]}
    return s


async def one_gpu_passing_pod(h: KubeHarness) -> tuple[Extender, Pod]:
    """One free GPU on node-a and pod p1 (claim c1) that filter passes there."""
    ext = extender_for(h)
    h.server.create("resourceslices", gpu_slice("node-a", 1))
    h.server.create("deviceclasses", device_class())
    h.server.create("resourceclaims", claim("c1"))
    p1 = add_pod(h, pod("p1", "c1"))
    h.watch()
    await h.synced()
    assert ext.filter(p1, ["node-a"]).passed == ["node-a"]
    return ext, p1


def allocated_to(h: KubeHarness, name: str) -> Any:
    return (h.server.get("resourceclaims", name, "default").get("status") or {}).get(
        "allocation")


async def test_filter_answers_not_synced_until_every_initial_list_is_in(tmp_path: Path
                                                                        ) -> None:
    async with KubeHarness(tmp_path) as h:
        ext = extender_for(h)
        h.server.create("nodes", node("node-a"))
        h.server.create("resourceslices", gpu_slice("node-a", 2))
        h.server.create("deviceclasses", device_class())
        h.server.create("resourceclaims", claim("c1"))
        p1 = add_pod(h, pod("p1", "c1"))
        h.server.faults.list_errors = 10_000
        h.watch()
        await eventually(lambda: h.metric("drax_watch_errors_total", kind="Node") >= 2,
                         "failing lists")
        result = ext.filter(p1, ["node-a"])
        assert result.error is not None and "not synced" in result.error
        assert result.passed == [] and not result.failed and not result.unresolvable
        h.server.faults.list_errors = 0
        await h.synced()
        result = ext.filter(p1, ["node-a"])
        assert (result.error, result.passed) == (None, ["node-a"])


async def test_filter_follows_adds_updates_and_deletes_of_every_kind(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        ext = extender_for(h)
        for name in ("node-a", "node-b", "node-c"):
            h.server.create("nodes", node(name))
        h.server.create("resourceslices", gpu_slice("node-a", 2))
        h.server.create("deviceclasses", device_class())
        h.server.create("resourceclaims", claim("c1", selector=H100))
        p1 = add_pod(h, pod("p1", "c1"))
        nodes = ["node-a", "node-b", "node-c"]
        h.watch()
        await h.synced()
        assert ext.filter(p1, nodes).passed == ["node-a"]

        # ResourceSlice: added, then updated to devices the claim does not want.
        h.server.create("resourceslices", gpu_slice("node-b", 2))
        await h.caught_up()
        assert ext.filter(p1, nodes).passed == ["node-a", "node-b"]
        h.server.update("resourceslices", gpu_slice("node-a", 2, generation=2, product="A100"))
        await h.caught_up()
        assert ext.filter(p1, nodes).passed == ["node-b"]

        # Node: a label puts node-c in reach of a rack-wide pool; deleting it makes
        # it unknown.
        h.server.create("resourceslices", rack_slice("rack-1", "r1", 1))
        h.server.update("nodes", node("node-c", rack="r1"))
        await h.caught_up()
        assert ext.filter(p1, nodes).passed == ["node-b", "node-c"]
        h.server.delete("nodes", "node-c")
        await h.caught_up()
        result = ext.filter(p1, nodes)
        assert result.passed == ["node-b"] and "node-c" in result.unresolvable

        # DeviceClass: narrowed to nothing, then deleted.
        h.server.update("deviceclasses", device_class(expression='device.driver == "other"'))
        await h.caught_up()
        assert ext.filter(p1, nodes).passed == []
        h.server.delete("deviceclasses", "gpu")
        await h.caught_up()
        result = ext.filter(p1, nodes)
        assert result.passed == []
        assert "gpu" in next(iter({**result.failed, **result.unresolvable}.values()))
        h.server.create("deviceclasses", device_class())
        await h.caught_up()
        assert ext.filter(p1, nodes).passed == ["node-b"]

        # ResourceClaim: allocated by someone else on node-b's devices (a shared
        # claim now pins the pod there), then deleted.
        allocated = h.server.get("resourceclaims", "c1", "default")
        allocated["status"] = {"allocation": {
            "devices": {"results": [{"request": "gpus", "driver": DRIVER, "pool": "node-b",
                                     "device": "gpu-0"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["node-b"]}]}]}},
            "reservedFor": [{"resource": "pods", "name": "other", "uid": "uid-other"}]}
        h.server.update("resourceclaims", allocated)
        await h.caught_up()
        result = ext.filter(p1, ["node-a", "node-b"])
        assert result.passed == ["node-b"]
        assert "already allocated" in result.unresolvable["node-a"]
        h.server.delete("resourceclaims", "c1", "default")
        await h.caught_up()
        result = ext.filter(p1, ["node-b"])
        assert "ResourceClaim default/c1" in result.unresolvable["node-b"]
        assert "does not exist" in result.unresolvable["node-b"]


async def test_template_claim_not_created_yet_fails_its_nodes(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        ext = extender_for(h)
        h.server.create("resourceslices", gpu_slice("node-a", 2))
        h.server.create("deviceclasses", device_class())
        waiting = add_pod(h, pod("p1", templates={"gpu": None}))
        h.watch()
        await h.synced()
        result = ext.filter(waiting, ["node-a"])
        assert result.passed == []
        assert "not created yet" in result.unresolvable["node-a"]

        # The resourceclaim controller creates the claim and records it in the pod.
        generated = claim("p1-gpu-x7k2q")
        generated["metadata"]["ownerReferences"] = [{
            "apiVersion": "v1", "kind": "Pod", "name": "p1", "uid": "uid-p1",
            "controller": True, "blockOwnerDeletion": True}]
        generated["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
        h.server.create("resourceclaims", generated)
        await h.caught_up()
        ready = add_pod(h, pod("p1", templates={"gpu": "p1-gpu-x7k2q"}))
        assert ext.filter(ready, ["node-a"]).passed == ["node-a"]
        assert await ext.bind(namespace="default", name="p1", uid="uid-p1", node="node-a") \
            is None
        assert allocated_to(h, "p1-gpu-x7k2q") is not None


async def test_bind_writes_exactly_the_best_allocation_filter_found(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        ext = extender_for(h)
        h.server.create("nodes", node("node-a"))
        h.server.create("resourceslices", gpu_slice("node-a", 8))
        h.server.create("deviceclasses", device_class())
        # gpu-1..3 are taken: root 0 keeps one free GPU, root 1 keeps four. First
        # fit would pair gpu-0 with gpu-4 across roots; the best pair shares root 1.
        taken = claim("taken", count=3)
        taken["status"] = {"allocation": {"devices": {"results": [
            {"request": "gpus", "driver": DRIVER, "pool": "node-a", "device": f"gpu-{i}"}
            for i in (1, 2, 3)]}}, "reservedFor": [
            {"resource": "pods", "name": "other", "uid": "uid-other"}]}
        h.server.create("resourceclaims", taken)
        h.server.create("resourceclaims", claim("pair", count=2))
        p1 = add_pod(h, pod("p1", "pair"))
        h.watch()
        await h.synced()
        (evaluation,) = ext.evaluate(p1, ["node-a"])
        assert evaluation.feasible
        reported = evaluation.claims[0].allocation.to_dict()
        assert {r["device"] for r in reported["devices"]["results"]} <= {
            "gpu-4", "gpu-5", "gpu-6", "gpu-7"}
        assert ext.filter(p1, ["node-a"]).passed == ["node-a"]

        assert await ext.bind(namespace="default", name="p1", uid="uid-p1", node="node-a") \
            is None
        assert unstamped(allocated_to(h, "pair")) == reported
        written = h.server.get("resourceclaims", "pair", "default")
        assert written["status"]["reservedFor"] == [
            {"resource": "pods", "name": "p1", "uid": "uid-p1"}]
        assert h.server.get("pods", "p1", "default")["spec"]["nodeName"] == "node-a"
        # The watch confirms the assumption: the devices stay taken without it.
        await h.caught_up()
        assert h.inventory.assumed_claims() == []
        assert h.metric("drax_inventory_allocated_devices") == 5


async def test_a_conflict_during_bind_is_retried(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        ext, _ = await one_gpu_passing_pod(h)
        h.server.faults.status_conflicts = 1
        assert await ext.bind(namespace="default", name="p1", uid="uid-p1", node="node-a") \
            is None
        assert allocated_to(h, "c1") is not None
        assert h.metric("drax_bind_conflicts_total") == 1


async def test_two_pods_racing_for_the_last_device_only_one_gets_it(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        ext = extender_for(h)
        h.server.create("resourceslices", gpu_slice("node-a", 1))
        h.server.create("deviceclasses", device_class())
        pods = []
        for name in ("p1", "p2"):
            h.server.create("resourceclaims", claim(f"{name}-gpu"))
            pods.append(add_pod(h, pod(name, f"{name}-gpu")))
        h.watch()
        await h.synced()
        for p in pods:  # both see the free device
            assert ext.filter(p, ["node-a"]).passed == ["node-a"]
        errors = await asyncio.gather(*(
            ext.bind(namespace="default", name=p.name, uid=p.uid, node="node-a")
            for p in pods))
        assert sorted(e is None for e in errors) == [False, True]
        loser = next(e for e in errors if e is not None)
        assert "can no longer hold" in loser.message
        assert loser.cause == BindCause.NO_LONGER_FITS
        assert [allocated_to(h, f"{p.name}-gpu") is not None for p in pods].count(True) == 1
        assert len(h.server.bindings) == 1


async def test_failed_binding_rolls_the_claim_back_and_frees_the_device(tmp_path: Path
                                                                        ) -> None:
    async with KubeHarness(tmp_path) as h:
        ext, p1 = await one_gpu_passing_pod(h)
        h.server.faults.binding_failures = 5  # every attempt
        error = await ext.bind(namespace="default", name="p1", uid="uid-p1", node="node-a")
        assert error is not None and "HTTP 500" in error.message and "undone" in error.message
        assert error.cause == BindCause.API_ERROR
        rolled_back = h.server.get("resourceclaims", "c1", "default")
        assert not rolled_back.get("status")
        assert "finalizers" not in rolled_back["metadata"]
        await h.caught_up()
        # Nothing is held any more: the scheduler's retry finds the device free.
        assert ext.filter(p1, ["node-a"]).passed == ["node-a"]
        assert await ext.bind(namespace="default", name="p1", uid="uid-p1", node="node-a") \
            is None
        assert allocated_to(h, "c1") is not None


async def test_a_shared_claim_is_allocated_once_then_only_reserved(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        ext = extender_for(h)
        for name in ("node-a", "node-b"):
            h.server.create("resourceslices", gpu_slice(name, 2))
        h.server.create("deviceclasses", device_class())
        h.server.create("resourceclaims", claim("shared"))
        p1, p2, p3 = (add_pod(h, pod(name, "shared")) for name in ("p1", "p2", "p3"))
        h.watch()
        await h.synced()
        assert ext.filter(p1, ["node-a", "node-b"]).passed == ["node-a", "node-b"]
        assert await ext.bind(namespace="default", name="p1", uid="uid-p1", node="node-a") \
            is None
        first = allocated_to(h, "shared")
        await h.caught_up()

        result = ext.filter(p2, ["node-a", "node-b"])
        assert result.passed == ["node-a"] and "node-b" in result.unresolvable
        assert await ext.bind(namespace="default", name="p2", uid="uid-p2", node="node-a") \
            is None
        shared = h.server.get("resourceclaims", "shared", "default")
        assert shared["status"]["allocation"] == first
        assert [r["name"] for r in shared["status"]["reservedFor"]] == ["p1", "p2"]
        assert h.server.count("PUT", "/resourceclaims/shared") == 1  # one finalizer write

        # reservedFor is full at 256: the next pod is turned away, as upstream does.
        shared["status"]["reservedFor"] += [
            {"resource": "pods", "name": f"o{i}", "uid": f"uid-o{i}"} for i in range(254)]
        h.server.update("resourceclaims", shared)
        await h.caught_up()
        result = ext.filter(p3, ["node-a"])
        assert result.passed == [] and "256" in result.unresolvable["node-a"]
        error = await ext.bind(namespace="default", name="p3", uid="uid-p3", node="node-a")
        assert error is not None and "256" in error.message
        assert len(h.server.get("resourceclaims", "shared", "default")["status"][
            "reservedFor"]) == 256
