"""Test wiring for the kube tests: the API double, the real client, an inventory, builders.

`KubeHarness` is an async context manager rather than a set of fixtures so the
tests read top to bottom and every piece is torn down in order (watch tasks,
client sessions, then the server) even when a test fails half-way.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client
from prometheus_client import CollectorRegistry

from app.inventory import Inventory, NodePool
from app.sources.kube import (
    WATCHED_KINDS,
    InventorySizes,
    KubeSource,
    WatchMetrics,
    WatchSettings,
    api_client,
)
from app.sources.kube.watch import OnChange
from tests.kube.apiserver import FakeApiServer

DRIVER = "gpu.example.com"
WATCHED_PLURALS = ("nodes", "resourceslices", "deviceclasses", "resourceclaims", "pods",
                   "poddisruptionbudgets", "priorityclasses")
FAST = WatchSettings(watch_timeout=30.0, backoff_initial=0.02, backoff_max=0.1, min_watch=0.05)


class KubeHarness:
    def __init__(self, tmp_path: Path, *, settings: WatchSettings = FAST,
                 bookmark_interval: float = 0.1, pool: NodePool | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.server = FakeApiServer(bookmark_interval=bookmark_interval)
        self.kubeconfig = tmp_path / "kubeconfig"
        self.settings = settings
        self.registry = CollectorRegistry()
        self.pool = pool
        self.inventory = Inventory(expected_kinds=[w.kind for w in WATCHED_KINDS], pool=pool,
                                   clock=clock)
        self.metrics = WatchMetrics(self.registry, kinds=[w.kind for w in WATCHED_KINDS])
        self.registry.register(InventorySizes(self.inventory))
        self.client: client.ApiClient | None = None
        self.source: KubeSource | None = None

    async def __aenter__(self) -> KubeHarness:
        await self.server.start()
        self.kubeconfig.write_text(self.server.kubeconfig())
        self.client = await api_client(kubeconfig=str(self.kubeconfig))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.source is not None:
            await self.source.stop()
        if self.client is not None:
            await self.client.close()
        await self.server.stop()

    def watch(self, *, on_change: OnChange | None = None) -> KubeSource:
        assert self.client is not None
        self.source = KubeSource(self.client, self.inventory, metrics=self.metrics,
                                 settings=self.settings, pool=self.pool, on_change=on_change)
        self.source.start()
        return self.source

    async def synced(self) -> None:
        await eventually(lambda: self.inventory.synced, "the initial lists")

    async def watching(self) -> None:
        """Every informer has a watch open."""
        await eventually(lambda: all(self.server.open_watches(p) == 1 for p in WATCHED_PLURALS),
                         "open watches")

    async def caught_up(self) -> None:
        """Every informer has seen the server's latest resourceVersion."""
        assert self.source is not None
        source = self.source
        rv = str(self.server.resource_version)
        await eventually(lambda: all(i.resource_version == rv for i in source.informers),
                         f"resourceVersion {rv}")

    def metric(self, name: str, **labels: str) -> float:
        value = self.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value


async def eventually(condition: Callable[[], bool], what: str, *, timeout: float = 10.0) -> None:
    """Wait for `condition`; the timeout only bounds a hung test, it measures nothing."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


# --------------------------------------------------------------------------- builders


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def gpu_slice(node_name: str, count: int, *, generation: int = 1, product: str = "H100",
              name: str | None = None) -> dict[str, Any]:
    """A node-local slice of `count` GPUs; GPUs 0-3 sit on pcie root 0, the rest on root 1."""
    devices = [{"name": f"gpu-{i}", "attributes": {
        "productName": {"string": product},
        "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{i // 4:02x}"}},
        "capacity": {"memory": {"value": "80Gi"}}} for i in range(count)]
    return {"metadata": {"name": name or f"{node_name}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": generation,
                              "resourceSliceCount": 1},
                     "devices": devices}}


def device_class(name: str = "gpu", expression: str | None = None) -> dict[str, Any]:
    expr = expression or f'device.driver == "{DRIVER}"'
    return {"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": expr}}]}}


def claim(name: str, *, count: int = 1, device_class_name: str = "gpu",
          namespace: str = "default", selector: str | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class_name, "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"metadata": {"name": name, "namespace": namespace},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}}}


def pod(name: str, *claims: str, namespace: str = "default", uid: str | None = None,
        templates: dict[str, str | None] | None = None) -> dict[str, Any]:
    """A pod using the named claims directly, plus template claims whose generated
    names (None: not created yet) are recorded in `status.resourceClaimStatuses`."""
    refs: list[dict[str, str]] = [{"name": c, "resourceClaimName": c} for c in claims]
    statuses = []
    for pod_claim, generated in (templates or {}).items():
        refs.append({"name": pod_claim, "resourceClaimTemplateName": f"{pod_claim}-template"})
        if generated is not None:
            statuses.append({"name": pod_claim, "resourceClaimName": generated})
    return {"metadata": {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}"},
            "spec": {"schedulerName": "drax", "resourceClaims": refs,
                     "containers": [{"name": "main", "image": "busybox"}]},
            "status": {"resourceClaimStatuses": statuses}}


def unstamped(allocation: dict[str, Any]) -> dict[str, Any]:
    """A written allocation without the allocationTimestamp the binder adds (it must
    be there), for comparing with what the allocator chose."""
    assert allocation.get("allocationTimestamp"), allocation
    return {k: v for k, v in allocation.items() if k != "allocationTimestamp"}
