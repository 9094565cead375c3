"""Drive a real extender server the way kube-scheduler does, and time it.

kube-scheduler schedules one pod at a time: it POSTs `filter` with the
candidate node names, `prioritize` with the nodes that passed (skipped when
exactly one passed), and `bind` on the best-scored node, over one keep-alive
connection. `schedule` does exactly that against `drax serve` and records every
request body; given a mirror server (the floor), it sends each pod's bodies
there too, right after drax answered, so both are timed on identical payloads
under the same background load.

Servers run as subprocesses on 127.0.0.1 and are always stopped by `serving`,
even when the benchmark fails. Latencies are client-observed round trips
(request sent to response decoded) from `http.client`, whose own overhead is
a few tens of microseconds and the same for both servers. The client's cyclic
collector is paused during a round trip and runs the passes that came due
right after it, outside the timing: CPython collects by stopping the
thread, so a pass over the client's own heap (triggered by decoding a
prioritize answer of thousands of entries) would otherwise be counted as the
server's latency, which kube-scheduler's concurrent Go collector does not
add. The client's time in those passes is kept beside the latencies
(`Client.collected_s`).
"""

from __future__ import annotations

import contextlib
import gc
import http.client
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

HOST: Final = "127.0.0.1"
URL_PREFIX: Final = "/scheduler"
JSON_HEADERS: Final = {"Content-Type": "application/json"}
HANDLER_METRIC: Final = "drax_request_duration_seconds"


class BenchmarkError(RuntimeError):
    """The benchmark cannot go on (server did not start, answered garbage...)."""


# --------------------------------------------------------------------------- processes


def free_ports(count: int) -> list[int]:
    """`count` distinct ports free on the loopback address. The sockets stay
    bound until all are picked: a port closed at once may be handed out again
    by the next bind, and two listeners given one port collide."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                 for _ in range(count)]
        for s in socks:
            s.bind((HOST, 0))
        return [int(s.getsockname()[1]) for s in socks]


def free_port() -> int:
    return free_ports(1)[0]


def memory_bytes(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process, from /proc: current and peak resident memory."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) * 1024
    return values.get("VmRSS", 0), values.get("VmHWM", 0)


@dataclass(slots=True)
class Server:
    process: subprocess.Popen[bytes]
    port: int
    log: Path
    ready_seconds: float = 0.0

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def stop_process(process: subprocess.Popen[bytes], *, timeout: float = 15.0) -> None:
    """Ask a process to exit (SIGINT: a server drains, py-spy writes its samples),
    kill it if it has not within `timeout` seconds."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=15)


def _wait_ready(server: Server, *, timeout: float, started: float) -> None:
    deadline = started + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise BenchmarkError(f"server exited with code {server.process.returncode} "
                                 f"before it was ready:\n{server.log_tail()}")
        try:
            conn = http.client.HTTPConnection(HOST, server.port, timeout=2)
            conn.request("GET", "/readyz")
            status = conn.getresponse().status
            conn.close()
        except OSError:
            status = 0
        if status == 200:
            server.ready_seconds = time.monotonic() - started
            return
        time.sleep(0.05)
    raise BenchmarkError(f"server not ready after {timeout:.0f}s:\n{server.log_tail()}")


@contextmanager
def serving(argv: Sequence[str], *, port: int, log: Path,
            ready_timeout: float = 240.0) -> Iterator[Server]:
    """Start `argv` (which must listen on `port`), wait for /readyz, stop it on exit."""
    started = time.monotonic()
    with log.open("wb") as sink:
        process = subprocess.Popen(list(argv), stdout=sink, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env={**os.environ,
                                                                  "PYTHONUNBUFFERED": "1"})
    server = Server(process=process, port=port, log=log)
    try:
        _wait_ready(server, timeout=ready_timeout, started=started)
        yield server
    finally:
        stop_process(process)


# --------------------------------------------------------------------------- client


