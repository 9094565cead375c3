"""Kube mode's Pod watch: live pods that use claims reach the inventory whole,
the others only as what they request on their node.

The API-server double applies the fieldSelector as the real one does (a pod
that turns terminal is DELETED for the watch); pods without claims are kept
as their requests (`Inventory.usage`), and only once bound.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.sources.kube.watch import LIVE_PODS
from tests.kube.harness import KubeHarness, eventually, pod


def plain_pod(name: str, node: str = "", cpu: str = "1") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "busybox",
                                            "resources": {"requests": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": spec}


def cpu_on(h: KubeHarness, node: str) -> tuple[int, int]:
    held = h.inventory.usage.on(node)
    return held.requested.milli_cpu, len(held.pods)


def pods_held(h: KubeHarness) -> set[str]:
    return {key for key in ("default/a", "default/b", "default/plain", "default/done")
            if h.inventory.pod(key) is not None}


async def test_only_live_pods_with_claims_are_held(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        h.server.create("pods", pod("a", "claim-a"))
        h.server.create("pods", plain_pod("plain"))
        done = pod("done", "claim-d")
        done["status"]["phase"] = "Succeeded"
        h.server.create("pods", done)
        h.watch()
        await h.synced()
        assert pods_held(h) == {"default/a"}
        assert all(q.get("fieldSelector") == LIVE_PODS for q in h.server.watch_queries("pods"))
        await h.watching()
        h.server.create("pods", pod("b", "claim-b"))
        h.server.create("pods", plain_pod("plain"))  # MODIFIED, still without claims
        await h.caught_up()
        assert pods_held(h) == {"default/a", "default/b"}
        finished = h.server.get("pods", "a", "default")
        finished.setdefault("status", {})["phase"] = "Failed"
        h.server.update("pods", finished)
        await eventually(lambda: pods_held(h) == {"default/b"}, "the terminal pod gone")
        h.server.delete("pods", "b", "default")
        await eventually(lambda: pods_held(h) == set(), "the deleted pod gone")


async def test_pods_without_claims_count_their_requests_on_their_node(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        h.server.create("pods", plain_pod("web", "n1", "2"))
        h.server.create("pods", plain_pod("queued", cpu="3"))  # pending: counts nowhere
        h.watch()
        await h.synced()
        assert cpu_on(h, "n1") == (2000, 1)
        assert h.inventory.pod("default/web") is None  # never the pod itself
        await h.watching()
        h.server.create("pods", plain_pod("queued", "n1", "3"))  # bound
        await eventually(lambda: cpu_on(h, "n1") == (5000, 2), "the bound pod counted")
        h.server.delete("pods", "web", "default")
        await eventually(lambda: cpu_on(h, "n1") == (3000, 1), "the deleted pod gone")
        finished = h.server.get("pods", "queued", "default")
        finished.setdefault("status", {})["phase"] = "Succeeded"
        h.server.update("pods", finished)
        await eventually(lambda: cpu_on(h, "n1") == (0, 0), "the terminal pod gone")
