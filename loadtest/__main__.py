"""`python -m loadtest`: the end-to-end scheduling benchmark, the floor and churn.

For each cluster size: generate the cluster and the workload's claims into a
temporary inventory directory, start the real `drax serve` on it, measure the
build (process start to /readyz) and RSS, then schedule the workload as
kube-scheduler would (`bench.schedule`), sending each pod's request bodies to
the floor server (`loadtest.floor`) too, right after drax answered them. The
churn benchmark then runs in-process (`loadtest.churn`). Results go to stdout as Markdown and, with
`--json`, to a file (`loadtest/results/scheduling.json` is the record RESULTS.md
is rendered from); the scheduling targets are evaluated in `report`.

The workload has two phases: `mixed` (the default claim mix, which fills the
cluster to about half of its GPUs) and then `2gpu-1nic-same-root` (the target
claim, scheduled into that half-full cluster). Every bound pod stays bound.
Everything is bounded: pod counts, request timeouts, the readiness wait.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from app import garbage_collector
from loadtest import (
    bench,
    churn,
    generator,
    kube_ready,
    peer,
    profile,
    real_cluster,
    report,
    soak,
)
from loadtest.bench import BenchmarkError, Client, PodJob, serving
from tests.upstream.differential import open_oracle


@dataclass(slots=True, frozen=True)
class Sizing:
    """How much work one cluster size gets; big clusters get fewer pods so the
    whole command stays under five minutes on two cores."""

    pods: int
    target_pods: int
    churn_events: int


def sizing(args: argparse.Namespace, nodes: int) -> Sizing:
    small = nodes <= LARGE_CLUSTER
    return Sizing(
        pods=args.pods if args.pods is not None else (600 if small else 200),
        target_pods=args.target_pods if args.target_pods is not None
        else (300 if small else 150),
        churn_events=args.churn_events if args.churn_events is not None
        else (2000 if small else 1000))


def _workload(args: argparse.Namespace, size: Sizing
              ) -> tuple[list[dict[str, Any]], list[PodJob]]:
    """Claim objects for the inventory, and the pods to schedule in order."""
    total = size.pods + size.target_pods
    phases: list[tuple[float, dict[str, float]]] = []
    if size.pods:
        phases.append((size.pods / total, dict(generator.DEFAULT_WEIGHTS)))
    if size.target_pods:
        phases.append((size.target_pods / total, {report.TARGET_SHAPE: 1}))
    shapes = generator.workload_shapes(pods=total, mix=phases, seed=args.seed)
    objects = generator.generate_workload(pods=total, mix=phases, seed=args.seed,
                                          claims=args.claims)
    claims = [o for o in objects if o["kind"] != "Pod"]
    pods = [o for o in objects if o["kind"] == "Pod"]
    jobs = [PodJob(phase="mixed" if i < size.pods else report.TARGET_SHAPE, shape=shape, pod=pod)
            for i, (shape, pod) in enumerate(zip(shapes, pods, strict=True))]
    return claims, jobs


LARGE_CLUSTER = 1000


@dataclass(slots=True)
class _Tally:
    """What the benchmark needs to know about a cluster streamed to files."""

    devices: int = 0
    node_names: list[str] = dataclasses.field(default_factory=list)

    def count(self, objects: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for obj in objects:
            if obj["kind"] == "ResourceSlice":
                self.devices += len(obj["spec"].get("devices", ()))
            elif obj["kind"] == "Node":
                self.node_names.append(obj["metadata"]["name"])
            yield obj


def _serve_argv(args: argparse.Namespace, *, port: int, inventory: Path) -> list[str]:
    return [sys.executable, "-m", "app", "serve", "--host", bench.HOST, "--port", str(port),
            "--inventory", str(inventory), "--log-level", "warning", *args.server_arg]


def _floor_argv(port: int) -> list[str]:
    return [sys.executable, "-m", "loadtest.floor", "--host", bench.HOST, "--port", str(port),
            "--log-level", "warning"]


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Generating a big cluster allocates millions of dicts that all stay alive;
    the cyclic collector would rescan them over and over for nothing. One
    collection after, so the benchmark's process starts without the garbage."""
    with garbage_collector.paused():
        yield
    gc.collect()


