"""Preemption against the API-server double: the driver end to end, and the
actor's faults the real control plane cannot show on demand (a victim gone or
replaced between the search and the write, a conflicting status write, the API
server failing half-way, the preemptor gone).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from app.extender import Extender
from app.features import FeatureGates
from app.inventory import Inventory
from app.model import Pod, parse_object
from app.preemption import Actor, Catchup, Driver, Preemption, PreemptionMetrics, VictimSearch
from app.preemption.actor import (
    DEFAULT_HOLD_SECONDS,
    DISRUPTION_TARGET,
    PREEMPTION_BY_SCHEDULER,
)
from app.preemption.catchup import newer
from app.preemption.driver import RETRY_SECONDS
from tests.kube.apiserver import FakeApiServer
from tests.kube.harness import DRIVER, KubeHarness, claim, device_class, eventually, gpu_slice, node
from tests.kube.test_kube_serve import serving


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


def held_node(server: FakeApiServer, name: str, prefix: str,
              priorities: tuple[int, ...]) -> None:
    """Node `name` whose GPUs are each held by a running pod `<prefix><i>` of
    the i-th priority."""
    server.create("nodes", node(name))
    server.create("resourceslices", gpu_slice(name, len(priorities)))
    for i, prio in enumerate(priorities):
        c, p = victim(f"{prefix}{i}", i, priority=prio, on=name)
        server.create("resourceclaims", c)
        server.create("pods", p)


def full_cluster(server: FakeApiServer) -> None:
    server.create("deviceclasses", device_class())
    held_node(server, "node-a", "v", (0, 5, 10, 20))


def with_node_b(server: FakeApiServer) -> None:
    """A second full node whose victims b0-b3 all outrank node-a's."""
    held_node(server, "node-b", "b", (30, 40, 50, 60))


async def full_api_with_preemptor() -> FakeApiServer:
    """The API double, started, with `full_cluster` and the preemptor p pending."""
    api = FakeApiServer(bookmark_interval=0.1)
    await api.start()
    full_cluster(api)
    c, p = preemptor()
    api.create("resourceclaims", c)
    api.create("pods", p)
    return api


async def preempted_for_p(api: FakeApiServer, inventory: Inventory) -> None:
    """Wait for the serving runtime's driver to preempt v0 and v1 of
    `full_cluster` for p and hold their GPUs."""
    await eventually(lambda: pods_deleted(api) == ["v0", "v1"], "the preemption", timeout=10)
    await eventually(lambda: inventory.nomination("default/p") is not None, "the hold")


def pods_deleted(server: FakeApiServer) -> list[str]:
    return sorted(name for plural, _, name in server.deleted if plural == "pods")


def conditions(h: KubeHarness, name: str) -> list[dict[str, Any]]:
    pod = h.server.store["pods"].get(("default", name))
    return [] if pod is None else list((pod.get("status") or {}).get("conditions") or [])