class Client:
    """One keep-alive HTTP/1.1 connection, like kube-scheduler's extender client."""

    def __init__(self, port: int, *, timeout: float = 30.0) -> None:
        self._conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
        # The last answer's time inside the server's handler (its Server-Timing
        # header), when it gave one.
        self.handler_s: float | None = None
        # Seconds this client spent in its own collections after its calls.
        self.collected_s: list[float] = []

    def post(self, verb: str, body: bytes) -> tuple[float, Any]:
        enabled = gc.isenabled()
        gc.disable()
        try:
            start = time.perf_counter()
            self._conn.request("POST", f"{URL_PREFIX}/{verb}", body, JSON_HEADERS)
            response = self._conn.getresponse()
            raw = response.read()
            decoded = orjson.loads(raw) if raw else None
            elapsed = time.perf_counter() - start
            if enabled:
                self._collect_due()
        finally:
            if enabled:
                gc.enable()
        if response.status != 200:
            raise BenchmarkError(f"{verb} answered HTTP {response.status}: {raw[:300]!r}")
        self.handler_s = _handler_seconds(response.getheader("server-timing"))
        return elapsed, decoded

    def _collect_due(self) -> None:
        """The pass the paused collector would have run: the oldest generation
        over its threshold, once the youngest is."""
        counts, thresholds = gc.get_count(), gc.get_threshold()
        if counts[0] <= thresholds[0]:
            return
        generation = max(g for g in range(3) if counts[g] > thresholds[g])
        collecting = time.perf_counter()
        gc.collect(generation)
        self.collected_s.append(time.perf_counter() - collecting)

    def close(self) -> None:
        self._conn.close()


def _handler_seconds(timing: str | None) -> float | None:
    """Seconds from a `Server-Timing: handler;dur=MS` header."""
    if timing is None or not timing.startswith("handler;dur="):
        return None
    try:
        return float(timing[len("handler;dur="):]) / 1e3
    except ValueError:
        return None


def handler_seconds(port: int) -> dict[str, dict[str, float]]:
    """Per verb, the count and total seconds the server's own request histogram
    (`drax_request_duration_seconds`, timed inside the route handler) recorded:
    set against client round trips it shows what the HTTP stack adds."""
    conn = http.client.HTTPConnection(HOST, port, timeout=10)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        for suffix in ("sum", "count"):
            prefix = f"{HANDLER_METRIC}_{suffix}{{verb=\""
            if line.startswith(prefix):
                verb, _, value = line[len(prefix):].partition('"} ')
                out.setdefault(verb, {})[suffix] = float(value)
    return out


# --------------------------------------------------------------------------- scheduling


@dataclass(slots=True, frozen=True)
class PodJob:
    phase: str
    shape: str
    pod: Mapping[str, Any]


@dataclass(slots=True)
class Sample:
    """One pod's scheduling attempt: request bodies sent and their latencies."""

    phase: str
    shape: str
    outcome: str  # bound | unschedulable | filter-error | bind-error
    filter_body: bytes
    filter_s: float
    passed: int = 0
    prioritize_body: bytes | None = None
    prioritize_s: float | None = None
    bind_body: bytes | None = None
    bind_s: float | None = None
    node: str | None = None
    error: str | None = None  # the server's Error text for filter-error / bind-error
    # Time inside the server's handler (Server-Timing), per verb sent.
    handler_s: dict[str, float] = field(default_factory=dict)

    @property
    def cycle_s(self) -> float:
        return self.filter_s + (self.prioritize_s or 0.0)


@dataclass(slots=True)
class Run:
    samples: list[Sample] = field(default_factory=list)
    # Per phase: client time spent on its pods (encoding, requests, decoding).
    wall_s: dict[str, float] = field(default_factory=dict)
    aborted: str | None = None

    def add(self, sample: Sample, seconds: float) -> None:
        self.samples.append(sample)
        self.wall_s[sample.phase] = self.wall_s.get(sample.phase, 0.0) + seconds