def _write_cluster(directory: Path, cluster: Iterable[dict[str, Any]],
                   claims: Sequence[dict[str, Any]] = ()) -> None:
    generator.write_cluster(directory, cluster, fmt="json")
    if claims:
        generator.write_objects(directory / "claims.json", claims)


def measure_rss_16(args: argparse.Namespace, nodes: int, workdir: Path) -> dict[str, Any]:
    """Build time and RSS of drax serving `nodes` nodes of exactly 8 GPUs + 8 NICs."""
    with _collector_paused():
        tally = _Tally()
        directory = workdir / f"inventory-{nodes}-16"
        _write_cluster(directory, tally.count(generator.iter_cluster(
            nodes=nodes, seed=args.seed, partitionable_fraction=0, shared_fraction=0)))
        devices = tally.devices
    port = bench.free_port()
    with serving(_serve_argv(args, port=port, inventory=directory), port=port,
                 log=workdir / f"drax-{nodes}-16.log", ready_timeout=args.ready_timeout) as server:
        rss, peak = bench.memory_bytes(server.pid)
    print(f"[{nodes} nodes x 16 devices] drax ready in {server.ready_seconds:.1f}s, "
          f"RSS {rss / report.MB:.0f} MB", file=sys.stderr)
    return {"devices": devices, "build_seconds": round(server.ready_seconds, 3),
            "ready_bytes": rss, "peak_bytes": peak}


