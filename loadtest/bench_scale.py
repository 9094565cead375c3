"""`python -m loadtest.bench_scale`: the verbs' costs that only show after start, at scale.

The scale targets ask, at 100,000 nodes, for the first touch of a new claim shape,
the cost of one watch event and the longest a burst of slice events or a
relist holds up a verb. None of them can be seen in file mode (every claim is
there, and warmed, before drax is ready), so this benchmark runs the real
`drax serve --kubeconfig` against the API-server double of
`loadtest.bench_watch` (its own process, so its encoding does not share
drax's CPU time slice), which makes the generated cluster itself
(`loadtest.generator`, the default mix) and holds the workload's claims and
pods. After ready, the run waits for background warming to settle (at most
`--settle-timeout`; the backlog left is reported), then:

1. `steady`: `--pods` pods of the default mix, scheduled as `python -m
   loadtest` does (`bench.schedule`, the scheduler's share of candidates), so
   the cluster is not empty when the new shapes arrive;
2. `first touch`: `--new-shapes` claim shapes drax has never seen (the
   generator's GPU shapes, each with a memory selector of its own) are
   created after ready, two claims and pods per shape. The first pod's filter
   is sent the moment drax knows its claim (a filter over one unknown node is
   repeated until it stops answering that the claim does not exist, which
   also keeps warming from getting ahead); its cycle (filter + prioritize
   over the candidates) is the first touch, the second pod's cycle right
   after it, over the same candidates, the same shape known (the ratio);
3. `burst`: a probe verb (filter of a pod without claims over one node, every
   PROBE_INTERVAL on a connection of its own) is timed while nothing happens
   (BASELINE_SECONDS), then while the double republishes `--burst` slices
   (until drax has applied every event), then through a relist (the watches
   dropped, one device removed meanwhile and the history compacted, so every
   informer lists again; until drax's device count shows the removal). The
   worst probe round trip of each window minus the quiet window's median is
   the longest a verb was held up;
4. `watch events`: `drax_watch_event_apply_seconds` over the burst, its p99
   interpolated within its bucket and the share of events under 1 ms.

    .venv/bin/python -m loadtest.bench_scale --nodes 5000 [--pods 100] [--new-shapes 24]
        [--burst 10000] [--json FILE] [--profile DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import functools
import http.client
import re
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from loadtest import bench, generator, profile, report
from loadtest.bench import BenchmarkError, Client, PodJob, serving
from loadtest.bench_watch import PLURALS, Child, kubeconfig
from loadtest.stats import summarize

PROBE_INTERVAL: Final = 0.005
# drax's /metrics is read this often in every window, the quiet one included:
# a scrape walks the inventory (drax_inventory_devices), as Prometheus' would.
SCRAPE_EVERY: Final = 1.0
BASELINE_SECONDS: Final = 5.0
WAIT_TIMEOUT: Final = 1800.0
APPLY_TARGET_S: Final = 0.001
BLOCK_TARGET_S: Final = 0.05
FIRST_TOUCH_TARGET_S: Final = 0.2
UNKNOWN_NODE: Final = "bench-scale-no-such-node"
_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')


# --------------------------------------------------------------------------- drax's metrics


def scrape(port: int) -> dict[tuple[str, str], float]:
    """Every sample of drax's /metrics, keyed by (name, label text)."""
    conn = http.client.HTTPConnection(bench.HOST, port, timeout=30)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    out = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m:
            out[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return out


def metric(samples: Mapping[tuple[str, str], float], name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for (n, text), value in samples.items():
        if n == name and ",".join(sorted(text.strip("{}").split(","))) == want:
            return value
    return 0.0


def apply_histogram(before: Mapping[tuple[str, str], float],
                    after: Mapping[tuple[str, str], float], *, kind: str) -> dict[str, Any]:
    """The events of `kind` applied between two scrapes: count, mean, the p99
    (linear within its bucket) and the share at or under 1 ms."""
    name = "drax_watch_event_apply_seconds"
    buckets: list[tuple[float, float]] = []
    for (n, text), value in after.items():
        if n == f"{name}_bucket" and f'kind="{kind}"' in text:
            le = re.search(r'le="([^"]+)"', text)
            if le:
                bound = float("inf") if le.group(1) == "+Inf" else float(le.group(1))
                buckets.append((bound, value - before.get((n, text), 0.0)))
    buckets.sort()
    count = metric(after, f"{name}_count", kind=kind) - metric(before, f"{name}_count", kind=kind)
    total = metric(after, f"{name}_sum", kind=kind) - metric(before, f"{name}_sum", kind=kind)
    if count <= 0:
        return {"events": 0}
    rank, low, below = 0.99 * count, 0.0, 0.0
    p99 = float("inf")
    for bound, cumulative in buckets:
        if cumulative >= rank:
            inside = cumulative - below
            p99 = bound if inside <= 0 or bound == float("inf") else (
                low + (bound - low) * (rank - below) / inside)
            break
        low, below = bound, cumulative
    under = next((c for b, c in buckets if b == APPLY_TARGET_S), 0.0)
    return {"events": int(count), "mean_ms": round(total / count * 1e3, 3),
            "p99_ms": round(p99 * 1e3, 3), "share_under_1ms": round(under / count, 4),
            "met": p99 <= APPLY_TARGET_S}


def gc_pauses(samples: Mapping[tuple[str, str], float]) -> dict[str, dict[str, float]]:
    """Per generation, drax's cyclic collections over the whole run: how many,
    their total, and how many stopped the process for more than 50 ms."""
    out = {}
    for generation in ("0", "1", "2"):
        count = metric(samples, "drax_gc_pause_seconds_count", generation=generation)
        under = metric(samples, "drax_gc_pause_seconds_bucket", generation=generation,
                       le="0.05")
        out[generation] = {"count": count, "total_s": round(metric(
            samples, "drax_gc_pause_seconds_sum", generation=generation), 3),
            "over_50ms": count - under}
    return out


def handler_means(before: Mapping[str, Mapping[str, float]],
                  after: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Per verb, the mean milliseconds inside drax's route handler between two
    reads of `bench.handler_seconds`: set against the client's round trips it
    shows what the HTTP stack and the client add."""
    out = {}
    for verb, now in after.items():
        then = before.get(verb, {})
        count = now.get("count", 0.0) - then.get("count", 0.0)
        if count > 0:
            out[verb] = round((now.get("sum", 0.0) - then.get("sum", 0.0)) / count * 1e3, 3)
    return out


def inside_and_outside(samples: Sequence[bench.Sample]) -> dict[str, dict[str, Any]]:
    """Per verb of the cycle, the time inside drax's handler (its Server-Timing)
    and the rest of each round trip (HTTP, the event loop's other work, the
    client): which side the slow cycles are on."""
    out: dict[str, dict[str, Any]] = {}
    for verb in ("filter", "prioritize"):
        inside, outside = [], []
        for sample in samples:
            trip = sample.filter_s if verb == "filter" else sample.prioritize_s
            handled = sample.handler_s.get(verb)
            if trip is not None and handled is not None:
                inside.append(handled)
                outside.append(trip - handled)
        if inside:
            out[verb] = {"inside": summarize(inside).to_dict(),
                         "outside": summarize(outside).to_dict()}
    return out


def gc_since(before: Mapping[str, Mapping[str, float]],
             after: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """`gc_pauses` between two scrapes."""
    return {generation: {key: round(value - before.get(generation, {}).get(key, 0.0), 3)
                         for key, value in figures.items()}
            for generation, figures in after.items()}


def wait_for(condition: Callable[[], bool], what: str, *, timeout: float,
             every: float = 0.05) -> float:
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise BenchmarkError(f"{what}: not after {timeout:.0f} s")
        time.sleep(every)
    return time.monotonic() - started


@dataclass(slots=True, frozen=True)
class Settled:
    seconds: float
    settled: bool
    backlog: float  # nodes still to warm when the wait ended


def settle(port: int, *, timeout: float) -> Settled:
    """Until background warming is idle (no backlog and no answer computed for 2 s),
    or `timeout`: at 100,000 nodes warming takes longer than a run can wait, and
    the phases after it then run beside it, as they would after a real restart."""
    started, last, quiet_since = time.monotonic(), -1.0, time.monotonic()
    while True:
        samples = scrape(port)
        misses = metric(samples, "drax_answer_cache_misses_total")
        backlog = metric(samples, "drax_warming_backlog")
        elapsed = time.monotonic() - started
        if misses != last or backlog > 0:
            last, quiet_since = misses, time.monotonic()
        elif time.monotonic() - quiet_since >= 2.0:
            return Settled(seconds=elapsed, settled=True, backlog=0.0)
        if elapsed >= timeout:
            return Settled(seconds=elapsed, settled=False, backlog=backlog)
        time.sleep(0.5)


# --------------------------------------------------------------------------- first touch


def new_shapes(count: int) -> list[tuple[str, dict[str, Any]]]:
    """`count` claim specs drax has not seen: the generator's GPU shapes in turn,
    each GPU request with a memory selector whose threshold no other shape uses."""
    bases = [name for name in generator.SHAPES if name != "mig-1g"]
    out = []
    for i in range(count):
        base = bases[i % len(bases)]
        spec = copy.deepcopy(dict(generator.SHAPES[base]))
        selector = (f'device.capacity["{generator.GPU_DRIVER}"].memory.compareTo('
                    f'quantity("{i + 1}Gi")) >= 0')
        for request in spec["devices"]["requests"]:
            exactly = request["exactly"]
            if exactly["deviceClassName"] == generator.GPU_CLASS:
                exactly.setdefault("selectors", []).append({"cel": {"expression": selector}})
        out.append((f"{base}-min{i + 1}gi", spec))
    return out


def _claim_and_pod(name: str, spec: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    claim = {"kind": "ResourceClaim", "metadata": {"name": f"{name}-gpus",
                                                   "namespace": "default"},
             "spec": copy.deepcopy(dict(spec))}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
           "spec": {"schedulerName": "drax", "resourceClaims": [
               {"name": generator.POD_CLAIM_NAME, "resourceClaimName": f"{name}-gpus"}],
               "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}
    return claim, pod


def _known(client: Client, pod: Mapping[str, Any]) -> bool:
    """Whether drax holds the pod's claims: a filter over one node it does not know
    answers that node either way, naming a missing claim if there is one."""
    body = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": [UNKNOWN_NODE]})
    answer = client.post("filter", body)[1]
    reasons = " ".join((answer or {}).get("FailedAndUnresolvableNodes", {}).values())
    return "does not exist" not in reasons


def first_touch(client: Client, child: Child, loop: asyncio.AbstractEventLoop, *,
                shapes: int, candidates: Callable[[], list[str]]) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for index, (shape, spec) in enumerate(new_shapes(shapes)):
        pairs = [_claim_and_pod(f"new-{index:02d}-{n}", spec) for n in range(2)]
        objects = [{**obj, "plural": PLURALS[obj["kind"]]} for pair in pairs for obj in pair]
        loop.run_until_complete(child.call("create", objects))
        cycles = []
        names = candidates()  # both pods over the same nodes: the second finds them answered
        for _, pod in pairs:
            wait_for(functools.partial(_known, client, pod),
                     f"claim of {pod['metadata']['name']}", timeout=60, every=0.001)
            one, _ = bench.schedule(client, [PodJob(phase="first-touch", shape=shape, pod=pod)],
                                    candidates=functools.partial(list, names))
            if one.aborted:
                raise BenchmarkError(one.aborted)
            cycles.append(one.samples[0])
        rows.append({"shape": shape, "first_s": cycles[0].cycle_s, "second_s": cycles[1].cycle_s,
                     "passed": cycles[0].passed, "outcome": cycles[0].outcome})
    first = sorted(r["first_s"] for r in rows)
    second = sorted(r["second_s"] for r in rows)
    p99 = summarize(first).to_dict()["p99_ms"]
    return {"shapes": rows, "first": summarize(first).to_dict(),
            "second": summarize(second).to_dict(),
            "first_over_second_median": round(statistics.median(first)
                                              / statistics.median(second), 1),
            "met": p99 <= FIRST_TOUCH_TARGET_S * 1e3}


# --------------------------------------------------------------------------- burst


@dataclass(slots=True)
class Probe:
    """A cheap verb, sent every PROBE_INTERVAL from a thread; round trips per window."""

    port: int
    node: str
    window: str = "quiet"
    seconds: dict[str, list[float]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        pod = {"metadata": {"name": "probe", "namespace": "default", "uid": "uid-probe"},
               "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}
        body = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": [self.node]})
        with closing(Client(self.port, timeout=60)) as client:
            while not self._stop.is_set():
                elapsed = client.post("filter", body)[0]
                self.seconds.setdefault(self.window, []).append(elapsed)
                time.sleep(PROBE_INTERVAL)

    @contextmanager
    def running(self) -> Iterator[Probe]:
        thread = threading.Thread(target=self.run, name="probe", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join(timeout=120)


def burst(port: int, child: Child, loop: asyncio.AbstractEventLoop, *, events: int,
          node: str) -> dict[str, Any]:
    probe = Probe(port=port, node=node)
    before = scrape(port)
    modified = metric(before, "drax_watch_events_total", kind="ResourceSlice", type="MODIFIED")
    with probe.running():
        started = time.monotonic()
        while time.monotonic() - started < BASELINE_SECONDS:
            scrape(port)
            time.sleep(SCRAPE_EVERY)
        probe.window = "burst"
        started = time.monotonic()
        loop.run_until_complete(child.call("republish", events))
        wait_for(lambda: metric(scrape(port), "drax_watch_events_total", kind="ResourceSlice",
                                type="MODIFIED") >= modified + events,
                 "burst applied", timeout=WAIT_TIMEOUT, every=SCRAPE_EVERY)
        burst_s = time.monotonic() - started
        after_burst = scrape(port)
        devices = metric(after_burst, "drax_inventory_devices")
        probe.window = "relist"
        started = time.monotonic()
        loop.run_until_complete(child.call("shrink-relist"))
        wait_for(lambda: metric(scrape(port), "drax_inventory_devices") == devices - 1,
                 "relist applied", timeout=WAIT_TIMEOUT, every=SCRAPE_EVERY)
        relist_s = time.monotonic() - started
        time.sleep(1.0)  # the other kinds' lists finish too
    quiet = sorted(probe.seconds.get("quiet", [0.0]))
    base = statistics.median(quiet)
    windows = {}
    for name, took in (("burst", burst_s), ("relist", relist_s)):
        seen = sorted(probe.seconds.get(name, [0.0]))
        worst = seen[-1] - base
        windows[name] = {"seconds": round(took, 2), "probes": len(seen),
                         "probe_p50_ms": round(statistics.median(seen) * 1e3, 2),
                         "probe_max_ms": round(seen[-1] * 1e3, 2),
                         "worst_delay_ms": round(worst * 1e3, 2),
                         "met": worst <= BLOCK_TARGET_S}
    return {"events": events, "quiet_probes": len(quiet),
            "quiet_p50_ms": round(base * 1e3, 3), "quiet_max_ms": round(quiet[-1] * 1e3, 3),
            "windows": windows,
            "apply": apply_histogram(before, after_burst, kind="ResourceSlice")}


# --------------------------------------------------------------------------- the run


def _workload(pods: int, seed: int) -> tuple[list[dict[str, Any]], list[PodJob]]:
    shapes = generator.workload_shapes(pods=pods, seed=seed)
    objects = generator.generate_workload(pods=pods, seed=seed, claims="claim")
    pod_objects = [o for o in objects if o["kind"] == "Pod"]
    jobs = [PodJob(phase="steady", shape=s, pod=p)
            for s, p in zip(shapes, pod_objects, strict=True)]
    return objects, jobs


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    loop = asyncio.new_event_loop()
    child = Child()
    result: dict[str, Any] = {"nodes": args.nodes, "pods": args.pods,
                              "candidates": bench.scheduler_candidate_count(args.nodes)}
    try:
        started = time.monotonic()
        loop.run_until_complete(child.call("generate", (args.nodes, args.seed)))
        objects, jobs = _workload(args.pods, args.seed)
        loop.run_until_complete(child.call("create", [
            {**o, "plural": PLURALS[o["kind"]]} for o in objects]))
        result["generate_s"] = round(time.monotonic() - started, 1)
        print(f"[{args.nodes} nodes] the double holds the cluster after "
              f"{result['generate_s']} s", file=sys.stderr)
        config = kubeconfig(workdir / "kubeconfig", child.port)
        port = bench.free_port()
        argv = [sys.executable, "-m", "app", "serve", "--host", bench.HOST, "--port", str(port),
                "--kubeconfig", str(config), "--log-level", "warning"]
        with ExitStack() as stack:
            server = stack.enter_context(serving(argv, port=port, log=workdir / "drax.log",
                                                 ready_timeout=args.ready_timeout))
            result["ready_s"] = round(server.ready_seconds, 1)
            settled = settle(port, timeout=args.settle_timeout)
            result["settle_s"] = round(settled.seconds, 1)
            result["settled"] = settled.settled
            result["warming_backlog_left"] = settled.backlog
            result["rss_settled_bytes"] = bench.memory_bytes(server.pid)[0]
            print(f"[{args.nodes} nodes] ready after {result['ready_s']} s, warming "
                  f"{_settled_text(result)}", file=sys.stderr)
            names = [generator.node_name(i) for i in range(args.nodes)]
            candidates = bench.candidate_lists(names, mode="scheduler")
            client = stack.enter_context(closing(Client(port, timeout=args.timeout)))
            with ExitStack() as sampling:
                if args.profile:
                    sampling.enter_context(profile.recording(
                        server.pid, Path(args.profile) / f"bench-scale-{args.nodes}.txt"))
                before, collections = bench.handler_seconds(port), gc_pauses(scrape(port))
                client.collected_s.clear()
                steady, _ = bench.schedule(client, jobs, candidates=candidates)
                if client.collected_s:
                    result["steady_client_collections"] = summarize(
                        client.collected_s).to_dict()
                result["steady"] = report.phase_results(steady, None)
                result["steady_handler_ms"] = handler_means(before, bench.handler_seconds(port))
                result["steady_inside"] = inside_and_outside(steady.samples)
                result["steady_gc_pauses"] = gc_since(collections, gc_pauses(scrape(port)))
            with ExitStack() as sampling:
                if args.profile:
                    sampling.enter_context(profile.recording(
                        server.pid,
                        Path(args.profile) / f"bench-scale-{args.nodes}-first-touch.txt"))
                result["first_touch"] = first_touch(client, child, loop, shapes=args.new_shapes,
                                                    candidates=candidates)
            print(f"[{args.nodes} nodes] first touch done", file=sys.stderr)
            with ExitStack() as sampling:
                if args.profile:
                    sampling.enter_context(profile.recording(
                        server.pid, Path(args.profile) / f"bench-scale-{args.nodes}-burst.txt"))
                result["burst"] = burst(port, child, loop, events=args.burst, node=names[-1])
            result["rss_after_bytes"] = bench.memory_bytes(server.pid)[0]
            final = scrape(port)
            result["gc_pauses"] = gc_pauses(final)
            result["warming_backlog_after"] = metric(final, "drax_warming_backlog")
    finally:
        child.close()
        loop.close()
    return result


def _settled_text(result: Mapping[str, Any]) -> str:
    if result["settled"]:
        return f"settled {result['settle_s']} s later"
    return (f"not settled {result['settle_s']} s later "
            f"({result['warming_backlog_left']:.0f} nodes still to warm)")


def markdown(result: Mapping[str, Any]) -> str:
    ft, b = result["first_touch"], result["burst"]
    apply = b["apply"]
    steady = next((p for p in result.get("steady", ()) if p["phase"] == "steady"), None)
    lines = [f"{result['nodes']} nodes, kube mode against the API double, "
             f"{result['candidates']} candidates per filter: ready {result['ready_s']} s, "
             f"warming {_settled_text(result)}, RSS "
             f"{result['rss_settled_bytes'] / report.MB:.0f} MB", "",
             "| measure | goal | measured | baseline in the same run | met |",
             "| --- | --- | --- | --- | --- |"]
    if steady is not None:
        cycle = steady["drax"]["cycle"]
        handler = result.get("steady_handler_ms", {})
        inside = " / ".join(f"{verb} {handler[verb]:.2f}" for verb in ("filter", "prioritize")
                            if verb in handler)
        lines.append(f"| steady cycle (default mix, {steady['pods']} pods) p50 / p99 | – | "
                     f"{cycle['p50_ms']:.1f} / {cycle['p99_ms']:.1f} ms | mean in drax's "
                     f"handler: {inside or '–'} ms | – |")
    lines += [
        f"| first touch of a new shape ({len(ft['shapes'])} shapes), cycle p99 | <= 200 ms | "
        f"{ft['first']['p99_ms']:.1f} ms (p50 {ft['first']['p50_ms']:.1f}) | second pod of the "
        f"shape p50 {ft['second']['p50_ms']:.1f} ms (first / second "
        f"{ft['first_over_second_median']} x) "
        f"| {'met' if ft['met'] else 'missed'} |",
        f"| one watch event applied ({apply.get('events', 0)} slice events), p99 | <= 1 ms | "
        f"{apply.get('p99_ms', '–')} ms (mean {apply.get('mean_ms', '–')}, "
        f"{apply.get('share_under_1ms', 0):.1%} under 1 ms) | – | "
        f"{'met' if apply.get('met') else 'missed'} |"]
    for name, what in (("burst", f"{b['events']} slice events"), ("relist", "a relist")):
        w = b["windows"][name]
        lines.append(f"| {what}: worst verb delay | <= 50 ms | {w['worst_delay_ms']} ms "
                     f"(probe max {w['probe_max_ms']}, {w['probes']} probes over "
                     f"{w['seconds']} s) | quiet probe p50 {b['quiet_p50_ms']} ms, max "
                     f"{b['quiet_max_ms']} ms | {'met' if w['met'] else 'missed'} |")
    full = result.get("gc_pauses", {}).get("2")
    if full:
        lines += ["", f"Full collections in drax over the run: {full['count']:.0f} "
                  f"({full['total_s']} s, {full['over_50ms']:.0f} over 50 ms)."]
    for verb, split in result.get("steady_inside", {}).items():
        inside, outside = split["inside"], split["outside"]
        lines.append(f"Steady {verb}: inside drax's handler p50 / p99 / max "
                     f"{inside['p50_ms']:.2f} / {inside['p99_ms']:.2f} / {inside['max_ms']:.2f} "
                     f"ms, the rest of the round trip {outside['p50_ms']:.2f} / "
                     f"{outside['p99_ms']:.2f} / {outside['max_ms']:.2f} ms.")
    during = result.get("steady_gc_pauses")
    if during:
        lines.append("Collections during the steady phase (young / middle / full): " + " / ".join(
            f"{during[g]['count']:.0f} ({during[g]['total_s'] * 1e3:.1f} ms)"
            for g in ("0", "1", "2")) + ".")
    client = result.get("steady_client_collections")
    if client:
        lines.append(f"The client's own collections, run after its calls (outside the timing): "
                     f"{client['count']}, p99 / max {client['p99_ms']:.2f} / "
                     f"{client['max_ms']:.2f} ms.")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_scale",
                                     description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=100,
                        help="default-mix pods scheduled before the new shapes (default 100)")
    parser.add_argument("--new-shapes", type=int, default=24)
    parser.add_argument("--burst", type=int, default=10_000,
                        help="slice events republished in the burst (default 10,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--settle-timeout", type=float, default=3600.0,
                        help="wait at most this long for background warming to settle, "
                             "then go on beside it (default 3600 s)")
    parser.add_argument("--ready-timeout", type=float, default=1500.0)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--workdir", help="keep drax's log and the kubeconfig here")
    parser.add_argument("--profile", metavar="DIR",
                        help="py-spy drax during the steady phase, the first touch and the "
                             "burst, each to a file of its own")
    parser.add_argument("--json", help="write every figure to this file")
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.pods < 0 or args.new_shapes < 1 or args.burst < 1:
        parser.error("--nodes, --new-shapes and --burst must be positive, --pods >= 0")
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        with tempfile.TemporaryDirectory(prefix="drax-bench-scale-") as tmp:
            workdir = Path(args.workdir) if args.workdir else Path(tmp)
            workdir.mkdir(parents=True, exist_ok=True)
            result = run(args, workdir)
    except (BenchmarkError, OSError) as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1
    print(markdown(result))
    if args.json:
        command = " ".join(["python -m loadtest.bench_scale",
                            *(sys.argv[1:] if argv is None else argv)])
        result.update(report.provenance(command))
        Path(args.json).write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