def scheduler_candidate_count(nodes: int, percentage: int = 0) -> int:
    """kube-scheduler's numFeasibleNodesToFind for `nodes` feasible nodes."""
    if nodes < 100:
        return nodes
    if percentage <= 0:
        percentage = max(5, 50 - nodes // 125)
    return max(100, nodes * percentage // 100)


def candidate_lists(node_names: Sequence[str], *, mode: str) -> Callable[[], list[str]]:
    """A function giving the next pod's candidates: every node (`all`), or the
    scheduler's default share from a rotating start (`scheduler`)."""
    names = list(node_names)
    if mode == "all":
        return lambda: names
    count = scheduler_candidate_count(len(names))
    start = 0

    def rotate() -> list[str]:
        nonlocal start
        picked = [names[(start + i) % len(names)] for i in range(count)]
        start = (start + count) % len(names)
        return picked

    return rotate


def _best(scores: Any, passed: Sequence[str]) -> str:
    """The highest score, first listed on ties (the scheduler breaks ties at random;
    a fixed choice keeps runs repeatable)."""
    if not isinstance(scores, list) or not scores:
        return passed[0]
    best = max(scores, key=lambda hp: int(hp.get("Score", 0)))
    top = int(best.get("Score", 0))
    winners = {hp["Host"] for hp in scores if int(hp.get("Score", 0)) == top}
    return next(n for n in passed if n in winners)


def schedule(client: Client, jobs: Sequence[PodJob], *, candidates: Callable[[], list[str]],
             mirror: Client | None = None) -> tuple[Run, Run | None]:
    """Schedule `jobs` in order. With `mirror` (the floor), each pod's request
    bodies are sent there too, right after drax answered them: both servers are
    timed on the same payloads under the same background load, and never at
    the same time. A request that times out or breaks a connection ends the
    run (`Run.aborted` says where) with what was measured so far."""
    run, mirrored = Run(), (Run() if mirror is not None else None)
    for job in jobs:
        try:
            start = time.perf_counter()
            sample = _schedule_one(client, job, candidates())
            run.add(sample, time.perf_counter() - start)
            if mirror is not None and mirrored is not None:
                start = time.perf_counter()
                mirrored.add(_replay_one(mirror, sample), time.perf_counter() - start)
        except OSError as exc:
            run.aborted = (f"pod {job.pod['metadata']['name']} ({job.shape}), after "
                           f"{len(run.samples)} pods: {type(exc).__name__} {exc}")
            break
    return run, mirrored


def _schedule_one(client: Client, job: PodJob, candidates: list[str]) -> Sample:
    pod = job.pod
    body = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": candidates})
    elapsed, result = client.post("filter", body)
    sample = Sample(phase=job.phase, shape=job.shape, outcome="unschedulable",
                    filter_body=body, filter_s=elapsed)
    _handled(sample, "filter", client)
    if not isinstance(result, Mapping) or result.get("Error"):
        sample.outcome = "filter-error"
        sample.error = str(result.get("Error") if isinstance(result, Mapping) else result)
        return sample
    passed = list(result.get("NodeNames") or [])
    sample.passed = len(passed)
    if not passed:
        return sample
    node = passed[0]
    if len(passed) > 1:
        sample.prioritize_body = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": passed})
        sample.prioritize_s, scores = client.post("prioritize", sample.prioritize_body)
        _handled(sample, "prioritize", client)
        node = _best(scores, passed)
    meta = pod["metadata"]
    sample.bind_body = orjson.dumps({"PodName": meta["name"], "PodNamespace": meta["namespace"],
                                     "PodUID": meta["uid"], "Node": node})
    sample.bind_s, bound = client.post("bind", sample.bind_body)
    sample.node = node
    if isinstance(bound, Mapping) and bound.get("Error"):
        sample.outcome, sample.error = "bind-error", str(bound["Error"])
    else:
        sample.outcome = "bound"
    return sample


def _handled(sample: Sample, verb: str, client: Client) -> None:
    if client.handler_s is not None:
        sample.handler_s[verb] = client.handler_s


def _replay_one(client: Client, rec: Sample) -> Sample:
    """The requests of a recorded pod, sent again; same phase, shape and outcome."""
    sample = Sample(phase=rec.phase, shape=rec.shape, outcome=rec.outcome,
                    filter_body=rec.filter_body, passed=rec.passed,
                    filter_s=client.post("filter", rec.filter_body)[0])
    if rec.prioritize_body is not None:
        sample.prioritize_s = client.post("prioritize", rec.prioritize_body)[0]
    if rec.bind_body is not None:
        sample.bind_s = client.post("bind", rec.bind_body)[0]
    return sample


def slow_requests(samples: Sequence[Sample], *, limit_s: float) -> int:
    """Requests slower than `limit_s` (kube-scheduler's httpTimeout fails them)."""
    return sum(1 for s in samples for t in (s.filter_s, s.prioritize_s, s.bind_s)
               if t is not None and t > limit_s)
