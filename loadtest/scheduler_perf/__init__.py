"""Upstream's scheduler_perf DRA workloads under in-tree, drax-allocator and drax-advisor.

`k8s.io/kubernetes/test/integration/scheduler_perf` is SIG Scheduling's own
benchmark. Its DRA test cases (`dra/` and its subdirectories) are read from
the Go module cache of k8s.io/kubernetes v1.37.2 at run time; nothing of them
is copied here. The thin Go wrapper in `perf/` runs one workload per process
(upstream's `RunBenchmarkPerfScheduling` with the allocator and topic that
upstream's own benchmark of that directory uses) and, for drax, starts
`drax serve --kubeconfig` from upstream's prepare hook against the workload's
in-process API server and stops it afterwards.

The three schedulers:
- `in-tree`: upstream's configuration, unchanged (its own file, its own
  `schedulerConfigPath` if it names one);
- `drax-allocator`: manifests/kube-scheduler/scheduler-config.yaml (DynamicResources off,
  drax filters, prioritizes and binds), drax with the args of
  manifests/deployment.yaml;
- `drax-advisor`: the same with the plugin kept and no bind verb, drax
  `--mode advisor` (README, advisor mode).

What differs from the manifests, and why (each forced by the harness):
- the profile's `schedulerName` is `default-scheduler`: upstream's pod
  templates name no scheduler, and scheduler_perf counts that profile;
- drax's `--port`/`--metrics-port` are free ports and `--metrics-host` is
  loopback: the machine is shared, not a pod's own network namespace; the
  extender URL follows the port;
- `--kubeconfig` is added (drax is not in a pod) and holds a token of the
  manifests' ServiceAccount, whose RBAC objects are applied first;
- `--feature-gates` repeats the test case's DRA gates, as a user passes the
  cluster's gates to drax;
- the node pool's `NodeAffinity` `addedAffinity` is left out: upstream's
  node templates carry no `drax.dev/pool` label, and every node is drax's;
- kube-scheduler's `--pod-max-in-unschedulable-pods-duration=30s` has no
  equivalent: scheduler_perf starts the scheduler in-process from the
  configuration alone.

Changed YAML (the test-case file naming the generated scheduler
configuration) is written to a temporary directory only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import yaml

from loadtest.bench import free_ports

KUBERNETES: Final = "v1.37.2"
HERE: Final = Path(__file__).resolve().parent
MODULE: Final = HERE / "perf"
REPO: Final = HERE.parents[1]
MANIFESTS: Final = REPO / "manifests"
SCHEDULERS: Final = ("in-tree", "drax-allocator", "drax-advisor")
BUCKETS: Final = ("Average", "Perc50", "Perc90", "Perc99")
THRESHOLD_MISSED: Final = '"SchedulingThroughput" "Average" to be higher'

# Gates drax has no code for; a test case that turns one on is not run under drax.
DRAX_LACKS: Final = {
    "DRADeviceCompatibilityGroups": "compatibilityGroups of counter consumption are not "
                                    "implemented in drax (1.37 alpha)",
    "DRAWorkloadResourceClaims": "claims shared by a PodGroup (scheduling.k8s.io PodGroup) "
                                 "are not implemented in drax (1.37 alpha)",
}
# Gates drax does not take but need nothing from it.
DRAX_IGNORES: Final = frozenset({"DynamicResourceAllocation", "DRAResourceClaimDeviceStatus",
                                 "GenericWorkload"})


class PerfError(RuntimeError):
    """The Go wrapper could not be built or upstream's files were not found."""


@dataclasses.dataclass(frozen=True, slots=True)
class Workload:
    case: str
    name: str
    directory: Path            # upstream's test directory (templates resolve from it)
    config_file: Path          # upstream's performance-config.yaml
    allocator: str             # as upstream's BenchmarkPerfScheduling of that directory
    topic: str
    gates: Mapping[str, bool]  # test case's, overridden by the workload's
    labels: tuple[str, ...]
    params: Mapping[str, Any]
    namespace: str             # where the measured pods are created
    scheduler_config: str | None  # the test case's own schedulerConfigPath
    threshold: float | None
    # The pods its measured createPods ops create; None when they keep creating
    # them for a duration (steady state), so the number is not fixed.
    pods: int | None = None

    @property
    def full_name(self) -> str:
        return f"{self.case}/{self.name}"

    @property
    def size(self) -> tuple[int, int]:
        nodes = sum(int(self.params.get(k, 0) or 0) for k in ("nodesWithDRA", "nodesWithoutDRA"))
        pods = sum(int(self.params.get(k, 0) or 0) for k in ("measurePods", "initPods"))
        return nodes, pods

    def drax_cannot_run(self) -> str | None:
        for gate, reason in DRAX_LACKS.items():
            if self.gates.get(gate):
                return f"{gate}: {reason}"
        return None


