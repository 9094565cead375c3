"""`python -m loadtest --from-api`: process start to ready in kube mode, from a
paged list of the API-server double (the 100,000-node start-up target).

The double of the kube tests (`tests/kube/apiserver.py`) runs in this
process, filled with the generator's cluster (the same objects as the file
benchmark: Nodes, DeviceClasses, ResourceSlices and the workload's claims),
and the real `drax serve --kubeconfig` lists every watched kind from it in
pages (limit/continue, 500 per page) and then watches. Measured: process
start to `/readyz` answering 200 (every kind listed), and RSS then.

Slices are stored with their spec encoded once (`orjson.Fragment`): a
100,000-node cluster held as dicts would take more memory than drax itself
(3.4 million devices), while a list only ever sends them as JSON.
"""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Final

import httpx
import orjson

from loadtest import generator
from loadtest.bench import free_port, memory_bytes, stop_process
from tests.kube.apiserver import FakeApiServer

REPO: Final = Path(__file__).resolve().parents[1]
PLURALS: Final = {"Node": "nodes", "DeviceClass": "deviceclasses",
                  "ResourceSlice": "resourceslices", "ResourceClaim": "resourceclaims"}


def _stored(obj: dict[str, Any]) -> dict[str, Any]:
    if obj["kind"] != "ResourceSlice":
        return obj
    return {**obj, "spec": orjson.Fragment(orjson.dumps(obj["spec"]))}


def fill(api: FakeApiServer, *, nodes: int, seed: int,
         claims: list[dict[str, Any]]) -> int:
    """Put the generated cluster and `claims` into `api`; returns the device count."""
    devices = 0
    gc.disable()  # millions of objects that stay alive (see `_collector_paused`)
    try:
        for obj in generator.iter_cluster(nodes=nodes, seed=seed):
            if obj["kind"] == "ResourceSlice":
                devices += len(obj["spec"].get("devices", ()))
            api.preload(PLURALS[obj["kind"]], [_stored(obj)])
        api.preload("resourceclaims", claims)
    finally:
        gc.enable()
    return devices


async def _wait_ready(proc: subprocess.Popen[bytes], port: int, *, timeout: float,
                      started: float) -> float:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
        while time.monotonic() - started < timeout:
            if proc.poll() is not None:
                raise RuntimeError(f"drax exited with {proc.returncode} before it was ready")
            try:
                if (await client.get("/readyz")).status_code == 200:
                    return time.monotonic() - started
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError(f"drax not ready after {timeout:.0f} s")


async def _measure(*, nodes: int, seed: int, claims: list[dict[str, Any]], workdir: Path,
                   ready_timeout: float, server_args: list[str]) -> dict[str, Any]:
    api = FakeApiServer(bookmark_interval=5.0)
    await api.start()
    try:
        began = time.monotonic()
        devices = fill(api, nodes=nodes, seed=seed, claims=claims)
        print(f"[{nodes} nodes, API double] {devices} devices stored in "
              f"{time.monotonic() - began:.1f}s", file=sys.stderr)
        kubeconfig = workdir / f"kubeconfig-{nodes}"
        kubeconfig.write_text(api.kubeconfig())
        port = free_port()
        with (workdir / f"drax-kube-{nodes}.log").open("wb") as log:
            started = time.monotonic()
            proc = subprocess.Popen(
                [sys.executable, "-m", "app", "serve", "--kubeconfig", str(kubeconfig),
                 "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
                 *server_args], cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
            try:
                ready = await _wait_ready(proc, port, timeout=ready_timeout, started=started)
                rss, peak = memory_bytes(proc.pid)
            finally:
                stop_process(proc)
        lists = api.count("GET", "/resourceslices")
    finally:
        await api.stop()
    return {"nodes": nodes, "devices": devices, "ready_seconds": round(ready, 3),
            "ready_bytes": rss, "peak_bytes": peak, "slice_list_requests": lists}


def run(*, nodes: int, seed: int, claims: list[dict[str, Any]], workdir: Path,
        ready_timeout: float, server_args: list[str]) -> dict[str, Any]:
    result = asyncio.run(_measure(nodes=nodes, seed=seed, claims=claims, workdir=workdir,
                                  ready_timeout=ready_timeout, server_args=server_args))
    print(f"[{nodes} nodes, API double] drax ready in {result['ready_seconds']:.1f}s, "
          f"RSS {result['ready_bytes'] / 2**20:.0f} MB", file=sys.stderr)
    return result


def markdown(results: list[dict[str, Any]]) -> str:
    rows = ["| nodes | devices | start to ready (paged list) | RSS at ready | peak RSS "
            "| slice list requests |", "| --- | --- | --- | --- | --- | --- |"]
    rows += [f"| {r['nodes']:,} | {r['devices']:,} | {r['ready_seconds']:.1f} s "
             f"| {r['ready_bytes'] / 2**20:,.0f} MB | {r['peak_bytes'] / 2**20:,.0f} MB "
             f"| {r['slice_list_requests']} |" for r in results]
    return "\n".join(rows)
