"""A nominated preemptor's scheduling attempts, counted by what drax knew of
its victims' claims (`drax_preemptor_attempts_total{claims}`), against the
API-server double: an attempt whose first filter read a victim's claim still
allocated began before the deallocation; the filters after it in the same
attempt do not count again; the first filter of each attempt reads, however
soon after the last read.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from app.preemption import Catchup, CatchupMetrics
from tests.kube.harness import KubeHarness, eventually, node
from tests.kube.test_kube_preemption import (
    full_api_with_preemptor,
    preempted_for_p,
    preempted_for_p_by_the_driver,
)
from tests.kube.test_kube_serve import serving


def attempts(registry: CollectorRegistry) -> dict[str, float]:
    return {claims: registry.get_sample_value("drax_preemptor_attempts_total",
                                              {"claims": claims}) or 0.0
            for claims in ("allocated", "freed", "unread")}


async def test_the_scheduler_s_attempts_are_counted_once_each_by_what_the_claims_were(
        tmp_path: Path) -> None:
    """Over HTTP, as kube-scheduler calls: attempt 1 tries the nominated node
    alone, drax refuses it (the read finds the victims' claims allocated), and
    the other nodes are filtered in the same attempt; once the claims are
    freed at the API server (drax's claim watch trailing), attempt 2's filter
    of the nominated node passes."""
    api = await full_api_with_preemptor()
    api.create("nodes", node("node-b"))  # no devices: never fits
    registry = CollectorRegistry()
    async with serving(api, tmp_path, registry) as (runtime, client):
        inventory = runtime.inventory
        await preempted_for_p(api, inventory)
        for name in ("v0", "v1"):
            api.delete("pods", name, "default")
        await eventually(lambda: inventory.pod("default/v0") is None
                         and inventory.pod("default/v1") is None, "the victims gone")
        pod = api.get("pods", "p", "default")
        assert pod["status"]["nominatedNodeName"] == "node-a"

        async def filtered(*names: str) -> list[str]:
            answer = (await client.post("/scheduler/filter", json={
                "Pod": pod, "NodeNames": list(names)})).json()
            return list(answer["NodeNames"] or [])

        assert await filtered("node-a") == []
        assert await filtered("node-a", "node-b") == []
        assert attempts(registry) == {"allocated": 1, "freed": 0, "unread": 0}
        api.hold_watches("resourceclaims")
        for name in ("v0", "v1"):
            api.delete("resourceclaims", f"{name}-gpu", "default")
        assert await filtered("node-a") == ["node-a"]
        assert attempts(registry) == {"allocated": 1, "freed": 1, "unread": 0}
        api.release_watches("resourceclaims")


async def test_an_attempt_s_first_filter_reads_however_soon_and_its_others_count_nothing(
        tmp_path: Path) -> None:
    """The claims are freed between an attempt's filter of the nominated node
    (read: allocated) and its filter of the other nodes: that attempt began
    before the deallocation and counts so, once. The next attempt's filter
    reads although the spacing between reads has not passed, and finds them
    freed. Without a connection nothing is read: such an attempt is unread."""
    async with KubeHarness(tmp_path) as h:
        await preempted_for_p_by_the_driver(h)
        p = h.inventory.pod("default/p")
        assert p is not None and p.nominated_node_name == "node-a"
        unconnected = CollectorRegistry()
        after = await Catchup(h.inventory, metrics=CatchupMetrics(unconnected)).before_filter(
            p, ["node-a"])
        assert after is not None
        assert attempts(unconnected) == {"allocated": 0, "freed": 0, "unread": 1}

        registry = CollectorRegistry()
        catchup = Catchup(h.inventory, metrics=CatchupMetrics(registry), min_interval=3600)
        catchup.api = h.client
        after = await catchup.before_filter(p, ["node-a"])
        assert after is not None
        after([])
        assert h.server.count("GET", "/resourceclaims/v0-gpu") == 1
        h.server.hold_watches("resourceclaims")
        for name in ("v0", "v1"):
            h.server.delete("pods", name, "default")
            h.server.delete("resourceclaims", f"{name}-gpu", "default")
        after = await catchup.before_filter(p, ["node-a", "node-b"])
        assert after is not None
        after([])
        assert attempts(registry) == {"allocated": 1, "freed": 0, "unread": 0}
        after = await catchup.before_filter(p, ["node-a"])
        assert after is not None
        after(["node-a"])
        assert h.server.count("GET", "/resourceclaims/v0-gpu") == 2
        assert attempts(registry) == {"allocated": 1, "freed": 1, "unread": 0}
        # A pod without a hold of its own is no preemptor's attempt.
        other = h.inventory.pod("default/v2")
        assert other is not None and await catchup.before_filter(other, ["node-a"]) is None
