"""`drax serve --kubeconfig` end to end: uvicorn on loopback, watching and binding
through the API double, driven over HTTP as kube-scheduler drives it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import uvicorn
from prometheus_client import CollectorRegistry

from app.config import Settings
from app.runtime import Runtime, build_runtime
from loadtest.bench import free_port
from tests.kube.apiserver import FakeApiServer
from tests.kube.harness import claim, device_class, gpu_slice, node, pod


async def wait_ready(client: httpx.AsyncClient, *, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (await client.get("/readyz")).status_code != 200:
        if loop.time() > deadline:
            raise AssertionError("drax never became ready")
        await asyncio.sleep(0.02)


@asynccontextmanager
async def serving(api: FakeApiServer, tmp_path: Path, registry: CollectorRegistry
                  ) -> AsyncIterator[tuple[Runtime, httpx.AsyncClient]]:
    """`drax serve --kubeconfig` on the (started) API double `api`, ready: the
    runtime and a client of its port; the server and `api` stop on the way out."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(api.kubeconfig())
    port = free_port()
    runtime = build_runtime(Settings(kubeconfig=str(kubeconfig), port=port), registry=registry)
    server = uvicorn.Server(uvicorn.Config(runtime.app, host="127.0.0.1", port=port,
                                           log_config=None, lifespan="on"))
    running = asyncio.create_task(server.serve())
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            while not server.started:
                await asyncio.sleep(0.01)
            await wait_ready(client)
            yield runtime, client
    finally:
        server.should_exit = True
        await running
        await api.stop()


async def test_serve_with_a_kubeconfig_watches_filters_and_binds(tmp_path: Path) -> None:
    api = FakeApiServer(bookmark_interval=0.1)
    await api.start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(api.kubeconfig())
    api.create("nodes", node("node-a"))
    api.create("resourceslices", gpu_slice("node-a", 4))
    api.create("deviceclasses", device_class())
    api.create("resourceclaims", claim("c1", count=2))
    p1 = api.create("pods", pod("p1", "c1"))
    api.faults.list_errors = 10_000

    port = free_port()
    registry = CollectorRegistry()
    runtime = build_runtime(Settings(kubeconfig=str(kubeconfig), port=port), registry=registry)
    assert runtime.source == "kube"
    server = uvicorn.Server(uvicorn.Config(runtime.app, host="127.0.0.1", port=port,
                                           log_config=None, lifespan="on"))
    serving = asyncio.create_task(server.serve())
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            while not server.started:
                await asyncio.sleep(0.01)
            args = {"Pod": p1, "NodeNames": ["node-a"]}
            assert (await client.get("/readyz")).status_code == 503
            early = (await client.post("/scheduler/filter", json=args)).json()
            assert "not synced" in early["Error"] or "not ready" in early["Error"]
            assert not early.get("NodeNames")

            api.faults.list_errors = 0
            await wait_ready(client)
            answer = (await client.post("/scheduler/filter", json=args)).json()
            assert answer["NodeNames"] == ["node-a"] and not answer.get("Error")
            bound = (await client.post("/scheduler/bind", json={
                "PodName": "p1", "PodNamespace": "default", "PodUID": "uid-p1",
                "Node": "node-a"})).json()
            assert not bound.get("Error")
    finally:
        server.should_exit = True
        await serving
        await api.stop()
    written = api.get("resourceclaims", "c1", "default")
    assert len(written["status"]["allocation"]["devices"]["results"]) == 2
    assert api.get("pods", "p1", "default")["spec"]["nodeName"] == "node-a"
    assert registry.get_sample_value("drax_bind_attempts_total", {"result": "ok"}) == 1
    assert registry.get_sample_value("drax_inventory_devices") == 4
    assert registry.get_sample_value("drax_watch_errors_total", {"kind": "Node"}) >= 1