async def start_with_preemptor(
        h: KubeHarness, *made: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """Create each (claim, pod) pair, by default the preemptor p, then watch
    and sync."""
    for c, p in made or (preemptor(),):
        h.server.create("resourceclaims", c)
        h.server.create("pods", p)
    h.watch()
    await h.synced()


def nominated(made: tuple[dict[str, Any], dict[str, Any]], to: str = "node-a"
              ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The (claim, pod) pair with the pod nominated to node `to`."""
    made[1]["status"]["nominatedNodeName"] = to
    return made


def going(h: KubeHarness, name: str, priority: int | None = None, *,
          disruption: str = "") -> None:
    """Pod `name` terminating, at `priority` when given; `disruption`: the
    message of its DisruptionTarget condition (a scheduler's preemption)."""
    pod = h.server.get("pods", name, "default")
    if priority is not None:
        pod["spec"]["priority"] = priority
    if disruption:
        pod["status"].setdefault("conditions", []).append({
            "type": DISRUPTION_TARGET, "status": "True", "reason": PREEMPTION_BY_SCHEDULER,
            "message": disruption})
    pod["metadata"]["deletionTimestamp"] = "2026-12-04T10:05:00Z"
    h.server.update("pods", pod)


def driver_of(h: KubeHarness, registry: CollectorRegistry,
              schedulers: tuple[str, ...] = ("drax",)) -> Driver:
    assert h.client is not None
    ext = Extender(h.inventory, features=FeatureGates(), mode="allocator")
    metrics = PreemptionMetrics(registry)
    metrics.observe(h.inventory)
    return Driver(h.inventory, search=VictimSearch.of(ext, schedulers=schedulers),
                  actor=Actor(h.client, h.inventory), metrics=metrics)


async def preempted_for_p_by_the_driver(h: KubeHarness) -> None:
    """`full_cluster` with p pending, one driver pass preempting v0 and v1 for
    it (their GPUs held for p), and drax caught up with the writes."""
    full_cluster(h.server)
    await start_with_preemptor(h)
    assert await driver_of(h, CollectorRegistry()).run_once()
    await h.caught_up()


def metric(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


async def test_the_driver_skips_a_node_whose_taint_the_preemptor_does_not_tolerate(
        tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        full_cluster(h.server)
        tainted = h.server.get("nodes", "node-a")
        tainted["spec"] = {"taints": [{"key": "team", "value": "infra",
                                       "effect": "NoExecute"}]}
        h.server.update("nodes", tainted)
        with_node_b(h.server)
        await start_with_preemptor(h)
        registry = CollectorRegistry()
        assert await driver_of(h, registry).run_once()
        # node-a's victims are cheaper, but p could never run there.
        assert pods_deleted(h.server) == ["b0", "b1"]
        assert h.server.get("pods", "p", "default")["status"]["nominatedNodeName"] == "node-b"


async def test_the_driver_solves_no_node_that_cannot_beat_the_best(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        full_cluster(h.server)
        with_node_b(h.server)
        await start_with_preemptor(h)
        driver = driver_of(h, CollectorRegistry())
        search = driver._search
        assert await driver.run_once()
        assert pods_deleted(h.server) == ["v0", "v1"]
        # node-b's cheapest two victims (30, 40) rank below node-a's (0, 5).
        assert search.left_out == 1


async def test_the_driver_preempts_the_two_lowest_once_and_holds_their_gpus(
        tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        full_cluster(h.server)
        await start_with_preemptor(h)
        registry = CollectorRegistry()
        driver = driver_of(h, registry)
        assert [pod.key for pod in driver.candidates()] == ["default/p"]
        assert await driver.run_once()
        assert pods_deleted(h.server) == ["v0", "v1"]
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
        assert pods_deleted(h.server) == ["v0", "v1"]
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
        assert pods_deleted(h.server) == ["v0", "v1"]
        assert h.inventory.nomination("default/p") is not None
        # Bound: the hold ends, the wait is observed.
        bound = h.server.get("pods", "p", "default")
        bound["spec"]["nodeName"] = "node-a"
        h.server.update("pods", bound)
        await eventually(lambda: h.inventory.nomination("default/p") is None, "the hold ended")
        await driver.run_once()
        assert metric(registry, "drax_preemptor_bind_seconds_count") == 1


async def test_a_nomination_its_scheduler_clears_is_written_back_while_the_devices_are_held(
        tmp_path: Path) -> None:
    """In advisor mode kube-scheduler's DefaultPreemption clears the preemptor's
    nominatedNodeName at its next failed attempt (no candidate: its
    DynamicResources filter refuses every node as unresolvable). The driver
    writes the hold's node back and deletes nothing more; a node its
    scheduler nominated instead is left as it is."""
    async with KubeHarness(tmp_path) as h:
        full_cluster(h.server)
        await start_with_preemptor(h)
        driver = driver_of(h, CollectorRegistry())
        assert await driver.run_once()
        await h.caught_up()

        async def nominate(node: str) -> None:
            pod = h.server.get("pods", "p", "default")
            pod["status"]["nominatedNodeName"] = node
            h.server.update("pods", pod)
            await eventually(lambda: (p := h.inventory.pod("default/p")) is not None
                             and p.nominated_node_name == node, f"nominated to {node!r}")

        await nominate("")
        assert not await driver.run_once()
        assert h.server.get("pods", "p", "default")["status"]["nominatedNodeName"] == "node-a"
        assert pods_deleted(h.server) == ["v0", "v1"]
        await nominate("node-b")
        assert not await driver.run_once()
        assert h.server.get("pods", "p", "default")["status"]["nominatedNodeName"] == "node-b"
        assert pods_deleted(h.server) == ["v0", "v1"]


async def test_the_pods_of_every_profile_drax_serves_are_preempted_for(
        tmp_path: Path) -> None:
    """One kube-scheduler with profiles drax and drax-gpu, both calling drax:
    with both names served, a pending drax-gpu pod is preempted for, and its
    victims' condition names its scheduler, as kube-scheduler's does. A
    scheduler drax does not serve gets nothing."""
    async with KubeHarness(tmp_path) as h:
        full_cluster(h.server)
        c, p = preemptor()
        p["spec"]["schedulerName"] = "drax-gpu"
        await start_with_preemptor(h, (c, p))
        assert not await driver_of(h, CollectorRegistry()).run_once()
        assert pods_deleted(h.server) == []
        assert await driver_of(h, CollectorRegistry(), ("drax", "drax-gpu")).run_once()
        assert pods_deleted(h.server) == ["v0", "v1"]
        for name in ("v0", "v1"):
            (cond,) = [c for c in conditions(h, name) if c["type"] == DISRUPTION_TARGET]
            assert cond["message"].startswith("drax-gpu: preempting to accommodate"), cond


async def test_never_and_pods_without_claims_preempt_nothing(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        full_cluster(h.server)
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
        assert pods_deleted(h.server) == []
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


async def staged(h: KubeHarness, clock: Callable[[], float] = time.monotonic
                 ) -> tuple[Actor, dict[str, Any], list[dict[str, Any]]]:
    """`full_cluster` with p pending, watched, and an actor for it; v0 and v1
    as the API server has them."""
    full_cluster(h.server)
    _, p = preemptor()
    h.server.create("pods", p)
    h.watch()
    await h.synced()
    assert h.client is not None
    victims = [h.server.get("pods", f"v{i}", "default") for i in range(2)]
    return Actor(h.client, h.inventory, max_attempts=3, clock=clock), p, victims


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_victim_already_gone_is_skipped(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        actor, p, (v0, v1) = await staged(h)
        h.server.delete("pods", "v0", "default")
        outcome = await actor.preempt(plan(p, v0, v1))
        assert outcome.refused is None
        assert outcome.deleted == ("default/v1",) and outcome.skipped == ("default/v0",)
        assert pods_deleted(h.server) == ["v1"]


@pytest.mark.parametrize("write", ["patch_namespaced_pod_status", "delete_namespaced_pod"])
async def test_a_victim_gone_between_its_read_and_a_write_is_skipped(
        tmp_path: Path, write: str) -> None:
    """v0 goes (another controller, its kubelet) after the actor read it: the
    404 of its condition patch or of its deletion skips it, with no Event."""
    async with KubeHarness(tmp_path) as h:
        actor, p, (v0, v1) = await staged(h)
        send = getattr(actor._core, write)

        def gone_first(name: str, namespace: str, *args: Any, **kwargs: Any) -> Any:
            if name == "v0" and ("default", "v0") in h.server.store["pods"]:
                h.server.delete("pods", "v0", "default")
            return send(name, namespace, *args, **kwargs)

        setattr(actor._core, write, gone_first)
        outcome = await actor.preempt(plan(p, v0, v1))
        assert outcome.refused is None
        assert outcome.deleted == ("default/v1",) and outcome.skipped == ("default/v0",)
        events = [o for o in h.server.created if o.get("kind") == "Event"]
        assert sorted(e["regarding"]["name"] for e in events) == ["p", "v1"]


async def test_a_replaced_victim_is_not_deleted(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        actor, p, (v0, v1) = await staged(h)
        h.server.delete("pods", "v0", "default")
        _, again = victim("v0", 0)
        again["metadata"]["uid"] = "uid-v0-second"
        h.server.create("pods", again)
        outcome = await actor.preempt(plan(p, v0, v1))
        assert outcome.deleted == ("default/v1",)
        assert pods_deleted(h.server) == ["v1"]
        assert not conditions(h, "v0")


async def test_a_conflicting_status_write_is_read_again_and_retried(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        actor, p, (v0, v1) = await staged(h)
        h.server.faults.pod_status_conflicts = 2  # p's nomination, then v0's first patch
        outcome = await actor.preempt(plan(p, v0, v1))
        assert outcome.refused is None and pods_deleted(h.server) == ["v0", "v1"]
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
        assert pods_deleted(h.server) == ["v0"]
        assert not conditions(h, "v1")
        held = h.inventory.nomination("default/p")
        assert held is not None and held.victims == (("default/v0", "uid-v0"),)


async def test_a_preemptor_deleted_half_way_gets_no_more_victims_and_no_hold(
        tmp_path: Path) -> None:
    """p is deleted once its first victim is: the watch ends the hold, and the
    actor deletes no other victim for a pod that no longer exists."""
    async with KubeHarness(tmp_path) as h:
        full_cluster(h.server)
        await start_with_preemptor(h)
        driver = driver_of(h, CollectorRegistry())
        actor: Any = driver._actor
        send = actor._core.delete_namespaced_pod

        async def then_p_goes(name: str, namespace: str, *args: Any, **kwargs: Any) -> Any:
            answer = await send(name, namespace, *args, **kwargs)
            if ("default", "p") in h.server.store["pods"]:
                h.server.delete("pods", "p", "default")
                await eventually(lambda: h.inventory.pod("default/p") is None, "p gone")
            return answer

        actor._core.delete_namespaced_pod = then_p_goes
        assert await driver.run_once()
        assert len(pods_deleted(h.server)) == 1
        assert h.inventory.nominations() == []
        await h.caught_up()
        assert not await driver.run_once()
        assert len(pods_deleted(h.server)) == 1


@pytest.mark.parametrize("then", ["carries-on", "api-down"])
async def test_a_preemption_outlasting_the_hold_s_time_to_live_keeps_holding_for_p(
        tmp_path: Path, then: str) -> None:
    """Deleting v0 takes longer than the hold's time-to-live (a slow API
    server). p still waits, so the actor goes on to v1, or, the API server down
    after v0, stops for that reason; either way p's devices stay held for the
    victims that went, counting down from the end."""
    clock = Clock()
    async with KubeHarness(tmp_path, clock=clock) as h:
        actor, p, (v0, v1) = await staged(h, clock)
        send = actor._core.delete_namespaced_pod

        async def slow(name: str, namespace: str, *args: Any, **kwargs: Any) -> Any:
            clock.now += DEFAULT_HOLD_SECONDS + 1
            return await send(name, namespace, *args, **kwargs)

        actor._core.delete_namespaced_pod = slow
        if then == "api-down":
            # Writes: p's nomination, v0's condition, v0's deletion, v0's Event.
            h.server.faults.fail_writes_after = 4
        outcome = await actor.preempt(plan(p, v0, v1))
        held = h.inventory.nomination("default/p")
        assert held is not None and held.expires_at == clock.now + DEFAULT_HOLD_SECONDS
        if then == "carries-on":
            assert outcome.refused is None and pods_deleted(h.server) == ["v0", "v1"]
            assert held.victims == (("default/v0", "uid-v0"), ("default/v1", "uid-v1"))
        else:
            assert outcome.refused == "api-error" and pods_deleted(h.server) == ["v0"]
            assert held.victims == (("default/v0", "uid-v0"),)


@pytest.mark.parametrize("then", ["deleted", "bound", "replaced"])
async def test_a_preemptor_gone_while_its_victim_is_marked_gets_that_victim_spared(
        tmp_path: Path, then: str) -> None:
    """p is deleted, bound elsewhere or replaced while v0's DisruptionTarget
    condition is written: v0 is not deleted (its condition stays), nor v1, and
    p keeps no hold."""
    async with KubeHarness(tmp_path) as h:
        actor, p, (v0, v1) = await staged(h)
        send = actor._core.patch_namespaced_pod_status

        async def then_p_goes(name: str, namespace: str, *args: Any, **kwargs: Any) -> Any:
            answer = await send(name, namespace, *args, **kwargs)
            if name == "v0":
                if then == "bound":
                    bound = h.server.get("pods", "p", "default")
                    bound["spec"]["nodeName"] = "node-b"
                    h.server.update("pods", bound)
                else:
                    h.server.delete("pods", "p", "default")
                if then == "replaced":
                    _, again = preemptor()
                    again["metadata"]["uid"] = "uid-p-second"
                    h.server.create("pods", again)
                await h.caught_up()
            return answer

        actor._core.patch_namespaced_pod_status = then_p_goes
        outcome = await actor.preempt(plan(p, v0, v1))
        assert outcome.refused == "preemptor-gone" and outcome.deleted == ()
        assert pods_deleted(h.server) == []
        assert any(c["type"] == DISRUPTION_TARGET for c in conditions(h, "v0"))
        assert not conditions(h, "v1")
        assert h.inventory.nominations() == []


async def test_the_api_server_down_from_the_start_touches_nothing_and_holds_nothing(
        tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        actor, p, (v0, v1) = await staged(h)
        h.server.faults.write_period = 1  # every write fails
        h.server.faults.write_kinds = ("500",)
        outcome = await actor.preempt(plan(p, v0, v1))
        assert outcome.refused == "api-error" and outcome.deleted == ()
        assert pods_deleted(h.server) == [] and not conditions(h, "v0")
        assert h.inventory.nominations() == []


async def test_a_preemption_stopped_half_way_waits_only_for_the_victims_that_went(
        tmp_path: Path) -> None:
    """The API server fails after one of p's two victims is deleted: the other,
    not reached, keeps running and its claim allocated. Once the first and its
    claim are gone, the driver preempts again for p rather than wait for the
    other's claim for ever."""
    async with KubeHarness(tmp_path) as h:
        full_cluster(h.server)
        await start_with_preemptor(h)
        driver = driver_of(h, CollectorRegistry())
        # Writes: p's nomination, a victim's condition, its deletion, its Event.
        h.server.faults.fail_writes_after = 4
        assert await driver.run_once()
        (went,) = pods_deleted(h.server)
        (other,) = {"v0", "v1"} - {went}
        assert not conditions(h, other)
        held = h.inventory.nomination("default/p")
        assert held is not None and held.victims == ((f"default/{went}", f"uid-{went}"),)
        assert held.victim_claims == (f"default/{went}-gpu",)
        h.server.faults.fail_writes_after = 0  # the API server is back
        await h.caught_up()
        assert not await driver.run_once()  # still terminating: no cascading
        h.server.delete("pods", went, "default")
        h.server.delete("resourceclaims", f"{went}-gpu", "default")
        await h.caught_up()
        assert not driver.victims_pending(held)
        assert await driver.run_once()
        assert pods_deleted(h.server) == ["v0", "v1"]


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
        assert pods_deleted(h.server) == [] and not conditions(h, "v0")
        assert h.inventory.nominations() == []


# --------------------------------------------------------------------------- catching up


async def test_a_preemptors_filter_sees_its_victims_claims_freed_before_drax_s_watch_does(
        tmp_path: Path) -> None:
    """kube-scheduler retries the preemptor as soon as the victims' claims are
    deallocated; drax's claim watch may not have delivered that yet. The
    filter reads those claims from the API server first and passes, and the
    bind goes through."""
    api = await full_api_with_preemptor()
    registry = CollectorRegistry()
    async with serving(api, tmp_path, registry) as (runtime, client):
        inventory = runtime.inventory
        await preempted_for_p(api, inventory)
        # The "kubelet" removes the victims and the claim controller frees
        # their claims (one deallocated, one deleted), but drax's claim watch
        # trails the API server.
        api.hold_watches("resourceclaims")
        for name in ("v0", "v1"):
            api.delete("pods", name, "default")
        freed = api.get("resourceclaims", "v0-gpu", "default")
        freed["status"] = {}
        api.update("resourceclaims", freed)
        api.delete("resourceclaims", "v1-gpu", "default")
        await eventually(lambda: inventory.pod("default/v0") is None
                         and inventory.pod("default/v1") is None, "the victims gone")
        # the claim watch is held: drax still sees both claims allocated
        held = [inventory.claim("default/v0-gpu"), inventory.claim("default/v1-gpu")]
        assert all(claim is not None and claim.allocation is not None for claim in held)
        args = {"Pod": api.get("pods", "p", "default"), "NodeNames": ["node-a"]}
        answer = (await client.post("/scheduler/filter", json=args)).json()
        assert answer["NodeNames"] == ["node-a"], answer
        assert registry.get_sample_value("drax_preemptor_claim_reads_total",
                                         {"result": "freed"}) == 2
        bound = (await client.post("/scheduler/bind", json={
            "PodName": "p", "PodNamespace": "default", "PodUID": "uid-p",
            "Node": "node-a"})).json()
        assert not bound.get("Error"), bound
        # The watch's late events, older than what was read, are dropped.
        api.release_watches("resourceclaims")
        await eventually(lambda: inventory.claim("default/p-gpus") is not None
                         and inventory.claim("default/p-gpus").allocation is not None,
                         "p's claim allocated")
        assert inventory.claim("default/v1-gpu") is None
    assert api.get("pods", "p", "default")["spec"]["nodeName"] == "node-a"


async def test_catching_up_reads_each_stale_claim_once_for_concurrent_filters(
        tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        await preempted_for_p_by_the_driver(h)
        catchup = Catchup(h.inventory)
        p = h.inventory.pod("default/p")
        assert p is not None
        assert sorted(catchup.stale_claims(p)) == ["default/v0-gpu", "default/v1-gpu"]
        await catchup.before_filter(p)  # not connected yet: nothing read
        assert h.server.count("GET", "/resourceclaims/v0-gpu") == 0
        catchup.api = h.client
        # Still allocated at the API server: read, and nothing changes.
        await catchup.before_filter(p)
        assert h.server.count("GET", "/resourceclaims/v0-gpu") == 1
        h.server.hold_watches("resourceclaims")
        for name in ("v0", "v1"):
            h.server.delete("pods", name, "default")
            h.server.delete("resourceclaims", f"{name}-gpu", "default")
        await asyncio.sleep(0.01)  # past the spacing between two reads
        await asyncio.gather(*(catchup.before_filter(p) for _ in range(3)))
        assert h.server.count("GET", "/resourceclaims/v0-gpu") == 2
        assert h.server.count("GET", "/resourceclaims/v1-gpu") == 2
        assert catchup.stale_claims(p) == []
        await catchup.before_filter(p)  # nothing stale: nothing read
        assert h.server.count("GET", "/resourceclaims/v0-gpu") == 2
        # Another pod (no hold of its own) never reads.
        v2 = h.inventory.pod("default/v2")
        assert v2 is not None and catchup.stale_claims(v2) == []


async def test_a_claim_read_as_gone_is_not_brought_back_by_the_watch_s_late_events(
        tmp_path: Path) -> None:
    """The catch-up reads a victim's claim as gone (404) while drax's watch
    still trails with the claim's last writes: its deletionTimestamp, still
    allocated, then its deletion. Those late events never bring it back."""
    async with KubeHarness(tmp_path) as h:
        full_cluster(h.server)
        c, p = preemptor()
        h.server.create("resourceclaims", c)
        h.server.create("pods", p)
        seen: list[tuple[str, bool]] = []
        h.watch(on_change=lambda kind, event, obj: seen.append(
            (event, h.inventory.claim("default/v0-gpu") is not None))
            if kind == "ResourceClaim" and obj and obj["metadata"]["name"] == "v0-gpu" else None)
        await h.synced()
        assert await driver_of(h, CollectorRegistry()).run_once()
        await h.caught_up()
        h.server.hold_watches("resourceclaims")
        h.server.delete("pods", "v0", "default")
        going = h.server.get("resourceclaims", "v0-gpu", "default")
        going["metadata"]["deletionTimestamp"] = "2026-12-04T10:05:00Z"
        h.server.update("resourceclaims", going)
        h.server.delete("resourceclaims", "v0-gpu", "default")
        catchup = Catchup(h.inventory)
        catchup.api = h.client
        pod = h.inventory.pod("default/p")
        assert pod is not None
        seen.clear()
        await catchup.before_filter(pod)
        assert h.inventory.claim("default/v0-gpu") is None
        h.server.release_watches("resourceclaims")
        await h.caught_up()
        assert seen == [("MODIFIED", False), ("DELETED", False)]
        assert h.inventory.claim("default/v0-gpu") is None
        held = h.inventory.nomination("default/p")
        assert held is not None and "default/v0-gpu" not in catchup.stale_claims(pod)


async def test_a_404_read_before_a_claim_was_made_again_leaves_the_new_claim(
        tmp_path: Path) -> None:
    """The read of v0's claim answers 404; before the answer is applied, the
    watch delivers a new claim of the same name (another uid). The 404 is
    about the old one: the new claim stays."""
    async with KubeHarness(tmp_path) as h:
        await preempted_for_p_by_the_driver(h)
        h.server.hold_watches("resourceclaims")
        h.server.delete("pods", "v0", "default")
        h.server.delete("resourceclaims", "v0-gpu", "default")

        class Remade(Catchup):
            async def _read(self, claims: Any, key: str) -> Any:
                answer = await super()._read(claims, key)
                if key == "default/v0-gpu":
                    again = claim("v0-gpu")
                    again["metadata"]["uid"] = "uid-again"
                    h.server.create("resourceclaims", again)
                    h.server.release_watches("resourceclaims")
                    await h.caught_up()
                return answer

        catchup = Remade(h.inventory)
        catchup.api = h.client
        pod = h.inventory.pod("default/p")
        assert pod is not None
        await catchup.before_filter(pod)
        again = h.inventory.claim("default/v0-gpu")
        assert again is not None and again.uid == "uid-again"


def test_a_claim_s_late_watch_event_leaves_a_newer_copy() -> None:
    """A copy read newer than the watch's (deallocated at rv 12) stays when the
    watch then delivers its older write (allocated at rv 11)."""
    inventory = Inventory()
    c, _ = victim("v0", 0)
    c["metadata"].update(uid="uid-c", resourceVersion="11")
    inventory.apply("ResourceClaim", "ADDED", c)
    fresh = {**c, "metadata": {**c["metadata"], "resourceVersion": "12"}, "status": {}}
    inventory.apply("ResourceClaim", "MODIFIED", fresh)
    inventory.apply("ResourceClaim", "MODIFIED", c)
    held = inventory.claim("default/v0-gpu")
    assert held is not None and held.allocation is None and held.resource_version == "12"
    # Versions that are not revisions are not compared: the event applies.
    c["metadata"]["resourceVersion"] = "x"
    inventory.apply("ResourceClaim", "MODIFIED", c)
    held = inventory.claim("default/v0-gpu")
    assert held is not None and held.allocation is not None


async def test_catching_up_forgets_a_preemptor_whose_nomination_ended(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        await preempted_for_p_by_the_driver(h)
        catchup = Catchup(h.inventory)
        catchup.api = h.client
        p = h.inventory.pod("default/p")
        assert p is not None
        await catchup.before_filter(p)
        assert h.server.count("GET", "/resourceclaims/v0-gpu") == 1
        assert list(catchup._last) == ["default/p"]
        # p goes while its victims' claims are still allocated.
        h.server.delete("pods", "p", "default")
        await h.caught_up()
        other = h.inventory.pod("default/v2")
        assert other is not None
        await catchup.before_filter(other)
        assert catchup._last == {}


def test_resource_versions_compare_as_revisions() -> None:
    assert newer("120", "99") and not newer("99", "120") and not newer("7", "7")
    # Versions that are not revisions have no known order.
    assert not newer("b", "a") and not newer("a", "b") and not newer("a", "a")
    assert not newer("12", "a") and not newer("a", "12") and not newer("", "12")


# --------------------------------------------------------------------------- a new leader


async def test_a_new_leader_holds_the_devices_of_a_preemptor_its_scheduler_nominated(
        tmp_path: Path) -> None:
    """What a failover leaves: p nominated to node-a by drax's scheduler, its
    two victims still terminating, no hold in the new leader's memory. The new
    leader's first pass deletes nothing more and holds the victims' GPUs for p,
    so a pod of lower priority is not given them."""
    async with KubeHarness(tmp_path) as h:
        full_cluster(h.server)
        going(h, "v0")
        going(h, "v1")
        await start_with_preemptor(h, nominated(preemptor()),
                                   preemptor("low", count=1, priority=5))
        registry = CollectorRegistry()
        driver = driver_of(h, registry)
        assert not await driver.run_once()
        assert pods_deleted(h.server) == []
        held = h.inventory.nomination("default/p")
        assert held is not None and held.node == "node-a" and held.pod_uid == "uid-p"
        assert sorted(held.device_ids) == [f"{DRIVER}/node-a/gpu-0", f"{DRIVER}/node-a/gpu-1"]
        assert sorted(held.victims) == [("default/v0", "uid-v0"), ("default/v1", "uid-v1")]
        assert driver.victims_pending(held)
        # The victims go, their claims are freed: the GPUs stay p's.
        for name in ("v0", "v1"):
            h.server.delete("pods", name, "default")
            h.server.delete("resourceclaims", f"{name}-gpu", "default")
        await h.caught_up()
        ext = Extender(h.inventory, features=FeatureGates(), mode="allocator")
        low_pod, p_pod = h.inventory.pod("default/low"), h.inventory.pod("default/p")
        assert low_pod is not None and p_pod is not None
        assert ext.filter(low_pod, ["node-a"]).passed == []
        assert ext.filter(p_pod, ["node-a"]).passed == ["node-a"]


async def nominated_after_failover(h: KubeHarness) -> Driver:
    await start_with_preemptor(h, nominated(preemptor(count=1)))
    driver = driver_of(h, CollectorRegistry())
    assert not await driver.run_once()
    assert pods_deleted(h.server) == []
    return driver


async def test_a_rebuilt_hold_takes_as_victims_only_the_lower_pods_going_that_free_its_devices(
        tmp_path: Path) -> None:
    """After a failover, p (1 GPU) nominated to node-a, where v0 (below p) and
    v1 (above p, stuck) are going: the hold takes v0's GPU, with v0 alone as
    its victim, and ends its wait once v0 is gone though v1 stays."""
    async with KubeHarness(tmp_path) as h:
        full_cluster(h.server)
        going(h, "v0", 0)
        going(h, "v1", 2000)
        driver = await nominated_after_failover(h)
        held = h.inventory.nomination("default/p")
        assert held is not None
        assert held.device_ids == (f"{DRIVER}/node-a/gpu-0",)
        assert held.victims == (("default/v0", "uid-v0"),)
        assert held.victim_claims == ("default/v0-gpu",)
        h.server.delete("pods", "v0", "default")
        h.server.delete("resourceclaims", "v0-gpu", "default")
        await h.caught_up()
        assert not driver.victims_pending(held)


async def test_no_hold_is_rebuilt_for_a_pod_going_that_is_of_higher_priority_or_not_needed(
        tmp_path: Path) -> None:
    """p's GPU can only come from v0, going but of higher priority than p: no
    victim of p's, so nothing is held. Nor when the pod going holds a GPU p's
    allocation does not take."""
    async with KubeHarness(tmp_path) as h:
        full_cluster(h.server)
        going(h, "v0", 2000)
        await nominated_after_failover(h)
        assert h.inventory.nomination("default/p") is None
    async with KubeHarness(tmp_path) as h:
        h.server.create("deviceclasses", device_class())
        h.server.create("nodes", node("node-a"))
        h.server.create("resourceslices", gpu_slice("node-a", 2))
        c, v = victim("v0", 1)
        h.server.create("resourceclaims", c)
        h.server.create("pods", v)
        going(h, "v0", 0)
        await nominated_after_failover(h)
        assert h.inventory.nomination("default/p") is None


async def test_a_nomination_elsewhere_or_none_rebuilds_no_hold(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        full_cluster(h.server)
        going(h, "v0")
        await start_with_preemptor(h, preemptor(count=1))
        driver = driver_of(h, CollectorRegistry())
        assert not await driver.run_once()
        # p fits once v0 is gone, but no scheduler nominated it: nothing held.
        assert h.inventory.nomination("default/p") is None
        # Nominated to another node: nothing held here either.
        elsewhere = h.server.get("pods", "p", "default")
        elsewhere["status"]["nominatedNodeName"] = "node-b"
        h.server.update("pods", elsewhere)
        await h.caught_up()
        assert not await driver_of(h, CollectorRegistry()).run_once()
        assert h.inventory.nomination("default/p") is None
        assert pods_deleted(h.server) == []


async def test_a_new_leader_holds_the_devices_of_a_preemptor_its_victims_name(
        tmp_path: Path) -> None:
    """What an advisor-mode failover leaves: the new leader's kube-scheduler
    cleared p's nominatedNodeName at its first failed attempt; p's two
    victims, still terminating, name p in their DisruptionTarget condition.
    The new leader deletes nothing more, holds their GPUs for p and writes the
    nomination back. Victims preempted for another pod, for an earlier pod of
    p's name (deleted and created again, as a StatefulSet does: another uid),
    or by kube-scheduler (whose message names no pod), give p nothing."""
    ours = "drax: preempting to accommodate a higher priority pod {} (uid {}; devices gpu)"
    async with KubeHarness(tmp_path) as h:
        full_cluster(h.server)
        for name in ("v0", "v1"):
            going(h, name, disruption=ours.format("default/p", "uid-p"))
        await start_with_preemptor(h)
        driver = driver_of(h, CollectorRegistry())
        assert not await driver.run_once()
        assert pods_deleted(h.server) == []
        held = h.inventory.nomination("default/p")
        assert held is not None and held.node == "node-a" and held.pod_uid == "uid-p"
        assert sorted(held.victims) == [("default/v0", "uid-v0"), ("default/v1", "uid-v1")]
        assert not await driver.run_once()
        assert h.server.get("pods", "p", "default")["status"]["nominatedNodeName"] == "node-a"
        assert pods_deleted(h.server) == []
    for message in (ours.format("default/q", "uid-q"), ours.format("default/p", "uid-p-0"),
                    "default-scheduler: preempting to accommodate a higher priority pod"):
        async with KubeHarness(tmp_path) as h:
            full_cluster(h.server)
            for name in ("v0", "v1"):
                going(h, name, disruption=message)
            await start_with_preemptor(h)
            assert not await driver_of(h, CollectorRegistry()).run_once()
            assert h.inventory.nomination("default/p") is None
            assert pods_deleted(h.server) == []


def busy(name: str, on: str, cpu: str, *, priority: int = 2000) -> dict[str, Any]:
    """A running pod without claims taking `cpu` of node `on`."""
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"nodeName": on, "priority": priority,
                     "containers": [{"name": "main", "image": "busybox",
                                     "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Running"}}


async def test_a_preemptor_refused_for_room_is_searched_again_once_a_pod_there_changes(
        tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        full_cluster(h.server)
        sized = h.server.get("nodes", "node-a")
        sized["status"] = {"allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110"}}
        h.server.update("nodes", sized)
        h.server.create("nodes", node("node-z"))
        # "web" outranks the preemptor and leaves it 1 cpu of the 4 it asks
        h.server.create("pods", busy("web", "node-a", "7"))
        c, p = preemptor()
        p["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "4"}}
        await start_with_preemptor(h, (c, p))
        registry = CollectorRegistry()
        driver = driver_of(h, registry)
        now = [0.0]
        driver._clock = lambda: now[0]
        attempted = "drax_preemptions_attempted_total"
        assert not await driver.run_once()
        assert metric(registry, attempted) == 1
        # A pod coming and going on a node not refused for room, and time
        # passing short of the backoff, are no reason to search again.
        h.server.create("pods", busy("other", "node-z", "1"))
        await eventually(lambda: bool(h.inventory.usage.on("node-z").pods), "the other pod")
        now[0] = 60.0
        assert not await driver.run_once()
        assert metric(registry, attempted) == 1
        # The backoff bounds the wait for what nothing tells.
        now[0] = 60.0 + RETRY_SECONDS
        assert not await driver.run_once()
        assert metric(registry, attempted) == 2
        # "web" going from the node refused for room: searched again at once.
        h.server.delete("pods", "web", "default")
        await eventually(lambda: "default/web" not in h.inventory.usage.on("node-a").pods,
                         "web gone")
        assert await driver.run_once()
        assert metric(registry, attempted) == 3
        assert pods_deleted(h.server) == ["v0", "v1"]