def upstream_root(module: Path = MODULE) -> Path:
    """k8s.io/kubernetes's directory in the module cache (downloaded if missing)."""
    try:
        out = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes"],
                             cwd=module, check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or exc
        raise PerfError(f"cannot locate k8s.io/kubernetes {KUBERNETES}: {detail}") from None
    root = Path(out.stdout.strip())
    if not (root / "test/integration/scheduler_perf/dra").is_dir():
        raise PerfError(f"{root} has no test/integration/scheduler_perf/dra")
    return root


def benchmark_settings(directory: Path) -> tuple[str, str]:
    """(allocator, topic) of upstream's `BenchmarkPerfScheduling` in `directory`."""
    for test_file in sorted(directory.glob("*_test.go")):
        text = test_file.read_text()
        match = re.search(r"func BenchmarkPerfScheduling\(b \*testing\.B\) \{(.*?)\n\}", text, re.S)
        if not match:
            continue
        body = match.group(1)
        allocator = re.search(r'EnableAllocators\("(\w+)"\)', body)
        topic = re.search(r'RunBenchmarkPerfScheduling\(b, "[^"]+", "(\w+)"', body)
        if allocator and topic:
            return allocator.group(1), topic.group(1)
    raise PerfError(f"{directory}: no BenchmarkPerfScheduling naming an allocator and topic")


def _measured_namespace(template: Sequence[Mapping[str, Any]]) -> str:
    for op in template:
        if op.get("opcode") == "createPods" and op.get("collectMetrics"):
            return str(op.get("namespace", ""))
        if op.get("opcode") == "startCollectingMetrics":
            return str((op.get("namespaces") or [""])[0])
    return ""


def _measured_pods(template: Sequence[Mapping[str, Any]], params: Mapping[str, Any]
                   ) -> int | None:
    """What the workload's measured createPods ops create, from upstream's YAML."""
    total = 0
    for op in template:
        if op.get("opcode") != "createPods" or not op.get("collectMetrics"):
            continue
        steady = op.get("steadyState") or _param(op.get("steadyStateParam"), params)
        if steady:
            return None
        count = op.get("count")
        total += int(count if count is not None else _param(op.get("countParam"), params) or 0)
    return total


def _param(ref: Any, params: Mapping[str, Any]) -> Any:
    return params.get(ref[1:]) if isinstance(ref, str) and ref.startswith("$") else None


def _threshold(raw: Any, topic: str) -> float | None:
    if isinstance(raw, Mapping):
        raw = raw.get(topic)
    return float(raw) if raw else None


def discover(root: Path) -> list[Workload]:
    """Every workload of every DRA test case of upstream's scheduler_perf, in file order."""
    dra = root / "test/integration/scheduler_perf/dra"
    found: list[Workload] = []
    for config in sorted(dra.rglob("performance-config.yaml")):
        allocator, topic = benchmark_settings(config.parent)
        for case in yaml.safe_load(config.read_text()) or []:
            for w in case["workloads"]:
                found.append(Workload(
                    case=case["name"], name=w["name"], directory=config.parent,
                    config_file=config, allocator=allocator, topic=topic,
                    gates={**(case.get("featureGates") or {}), **(w.get("featureGates") or {})},
                    labels=tuple(case.get("labels") or ()) + tuple(w.get("labels") or ()),
                    params=w.get("params") or {},
                    namespace=_measured_namespace(case["workloadTemplate"]),
                    scheduler_config=case.get("schedulerConfigPath"),
                    threshold=_threshold(w.get("threshold"), topic),
                    pods=_measured_pods(case["workloadTemplate"], w.get("params") or {})))
    return found


def smallest(workloads: Iterable[Workload]) -> list[Workload]:
    """The smallest workload of each test case (fewest nodes, then pods)."""
    best: dict[str, Workload] = {}
    for w in workloads:
        if w.case not in best or w.size < best[w.case].size:
            best[w.case] = w
    return list(best.values())


def select(workloads: Sequence[Workload], names: Iterable[str]) -> list[Workload]:
    by_name = {w.full_name: w for w in workloads}
    chosen = []
    for name in names:
        if name not in by_name:
            rest = name.partition("/")[2]
            hints = [n for n in by_name if n.endswith("/" + rest)] if rest else []
            hint = f"; upstream has {', '.join(hints)}" if hints else ""
            raise PerfError(f"unknown workload {name!r}{hint} (see --list)")
        chosen.append(by_name[name])
    return chosen


# ---------------------------------------------------------------- configuration

def _manifest_docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d]


def drax_container() -> dict[str, Any]:
    """The drax container of manifests/deployment.yaml."""
    for doc in _manifest_docs("deployment.yaml"):
        if doc["kind"] == "Deployment":
            for container in doc["spec"]["template"]["spec"]["containers"]:
                if container["name"] == "drax":
                    return dict(container)
    raise PerfError("manifests/deployment.yaml has no drax container")


def service_account() -> tuple[str, str]:
    for doc in _manifest_docs("deployment.yaml"):
        if doc["kind"] == "ServiceAccount":
            return doc["metadata"]["namespace"], doc["metadata"]["name"]
    raise PerfError("manifests/deployment.yaml has no ServiceAccount")


def _set_flag(args: list[str], flag: str, value: str) -> list[str]:
    if flag in args:
        i = args.index(flag)
        return [*args[:i + 1], value, *args[i + 2:]]
    return [*args, flag, value]