def run_size(args: argparse.Namespace, nodes: int, workdir: Path) -> dict[str, Any]:
    started = time.monotonic()
    size = sizing(args, nodes)
    inventory = workdir / f"inventory-{nodes}"
    with _collector_paused():
        tally = _Tally()
        claims, jobs = _workload(args, size)
        _write_cluster(inventory, tally.count(generator.iter_cluster(nodes=nodes, seed=args.seed)),
                       claims)
        devices, node_names = tally.devices, tally.node_names
    print(f"[{nodes} nodes] generated {devices} devices, {len(jobs)} pods "
          f"in {time.monotonic() - started:.1f}s", file=sys.stderr)

    port = bench.free_port()
    with ExitStack() as servers:
        server = servers.enter_context(serving(
            _serve_argv(args, port=port, inventory=inventory), port=port,
            log=workdir / f"drax-{nodes}.log", ready_timeout=args.ready_timeout))
        rss_ready, _ = bench.memory_bytes(server.pid)
        build_seconds = server.ready_seconds
        print(f"[{nodes} nodes] drax ready in {build_seconds:.1f}s, "
              f"RSS {rss_ready / report.MB:.0f} MB", file=sys.stderr)
        floor = None
        if not args.no_floor:
            floor_port = bench.free_port()
            floor = servers.enter_context(serving(
                _floor_argv(floor_port), port=floor_port, log=workdir / f"floor-{nodes}.log",
                ready_timeout=args.ready_timeout))
        profile_file = Path(args.profile) / f"drax-{nodes}.txt" if args.profile else None
        client = servers.enter_context(closing(Client(port, timeout=args.timeout)))
        mirror = (servers.enter_context(closing(Client(floor.port, timeout=args.timeout)))
                  if floor is not None else None)
        with ExitStack() as sampling:
            if profile_file is not None:
                sampling.enter_context(profile.recording(server.pid, profile_file))
            drax_run, floor_run = bench.schedule(
                client, jobs, candidates=bench.candidate_lists(node_names, mode=args.candidates),
                mirror=mirror)
        rss_after, rss_peak = bench.memory_bytes(server.pid)
        floor_rss = bench.memory_bytes(floor.pid)[0] if floor is not None else 0
        handler = {"drax": bench.handler_seconds(server.port)}
        if floor is not None:
            handler["floor"] = bench.handler_seconds(floor.port)
    print(f"[{nodes} nodes] scheduled {len(drax_run.samples)} of {len(jobs)} pods"
          + (f"; aborted: {drax_run.aborted}" if drax_run.aborted else ""), file=sys.stderr)

    phases = report.phase_results(drax_run, floor_run)
    count = bench.scheduler_candidate_count(nodes)
    result: dict[str, Any] = {
        "nodes": nodes, "devices": devices,
        "candidates": f"all {nodes} nodes" if args.candidates == "all"
        else f"{count} of {nodes} (percentageOfNodesToScore default, rotating start)",
        "build_seconds": round(build_seconds, 3),
        "rss": {"ready_bytes": rss_ready, "after_bytes": rss_after, "peak_bytes": rss_peak,
                "floor_bytes": floor_rss},
        "phases": phases,
        "drax_overall": report.overall(phases, "drax"),
        "aborted": drax_run.aborted,
        "handler": handler,
    }
    if profile_file is not None:
        result["profile"] = profile.summarize_collapsed(profile_file.read_text(errors="replace"))
    if floor_run is not None:
        result["floor_overall"] = report.overall(phases, "floor")
    if args.rss_16:
        result["rss_16"] = measure_rss_16(args, nodes, workdir)
    if not args.no_churn:
        result["churn"] = churn.run_churn(nodes=nodes, seed=args.seed, events=size.churn_events)
        print(f"[{nodes} nodes] churn done", file=sys.stderr)
    return result


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m loadtest", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+",
                        help="cluster sizes to run (default: 500 5000); with --real-cluster "
                             "the nodes of each pool (default 32)")
    parser.add_argument("--pods", type=int,
                        help="pods in the mixed phase (default 600; 200 above 1,000 nodes)")
    parser.add_argument("--target-pods", type=int,
                        help="pods in the 2gpu-1nic-same-root phase (default 300; 150 above "
                             "1,000 nodes)")
    parser.add_argument("--candidates", choices=("all", "scheduler"), default="all",
                        help="all nodes per filter, or the scheduler's default share")
    parser.add_argument("--claims", choices=("claim", "template"), default="claim",
                        help="per-pod ResourceClaims, or ResourceClaimTemplates")
    parser.add_argument("--churn-events", type=int,
                        help="inventory events in the churn run (default 2000; 1000 above "
                             "1,000 nodes)")
    parser.add_argument("--rss-16", action="store_true",
                        help="also measure drax's RSS on a cluster of exactly 16 devices per "
                             "node (no partitionable or shared GPUs), the shape of the RSS "
                             "target")
    parser.add_argument("--no-floor", action="store_true")
    parser.add_argument("--no-churn", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ready-timeout", type=float, default=240.0)
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="per-request timeout; a request over it ends that size's run")
    parser.add_argument("--server-arg", action="append", default=[],
                        help="extra argument for drax serve (repeatable)")
    parser.add_argument("--json", help="write the full results as JSON to this file")
    parser.add_argument("--markdown", help="also write the Markdown report to this file")
    parser.add_argument("--workdir", help="keep generated files and server logs here")
    parser.add_argument("--profile", metavar="DIR",
                        help="sample drax with py-spy while it schedules; collapsed stacks "
                             "and a summary go to DIR (timings are then perturbed)")
    parser.add_argument("--upstream", action="store_true",
                        help="also time upstream's Go allocator on the same clusters and "
                             "claim shapes (loadtest/peer.py; needs the oracle, built with go)")
    parser.add_argument("--soak", type=float, metavar="SECONDS",
                        help="scheduling and churn together against drax serve in kube mode "
                             "for this long (loadtest/soak.py); RSS, p99 drift and errors")
    parser.add_argument("--from-api", action="store_true",
                        help="only measure start to ready in kube mode: drax lists the "
                             "generated cluster in pages from the API-server double "
                             "(loadtest/kube_ready.py)")
    parser.add_argument("--real-cluster", action="store_true",
                        help="drax beside the in-tree DRA scheduler on a real 1.37 control "
                             "plane (loadtest/real_cluster.py; needs go): two identical pools, "
                             "the same workload through each scheduler")
    parser.add_argument("--dir", help="with --real-cluster: a cluster already up there "
                                      "(python -m tests.e2e.cluster up --dir DIR)")
    parser.add_argument("--mix", default="topology", choices=sorted(generator.MIXES),
                        help="with --real-cluster: the workload mix (default topology)")
    parser.add_argument("--scheduler-qps", type=int,
                        help="with --real-cluster: restart both kube-schedulers with this "
                             "clientConnection.qps (burst 2x) first (default: theirs, 50)")
    args = parser.parse_args(argv)
    if args.nodes is None:
        args.nodes = [32] if args.real_cluster else [500, 5000]
    if args.real_cluster and len(args.nodes) != 1:
        parser.error("--real-cluster takes one --nodes value (the nodes of each pool)")
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    if (args.pods or 0) < 0 or (args.target_pods or 0) < 0 or args.pods == args.target_pods == 0:
        parser.error("--pods and --target-pods must be >= 0 and not both 0")
    if any(n < 1 for n in args.nodes):
        parser.error("--nodes must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    command = "python -m loadtest " + " ".join(
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    if args.real_cluster:
        return _real_cluster(args, command.strip())
    if args.soak is not None:
        return _soak(args, command.strip())
    if args.from_api:
        return _from_api(args, command.strip())
    doc: dict[str, Any] = {
        **report.provenance(command.strip()), "runs": []}
    try:
        with tempfile.TemporaryDirectory(prefix="drax-loadtest-") as tmp:
            workdir = Path(args.workdir) if args.workdir else Path(tmp)
            workdir.mkdir(parents=True, exist_ok=True)
            for nodes in args.nodes:
                doc["runs"].append(run_size(args, nodes, workdir))
    except (BenchmarkError, OSError) as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1
    doc["targets"] = report.evaluate_targets(doc)
    text = report.markdown(doc)
    if args.upstream:
        rows = _peer(args)
        doc["upstream"] = [r.to_dict() for r in rows]
        text += "\n\n## drax vs upstream's allocator\n\n" + peer.markdown(rows) + "\n"
    _publish(args, doc, text)
    return 0


def _publish(args: argparse.Namespace, doc: dict[str, Any], text: str) -> None:
    """The report on stdout, and as JSON / Markdown where `--json` / `--markdown` ask."""
    print(text)
    if args.json:
        Path(args.json).write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    if args.markdown:
        Path(args.markdown).write_text(text)


def _soak(args: argparse.Namespace, command: str) -> int:
    try:
        doc = soak.run(args.soak, seed=args.seed, workdir=args.workdir)
    except (RuntimeError, OSError) as exc:
        print(f"soak failed: {exc}", file=sys.stderr)
        return 1
    doc.update(report.provenance(command))
    text = soak.markdown(doc)
    _publish(args, doc, text)
    return 0 if doc["passed"] else 1


def _from_api(args: argparse.Namespace, command: str) -> int:
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="drax-loadtest-") as tmp:
            workdir = Path(args.workdir) if args.workdir else Path(tmp)
            workdir.mkdir(parents=True, exist_ok=True)
            for nodes in args.nodes:
                claims, _ = _workload(args, sizing(args, nodes))
                results.append(kube_ready.run(
                    nodes=nodes, seed=args.seed, claims=claims, workdir=workdir,
                    ready_timeout=args.ready_timeout, server_args=args.server_arg))
    except (RuntimeError, OSError) as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1
    doc = {**report.provenance(command), "from_api": results}
    text = kube_ready.markdown(results)
    _publish(args, doc, text)
    return 0


def _real_cluster(args: argparse.Namespace, command: str) -> int:
    try:
        doc = real_cluster.run(args)
    except (TimeoutError, RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        print(f"real-cluster benchmark failed: {exc}", file=sys.stderr)
        return 1
    doc.update(report.provenance(command))
    text = real_cluster.markdown(doc, command=command)
    _publish(args, doc, text)
    return 0


def _peer(args: argparse.Namespace) -> list[peer.PeerRow]:
    oracle = open_oracle()
    try:
        return peer.run(node_counts=args.nodes, oracle=oracle, seed=args.seed)
    finally:
        oracle.close()


if __name__ == "__main__":
    sys.exit(main())
