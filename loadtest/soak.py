"""`python -m loadtest --soak SECONDS`: scheduling and churn together, for a long time.

The real `drax serve --kubeconfig` (allocator mode) runs as a process against
the API-server double of the kube tests (in this process), so every part that
lives for the whole run takes part: the watches, the inventory, the answer
caches, the binder's writes. One loop schedules pods as kube-scheduler does
(filter over every node, prioritize the nodes that passed, bind the best);
between pods, churn: the oldest bound pods are deleted with their claims once
half the GPUs are taken (so the cluster never fills), a node's slice is
republished with a new generation, a node is relabelled.

Per window of `WINDOW_SECONDS`: drax's RSS (/proc/<pid>/status, drax's own
process: the API double lives in this one), the p99 of filter both as a round
trip and as drax's handler time (its `Server-Timing` header), drax's CPU time
per pod (/proc/<pid>/stat), the load average, and the requests that erred
(HTTP status other than 200, a transport error, or an `Error` in the answer).

After the warm-up, the soak's targets: RSS grows by at most 5 %, the
filter p99 of the second half of the windows drifts by at most 20 % from the
first half, no request errs. The warm-up lasts a fifth of the run and at
least until `WARMUP_PODS` pods were scheduled: every bounded memory that still
fills per pod (the inventory's change log, the filter-reason categories, the
shape cache's bound, all 4,096 entries, and the re module's 512 patterns)
gains at least one entry per pod, so it is full, or at its steady size, by
then, and what grows after is not a cache filling.

The drift is judged on the handler p99, not the round trip: the question is
whether drax gets slower as it runs, and the round trip also holds the time
this process (a single event loop that also serves drax's watches and writes)
takes to notice the answer, on the same two cores. Both are wall-clock time,
so the run belongs under the heavy-run lock; the CPU time per pod and the load
average show whether a window was slow by drax's own work or by the machine.
"""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx

from loadtest.bench import free_port
from loadtest.stats import percentile
from tests.kube.apiserver import FakeApiServer
from tests.kube.harness import claim, device_class, gpu_slice, node, pod

REPO: Final = Path(__file__).resolve().parents[1]
NODES: Final = 100
GPUS_PER_NODE: Final = 8
WINDOW_SECONDS: Final = 30.0
WARMUP_PODS: Final = 5_000  # above the 4,096 entries of the largest per-pod memory
RSS_GROWTH_MAX: Final = 0.05
P99_DRIFT_MAX: Final = 0.20
CLAIMS_AHEAD: Final = 5


@dataclass(slots=True)
class Window:
    started: float
    rss_mb: float = 0.0
    pods_before: int = 0  # pods scheduled before this window
    cpu_started: float = 0.0  # drax's CPU seconds when the window began
    cpu_seconds: float = 0.0  # drax's CPU seconds spent in the window
    load: float = 0.0  # 1-minute load average at the window's end
    filter_seconds: list[float] = field(default_factory=list)
    handler_seconds: list[float] = field(default_factory=list)
    requests: int = 0
    errors: int = 0

    def close(self, pid: int) -> None:
        self.rss_mb = _rss_mb(pid)
        self.cpu_seconds = _cpu_seconds(pid) - self.cpu_started
        self.load = float(Path("/proc/loadavg").read_text().split()[0])

    def to_dict(self) -> dict[str, Any]:
        filters = len(self.filter_seconds)
        return {"t_s": round(self.started, 1), "rss_mb": round(self.rss_mb, 1),
                "filters": filters, "filter_p99_ms": _p99_ms(self.filter_seconds),
                "handler_p99_ms": _p99_ms(self.handler_seconds),
                "cpu_ms_per_pod": round(self.cpu_seconds * 1e3 / filters, 2) if filters else 0.0,
                "load": self.load, "requests": self.requests, "errors": self.errors}