def drax_argv(workload: Workload, scheduler: str, port: int, metrics_port: int) -> list[str]:
    args = [str(a) for a in drax_container()["args"]]
    args = _set_flag(args, "--port", str(port))
    args = _set_flag(args, "--metrics-port", str(metrics_port))
    args = _set_flag(args, "--metrics-host", "127.0.0.1")
    args = _set_flag(args, "--mode", "advisor" if scheduler == "drax-advisor" else "allocator")
    from app.features import GATES  # the gates drax takes, by upstream name

    gates = ",".join(f"{k}={str(v).lower()}" for k, v in sorted(workload.gates.items())
                     if k in GATES)
    args += ["--kubeconfig", "{kubeconfig}"]
    if gates:
        args += ["--feature-gates", gates]
    return [sys.executable, "-m", "app", *args]


def drax_scheduler_config(workload: Workload, scheduler: str, port: int) -> dict[str, Any]:
    """manifests/kube-scheduler/scheduler-config.yaml for this workload (module docstring)."""
    (config,) = _manifest_docs("kube-scheduler/scheduler-config.yaml")
    for profile in config["profiles"]:
        # The node pool's addedAffinity keeps drax off nodes another scheduler
        # allocates on; upstream's nodes carry no pool label and are all drax's here.
        kept = [c for c in profile.pop("pluginConfig", []) if c["name"] != "NodeAffinity"]
        if kept:
            profile["pluginConfig"] = kept
    if workload.scheduler_config:
        own = yaml.safe_load((workload.directory / workload.scheduler_config).read_text())
        drax_profile = {k: v for k, v in config["profiles"][0].items()
                        if k in ("plugins", "percentageOfNodesToScore")}
        for profile in own.get("profiles") or [{}]:
            profile.update(drax_profile)
        config["profiles"] = own.get("profiles") or config["profiles"]
    for profile in config["profiles"]:
        profile["schedulerName"] = "default-scheduler"
    for extender in config["extenders"]:
        extender["urlPrefix"] = f"http://127.0.0.1:{port}/scheduler"
    if scheduler == "drax-advisor":
        for profile in config["profiles"]:
            profile.pop("plugins", None)
            profile.pop("percentageOfNodesToScore", None)
        for extender in config["extenders"]:
            extender.pop("bindVerb", None)
    return config


def drax_test_cases(workload: Workload, scheduler_config: Path) -> list[dict[str, Any]]:
    """Upstream's test-case file, every case naming `scheduler_config`."""
    cases = yaml.safe_load(workload.config_file.read_text())
    for case in cases:
        case["schedulerConfigPath"] = str(scheduler_config)
    return list(cases)


# ---------------------------------------------------------------- running

@dataclasses.dataclass(slots=True)
class Outcome:
    """One workload under one scheduler: the JSON run and what explains it."""

    run: dict[str, Any]
    ok: bool
    failed_pods: int
    pending: list[str]
    metrics: dict[str, Any]
    log: str
    extension_points_ms: dict[str, float] = dataclasses.field(default_factory=dict)
    # CPU ms per bound pod by process, over the measured pods (`cpu_per_pod`).
    cpu_ms_per_pod: dict[str, float] | None = None
    # drax's own time per filter call, from its metrics (`drax_split`).
    drax_ms_per_filter: dict[str, float] | None = None


def build() -> tuple[Path, Path]:
    """The wrapper's test binary and the bin dir of etcd, built once per go.sum and Go version."""
    from tests.e2e.build import E2E_DIR, build_module

    etcd = build_module(E2E_DIR / "etcd", ("./cmd/...",), "etcd")
    binary = build_module(MODULE, (".",), "scheduler-perf", test_binary="perf.test")
    return binary / "perf.test", etcd


