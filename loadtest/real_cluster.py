"""`python -m loadtest --real-cluster`: drax beside the in-tree DRA scheduler on
a real Kubernetes 1.37 control plane (tests/e2e/cluster.py).

Two identical node pools (`loadtest.generator`, the same seed, labelled
`e2e/pool`) get the same workload: pool A through the `drax` scheduler, pool B
through `default-scheduler` (the in-tree DynamicResources plugin), one after
the other in the same run, so each has both cores. Every pod has its own
ResourceClaim, created before the clock starts, so what is timed is
scheduling, not the resourceclaim controller (whose client is limited to 20
writes/s). The clock runs from the first pod created to the last pod bound; a
watch on the pool's pods records each pod's first binding and each
`PodScheduled=False`.

Per scheduler it reports pods placed before the first failure: the pods
are created in workload order from a few threads, so the API server commits
them a few places out of that order, and the scheduler queues them in commit
order; the count is of the pods, in the order the watch saw them added,
before the first that ended unbound. Pods that were bound only after a failed
attempt (`PodScheduled=False`: Unschedulable, or SchedulerError for a refused
bind) are counted too: a refused bind sends a pod to the back-off queue,
behind pods created after it. Then the share of GPUs of GPU+NIC pods with one of their NICs on the
same PCIe root, the share of multi-device pods on one NUMA node
(tests/e2e/workload.py `placement_quality`), pods/s, and where the time goes:
deltas of the scheduler's own metrics (scheduling cycle, binding), drax's
handler time per verb, and the API server's writes per pod.

The cluster comes up in a temporary directory (allocator mode), or `--dir`
names one already running (`python -m tests.e2e.cluster up --dir DIR`); pool
and pod names carry a run id, so runs on one cluster do not collide.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import ssl
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx
import yaml

from loadtest import generator
from tests.e2e.cluster import SAMPLE_CLASSES, Cluster, start, stop
from tests.e2e.kube import Kube, collection_path, wait_for
from tests.e2e.workload import (
    PlacementQuality,
    add_pool,
    claim,
    placement_quality,
    pod,
    published_devices,
)

SCHEDULERS: Final = ("drax", "default-scheduler")
RUN_LABEL: Final = "loadtest.drax.dev/run"
CREATE_THREADS: Final = 8
# No pod event for this long, with every pod bound or unschedulable: the run is over.
SETTLE_SECONDS: Final = 3.0
# kube-scheduler's clientConnection.qps default (KubeSchedulerConfiguration v1).
DEFAULT_CLIENT_QPS: Final = 50

# (metric, label filter) -> the name it is reported under; sums and counts of
# histograms give totals and means per pod.
SCHEDULER_METRICS: Final = {
    "cycle": ("scheduler_scheduling_algorithm_duration_seconds", {}),
    "attempt": ("scheduler_scheduling_attempt_duration_seconds", {"result": "scheduled"}),
    "unschedulable_attempt": ("scheduler_scheduling_attempt_duration_seconds",
                              {"result": "unschedulable"}),
    "prebind": ("scheduler_framework_extension_point_duration_seconds",
                {"extension_point": "PreBind"}),
    "bind": ("scheduler_framework_extension_point_duration_seconds",
             {"extension_point": "Bind"}),
}


@dataclass(slots=True)
class PodOutcome:
    bound_at: float | None = None
    unschedulable: bool = False
    # PodScheduled=False reasons seen before the pod was bound, or at the end.
    reasons: set[str] = field(default_factory=set)


@dataclass(slots=True)
class SchedulerRun:
    scheduler: str
    pool: str
    pods: int
    bound: int
    before_first_failure: int
    first_failure_shape: str | None
    # bound after a failed attempt, by the PodScheduled reason of that attempt
    bound_after_retry: dict[str, int]
    seconds: float
    create_seconds: float
    quality: PlacementQuality
    timings: dict[str, Any] = field(default_factory=dict)

    @property
    def pods_per_second(self) -> float:
        return self.bound / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "pods_per_second": round(self.pods_per_second, 2),
                "aligned_share": self.quality.aligned_share,
                "single_numa_share": self.quality.single_numa_share}


# --------------------------------------------------------------------------- metrics


def parse_metrics(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Prometheus text format -> (name, labels) -> value (comments skipped)."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        name, _, rest = head.partition("{")
        labels = frozenset(_labels(rest.rstrip("}"))) if rest else frozenset()
        try:
            out[(name, labels)] = float(value)
        except ValueError:
            continue
    return out


def _labels(text: str) -> Iterator[tuple[str, str]]:
    for part in text.split('",'):
        key, _, value = part.partition("=")
        if key:
            yield key.strip(), value.strip().strip('"')


Metrics = dict[tuple[str, frozenset[tuple[str, str]]], float]


def total(metrics: Metrics, name: str, labels: Mapping[str, str] | None = None) -> float:
    wanted = set((labels or {}).items())
    return sum(v for (n, ls), v in metrics.items() if n == name and wanted <= ls)


def _delta(after: Metrics, before: Metrics, name: str,
           labels: Mapping[str, str] | None = None) -> float:
    return total(after, name, labels) - total(before, name, labels)


class Scrapers:
    """/metrics of the API server, both kube-schedulers (admin client cert) and drax."""

    def __init__(self, cluster: Cluster) -> None:
        pki = cluster.path / "pki"
        # The schedulers serve a self-signed certificate of their own.
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        insecure.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        self.schedulers = httpx.Client(verify=insecure, timeout=30)
        self.kube = cluster.kube()
        self.urls = {"drax": f"https://127.0.0.1:{cluster.ports['drax-scheduler']}/metrics",
                     "default-scheduler":
                         f"https://127.0.0.1:{cluster.ports['default-scheduler']}/metrics"}
        self.drax_url = f"{cluster.drax_url}/metrics"

    def close(self) -> None:
        self.schedulers.close()
        self.kube.close()

    def snapshot(self, scheduler: str) -> dict[str, Metrics]:
        return {
            "scheduler": parse_metrics(self.schedulers.get(self.urls[scheduler]).text),
            "drax": parse_metrics(httpx.get(self.drax_url, timeout=30).text),
            "apiserver": parse_metrics(self.kube.http.get("/metrics").text),
        }


def timings(before: Mapping[str, Metrics], after: Mapping[str, Metrics], *, bound: int
            ) -> dict[str, Any]:
    """Where the time of one run went: per-pod means in ms, and API writes per pod."""
    per_pod = max(bound, 1)
    out: dict[str, Any] = {}
    for key, (name, labels) in SCHEDULER_METRICS.items():
        seconds = _delta(after["scheduler"], before["scheduler"], f"{name}_sum", labels)
        count = _delta(after["scheduler"], before["scheduler"], f"{name}_count", labels)
        out[f"scheduler_{key}_ms"] = round(1000 * seconds / count, 2) if count else None
        out[f"scheduler_{key}_count"] = int(count)
    for verb in ("filter", "prioritize", "bind"):
        name = "drax_request_duration_seconds"
        seconds = _delta(after["drax"], before["drax"], f"{name}_sum", {"verb": verb})
        count = _delta(after["drax"], before["drax"], f"{name}_count", {"verb": verb})
        out[f"drax_{verb}_calls"] = int(count)
        out[f"drax_{verb}_ms"] = round(1000 * seconds / count, 2) if count else None
    # Filters that found the previous pods' binds still on their way (app/extender/pending.py).
    name = "drax_filter_bind_wait_seconds"
    seconds = _delta(after["drax"], before["drax"], f"{name}_sum")
    count = _delta(after["drax"], before["drax"], f"{name}_count")
    out["drax_bind_wait_filters"] = int(count)
    out["drax_bind_wait_ms"] = round(1000 * seconds / count, 2) if count else None
    writes: dict[str, float] = {}
    for (name, labels), value in after["apiserver"].items():
        if name != "apiserver_request_total":
            continue
        label = dict(labels)
        if label.get("verb") not in ("POST", "PUT", "PATCH", "DELETE", "CREATE", "UPDATE"):
            continue
        key = label.get("resource", "") + (f"/{label['subresource']}"
                                           if label.get("subresource") else "")
        writes[key] = writes.get(key, 0.0) + value - before["apiserver"].get((name, labels), 0.0)
    out["api_writes_per_pod"] = {k: round(v / per_pod, 2) for k, v in sorted(writes.items())
                                 if v > 0}
    return out


# --------------------------------------------------------------------------- one run


def _created(kube: Kube, objects: Sequence[dict[str, Any]]) -> float:
    """Create `objects` in order from a few threads; return the seconds it took."""
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(CREATE_THREADS) as pool:
        for future in [pool.submit(kube.create, obj) for obj in objects]:
            future.result()
    return time.monotonic() - started


def _outcome(pod_obj: dict[str, Any], record: PodOutcome, now: float) -> None:
    if pod_obj["spec"].get("nodeName"):
        if record.bound_at is None:
            record.bound_at = now
        return
    for c in pod_obj.get("status", {}).get("conditions", []):
        if c["type"] == "PodScheduled" and c["status"] == "False":
            record.unschedulable = True
            record.reasons.add(c.get("reason") or "")


def follow(kube: Kube, *, selector: str, resource_version: str, names: Sequence[str],
           timeout: float) -> dict[str, PodOutcome]:
    """Watch the pods matching `selector` from `resource_version` until every one of
    `names` is bound or unschedulable and nothing changed for SETTLE_SECONDS. The
    outcomes are in the order the pods were added (the API server's commit order)."""
    outcomes: dict[str, PodOutcome] = {}
    wanted = set(names)
    deadline = time.monotonic() + timeout
    rv = resource_version
    while time.monotonic() < deadline:
        params = {"watch": "1", "labelSelector": selector, "resourceVersion": rv,
                  "allowWatchBookmarks": "true", "timeoutSeconds": "60"}
        try:
            with kube.http.stream("GET", collection_path("Pod"), params=params,
                                  timeout=httpx.Timeout(30, read=SETTLE_SECONDS)) as resp:
                resp.raise_for_status()
                for line in resp.iter_lines():
                    event = json.loads(line)
                    obj = event["object"]
                    rv = obj["metadata"].get("resourceVersion", rv)
                    name = obj["metadata"]["name"]
                    if event["type"] in ("ADDED", "MODIFIED") and name in wanted:
                        _outcome(obj, outcomes.setdefault(name, PodOutcome()),
                                 time.monotonic())
                    if time.monotonic() >= deadline:
                        break
        except httpx.ReadTimeout:
            if len(outcomes) == len(wanted) and all(
                    o.bound_at is not None or o.unschedulable for o in outcomes.values()):
                return outcomes
    raise TimeoutError(f"pods of {selector} not settled within {timeout:.0f}s")


def _delete_pending(kube: Kube) -> None:
    """Delete the benchmark's unbound pods (this run's or an earlier one's): pending
    pods are retried on every cluster event and would take CPU from the next run."""
    pending = [p["metadata"]["name"] for p in kube.list("Pod", "default", selector=RUN_LABEL)
               if not p["spec"].get("nodeName")]
    with concurrent.futures.ThreadPoolExecutor(CREATE_THREADS) as deleter:
        list(deleter.map(lambda name: kube.delete("Pod", name, "default"), pending))


def run_scheduler(kube: Kube, scrapers: Scrapers, *, scheduler: str, pool: str,
                  nodes: Sequence[str], shapes: Sequence[str], timeout: float) -> SchedulerRun:
    names = [f"{pool}-{i:05d}" for i in range(len(shapes))]
    _created(kube, [claim(name, shape) for name, shape in zip(names, shapes, strict=True)])
    pods = []
    for name in names:
        obj = pod(name, scheduler=scheduler, claim_name=name, node_selector={"e2e/pool": pool})
        obj["metadata"]["labels"] = {RUN_LABEL: pool}
        pods.append(obj)
    selector = f"{RUN_LABEL}={pool}"
    rv = kube.request("GET", collection_path("Pod"),
                      params={"labelSelector": selector})["metadata"]["resourceVersion"]
    before = scrapers.snapshot(scheduler)
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(1) as creator:
        creating = creator.submit(_created, kube, pods)
        outcomes = follow(kube, selector=selector, resource_version=rv, names=names,
                          timeout=timeout)
        create_seconds = creating.result()
    after = scrapers.snapshot(scheduler)
    _delete_pending(kube)
    bound_times = [o.bound_at for o in outcomes.values() if o.bound_at is not None]
    shape_of = dict(zip(names, shapes, strict=True))
    added = list(outcomes)
    first_failure = next((i for i, n in enumerate(added) if outcomes[n].bound_at is None),
                         len(added))
    retried: dict[str, int] = {}
    for o in outcomes.values():
        if o.bound_at is not None:
            for reason in o.reasons:
                retried[reason] = retried.get(reason, 0) + 1
    claims = [c for c in kube.list("ResourceClaim", "default")
              if c["metadata"]["name"] in outcomes
              and outcomes[c["metadata"]["name"]].bound_at is not None]
    allowed = set(nodes)
    devices = {k: d for k, d in published_devices(kube).items() if k[1] in allowed}
    return SchedulerRun(
        scheduler=scheduler, pool=pool, pods=len(names), bound=len(bound_times),
        before_first_failure=first_failure,
        first_failure_shape=shape_of[added[first_failure]] if first_failure < len(added)
        else None,
        bound_after_retry=dict(sorted(retried.items())),
        seconds=round(max(bound_times) - started, 3) if bound_times else 0.0,
        create_seconds=round(create_seconds, 3),
        quality=placement_quality(claims, devices),
        timings=timings(before, after, bound=len(bound_times)))


# --------------------------------------------------------------------------- the benchmark


@contextmanager
def _cluster(directory: str | None) -> Iterator[Cluster]:
    if directory:
        yield Cluster.load(Path(directory))
        return
    with tempfile.TemporaryDirectory(prefix="drax-real-cluster-") as tmp:
        running = start(Path(tmp))
        try:
            yield running
        finally:
            stop(running)


def set_client_qps(cluster: Cluster, qps: int) -> None:
    """Restart both kube-schedulers with `clientConnection.qps` = `qps` (burst twice
    that). The default, 50 (burst 100), throttles the in-tree scheduler's claim and
    Binding writes here, while drax's go through drax's own client, which has no
    client-side limit; both schedulers always get the same setting."""
    kube = cluster.kube()
    try:
        for name in ("default-scheduler", "drax-scheduler"):
            config = Path(next(a for a in cluster.commands[name]
                               if a.startswith("--config="))[len("--config="):])
            doc = yaml.safe_load(config.read_text())
            doc["clientConnection"].update(qps=qps, burst=2 * qps)
            config.write_text(yaml.safe_dump(doc))
            holder = kube.get("Lease", name, "kube-system")["spec"].get("holderIdentity") \
                if name == "drax-scheduler" else None
            cluster.restart(name)
            port = cluster.ports[name]
            wait_for(f"{name} /healthz", lambda p=port: httpx.get(
                f"https://127.0.0.1:{p}/healthz", verify=False, timeout=5).status_code == 200)
            if holder is not None:
                # kube-scheduler releases its lease on SIGTERM (holderIdentity ""); wait
                # until the new process holds it, or it would schedule nothing.
                wait_for("drax-scheduler leader lease", lambda h=holder: kube.get(
                    "Lease", "drax-scheduler", "kube-system")["spec"].get("holderIdentity")
                    not in (None, "", h), timeout=120)
    finally:
        kube.close()


def run(args: argparse.Namespace) -> dict[str, Any]:
    nodes = args.nodes[0]
    pods = args.pods if args.pods is not None else 4 * nodes
    with _cluster(args.dir) as cluster:
        if args.scheduler_qps:
            set_client_qps(cluster, args.scheduler_qps)
        doc = measure(cluster, nodes=nodes, pods=pods, mix=args.mix, seed=args.seed,
                      timeout=args.timeout * 10)
    return {**doc, "scheduler_qps": args.scheduler_qps or DEFAULT_CLIENT_QPS}


def measure(cluster: Cluster, *, nodes: int, pods: int, mix: str, seed: int,
            timeout: float) -> dict[str, Any]:
    """Both pools, then the workload through each scheduler in turn (module doc)."""
    shapes = generator.workload_shapes(pods=pods, mix=mix, seed=seed)
    run_id = time.strftime("%H%M%S")
    kube = cluster.kube()
    scrapers = Scrapers(cluster)
    try:
        kube.apply_file(SAMPLE_CLASSES)
        _delete_pending(kube)
        pools = {s: f"rc{run_id}{'ab'[i]}" for i, s in enumerate(SCHEDULERS)}
        members = {s: add_pool(kube, prefix=p, nodes=nodes, seed=seed)
                   for s, p in pools.items()}
        # Let drax's informers and both schedulers' caches see the pools.
        time.sleep(2)
        runs = [run_scheduler(kube, scrapers, scheduler=s, pool=pools[s], nodes=members[s],
                              shapes=shapes, timeout=timeout)
                for s in SCHEDULERS]
    finally:
        scrapers.close()
        kube.close()
    return {"nodes_per_pool": nodes, "pods": pods, "mix": mix, "seed": seed,
            "runs": [r.to_dict() for r in runs], "targets": targets(runs)}


def targets(runs: Sequence[SchedulerRun]) -> list[dict[str, Any]]:
    drax, in_tree = runs
    ratio = drax.pods_per_second / in_tree.pods_per_second if in_tree.pods_per_second else None
    return [
        {"target": "GPU+NIC pods: GPUs with a NIC on their PCIe root (drax)", "goal": "100 %",
         "measured": drax.quality.aligned_share, "beside": in_tree.quality.aligned_share,
         "met": drax.quality.aligned_share in (None, 1.0)},
        {"target": "pods placed before the first failure", "goal": ">= in-tree",
         "measured": drax.before_first_failure, "beside": in_tree.before_first_failure,
         "met": drax.before_first_failure >= in_tree.before_first_failure},
        {"target": "pods/s vs in-tree", "goal": ">= 0.8x",
         "measured": round(ratio, 3) if ratio is not None else None,
         "beside": round(in_tree.pods_per_second, 2), "met": ratio is not None and ratio >= 0.8},
    ]


def _pct(share: float | None) -> str:
    return "–" if share is None else f"{100 * share:.1f} %"


def markdown(doc: Mapping[str, Any], *, command: str) -> str:
    lines = [f"Command: `{command}`.", "", comparison(doc), "",
             "| target | goal | drax | in-tree | met |", "| --- | --- | --- | --- | --- |"]
    for t in doc["targets"]:
        lines.append(f"| {t['target']} | {t['goal']} | {t['measured']} | {t['beside']} | "
                     f"{'met' if t['met'] else '**missed**'} |")
    return "\n".join(lines)


def comparison(doc: Mapping[str, Any]) -> str:
    """The two schedulers side by side: placement, quality, time, API writes."""
    runs = doc["runs"]
    lines = [f"{doc['nodes_per_pool']} nodes per pool (8 GPUs + 8 NICs each), {doc['pods']} "
             f"pods of the `{doc['mix']}` mix per scheduler; both kube-schedulers' client QPS "
             f"{doc.get('scheduler_qps', DEFAULT_CLIENT_QPS)}.", "",
             "| | " + " | ".join(r["scheduler"] for r in runs) + " |",
             "| --- |" + " --- |" * len(runs)]

    def row(label: str, cells: Sequence[Any]) -> None:
        lines.append(f"| {label} | " + " | ".join(str(c) for c in cells) + " |")

    q = [r["quality"] for r in runs]
    row("pods bound / created", [f"{r['bound']} / {r['pods']}" for r in runs])
    row("pods placed before the first failure (its shape)",
        [f"{r['before_first_failure']} ({r['first_failure_shape']})" for r in runs])
    row("pods bound after a failed attempt (its reason)",
        [", ".join(f"{n} ({k})" for k, n in r["bound_after_retry"].items()) or "0"
         for r in runs])
    row("GPUs with a NIC on their PCIe root (GPU+NIC pods)",
        [f"{_pct(r['aligned_share'])} ({x['aligned_gpus']}/{x['gpus_in_gpu_nic_pods']})"
         for r, x in zip(runs, q, strict=True)])
    row("multi-device pods on one NUMA node",
        [f"{_pct(r['single_numa_share'])} ({x['single_numa_pods']}/{x['multi_device_pods']})"
         for r, x in zip(runs, q, strict=True)])
    row("time to schedule the workload", [f"{r['seconds']:.2f} s" for r in runs])
    row("pods/s", [f"{r['pods_per_second']:.1f}" for r in runs])
    row("pod creation (8 threads)", [f"{r['create_seconds']:.2f} s" for r in runs])
    for key in ("cycle", "attempt", "unschedulable_attempt", "prebind", "bind"):
        row(f"scheduler `{key}` mean ms (count)",
            [f"{r['timings'][f'scheduler_{key}_ms']} ({r['timings'][f'scheduler_{key}_count']})"
             for r in runs])
    for verb in ("filter", "prioritize", "bind"):
        row(f"drax `{verb}` handler mean ms (calls)",
            [f"{r['timings'][f'drax_{verb}_ms']} ({r['timings'][f'drax_{verb}_calls']})"
             for r in runs])
    row("drax filters that waited for a bind on its way: mean ms (filters)",
        [f"{r['timings']['drax_bind_wait_ms']} ({r['timings']['drax_bind_wait_filters']})"
         for r in runs])
    row("API writes per bound pod", [
        ", ".join(f"{k} {v}" for k, v in r["timings"]["api_writes_per_pod"].items())
        for r in runs])
    return "\n".join(lines)
