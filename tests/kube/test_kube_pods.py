"""Kube mode's Pod watch: only live pods that use claims reach the inventory.

The API-server double applies the fieldSelector as the real one does (a pod
that turns terminal is DELETED for the watch); pods without claims are
dropped by the source before parsing.
"""

from __future__ import annotations

from pathlib import Path

from app.sources.kube.watch import LIVE_PODS
from tests.kube.harness import KubeHarness, eventually, pod


def plain_pod(name: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]}}


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
