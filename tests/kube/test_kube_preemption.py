"""Preemption against the API-server double: the driver end to end, and the
actor's faults the real control plane cannot show on demand (a victim gone or
replaced between the search and the write, a conflicting status write, the API
server failing half-way, the preemptor gone).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from app.extender import Extender
from app.features import FeatureGates
from app.model import Pod, parse_object
from app.preemption import Actor, Driver, Preemption, PreemptionMetrics, VictimSearch
from app.preemption.actor import DISRUPTION_TARGET, PREEMPTION_BY_SCHEDULER
from tests.kube.harness import DRIVER, KubeHarness, claim, device_class, eventually, gpu_slice, node


def victim(name: str, index: int, *, priority: int = 0, on: str = "node-a"
           ) -> tuple[dict[str, Any], dict[str, Any]]:
    """A running pod on node `on` holding GPU `index` through its own claim."""
    c = claim(f"{name}-gpu")
    c["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpus", "driver": DRIVER, "pool": on, "device": f"gpu-{index}"}]}},
        "reservedFor": [{"resource": "pods", "name": name, "uid": f"uid-{name}"}]}
    p = {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
         "spec": {"schedulerName": "drax", "nodeName": on, "priority": priority,
                  "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}],
                  "containers": [{"name": "main", "image": "busybox"}]},
         "status": {"phase": "Running", "startTime": "2026-12-04T10:00:00Z"}}
    return c, p


def preemptor(name: str = "p", *, count: int = 2, priority: int = 1000,
              policy: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    c = claim(f"{name}-gpus", count=count)
    spec: dict[str, Any] = {"schedulerName": "drax", "priority": priority,
                            "resourceClaims": [{"name": "gpus",
                                                "resourceClaimName": f"{name}-gpus"}],
                            "containers": [{"name": "main", "image": "busybox"}]}
    if policy:
        spec["preemptionPolicy"] = policy
    p = {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
         "spec": spec,
         "status": {"phase": "Pending", "conditions": [
             {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
              "message": "0/1 nodes are available"}]}}
    return c, p


def full_cluster(h: KubeHarness) -> None:
    h.server.create("deviceclasses", device_class())
    h.server.create("nodes", node("node-a"))
    h.server.create("resourceslices", gpu_slice("node-a", 4))
    for i, prio in enumerate((0, 5, 10, 20)):
        c, p = victim(f"v{i}", i, priority=prio)
        h.server.create("resourceclaims", c)
        h.server.create("pods", p)


def pods_deleted(h: KubeHarness) -> list[str]:
    return sorted(name for plural, _, name in h.server.deleted if plural == "pods")


def conditions(h: KubeHarness, name: str) -> list[dict[str, Any]]:
    pod = h.server.store["pods"].get(("default", name))
    return [] if pod is None else list((pod.get("status") or {}).get("conditions") or [])


async def start_with_preemptor(h: KubeHarness) -> None:
    c, p = preemptor()
    h.server.create("resourceclaims", c)
    h.server.create("pods", p)
    h.watch()
    await h.synced()


def driver_of(h: KubeHarness, registry: CollectorRegistry) -> Driver:
    assert h.client is not None
    ext = Extender(h.inventory, features=FeatureGates(), mode="allocator")
    metrics = PreemptionMetrics(registry)
    metrics.observe(h.inventory)
    return Driver(h.inventory, search=VictimSearch.of(ext), actor=Actor(h.client, h.inventory),
                  metrics=metrics)


def metric(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


async def test_the_driver_skips_a_node_whose_taint_the_preemptor_does_not_tolerate(
        tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        full_cluster(h)
        tainted = h.server.get("nodes", "node-a")
        tainted["spec"] = {"taints": [{"key": "team", "value": "infra",
                                       "effect": "NoExecute"}]}
        h.server.update("nodes", tainted)
        h.server.create("nodes", node("node-b"))
        h.server.create("resourceslices", gpu_slice("node-b", 4))
        for i, prio in enumerate((30, 40, 50, 60)):
            for obj, plural in zip(victim(f"b{i}", i, priority=prio, on="node-b"),
                                   ("resourceclaims", "pods"), strict=True):
                h.server.create(plural, obj)
        await start_with_preemptor(h)
        registry = CollectorRegistry()
        assert await driver_of(h, registry).run_once()
        # node-a's victims are cheaper, but p could never run there.
        assert pods_deleted(h) == ["b0", "b1"]
        assert h.server.get("pods", "p", "default")["status"]["nominatedNodeName"] == "node-b"


async def test_the_driver_preempts_the_two_lowest_once_and_holds_their_gpus(
        tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        full_cluster(h)
        await start_with_preemptor(h)
        registry = CollectorRegistry()
        driver = driver_of(h, registry)
        assert [pod.key for pod in driver.candidates()] == ["default/p"]
        assert await driver.run_once()
        assert pods_deleted(h) == ["v0", "v1"]
        assert all(o.get("preconditions", {}).get("uid", "").startswith("uid-v")
                   for o in h.server.delete_options)
        for name in ("v0", "v1"):
            (cond,) = [c for c in conditions(h, name) if c["type"] == DISRUPTION_TARGET]
            assert cond["reason"] == PREEMPTION_BY_SCHEDULER
            assert "default/p" in cond["message"] and "gpu-" in cond["message"]
        assert h.server.get("pods", "p", "default")["status"]["nominatedNodeName"] == "node-a"
        events = [o for o in h.server.created if o.get("kind") == "Event"]
        assert sorted(e["regarding"]["name"] for e in events) == ["p", "v0", "v1"]
        assert {e["reason"] for e in events} == {"Preempted", "Preempting"}
        held = h.inventory.nomination("default/p")
        assert held is not None and held.node == "node-a"
        assert sorted(held.device_ids) == [f"{DRIVER}/node-a/gpu-0", f"{DRIVER}/node-a/gpu-1"]
        # The victims are terminating (the double waits for their "kubelet"): no
        # second preemption for p.
        await h.caught_up()
        assert not await driver.run_once()
        assert pods_deleted(h) == ["v0", "v1"]
        assert metric(registry, "drax_preemptions_total") == 1
        assert metric(registry, "drax_preemption_victims_sum") == 2
        assert metric(registry, "drax_preemption_devices_freed_total") == 2
        assert metric(registry, "drax_preemptions_refused_total", reason="victims-pending") == 1
        assert metric(registry, "drax_nominated_devices") == 2
        # The "kubelet" removes them, the claim controller deallocates: p fits
        # on its held devices and nothing more is deleted.
        for name in ("v0", "v1"):
            h.server.delete("pods", name, "default")
            h.server.delete("resourceclaims", f"{name}-gpu", "default")
        await h.caught_up()
        assert not driver.victims_pending(held)
        assert not await driver.run_once()
        assert pods_deleted(h) == ["v0", "v1"]
        assert h.inventory.nomination("default/p") is not None
        # Bound: the hold ends, the wait is observed.
        bound = h.server.get("pods", "p", "default")
        bound["spec"]["nodeName"] = "node-a"
        h.server.update("pods", bound)
        await eventually(lambda: h.inventory.nomination("default/p") is None, "the hold ended")
        await driver.run_once()
        assert metric(registry, "drax_preemptor_bind_seconds_count") == 1


async def test_never_and_pods_without_claims_preempt_nothing(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        full_cluster(h)
        c, p = preemptor("never", policy="Never")
        h.server.create("resourceclaims", c)
        h.server.create("pods", p)
        _, plain = preemptor("plain")
        del plain["spec"]["resourceClaims"]
        h.server.create("pods", plain)
        h.watch()
        await h.synced()
        registry = CollectorRegistry()
        driver = driver_of(h, registry)
        assert [pod.key for pod in driver.candidates()] == ["default/never"]
        assert not await driver.run_once()
        assert pods_deleted(h) == []
        assert metric(registry, "drax_preemptions_refused_total", reason="never") == 1
        assert not await driver.run_once()  # not searched again while nothing changed
        assert metric(registry, "drax_preemptions_attempted_total") == 1


# --------------------------------------------------------------------------- the actor's faults


def parsed(obj: dict[str, Any]) -> Pod:
    pod: Pod = parse_object("Pod", obj)
    return pod


def plan(p: dict[str, Any], *victims: dict[str, Any]) -> Preemption:
    return Preemption(preemptor=parsed(p), priority=1000, node="node-a",
                      victims=tuple(parsed(v) for v in victims), allocations=(),
                      released_claims=(), freed_devices=(f"{DRIVER}/node-a/gpu-0",))


async def staged(h: KubeHarness) -> tuple[Actor, dict[str, Any], list[dict[str, Any]]]:
    full_cluster(h)
    _, p = preemptor()
    h.server.create("pods", p)
    assert h.client is not None
    victims = [h.server.get("pods", f"v{i}", "default") for i in range(2)]
    return Actor(h.client, h.inventory, max_attempts=3), p, victims


async def test_a_victim_already_gone_is_skipped(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        actor, p, (v0, v1) = await staged(h)
        h.server.delete("pods", "v0", "default")
        outcome = await actor.preempt(plan(p, v0, v1))
        assert outcome.refused is None
        assert outcome.deleted == ("default/v1",) and outcome.skipped == ("default/v0",)
        assert pods_deleted(h) == ["v1"]


async def test_a_replaced_victim_is_not_deleted(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        actor, p, (v0, v1) = await staged(h)
        h.server.delete("pods", "v0", "default")
        _, again = victim("v0", 0)
        again["metadata"]["uid"] = "uid-v0-second"
        h.server.create("pods", again)
        outcome = await actor.preempt(plan(p, v0, v1))
        assert outcome.deleted == ("default/v1",)
        assert pods_deleted(h) == ["v1"]
        assert not conditions(h, "v0")


async def test_a_conflicting_status_write_is_read_again_and_retried(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        actor, p, (v0, v1) = await staged(h)
        h.server.faults.pod_status_conflicts = 2  # p's nomination, then v0's first patch
        outcome = await actor.preempt(plan(p, v0, v1))
        assert outcome.refused is None and pods_deleted(h) == ["v0", "v1"]
        assert any(c["type"] == DISRUPTION_TARGET for c in conditions(h, "v0"))
        assert h.server.get("pods", "p", "default")["status"]["nominatedNodeName"] == "node-a"


async def test_the_api_server_going_down_half_way_deletes_no_more(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        actor, p, (v0, v1) = await staged(h)
        # Writes: p's nomination, v0's condition, v0's deletion, v0's Event; then
        # every write fails.
        h.server.faults.fail_writes_after = 4
        outcome = await actor.preempt(plan(p, v0, v1))
        assert outcome.refused == "api-error"
        assert outcome.deleted == ("default/v0",)
        assert pods_deleted(h) == ["v0"]
        assert not conditions(h, "v1")
        held = h.inventory.nomination("default/p")
        assert held is not None and held.victims == (("default/v0", "uid-v0"),)


async def test_a_preemptor_gone_or_replaced_touches_no_victim(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        actor, p, (v0, v1) = await staged(h)
        h.server.delete("pods", "p", "default")
        outcome = await actor.preempt(plan(p, v0, v1))
        assert outcome.refused == "preemptor-gone"
        _, again = preemptor()
        again["metadata"]["uid"] = "uid-p-second"
        h.server.create("pods", again)
        outcome = await actor.preempt(plan(p, v0, v1))
        assert outcome.refused == "preemptor-gone"
        assert pods_deleted(h) == [] and not conditions(h, "v0")
        assert h.inventory.nominations() == []