def _p99_ms(seconds: list[float]) -> float:
    return round(percentile(sorted(seconds), 99) * 1e3, 2)


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _cpu_seconds(pid: int) -> float:
    # utime and stime, fields 14 and 15 of /proc/<pid>/stat, after the "(comm)"
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Soak:
    def __init__(self, api: FakeApiServer, client: httpx.AsyncClient, *, seed: int) -> None:
        self.api, self.client = api, client
        self.rng = random.Random(seed)
        self.nodes = [f"node-{i:03d}" for i in range(NODES)]
        self.bound: deque[str] = deque()
        self.held = 0  # GPUs held by bound pods
        self.serial = 0
        self.scheduled = 0
        self.unplaced = 0
        self.generations = dict.fromkeys(self.nodes, 1)
        self.errors: list[str] = []
        # Claims are created a few pods ahead, as the resourceclaim controller
        # creates them before the scheduler sees the pod: drax's watch has them.
        self.ahead: deque[tuple[str, int]] = deque()

    async def post(self, window: Window, path: str, body: dict[str, Any],
                   handler: list[float] | None = None) -> Any:
        window.requests += 1
        try:
            r = await self.client.post(path, json=body)
        except httpx.TransportError as exc:
            return self._erred(window, f"{path}: {type(exc).__name__}")
        timing = r.headers.get("server-timing", "")
        if handler is not None and timing.startswith("handler;dur="):
            handler.append(float(timing.removeprefix("handler;dur=")) / 1e3)
        if r.status_code != 200:
            return self._erred(window, f"{path}: HTTP {r.status_code}")
        answer = r.json()
        if isinstance(answer, dict) and answer.get("Error"):
            return self._erred(window, f"{path}: {answer['Error']}")
        return answer

    def _erred(self, window: Window, what: str) -> None:
        window.errors += 1
        if len(self.errors) < 20:
            self.errors.append(what)
        return None

    def _next_claim(self) -> tuple[str, int]:
        while len(self.ahead) < CLAIMS_AHEAD:
            self.serial += 1
            name, gpus = f"soak-{self.serial}", self.rng.choice((1, 1, 2, 4))
            self.api.create("resourceclaims", claim(name, count=gpus))
            self.ahead.append((name, gpus))
        return self.ahead.popleft()

    async def schedule_one(self, window: Window) -> None:
        name, gpus = self._next_claim()
        self.scheduled += 1
        obj = self.api.create("pods", pod(name, name))
        started = time.perf_counter()
        answer = await self.post(window, "/scheduler/filter",
                                 {"Pod": obj, "NodeNames": self.nodes}, window.handler_seconds)
        window.filter_seconds.append(time.perf_counter() - started)
        passed = (answer or {}).get("NodeNames") or []
        if not passed:
            self.unplaced += 1
            return self._drop(name)
        scores = await self.post(window, "/scheduler/prioritize",
                                 {"Pod": obj, "NodeNames": passed}) or []
        best = max(scores, key=lambda s: s["Score"])["Host"] if scores else passed[0]
        bound = await self.post(window, "/scheduler/bind", {
            "PodName": name, "PodNamespace": "default", "PodUID": obj["metadata"]["uid"],
            "Node": best})
        if bound is None:
            return self._drop(name)
        self.bound.append(name)
        self.held += gpus

    def _drop(self, name: str) -> None:
        self.api.delete("pods", name, "default")
        self.api.delete("resourceclaims", name, "default")

    def churn(self) -> None:
        while self.held > NODES * GPUS_PER_NODE // 2 and self.bound:
            name = self.bound.popleft()
            gone = self.api.get("resourceclaims", name, "default")
            self.held -= len(((gone.get("status") or {}).get("allocation") or {})
                             .get("devices", {}).get("results") or [])
            self._drop(name)
        roll = self.rng.random()
        target = self.rng.choice(self.nodes)
        if roll < 0.05:
            self.generations[target] += 1
            self.api.update("resourceslices", gpu_slice(target, GPUS_PER_NODE,
                                                        generation=self.generations[target]))
        elif roll < 0.10:
            self.api.update("nodes", node(target, rack=f"r{self.rng.randrange(4)}"))


async def _ready(client: httpx.AsyncClient, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(1200):
        if proc.poll() is not None:
            raise RuntimeError(f"drax exited with {proc.returncode}")
        try:
            if (await client.get("/readyz")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.1)
    raise RuntimeError("drax never became ready")


async def _run(seconds: float, *, seed: int, workdir: Path) -> dict[str, Any]:
    api = FakeApiServer(bookmark_interval=1.0)
    await api.start()
    kubeconfig = workdir / "kubeconfig"
    kubeconfig.write_text(api.kubeconfig())
    for name in [f"node-{i:03d}" for i in range(NODES)]:
        api.create("nodes", node(name))
        api.create("resourceslices", gpu_slice(name, GPUS_PER_NODE))
    api.create("deviceclasses", device_class())
    port = free_port()
    log = (workdir / "drax.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--kubeconfig",
                             str(kubeconfig), "--port", str(port)], cwd=REPO, stdout=log,
                            stderr=subprocess.STDOUT)
    windows: list[Window] = []
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
            await _ready(c, proc)
            soak = _Soak(api, c, seed=seed)
            began = time.monotonic()
            while (now := time.monotonic() - began) < seconds:
                if not windows or now - windows[-1].started >= WINDOW_SECONDS:
                    if windows:
                        windows[-1].close(proc.pid)
                    windows.append(Window(started=now, pods_before=soak.scheduled,
                                          cpu_started=_cpu_seconds(proc.pid)))
                await soak.schedule_one(windows[-1])
                soak.churn()
            windows[-1].close(proc.pid)
            errors = soak.errors
            pods, unplaced = soak.scheduled, soak.unplaced
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
        await api.stop()
    return _verdict(windows, seconds=seconds, pods=pods, unplaced=unplaced, errors=errors)