def _gomodcache() -> Path:
    out = subprocess.run(["go", "env", "GOMODCACHE"], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def _data_items(data_dir: Path) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for path in sorted(data_dir.glob("*.json")):
        items += json.loads(path.read_text()).get("dataItems") or []
    return items


def _throughput(items: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    for item in items:
        if (item.get("labels") or {}).get("Metric") == "SchedulingThroughput":
            data = item.get("data") or {}
            return {b: data.get(b) for b in BUCKETS}
    return dict.fromkeys(BUCKETS)


def _extension_points(items: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Upstream's own per-extension-point averages (ms) over the measured pods."""
    out: dict[str, float] = {}
    for item in items:
        labels = item.get("labels") or {}
        average = (item.get("data") or {}).get("Average")
        if average is None:
            continue
        if labels.get("Metric") == "scheduler_framework_extension_point_duration_seconds":
            out[labels.get("extension_point", "")] = round(average, 2)
        elif (labels.get("Metric") == "scheduler_scheduling_attempt_duration_seconds"
              and labels.get("result") == "scheduled"):
            out["attempt (scheduled)"] = round(average, 2)
    return out


def _profile_drax(pid_file: Path, proc: subprocess.Popen[bytes], out: Path) -> None:
    """Sample drax with py-spy from its start to its end (runs on a thread)."""
    from loadtest.profile import recording

    while not pid_file.exists():
        if proc.poll() is not None:
            return
        time.sleep(0.05)
    pid = int(pid_file.read_text())
    with recording(pid, out):
        while proc.poll() is None:
            try:
                os.kill(pid, 0)
            except OSError:
                return
            time.sleep(0.2)


# The processes whose CPU a run samples: the Go test process (API server,
# controllers, scheduler, upstream's pod loop), its etcd, and drax.
CPU_PROCESSES: Final = ("go", "etcd", "drax")
CPU_SAMPLE_SECONDS: Final = 0.2


def _cpu_seconds(pid: int) -> float | None:
    """utime + stime of `pid` (its own, not its children's), None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _machine_busy_seconds() -> float | None:
    """CPU seconds the whole machine spent busy (every core), from /proc/stat."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    return (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError, ValueError):
            found += [int(c) for c in task.read_text().split()]
    return found


class CpuSampler:
    """Samples the CPU seconds of a run's processes (CPU_PROCESSES) and of the whole
    machine every CPU_SAMPLE_SECONDS, on a thread, until stopped."""

    def __init__(self, go_pid: int, drax_pid_file: Path | None) -> None:
        self.samples: list[dict[str, float]] = []
        self._go = go_pid
        self._drax_pid_file = drax_pid_file
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _pids(self) -> dict[str, list[int]]:
        etcd = [c for c in _children(self._go)
                if Path(f"/proc/{c}/comm").exists()
                and Path(f"/proc/{c}/comm").read_text().strip() == "etcd"]
        drax: list[int] = []
        if self._drax_pid_file is not None:
            with contextlib.suppress(OSError, ValueError):
                drax = [int(self._drax_pid_file.read_text())]
        return {"go": [self._go], "etcd": etcd, "drax": drax}

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError, ValueError):
                sample = {"t": time.time()}
                for name, pids in self._pids().items():
                    seconds = [s for s in map(_cpu_seconds, pids) if s is not None]
                    if seconds:
                        sample[name] = sum(seconds)
                busy = _machine_busy_seconds()
                if busy is not None:
                    sample["machine"] = busy
                self.samples.append(sample)
            self._stop.wait(CPU_SAMPLE_SECONDS)


# drax's own series summed into the totals `drax_split` compares (name: series,
# labels that must match; every other series of the name is added up).
DRAX_SERIES: Final = {
    "cpu": ("process_cpu_seconds_total", {}),
    "filter_calls": ("drax_request_duration_seconds_count", {"verb": "filter"}),
    "filter": ("drax_request_duration_seconds_sum", {"verb": "filter"}),
    "prioritize": ("drax_request_duration_seconds_sum", {"verb": "prioritize"}),
    "bind": ("drax_request_duration_seconds_sum", {"verb": "bind"}),
    "watch_apply": ("drax_watch_event_apply_seconds_sum", {}),
    "watch_events": ("drax_watch_events_total", {}),
    "gc": ("drax_gc_pause_seconds_sum", {}),
}
DRAX_SCRAPE_SECONDS: Final = 1.0


def drax_totals(text: str) -> dict[str, float]:
    """The DRAX_SERIES totals of one /metrics answer."""
    from prometheus_client.parser import text_string_to_metric_families

    totals = dict.fromkeys(DRAX_SERIES, 0.0)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for key, (name, labels) in DRAX_SERIES.items():
                if sample.name == name and all(sample.labels.get(k) == v
                                               for k, v in labels.items()):
                    totals[key] += sample.value
    return totals


def drax_split(first: Mapping[str, float], last: Mapping[str, float]
               ) -> dict[str, float] | None:
    """drax's time per filter call (one per scheduling attempt) between two scrapes:
    its CPU, the time inside the filter, prioritize and bind handlers (bind waits for
    its API writes), applying watch events and collector pauses, in ms, and the
    watch events; None without a filter call in between."""
    calls = last["filter_calls"] - first["filter_calls"]
    if calls <= 0:
        return None
    out = {key: round((last[key] - first[key]) * 1000 / calls, 2)
           for key in ("cpu", "filter", "prioritize", "bind", "watch_apply", "gc")}
    out["watch_events"] = round((last["watch_events"] - first["watch_events"]) / calls, 1)
    return out


class DraxScraper:
    """Reads drax's /metrics every DRAX_SCRAPE_SECONDS on a thread: the totals of the
    first answer after its first filter call and of the last answer before it stopped."""

    def __init__(self, url: str | None) -> None:
        self.first: dict[str, float] | None = None
        self.last: dict[str, float] | None = None
        self._url = url
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> DraxScraper:
        if self._url is not None:
            self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        import urllib.request

        assert self._url is not None
        while not self._stop.wait(DRAX_SCRAPE_SECONDS):
            try:
                with urllib.request.urlopen(self._url, timeout=2) as answer:
                    totals = drax_totals(answer.read().decode())
            except (OSError, ValueError):
                continue
            if self.first is None and totals["filter_calls"] > 0:
                self.first = totals
            self.last = totals

    def split(self) -> dict[str, float] | None:
        if self.first is None or self.last is None:
            return None
        return drax_split(self.first, self.last)


def cpu_per_pod(samples: Sequence[Mapping[str, float]], *, first: float, last: float,
                pods: int) -> dict[str, float] | None:
    """CPU milliseconds per bound pod of each sampled process between the first and
    the last pod seen bound (`first`, `last`: Unix seconds; `pods` bound in all, so
    `pods - 1` were bound after the first), each process's cumulative CPU read off
    at those times by linear interpolation between samples; `total` their sum and
    `outside` the cores the rest of the machine kept busy on average meanwhile.
    None when the window holds fewer than two samples or pods."""
    inside = [s for s in samples if first <= s["t"] <= last]
    if pods < 2 or last <= first or len(inside) < 2:
        return None

    def at(name: str, t: float) -> float | None:
        points = [(s["t"], s[name]) for s in samples if name in s]
        before = [p for p in points if p[0] <= t]
        after = [p for p in points if p[0] >= t]
        if not before or not after:
            return None
        (t0, v0), (t1, v1) = before[-1], after[0]
        return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)

    out: dict[str, float] = {}
    used = 0.0
    for name in CPU_PROCESSES:
        start, end = at(name, first), at(name, last)
        if start is None or end is None:
            continue
        used += end - start
        out[name] = round((end - start) * 1000 / (pods - 1), 2)
    out["total"] = round(sum(out.values()), 2)
    busy_start, busy_end = at("machine", first), at("machine", last)
    if busy_start is not None and busy_end is not None:
        out["outside"] = round(max(0.0, busy_end - busy_start - used) / (last - first), 2)
    return out


def run_workload(workload: Workload, scheduler: str, *, binary: Path, etcd_dir: Path,
                 pods_timeout: int = 600, keep: Path | None = None,
                 profile: Path | None = None) -> Outcome:
    """Run one workload under one scheduler in a fresh process and temporary directory.
    With `profile`, drax is sampled by py-spy and its collapsed stacks land there."""
    work = Path(tempfile.mkdtemp(prefix="drax-perf-"))
    try:
        data_dir = work / "data"
        data_dir.mkdir()
        spec: dict[str, Any] = {
            "config_dir": str(workload.directory), "config_file": str(workload.config_file),
            "allocator": workload.allocator, "topic": workload.topic,
            "namespace": workload.namespace, "out": str(work / "result.json"),
            "pods_timeout_seconds": pods_timeout, "drax": None}
        if scheduler != "in-tree":
            port, metrics_port = free_ports(2)
            sched = work / "scheduler-config.yaml"
            sched.write_text(yaml.safe_dump(drax_scheduler_config(workload, scheduler, port)))
            cases = work / "performance-config.yaml"
            cases.write_text(yaml.safe_dump(drax_test_cases(workload, sched)))
            ns, name = service_account()
            env = {e["name"]: str(e["value"]) for e in drax_container().get("env") or []}
            spec["config_file"] = str(cases)
            spec["drax"] = {
                "argv": drax_argv(workload, scheduler, port, metrics_port), "env": env,
                "ready_url": f"http://127.0.0.1:{metrics_port}/readyz",
                "log": str(work / "drax.log"), "kubeconfig": str(work / "drax.kubeconfig"),
                "pid_file": str(work / "drax.pid"),
                "manifests": [str(MANIFESTS / "deployment.yaml"), str(MANIFESTS / "rbac.yaml")],
                "service_account_namespace": ns, "service_account_name": name}
        (work / "run.json").write_text(json.dumps(spec, indent=2))
        bench = (f"^BenchmarkPerfScheduling$/^{re.escape(workload.case)}$/"
                 f"^{re.escape(workload.name)}$")
        argv = [str(binary), "-test.run=^$", f"-test.bench={bench}", "-test.benchtime=1ns",
                "-test.timeout=60m", "-perf-scheduling-label-filter=",
                f"-data-items-dir={data_dir}"]
        env = {**os.environ, "DRAX_PERF_RUN": str(work / "run.json"),
               "PATH": f"{etcd_dir}{os.pathsep}{os.environ.get('PATH', '')}",
               "KUBE_CACHE_MUTATION_DETECTOR": "false", "PYTHONPATH": str(REPO)}
        env.pop("ARTIFACTS", None)
        # The binary is built with -trimpath (sharing tests/e2e's build cache);
        # upstream's test API server then finds its testdata through the
        # variables it reads for trimmed (bazel) builds.
        modcache = _gomodcache()
        env.update(TEST_SRCDIR=str(modcache.parent), TEST_WORKSPACE=modcache.name)
        started = time.monotonic()
        with open(work / "go.log", "wb") as log:
            proc = subprocess.Popen(argv, cwd=workload.directory, env=env, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            profiler = None
            if profile is not None and spec["drax"] is not None:
                profiler = threading.Thread(target=_profile_drax, daemon=True,
                                            args=(work / "drax.pid", proc, profile))
                profiler.start()
            try:
                drax_pid = work / "drax.pid" if spec["drax"] is not None else None
                metrics_url = spec["drax"]["ready_url"].replace("/readyz", "/metrics") \
                    if spec["drax"] is not None else None
                with CpuSampler(proc.pid, drax_pid) as sampler, \
                        DraxScraper(metrics_url) as scraper:
                    code = proc.wait()
                if profiler is not None:
                    profiler.join(timeout=60)
            except BaseException:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait()
                raise
        seconds = time.monotonic() - started
        items = _data_items(data_dir)
        result = json.loads((work / "result.json").read_text()) \
            if (work / "result.json").exists() else {}
        go_log = (work / "go.log").read_text(errors="replace")
        drax_log = (work / "drax.log").read_text(errors="replace") \
            if (work / "drax.log").exists() else ""
        run = {"workload": workload.full_name, "scheduler": scheduler,
               "pods_per_second": _throughput(items),
               "scheduled": int(result.get("scheduled", 0)),
               "measured_pods": int(result.get("created", 0)),
               "seconds": round(seconds, 1)}
        # Upstream fails a workload below its threshold; here the threshold is only
        # reported beside the figures (this machine is not upstream's).
        below = go_log.count(THRESHOLD_MISSED)
        passed = code == 0 or (below > 0 and go_log.count("ERROR:") == below)
        ok = (passed and bool(result) and run["scheduled"] == run["measured_pods"]
              and not result.get("failed"))
        log_tail = go_log[-6000:] + (f"\n--- drax log tail\n{drax_log[-3000:]}" if drax_log else "")
        if keep is not None:
            shutil.copytree(work, keep / f"{workload.case}_{workload.name}_{scheduler}",
                            dirs_exist_ok=True)
        cpu = cpu_per_pod(sampler.samples, first=result.get("first_bound_unix_nano", 0) / 1e9,
                          last=result.get("last_bound_unix_nano", 0) / 1e9,
                          pods=int(result.get("scheduled", 0)))
        return Outcome(run=run, ok=ok, failed_pods=int(result.get("failed", 0)),
                       pending=list(result.get("pending") or []),
                       metrics=dict(result.get("metrics") or {}), log=log_tail,
                       extension_points_ms=_extension_points(items), cpu_ms_per_pod=cpu,
                       drax_ms_per_filter=scraper.split())
    finally:
        shutil.rmtree(work, ignore_errors=True)


def machine() -> str:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs, {cpu or 'unknown CPU'}"


def histogram_quantile(h: Mapping[str, Any], q: float) -> float | None:
    """Prometheus' histogram_quantile over cumulative buckets (linear within a bucket)."""
    count = h.get("count") or 0
    if not count:
        return None
    rank = q * count
    lower, below = 0.0, 0
    for bound, cumulative in zip(h["bounds"], h["cumulative_counts"], strict=False):
        if cumulative >= rank:
            inside = cumulative - below
            return lower + (bound - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = bound, cumulative
    return float(h["bounds"][-1]) if h.get("bounds") else None


# ---------------------------------------------------------------- the record

RECORD_KEYS: Final = ("workload", "scheduler")
# The benchmark's targets: drax-allocator against in-tree (average pods/s, same run).
KEY_WORKLOADS: Final = ("SchedulingWithResourceClaimTemplate/5000pods_500nodes",
                        "SchedulingWithResourceClaimTemplate/half_500nodes")


def _ms(h: Mapping[str, Any] | None) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name, q in (("p50", 0.5), ("p99", 0.99)):
        v = histogram_quantile(h, q) if h else None
        out[name] = None if v is None else round(v * 1000, 2)
    return out


def detail(workload: Workload, outcome: Outcome) -> dict[str, Any]:
    """What the record keeps of a run beyond its JSON entry."""
    m = outcome.metrics
    algo = m.get("scheduler_scheduling_algorithm_duration_seconds")
    sli = m.get("scheduler_pod_scheduling_sli_duration_seconds")
    return {"workload": outcome.run["workload"], "scheduler": outcome.run["scheduler"],
            "threshold": workload.threshold, "ok": outcome.ok,
            "failed_pods": outcome.failed_pods, "pending": outcome.pending[:3],
            "scheduling_algorithm_ms": _ms(algo), "pod_scheduling_sli_ms": _ms(sli),
            "extension_points_ms": outcome.extension_points_ms,
            "cpu_ms_per_pod": outcome.cpu_ms_per_pod,
            "drax_ms_per_filter": outcome.drax_ms_per_filter}


RECORD: Final = "loadtest/results/scheduler-perf.json"
# Options naming a scratch place: a recorded command keeps what reproduces its figures.
_SCRATCH_OPTIONS: Final = {"--json": None, "--keep": None, "--profile": "DIR",
                           "--record": RECORD}


def record_command(argv: Sequence[str]) -> str:
    """The command as the record lists it: `--json` and `--keep` dropped, `--record` naming
    the stored record and `--profile` a placeholder directory, whatever paths the run used."""
    out = ["python -m loadtest.scheduler_perf"]
    args = iter(argv)
    for arg in args:
        option, eq, _ = arg.partition("=")
        if option not in _SCRATCH_OPTIONS:
            out.append(arg)
            continue
        if not eq:
            next(args, None)
        if _SCRATCH_OPTIONS[option] is not None:
            out += [option, _SCRATCH_OPTIONS[option]]
    return " ".join(out)


def merge_record(path: Path, *, command: str, runs: Sequence[Mapping[str, Any]],
                 details: Sequence[Mapping[str, Any]], not_run: Sequence[Mapping[str, Any]],
                 profiles: Mapping[str, Any]) -> dict[str, Any]:
    """Add these runs to the record at `path` (loadtest/results/scheduler-perf.json), replacing
    earlier runs of the same workload and scheduler; other runs are kept. Each run, reason and
    profile names the command and commit it comes from, and the record's `commands` are the
    ones that still have a figure in it, in the order they were run."""
    from loadtest.report import provenance

    doc: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    source = provenance(command)
    stamp = {"command": command, "commit": source["commit"]}

    def merged(old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]
               ) -> list[Mapping[str, Any]]:
        fresh = {tuple(e[k] for k in RECORD_KEYS) for e in new}
        return [e for e in old if tuple(e[k] for k in RECORD_KEYS) not in fresh] + list(new)

    out = {**source, "kubernetes": KUBERNETES, "machine_cpu": machine(),
           "runs": merged(doc.get("runs", []), [{**r, **stamp} for r in runs]),
           "details": merged(doc.get("details", []), details),
           "not_run": merged(doc.get("not_run", []), [{**n, **stamp} for n in not_run]),
           "profiles": {**doc.get("profiles", {}),
                        **{k: {**v, **stamp} for k, v in profiles.items()}},
           "notes": doc.get("notes", [])}
    used = {e.get("command") for e in (*out["runs"], *out["not_run"],
                                       *out["profiles"].values())}
    out["commands"] = [c for c in [*doc.get("commands", []), command]
                       if c in used and c != command] + [command]
    kept = [e.get("commit") for e in (*out["runs"], *out["profiles"].values())]
    out["commits"] = sorted({c for c in kept if c}, key=kept.index)
    path.write_text(json.dumps(out, indent=1) + "\n")
    return out


def _ratio(value: float | None, base: float | None) -> float | None:
    return round(value / base, 2) if value and base else None


def targets(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The targets against the in-tree plugin, from a record: ratios of average
    pods/s within one run file."""
    avg = {(r["workload"], r["scheduler"]): r["pods_per_second"]["Average"] for r in doc["runs"]}
    out: list[dict[str, Any]] = []
    for (workload, scheduler), value in sorted(avg.items()):
        if scheduler == "in-tree":
            continue
        base = avg.get((workload, "in-tree"))
        ratio = _ratio(value, base)
        if ratio is None:
            continue  # too short to measure (the smallest workloads) or not run in-tree
        goal = 1.0 if scheduler == "drax-allocator" and workload in KEY_WORKLOADS else 0.8
        out.append({"target": f"{scheduler} / in-tree, {workload}", "goal": f">= {goal}x",
                    "measured": ratio, "unit": "x", "met": ratio >= goal, "note": ""})
    failed = {(d["workload"], d["scheduler"]) for d in doc.get("details", [])
              if d.get("ok") is False}
    missed = [f"{r['workload']} ({r['scheduler']}: {r['scheduled']}/{r['measured_pods']})"
              for r in doc["runs"] if r["scheduler"] != "in-tree"
              and (r["scheduled"] != r["measured_pods"]
                   or (r["workload"], r["scheduler"]) in failed)]
    out.append({"target": "every pod in-tree schedules, drax schedules", "goal": "all",
                "measured": len(missed), "unit": "runs short", "met": not missed,
                "note": "; ".join(missed)})
    return out


def _fmt(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _cpu_cell(detail: Mapping[str, Any]) -> str:
    cpu = detail.get("cpu_ms_per_pod") or {}
    if not cpu:
        return "–"
    return " / ".join(_fmt(cpu.get(name)) for name in CPU_PROCESSES)


def _drax_split_table(details: Sequence[Mapping[str, Any]]) -> list[str]:
    rows = [d for d in details if d.get("drax_ms_per_filter")]
    if not rows:
        return []
    keys = ("cpu", "filter", "prioritize", "bind", "watch_apply", "watch_events", "gc")
    lines = ["", "drax's own time per filter call (one per scheduling attempt), from its "
             "metrics between its first filter call and its stop: CPU, the time inside the "
             "filter, prioritize and bind handlers (bind waits for its API writes), applying "
             "watch events (and how many), collector pauses.", "",
             "| workload | scheduler | CPU ms | filter ms | prioritize ms | bind ms "
             "| watch apply ms | watch events | GC ms |",
             "|---|---|---|---|---|---|---|---|---|"]
    for d in rows:
        split = d["drax_ms_per_filter"]
        lines.append(f"| {d['workload']} | {d['scheduler']} | "
                     + " | ".join(_fmt(split.get(k), 2) for k in keys) + " |")
    return lines


def _extension_points_table(details: Sequence[Mapping[str, Any]]) -> list[str]:
    """Upstream's extension-point averages for the key workloads: where the scheduler's
    time per attempt goes (drax-allocator's Filter is the in-tree plugins only)."""
    rows = [d for d in details if d["workload"] in KEY_WORKLOADS and d.get("extension_points_ms")]
    if not rows:
        return []
    points = ("Filter", "PreBind", "Bind", "attempt (scheduled)")
    lines = ["", "Where the scheduler's time goes: upstream's extension-point averages, ms "
             "(under drax-allocator the Filter is the in-tree plugins only; drax filters, "
             "scores and binds behind the extender).", "",
             "| workload | scheduler | " + " | ".join(points) + " |",
             "|---|---|" + "---|" * len(points)]
    for d in rows:
        ms = d["extension_points_ms"]
        lines.append(f"| {d['workload']} | {d['scheduler']} | "
                     + " | ".join(_fmt(ms.get(k)) for k in points) + " |")
    return lines


def markdown(doc: Mapping[str, Any]) -> str:
    """The record as RESULTS.md's section: the table, what was not run, the profiles."""
    details = {(d["workload"], d["scheduler"]): d for d in doc.get("details", [])}
    avg = {(r["workload"], r["scheduler"]): r["pods_per_second"]["Average"] for r in doc["runs"]}
    lines = [f"Machine: {doc.get('machine_cpu', '')}. Upstream threshold: the workload's "
             "`threshold` in the v1.37.2 YAML for the topic upstream's benchmark of that "
             "directory uses (upstream fails a run below it; here it is only shown). "
             "Latencies are the scheduler's own histograms over the whole workload. CPU per "
             "pod: CPU milliseconds per pod bound between the first and the last measured pod "
             "bound, of the Go test process (API server, controllers, scheduler, upstream's "
             "pod loop), its etcd and drax; outside: the cores the rest of the machine kept "
             "busy meanwhile. Commit: the code each row was measured at, by the command "
             "above that ran it.", "",
             "| workload | scheduler | pods/s avg | p50 | x in-tree | scheduled / measured "
             "| algorithm p50 / p99 ms | SLI p50 / p99 ms | CPU ms/pod Go / etcd / drax "
             "| outside cores | upstream threshold | commit |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["runs"]:
        key = (r["workload"], r["scheduler"])
        d = details.get(key, {})
        pps = r["pods_per_second"]
        ratio = _ratio(avg[key], avg.get((r["workload"], "in-tree"))) \
            if r["scheduler"] != "in-tree" else None
        algo, sli = d.get("scheduling_algorithm_ms", {}), d.get("pod_scheduling_sli_ms", {})
        lines.append(
            f"| {r['workload']} | {r['scheduler']} | {_fmt(pps['Average'])} | "
            f"{_fmt(pps['Perc50'])} | {_fmt(ratio, 2)} | {r['scheduled']} / "
            f"{r['measured_pods']} | {_fmt(algo.get('p50'))} / {_fmt(algo.get('p99'))} | "
            f"{_fmt(sli.get('p50'))} / {_fmt(sli.get('p99'))} | {_cpu_cell(d)} | "
            f"{_fmt((d.get('cpu_ms_per_pod') or {}).get('outside'), 2)} | "
            f"{_fmt(d.get('threshold'), 0) if d.get('threshold') else '–'} | "
            f"{r.get('commit') or '–'} |")
    lines += _drax_split_table(doc.get("details", []))
    lines += _extension_points_table(doc.get("details", []))
    lines += ["", "Published upstream figures for comparison (other machines): "
              "5000pods_500nodes `dra: 120` pods/s quoted for 1.37 (kubernetes#138916; the "
              "v1.37.2 YAML still says 56, \"typically above 70\"); the 500-node steady-state "
              "workloads (`empty`/`half`/`full_500nodes`, which 1.37.2 keeps in "
              "`SchedulingWithResourceClaimTemplate`: there is no "
              "`SteadyStateClusterResourceClaimTemplate` test case) typically 75–81; "
              "`selector_empty_500nodes` 240.8 and `match_empty_500nodes` 109.1 in one local run "
              "(kubernetes#140254)."]
    if doc.get("notes"):
        lines += ["", *(f"- {note}" for note in doc["notes"])]
    if doc.get("not_run"):
        lines += ["", "Not run:", ""]
        lines += [f"- {n['workload']} under {n['scheduler']}: {n['reason']}"
                  for n in doc["not_run"]]
    for key, summary in sorted(doc.get("profiles", {}).items()):
        lines += ["", f"Where drax's time goes, {key} (py-spy, {summary['samples']} "
                  "non-idle samples over drax's whole life in a separate run under "
                  "--profile):", "",
                  "| area | % of samples |", "|---|---|"]
        lines += [f"| {a['function']} | {a['percent']} |" for a in summary["by_area"]]
        lines += ["", "| self % | function |", "|---|---|"]
        lines += [f"| {s['percent']} | {s['function']} |" for s in summary["self"][:12]]
    return "\n".join(lines) + "\n"
