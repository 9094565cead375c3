"""A real Prometheus scraping a real `drax serve` under a scheduler-like load.

drax runs in kube mode against the API-server double of tests/kube (the real
list/watch/bind protocol on loopback), so the watch, bind and inventory
metrics are all live; the cluster and its pods come from loadtest/generator.py.
The load is kube-scheduler's cycle per pod (filter, prioritize, bind) from
loadtest/bench.py, in small paced batches (the background inventory walk and
warming run in the gaps, as they would between real scheduling cycles), with
more pods than the cluster holds so that the last ones no longer fit.
Prometheus gets its own config and data directory under `workdir`, a 1 s
scrape interval, loopback only, and is stopped on exit.

`tests/observability/test_prometheus.py` asserts on it; `render.py` draws the
dashboards from it for the README.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import math
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from loadtest import bench, generator
from tests.kube.apiserver import FakeApiServer

REPO: Final = Path(__file__).resolve().parents[2]
GRAFANA: Final = REPO / "manifests" / "grafana"
DASHBOARDS: Final = GRAFANA / "dashboards"  # the dashboards' JSON sources
PROMETHEUS: Final = REPO / "manifests" / "prometheus"
RULES: Final = PROMETHEUS / "rules"  # the plain rule file and its promtool unit tests
SCRAPE_SECONDS: Final = 1
NODES: Final = 6
PODS: Final = 90
BATCH: Final = 6
PLURALS: Final = {"DeviceClass": "deviceclasses", "Node": "nodes",
                  "ResourceSlice": "resourceslices", "ResourceClaim": "resourceclaims",
                  "Pod": "pods"}


def prometheus_binaries() -> tuple[str, str] | None:
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    return (prometheus, promtool) if prometheus and promtool else None


@dataclass(slots=True)
class Stack:
    prometheus_port: int
    drax_port: int
    started: float
    finished: float = 0.0
    outcomes: dict[str, int] = field(default_factory=dict)

    def api(self, path: str, params: Mapping[str, str] | Sequence[tuple[str, str]]) -> Any:
        query = urllib.parse.urlencode(params)
        conn = http.client.HTTPConnection("127.0.0.1", self.prometheus_port, timeout=30)
        try:
            conn.request("GET", f"{path}?{query}")
            body = json.loads(conn.getresponse().read())
        finally:
            conn.close()
        if body.get("status") != "success":
            raise AssertionError(f"Prometheus {path} {params}: {body}")
        return body["data"]

    def query_range(self, expr: str, *, step: float = 1.0) -> list[dict[str, Any]]:
        return list(self.api("/api/v1/query_range", {
            "query": expr, "start": f"{self.started:.3f}", "end": f"{self.finished:.3f}",
            "step": str(step)})["result"])

    def label_values(self, label: str, match: str) -> list[str]:
        return list(self.api(f"/api/v1/label/{label}/values",
                             [("match[]", match), ("start", f"{self.started:.3f}"),
                              ("end", f"{self.finished:.3f}")]))

    # ------------------------------------------------------------------ Grafana's view

    def variables(self, dashboard: Mapping[str, Any]) -> dict[str, str]:
        """The dashboard's template variables resolved as Grafana does on load:
        each query variable's label_values() asked of Prometheus, in order (a
        later one may use an earlier one), every value selected (a multi-value
        variable in a regex matcher becomes `(a|b)`)."""
        values: dict[str, str] = {"datasource": "prometheus"}
        for var in dashboard["templating"]["list"]:
            if var["type"] != "query":
                continue
            definition = substitute(var["definition"], values, range_seconds=self.range_seconds)
            match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", definition)
            if match is None:
                raise AssertionError(f"variable {var['name']}: unsupported {definition!r}")
            found = self.label_values(match.group(2), match.group(1))
            if not found:
                raise AssertionError(f"variable {var['name']}: {definition} found no values")
            # Grafana escapes regex metacharacters for a PromQL string literal.
            escaped = [re.escape(v).replace("\\", "\\\\") for v in found]
            values[var["name"]] = escaped[0] if len(escaped) == 1 else f"({'|'.join(escaped)})"
        return values

    @property
    def range_seconds(self) -> int:
        return max(1, math.ceil(self.finished - self.started))


def substitute(expr: str, values: Mapping[str, str], *, range_seconds: int) -> str:
    """Grafana's built-in and template variables in a query (Prometheus data source):
    $__rate_interval is max(4 x scrape interval, $__interval + scrape interval)."""
    builtins = {"__rate_interval": f"{4 * SCRAPE_SECONDS}s", "__interval": f"{SCRAPE_SECONDS}s",
                "__range": f"{range_seconds}s"}
    merged = {**builtins, **values}

    def one(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in merged:
            raise AssertionError(f"unknown variable ${name} in {expr!r}")
        return merged[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", one, expr)


def dashboards() -> dict[str, dict[str, Any]]:
    return {p.name: json.loads(p.read_text()) for p in sorted(DASHBOARDS.glob("*.json"))}


def panels(dashboard: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))
    return [p for p in out if p.get("type") != "row"]


# ---------------------------------------------------------------------- running it


@contextlib.contextmanager
def _api_server() -> Iterator[tuple[FakeApiServer, asyncio.AbstractEventLoop]]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fake-apiserver", daemon=True)
    thread.start()
    api = FakeApiServer(bookmark_interval=1.0)
    asyncio.run_coroutine_threadsafe(api.start(), loop).result(timeout=30)
    try:
        yield api, loop
    finally:
        asyncio.run_coroutine_threadsafe(api.stop(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)


def _fill(api: FakeApiServer, loop: asyncio.AbstractEventLoop,
          objects: Sequence[dict[str, Any]]) -> None:
    async def create() -> None:
        for obj in objects:
            api.create(PLURALS[obj["kind"]], obj)

    asyncio.run_coroutine_threadsafe(create(), loop).result(timeout=60)


def _prometheus_config(workdir: Path, *, drax_port: int) -> Path:
    config = workdir / "prometheus.yml"
    config.write_text(
        "global:\n"
        f"  scrape_interval: {SCRAPE_SECONDS}s\n"
        f"  evaluation_interval: {SCRAPE_SECONDS}s\n"
        "scrape_configs:\n"
        "  - job_name: drax\n"
        "    static_configs:\n"
        f"      - targets: ['127.0.0.1:{drax_port}']\n")
    return config


def _wait_http(port: int, path: str, *, timeout: float, process: subprocess.Popen[bytes],
               log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{path} server exited:\n{log.read_text()[-3000:]}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", path)
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"port {port}{path} not ready after {timeout}s:\n"
                         f"{log.read_text()[-3000:]}")


@contextlib.contextmanager
def _prometheus(binary: str, workdir: Path, *, drax_port: int) -> Iterator[int]:
    port = bench.free_port()
    log = workdir / "prometheus.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [binary, f"--config.file={_prometheus_config(workdir, drax_port=drax_port)}",
             f"--storage.tsdb.path={workdir / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
             "--storage.tsdb.retention.time=1h", "--log.level=warn"],
            stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        _wait_http(port, "/-/ready", timeout=60, process=process, log=log)
        yield port
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)


def _load(port: int, pods: Sequence[dict[str, Any]], names: Sequence[str]) -> dict[str, int]:
    client = bench.Client(port)
    outcomes: dict[str, int] = {}
    try:
        jobs = [bench.PodJob(phase="load", shape=p["metadata"]["name"].split("-", 2)[2], pod=p)
                for p in pods]
        for start in range(0, len(jobs), BATCH):
            run, _ = bench.schedule(client, jobs[start:start + BATCH],
                                    candidates=lambda: list(names))
            if run.aborted:
                raise AssertionError(f"load aborted: {run.aborted}")
            for sample in run.samples:
                outcomes[sample.outcome] = outcomes.get(sample.outcome, 0) + 1
            time.sleep(0.4)
    finally:
        client.close()
    return outcomes


def _wait_scraped(stack: Stack, expr: str, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = stack.api("/api/v1/query", {"query": expr})["result"]
        if result:
            return
        time.sleep(0.5)
    raise AssertionError(f"Prometheus never saw {expr}")


@contextlib.contextmanager
def running(workdir: Path, *, prometheus: str, settle_seconds: float = 6.0) -> Iterator[Stack]:
    """The whole stack; yields after the load, once Prometheus has scraped its end."""
    cluster = generator.generate_cluster(nodes=NODES, seed=7)
    workload = generator.generate_workload(pods=PODS, seed=7, claims="claim")
    pods = [o for o in workload if o["kind"] == "Pod"]
    with _api_server() as (api, loop):
        _fill(api, loop, cluster + workload)
        kubeconfig = workdir / "kubeconfig"
        kubeconfig.write_text(api.kubeconfig())
        drax_port = bench.free_port()
        argv = [sys.executable, "-m", "app", "serve", "--kubeconfig", str(kubeconfig),
                "--port", str(drax_port), "--log-level", "warning"]
        with bench.serving(argv, port=drax_port, log=workdir / "drax.log", ready_timeout=120), \
                _prometheus(prometheus, workdir, drax_port=drax_port) as prom_port:
            stack = Stack(prometheus_port=prom_port, drax_port=drax_port, started=time.time())
            _wait_scraped(stack, 'drax_ready{job="drax"} == 1', timeout=60)
            names = [generator.node_name(i) for i in range(NODES)]
            stack.outcomes = _load(drax_port, pods, names)
            time.sleep(settle_seconds)
            stack.finished = time.time()
            yield stack