def warmup_windows(windows: list[Window]) -> int:
    """Windows of warm-up: a fifth of the run, at least one, and at least until
    `WARMUP_PODS` pods were scheduled (module doc); never all of them."""
    warm = max(1, len(windows) // 5)
    while warm < len(windows) - 1 and windows[warm].pods_before < WARMUP_PODS:
        warm += 1
    return min(warm, max(1, len(windows) - 1))


def _halves(after: list[Window], seconds_of: Callable[[Window], list[float]]
            ) -> tuple[float, float, float]:
    half = max(1, len(after) // 2)
    first = sorted(s for w in after[:half] for s in seconds_of(w))
    last = sorted(s for w in after[half:] or after[-1:] for s in seconds_of(w))
    p99_first, p99_last = percentile(first, 99), percentile(last, 99)
    return p99_first, p99_last, (p99_last / p99_first - 1 if p99_first else 0.0)


def _verdict(windows: list[Window], *, seconds: float, pods: int, unplaced: int,
             errors: list[str]) -> dict[str, Any]:
    warm = warmup_windows(windows)
    after = windows[warm:] or windows[-1:]
    trip_first, trip_last, trip_drift = _halves(after, lambda w: w.filter_seconds)
    handler_first, handler_last, drift = _halves(after, lambda w: w.handler_seconds)
    rss_start, rss_end = after[0].rss_mb, after[-1].rss_mb
    growth = rss_end / rss_start - 1 if rss_start else 0.0
    erred = sum(w.errors for w in windows)
    return {
        "seconds": seconds, "nodes": NODES, "gpus": NODES * GPUS_PER_NODE, "pods": pods,
        "unplaced": unplaced,
        "requests": sum(w.requests for w in windows), "errors": erred,
        "first_errors": errors, "warmup_windows": warm,
        "warmup_pods": after[0].pods_before,
        "rss_mb": [round(rss_start, 1), round(rss_end, 1)], "rss_growth": round(growth, 4),
        "handler_p99_ms": [round(handler_first * 1e3, 2), round(handler_last * 1e3, 2)],
        "handler_p99_drift": round(drift, 4),
        "filter_p99_ms": [round(trip_first * 1e3, 2), round(trip_last * 1e3, 2)],
        "p99_drift": round(trip_drift, 4),
        "drift_judged_on": "handler", "measured_windows": len(windows) - warm,
        # halves need two windows after the warm-up; a shorter run proves nothing
        "passed": len(windows) - warm >= 2 and growth <= RSS_GROWTH_MAX
        and abs(drift) <= P99_DRIFT_MAX and erred == 0,
        "windows": [w.to_dict() for w in windows],
    }


def run(seconds: float, *, seed: int = 0, workdir: str | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="drax-soak-") as tmp:
        path = Path(workdir) if workdir else Path(tmp)
        path.mkdir(parents=True, exist_ok=True)
        return asyncio.run(_run(seconds, seed=seed, workdir=path))


def markdown(doc: dict[str, Any]) -> str:
    rows = ["| t (s) | RSS (MB) | filters | filter p99 (ms) | handler p99 (ms) | "
            "drax CPU ms/pod | load | requests | errors |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    rows += [f"| {w['t_s']} | {w['rss_mb']} | {w['filters']} | {w['filter_p99_ms']} | "
             f"{w['handler_p99_ms']} | {w['cpu_ms_per_pod']} | {w['load']} | "
             f"{w['requests']} | {w['errors']} |" for w in doc["windows"]]
    head = (f"Soak {doc['seconds']:g} s, {doc['nodes']} nodes ({doc['gpus']} GPUs): "
            f"{doc['pods']} pods ({doc['unplaced']} found no node), {doc['requests']} "
            f"requests, {doc['errors']} erred; after {doc['warmup_windows']} warm-up windows "
            f"({doc['warmup_pods']} pods) RSS {doc['rss_mb'][0]} -> {doc['rss_mb'][1]} MB "
            f"({doc['rss_growth']:+.1%}, target <= +5 %), filter handler p99 "
            f"{doc['handler_p99_ms'][0]} -> {doc['handler_p99_ms'][1]} ms "
            f"({doc['handler_p99_drift']:+.1%}, target within 20 %; round trip "
            f"{doc['filter_p99_ms'][0]} -> {doc['filter_p99_ms'][1]} ms, "
            f"{doc['p99_drift']:+.1%}): {'PASS' if doc['passed'] else 'FAIL'}"
            + ("" if doc["measured_windows"] >= 2 else
               " (fewer than two windows after the warm-up: run longer)"))
    return head + "\n\n" + "\n".join(rows)
