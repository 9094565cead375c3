"""RESULTS.md: rendered from the benchmarks' JSON in `loadtest/results/`.

Every benchmark writes its figures as JSON (`--json FILE`); the record is one
file per benchmark, `loadtest/results/<name>.json`, committed with the code.
`python -m loadtest.report` renders `loadtest/RESULTS.md` from those files
(`--check` fails when the file on disk differs, which a test runs), so a
benchmark re-run with `--json loadtest/results/<name>.json` refreshes its
section. Targets are evaluated from the JSON alone, so a stored JSON can be
re-rendered.

A JSON file states where its figures come from: `command` (`commands` when
several runs make it up), `commit` (`commits` when they ran at several),
`machine` (cores, Python, platform) and `date`; `provenance()` gives the
current ones. Figures that no benchmark run here can refresh cheaply (the
100,000-node runs) are transcribed into the generic format below with the
commit and machine they were measured on.

Adding a section is two steps:

1. the JSON: `loadtest/results/<name>.json`, written by the benchmark's
   `--json` (with `provenance()` in it), or in the generic format:
   `{"format": "figures", "command", "commit", "machine", "date", "about",
   "targets": [{"target", "goal", "measured", "unit", "met", "note"}],
   "tables": [{"caption", "columns", "rows"}], "notes": [...]}`; a target may
   carry its own `commit` and `command` when it was measured apart;
2. a `Section` in `SECTIONS` below: the name, a title, the command that
   refreshes the JSON, and a renderer (the benchmark's own `markdown`, or
   `figures` for the generic format). Then `python -m loadtest.report`.

This module also turns the scheduling benchmark's samples into its JSON
(`phase_results`, `overall`) and evaluates that benchmark's targets.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from loadtest import profile as profiling
from loadtest.bench import Run, Sample, slow_requests
from loadtest.stats import summarize

TARGET_SHAPE: Final = "2gpu-1nic-same-root"
MB: Final = 1024 * 1024
MAX_ERRORS_SHOWN: Final = 5
SCHEDULER_HTTP_TIMEOUT_S: Final = 5.0  # KubeSchedulerConfiguration extenders[].httpTimeout


def _verbs(samples: Sequence[Sample]) -> dict[str, Any]:
    cycle = [s.cycle_s for s in samples]
    return {
        "filter": summarize([s.filter_s for s in samples]).to_dict(),
        "prioritize": summarize([s.prioritize_s for s in samples
                                 if s.prioritize_s is not None]).to_dict(),
        "bind": summarize([s.bind_s for s in samples if s.bind_s is not None]).to_dict(),
        "cycle": summarize(cycle).to_dict(),
        "cycles_per_s": round(len(cycle) / sum(cycle), 1) if cycle else 0.0,
    }


def phase_results(drax: Run, floor: Run | None) -> list[dict[str, Any]]:
    """Per phase: outcomes, drax's and the floor's summaries, the ratio, per-shape cycles."""
    by_phase: dict[str, list[Sample]] = defaultdict(list)
    for s in drax.samples:
        by_phase[s.phase].append(s)
    floor_by_phase: dict[str, list[Sample]] = defaultdict(list)
    for s in floor.samples if floor else ():
        floor_by_phase[s.phase].append(s)
    out = []
    for phase, samples in by_phase.items():
        outcomes: dict[str, int] = defaultdict(int)
        shapes: dict[str, list[Sample]] = defaultdict(list)
        for s in samples:
            outcomes[s.outcome] += 1
            shapes[s.shape].append(s)
        entry: dict[str, Any] = {
            "phase": phase, "pods": len(samples), "outcomes": dict(outcomes),
            "mean_passed_nodes": round(sum(s.passed for s in samples) / len(samples), 1),
            "requests_over_http_timeout": slow_requests(samples, limit_s=SCHEDULER_HTTP_TIMEOUT_S),
            "errors": sorted({s.error for s in samples if s.error})[:MAX_ERRORS_SHOWN],
            "drax": {**_verbs(samples),
                     "pods_per_s": round(len(samples) / drax.wall_s[phase], 1)},
            "shapes": {shape: {"pods": len(ss), "cycle": summarize(
                [s.cycle_s for s in ss]).to_dict()} for shape, ss in sorted(shapes.items())},
        }
        if floor_by_phase.get(phase) and floor is not None:
            fs = floor_by_phase[phase]
            entry["floor"] = {**_verbs(fs), "pods_per_s": round(len(fs) / floor.wall_s[phase], 1)}
            entry["cycle_ratio"] = _ratios(entry["drax"]["cycle"], entry["floor"]["cycle"])
        out.append(entry)
    return out


def _ratios(drax: Mapping[str, Any], floor: Mapping[str, Any]) -> dict[str, float]:
    return {k: round(drax[f"{k}_ms"] / floor[f"{k}_ms"], 2) if floor[f"{k}_ms"] else 0.0
            for k in ("mean", "p50", "p99")}


def overall(phases: Iterable[Mapping[str, Any]], who: str) -> dict[str, float]:
    """Cycles per second and mean cycle over every phase of one run."""
    count = 0
    total_ms = 0.0
    for p in phases:
        if who in p:
            c = p[who]["cycle"]
            count += c["count"]
            total_ms += c["mean_ms"] * c["count"]
    return {"cycles": count, "mean_cycle_ms": round(total_ms / count, 4) if count else 0.0,
            "cycles_per_s": round(count / (total_ms / 1000), 1) if total_ms else 0.0}


# --------------------------------------------------------------------------- targets


def _target(name: str, goal: str, measured: float | None, unit: str, met: bool | None,
            note: str = "") -> dict[str, Any]:
    return {"target": name, "goal": goal, "measured": measured, "unit": unit,
            "met": met, "note": note}


def _target_phase(run: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((p for p in run["phases"] if p["phase"] == TARGET_SHAPE), None)


def evaluate_targets(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    runs = {r["nodes"]: r for r in doc["runs"]}
    for nodes, limit in ((500, 5.0), (5000, 25.0)):
        run = runs.get(nodes)
        phase = _target_phase(run) if run else None
        name = f"2-GPU + 1-NIC same-root cycle p99, {nodes} nodes"
        if phase is None or run is None:
            out.append(_target(name, f"<= {limit} ms", None, "ms", None, "not run"))
            continue
        p99 = phase["drax"]["cycle"]["p99_ms"]
        out.append(_target(name, f"<= {limit} ms", p99, "ms", p99 <= limit,
                           f"candidates: {run['candidates']}"))
    run = runs.get(500)
    if run and run.get("floor_overall"):
        ratio = run["drax_overall"]["mean_cycle_ms"] / run["floor_overall"]["mean_cycle_ms"]
        out.append(_target("cycle time vs floor, 500 nodes", "<= 3x", round(ratio, 2), "x",
                           ratio <= 3, "mean cycle over all phases, same request bodies"))
    else:
        out.append(_target("cycle time vs floor, 500 nodes", "<= 3x", None, "x", None, "not run"))
    if run:
        rate = run["drax_overall"]["cycles_per_s"]
        out.append(_target("cycles/s, 500 nodes", ">= 300", rate, "cycles/s", rate >= 300,
                           "sequential, one server process, all phases"))
    else:
        out.append(_target("cycles/s, 500 nodes", ">= 300", None, "cycles/s", None, "not run"))
    churn_p99 = [(r["nodes"], r["churn"]["apply"]["p99_ms"], r["churn"]["apply_cpu"]["p99_ms"])
                 for r in doc["runs"] if r.get("churn")]
    if churn_p99:
        worst_nodes, worst, cpu = max(churn_p99, key=lambda x: x[1])
        out.append(_target("apply one inventory event (p99)", "<= 1 ms", worst, "ms",
                           worst <= 1.0, f"wall clock, worst run: {worst_nodes} nodes; "
                           f"CPU time p99 {cpu} ms"))
    else:
        out.append(_target("apply one inventory event (p99)", "<= 1 ms", None, "ms", None,
                           "not run"))
    run = runs.get(5000)
    if run and run.get("rss_16"):
        rss = round(run["rss_16"]["ready_bytes"] / MB, 1)
        out.append(_target("RSS holding 5,000 nodes x 16 devices", "<= 400 MB", rss, "MB",
                           rss <= 400, f"after inventory build, {run['rss_16']['devices']} "
                           f"devices; the default cluster ({run['devices']} devices with "
                           f"MIG partitions): {run['rss']['ready_bytes'] / MB:.0f} MB"))
    elif run:
        rss = round(run["rss"]["ready_bytes"] / MB, 1)
        out.append(_target("RSS holding 5,000 nodes", "<= 400 MB", rss, "MB", rss <= 400,
                           f"after inventory build; {run['devices']} devices "
                           f"(peak during run {run['rss']['peak_bytes'] / MB:.0f} MB)"))
    else:
        out.append(_target("RSS holding 5,000 nodes", "<= 400 MB", None, "MB", None, "not run"))
    return out


# --------------------------------------------------------------------------- markdown


def _row(cells: Iterable[Any]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _ms(summary: Mapping[str, Any]) -> list[str]:
    if not summary["count"]:
        return ["–"] * 3
    return [f"{summary['p50_ms']:.2f}", f"{summary['p99_ms']:.2f}", f"{summary['max_ms']:.2f}"]


def _handler_cells(run: Mapping[str, Any], verb: str, who: str) -> list[str]:
    stats = run["handler"].get(who, {}).get(verb)
    if not stats or not stats.get("count"):
        return ["–", "–"]
    rounds = [p[who][verb] for p in run["phases"] if who in p and p[who][verb]["count"]]
    count = sum(r["count"] for r in rounds)
    client_ms = sum(r["mean_ms"] * r["count"] for r in rounds) / count if count else 0.0
    return [f"{1000 * stats['sum'] / stats['count']:.2f}", f"{client_ms:.2f}"]


def markdown(doc: Mapping[str, Any]) -> str:
    """The scheduling benchmark's report as `python -m loadtest` prints it."""
    return "\n".join([*provenance_lines(doc), "", *targets_table(doc["targets"]), "",
                      scheduling(doc)])


def scheduling(doc: Mapping[str, Any]) -> str:
    """Per cluster size: build, RSS, per-verb and per-phase tables, churn."""
    lines: list[str] = []
    for run in doc["runs"]:
        lines += ["", f"### {run['nodes']:,} nodes", "",
                  f"- devices: {run['devices']}; candidates per filter: {run['candidates']}",
                  f"- inventory build (process start to /readyz): {run['build_seconds']:.2f} s",
                  f"- server RSS: {run['rss']['ready_bytes'] / MB:.0f} MB after build, "
                  f"{run['rss']['after_bytes'] / MB:.0f} MB after the run, "
                  f"peak {run['rss']['peak_bytes'] / MB:.0f} MB (the floor server, same stack "
                  f"without an inventory: {run['rss'].get('floor_bytes', 0) / MB:.0f} MB)",
                  *([f"- exactly 16 devices per node ({run['rss_16']['devices']} devices): "
                     f"build {run['rss_16']['build_seconds']:.2f} s, RSS "
                     f"{run['rss_16']['ready_bytes'] / MB:.0f} MB"] if run.get("rss_16") else []),
                  f"- overall: drax {run['drax_overall']['cycles_per_s']} cycles/s "
                  f"(mean {run['drax_overall']['mean_cycle_ms']} ms)"
                  + (f", floor {run['floor_overall']['cycles_per_s']} cycles/s "
                     f"(mean {run['floor_overall']['mean_cycle_ms']} ms)"
                     if run.get("floor_overall") else ""), ""]
        lines += [_row(["phase", "server", "verb", "count", "p50 ms", "p99 ms", "max ms"]),
                  _row(["---"] * 7)]
        for p in run["phases"]:
            for who in ("drax", "floor"):
                if who not in p:
                    continue
                for verb in ("filter", "prioritize", "bind", "cycle"):
                    s = p[who][verb]
                    lines.append(_row([p["phase"], who, verb, s["count"], *_ms(s)]))
        if run.get("aborted"):
            lines += [f"**Run aborted**: {run['aborted']}", ""]
        lines += ["", _row(["phase", "pods", "outcomes", "mean nodes passed",
                            "requests > 5 s", "drax cycles/s", "drax pods/s", "floor cycles/s",
                            "cycle ratio mean / p50 / p99"]),
                  _row(["---"] * 9)]
        for p in run["phases"]:
            ratio = p.get("cycle_ratio")
            lines.append(_row([
                p["phase"], p["pods"], ", ".join(f"{k} {v}" for k, v in p["outcomes"].items()),
                p["mean_passed_nodes"], p["requests_over_http_timeout"],
                p["drax"]["cycles_per_s"], p["drax"]["pods_per_s"],
                p["floor"]["cycles_per_s"] if "floor" in p else "–",
                f"{ratio['mean']} / {ratio['p50']} / {ratio['p99']}" if ratio else "–"]))
        if run.get("handler"):
            lines += ["", "Mean time per verb inside the route handler (server histogram) vs. "
                      "the client's round trip, all phases:", "",
                      _row(["verb", "drax handler ms", "drax round trip ms",
                            "floor handler ms", "floor round trip ms"]), _row(["---"] * 5)]
            for verb in ("filter", "prioritize", "bind"):
                lines.append(_row([verb, *_handler_cells(run, verb, "drax"),
                                   *_handler_cells(run, verb, "floor")]))
        for p in run["phases"]:
            if p.get("errors"):
                lines += ["", f"Errors answered in phase {p['phase']} (distinct, first "
                          f"{MAX_ERRORS_SHOWN}):", *(f"- `{e}`" for e in p["errors"])]
        lines += ["", _row(["phase", "claim shape", "pods", "cycle p50 ms", "cycle p99 ms",
                            "cycle max ms"]), _row(["---"] * 6)]
        for p in run["phases"]:
            for shape, s in p["shapes"].items():
                lines.append(_row([p["phase"], shape, s["pods"], *_ms(s["cycle"])]))
        if run.get("profile"):
            lines += ["", "Profile of drax while scheduling (py-spy; busy samples only):", "",
                      profiling.markdown(run["profile"], top=15)]
        churn = run.get("churn")
        if churn:
            lines += ["", f"Churn ({churn['events']} events interleaved with "
                      f"{churn['cycles']} filter+prioritize cycles, in-process):", "",
                      _row(["event kind", "count", "p50 ms", "p99 ms", "max ms"]),
                      _row(["---"] * 5)]
            lines.append(_row(["all", churn["apply"]["count"], *_ms(churn["apply"])]))
            lines.append(_row(["all, CPU time", churn["apply_cpu"]["count"],
                               *_ms(churn["apply_cpu"])]))
            for kind, s in churn["by_kind"].items():
                lines.append(_row([kind, s["count"], *_ms(s)]))
            lines += ["", f"Correctness checks: {churn['checks_passed']} passed, "
                      f"{len(churn['violations'])} failed"
                      + ("".join(f"\n- {v}" for v in churn["violations"][:10])
                         if churn["violations"] else ".")]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- RESULTS.md

RESULTS_DIR: Final = Path(__file__).parent / "results"
RESULTS_MD: Final = Path(__file__).parent / "RESULTS.md"
MET_WORDS: Final = {True: "met", False: "**missed**", None: "not measured"}


def provenance(command: str) -> dict[str, Any]:
    """Where a run's figures come from: the command, the checked-out commit, the
    machine and the day (UTC). Every benchmark's JSON carries these keys."""
    return {"command": command, "commit": head_commit(),
            "machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                        "platform": platform.platform()},
            "date": time.strftime("%Y-%m-%d", time.gmtime())}


def head_commit() -> str:
    """The checked-out commit, so a stored result says which code it measured."""
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=False)
    except OSError:
        return ""
    return done.stdout.strip()


def _machine(machine: Mapping[str, Any] | str | None) -> str:
    if not machine:
        return "not recorded"
    if isinstance(machine, str):
        return machine
    return f"{machine['cores']} cores, Python {machine['python']}, {machine['platform']}"


def commits(doc: Mapping[str, Any]) -> str:
    """The commit a JSON's figures were measured at, or each of them (`commits`, a
    record whose runs were made at several) as Markdown."""
    names = doc.get("commits") or [doc.get("commit")]
    return ", ".join(f"`{c}`" for c in names if c) or "not recorded"


def provenance_lines(doc: Mapping[str, Any]) -> list[str]:
    commands = doc.get("commands") or [doc.get("command", "")]
    many = len(doc.get("commits") or ()) > 1
    lines = ["```sh", *commands, "```", "",
             f"{'Commits' if many else 'Commit'} {commits(doc)}; machine: "
             f"{_machine(doc.get('machine'))}"
             + (f"; measured {doc['date']}" if doc.get("date") else "") + "."]
    if doc.get("transcribed"):
        lines += ["", f"Transcribed from the benchmark's printed report: {doc['transcribed']}"]
    return lines


def _measured(t: Mapping[str, Any]) -> str:
    value = t.get("measured")
    if value is None:
        return "–"
    return f"{value} {t['unit']}" if t.get("unit") else str(value)


def targets_table(targets: Sequence[Mapping[str, Any]]) -> list[str]:
    """One row per target: goal, measured, met / missed, and any of beside (the
    baseline's figure), commit and note the targets carry."""
    extra = [k for k in ("beside", "commit", "note") if any(t.get(k) for t in targets)]
    headers = {"beside": "baseline, same run", "commit": "commit", "note": "note"}
    lines = [_row(["target", "goal", "measured", "met", *(headers[k] for k in extra)]),
             _row(["---"] * (4 + len(extra)))]
    for t in targets:
        cells = [f"`{t[k]}`" if k == "commit" and t.get(k) else t.get(k, "") for k in extra]
        lines.append(_row([t["target"], t["goal"], _measured(t), MET_WORDS[t["met"]], *cells]))
    return lines


def figures(doc: Mapping[str, Any]) -> str:
    """The generic format's tables and notes (its `about` heads the section)."""
    lines: list[str] = []
    for table in doc.get("tables", ()):
        lines += [table["caption"], ""] if table.get("caption") else []
        lines += [_row(table["columns"]), _row(["---"] * len(table["columns"])),
                  *(_row(r) for r in table["rows"]), ""]
    lines += [f"- {note}" for note in doc.get("notes", ())]
    return "\n".join(lines).rstrip() + "\n"


def soak_targets(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    from loadtest import soak
    growth, drift = doc["rss_growth"], doc["handler_p99_drift"]
    return [
        _target("requests that erred", "0", doc["errors"], "", doc["errors"] == 0,
                f"{doc['requests']:,} requests, {doc['pods']:,} pods"),
        _target("RSS growth after the warm-up", f"<= +{soak.RSS_GROWTH_MAX:.0%}",
                f"{growth:+.1%}", "", growth <= soak.RSS_GROWTH_MAX,
                f"{doc['rss_mb'][0]} -> {doc['rss_mb'][1]} MB"),
        _target("filter handler p99 drift, second half vs first", f"within "
                f"{soak.P99_DRIFT_MAX:.0%}", f"{drift:+.1%}", "",
                abs(drift) <= soak.P99_DRIFT_MAX,
                f"{doc['handler_p99_ms'][0]} -> {doc['handler_p99_ms'][1]} ms; round trip "
                f"{doc['p99_drift']:+.1%}")]


def _of(module: str, function: str) -> Callable[[Mapping[str, Any]], Any]:
    """`loadtest.<module>.<function>(doc)`, imported when a section renders: the
    benchmarks import this module for `provenance`."""
    def call(doc: Mapping[str, Any]) -> Any:
        return getattr(importlib.import_module(f"loadtest.{module}"), function)(doc)
    return call


def _soak(doc: Mapping[str, Any]) -> str:
    from loadtest import soak
    return soak.markdown(dict(doc))


def _from_api(doc: Mapping[str, Any]) -> str:
    from loadtest import kube_ready
    return kube_ready.markdown(doc["from_api"])


def _upstream(doc: Mapping[str, Any]) -> str:
    from loadtest import peer
    return peer.markdown([peer.PeerRow(**r) for r in doc["rows"]])


def _by_format(native: Callable[[Mapping[str, Any]], str]) -> Callable[[Mapping[str, Any]], str]:
    """The benchmark's own renderer, or `figures` for a transcribed file."""
    return lambda doc: figures(doc) if doc.get("format") == "figures" else native(doc)


@dataclass(frozen=True)
class Section:
    name: str  # loadtest/results/<name>.json
    title: str
    refresh: str  # the command that rewrites the JSON
    render: Callable[[Mapping[str, Any]], str]
    about: str = ""  # what the benchmark measures, whatever the run
    targets: Callable[[Mapping[str, Any]], Sequence[Mapping[str, Any]]] = \
        lambda doc: doc.get("targets", ())


SECTIONS: Final = (
    Section("scheduling", "Scheduling at 500 and 5,000 nodes, against the floor",
            "python -m loadtest --nodes 500 5000 --rss-16 --json "
            "loadtest/results/scheduling.json", scheduling,
            "The real `drax serve` (allocator mode, file inventory) over HTTP on 127.0.0.1. "
            "Per cluster size (8 GPUs + 8 RDMA NICs per node, a quarter of the nodes "
            "partitionable, an eighth with shareable GPUs): 600 pods of the default claim mix "
            "(200 at 5,000 nodes), then 300 pods of the target claim, 2 GPUs + 1 RDMA NIC on "
            "one PCIe root (150 at 5,000 nodes), each scheduled as kube-scheduler does "
            "(`filter` with every node as candidate, `prioritize`, `bind` on the best), pods "
            "staying bound. Each pod's request bodies go to the floor server (the same HTTP "
            "stack with verbs that pass every node) right after drax answered them. A cycle "
            "is filter + prioritize as the client sees it. The churn benchmark applies watch "
            "events in-process between scheduling cycles and checks the inventory's "
            "invariants as it goes."),
    Section("scale", "100,000 nodes",
            "python -m loadtest.bench_scale --nodes 100000 --settle-timeout 600 --json "
            "loadtest/results/scale.json", _by_format(_of("bench_scale", "markdown"))),
    Section("from-api", "Start-up from the API server (paged lists)",
            "python -m loadtest --from-api --nodes 500 5000 --json "
            "loadtest/results/from-api.json", _from_api,
            "The API-server double of the kube tests holds the generated cluster and claims; "
            "`drax serve --kubeconfig` is timed from process start to `/readyz` 200, every "
            "kind listed in pages of 500."),
    Section("parse", "Reading ResourceSlices: CPU per device",
            "python -m loadtest.bench_parse --nodes 5000 --json loadtest/results/parse.json",
            _of("bench_parse", "render"),
            "The slices of a generated cluster (8 GPUs + 8 RDMA NICs per node, a quarter of "
            "the nodes partitionable), encoded as the API server sends them, read in-process "
            "both ways in the same run: orjson's dict tree and the reference parse "
            "(`app.model.parse`, the baseline) against the typed decoder that lists, watch "
            "events and JSON files go through (`app.model.typed`). CPU time with the cyclic "
            "collector paused, every object kept until the pass ends, best of 3 passes (the "
            "decoder's caches then hold even the values unique to one device; the cold row "
            "empties them before each pass, as a process start meets them). Then "
            "one watch event (MODIFIED, a new pool generation) of each partitionable node's "
            "largest slice, decoded and applied to an inventory holding the cluster, freezing "
            "what it built as the slice informer does.",
            _of("bench_parse", "targets")),
    Section("node-pool", "One node pool (`--node-selector`) against the whole cluster",
            "python -m loadtest.bench_pool --nodes 100000 --json "
            "loadtest/results/node-pool.json", _of("bench_pool", "markdown"),
            "The real `drax serve` on one generated cluster (8 GPUs + 8 RDMA NICs per node, "
            "a quarter of the nodes partitionable, no claims), started four times in one run: "
            "in kube mode from the API-server double (paged lists) and in file mode, each "
            "with the whole cluster and with `--node-selector` picking a quarter of the "
            "nodes. Start to `/readyz` 200, RSS then and at its peak, and what drax holds.",
            _of("bench_pool", "targets")),
    Section("upstream-allocator", "drax against upstream's allocator",
            "python -m loadtest.peer --nodes 500 5000 --sample 20 --json "
            "loadtest/results/upstream-allocator.json", _by_format(_upstream),
            "The same generated clusters and claim shapes for drax and for upstream's Go "
            "allocator (`k8s.io/dynamic-resource-allocation/structured` v0.37.2 through the "
            "oracle in `tests/upstream`, 1.37.2 default gates), nothing allocated yet. Per "
            "node: the median over the sampled nodes of one `allocate` (drax advisor = "
            "upstream's first fit, drax allocator = best topology) against upstream's "
            "`NewAllocator` + `Allocate`, timed inside the Go process. Whole filter: drax's "
            "`filter` over every node on an extender that has not seen the shape (cold "
            "caches) against `Allocate` once per node, as the in-tree PreFilter and Filter do "
            "(sequentially here; the in-tree Filter runs nodes in parallel)."),
    Section("allocator-differential", "Allocator differential against upstream",
            "python -m tests.upstream.differential --allocator 50000 --json "
            "loadtest/results/allocator-differential.json", figures,
            "Generated scenarios of one pod on one node (`tests/upstream/scenarios.py`: "
            "several drivers, pools over several slices and generations, network-attached "
            "slices, counters, consumable capacity, taints, every attribute type, every "
            "request and constraint kind, allocated claims, invalid and incomplete pools; "
            "1.37.2 default gates) answered by upstream's structured allocator "
            "(`k8s.io/dynamic-resource-allocation/structured` v0.37.2 through the oracle in "
            "`tests/upstream`) and by drax's inventory and allocator in both modes: advisor "
            "mode must give upstream's answer (the same devices, or the same verdict), "
            "allocator mode the same verdict with an allocation that passes "
            "`tests/upstream/validity.py`. The CI batch is 2,000 scenarios "
            "(`tests/upstream/test_allocator_differential.py`)."),
    Section("real-cluster", "Real cluster: drax beside the in-tree DRA scheduler",
            "python -m loadtest --real-cluster --nodes 32 --pods 128 --json "
            "loadtest/results/real-cluster.json", _by_format(_of("real_cluster", "comparison")),
            "The real 1.37 control plane of `tests/e2e/cluster.py`: two identical pools, the "
            "same workload (the `topology` mix: mixed pods, then 8-GPU pods until the cluster "
            "runs out) to pool A through the `drax` scheduler (allocator mode) and then to "
            "pool B through `default-scheduler` (in-tree DynamicResources), in the same run, "
            "both kube-schedulers with the same client settings."),
    Section("scheduler-perf", "Upstream's scheduler_perf DRA workloads: drax against the "
            "in-tree plugin",
            "python -m loadtest.scheduler_perf --smallest --record "
            "loadtest/results/scheduler-perf.json", _of("scheduler_perf", "markdown"),
            "SIG Scheduling's own benchmark (`test/integration/scheduler_perf` of "
            "k8s.io/kubernetes v1.37.2, its DRA test cases read from the Go module cache): "
            "upstream's objects, in-process API server and throughput measurement, each "
            "workload under the in-tree scheduler (upstream's configuration), drax-allocator "
            "(DynamicResources off, drax filters, prioritizes and binds) and drax-advisor "
            "(the plugin on, drax filters and prioritizes), in one run on one machine. "
            "pods/s is upstream's SchedulingThroughput (sampled each second; none for "
            "workloads shorter than a second); the targets compare averages within the run.",
            _of("scheduler_perf", "targets")),
    Section("victim-search", "Victim search for device-aware preemption",
            "python -m loadtest.bench_preempt --nodes 500 --runs 30 --json "
            "loadtest/results/victim-search.json", figures,
            "`app.preemption.VictimSearch` in-process over 500 full candidate nodes with 8 "
            "candidate victims each, all started at once, against the filter over the same "
            "nodes in the same run (how: `loadtest/bench_preempt.py`). Victim priorities: "
            "`random`, drawn uniformly from 0..999 (nodes almost never tie on their lowest "
            "victims); `3 levels`, 1000 / 2000 / 3000 drawn with weights 3 / 2 / 1, as three "
            "PriorityClasses give (most nodes tie on the first terms of the ranking). The "
            "goal holds for the first searches: the best node (the preemption loop), "
            "every node (the preempt verb and `drax preempt`), and every node after a "
            "tenth of the nodes changed. A `first` search runs on a fresh extender but "
            "reuses each node's holdings (who holds which device, in the search's order) "
            "that earlier searches kept, over an inventory unchanged since. The row "
            "`every node, first, a tenth of nodes changed` first replaces one pod on each "
            "of 50 of the 500 nodes as the watch applies it (deleted, and a pod of another "
            "priority holding the same devices added), so those nodes' holdings are "
            "rebuilt in the timed search; the last column of the second table counts "
            "them."),
    Section("victim-search-room", "Victim search with victims for room (reported, no target)",
            "python -m loadtest.bench_preemption --search-room --nodes 500 --runs 30 --json "
            "loadtest/results/victim-search-room.json", figures,
            "`app.preemption.VictimSearch` in-process over the victim-search section's uniform "
            "cluster (500 nodes) with 64 allocatable cpus per node, 6 requested by each GPU "
            "pod and 7 by each of two pods without claims: the preemptor (the target claim, "
            "16 cpus) is left short of cpu by its two device victims on every node, so at "
            "least one more pod goes there, chosen as SelectVictimsOnNode chooses (how: "
            "`loadtest/bench_preemption.py --search-room`). Reported beside the filter over "
            "the same nodes in the same run; not a target."),
    Section("preemption", "Preemption for devices on the real control plane",
            "python -m loadtest.bench_preemption --rounds 10 --json "
            "loadtest/results/preemption.json", figures,
            "The real 1.37 control plane of `tests/e2e/cluster.py`, drax in allocator mode: a "
            "pool of 2 nodes (8 GPUs + 8 NICs each) full of low-priority 1-GPU pods; each "
            "round a high-priority pod asks for 2 GPUs + 1 NIC on one PCIe root. Seconds "
            "from its creation to its bind, split into drax's decision (to the first victim "
            "marked and deleting), the victims' termination (the harness plays the kubelet: "
            "grace 0 as soon as a victim is deleting), the resource-claim controller "
            "(to every victim claim deallocated) and the scheduler's requeue (to the bind). "
            "The scheduling attempts after the victims' claims are deallocated are drax's "
            "count (`drax_preemptor_attempts_total`, read per round): each attempt of the "
            "nominated preemptor once, at its first filter, for which drax reads from the API "
            "server the victims' claims its watch still shows allocated; an attempt whose "
            "read found one still allocated began before the deallocation, one answered with "
            "every claim deallocated or gone (or with no read answered) counts after it, the "
            "binding attempt included. Every attempt reaches drax: the pods request no cpu or "
            "memory, so kube-scheduler's own filters pass every node of the pool, and the "
            "DynamicResources plugin is kept at PreEnqueue only, where the preemptor's claim "
            "exists. kube-scheduler tries a nominated pod's node alone "
            "first and filters the other nodes in the same attempt only when it is refused, "
            "so one attempt can be two `filter` requests; the requests the harness can count "
            "by itself (from just before it removes the last victim, and from the poll that "
            "first sees every claim freed) are shown beside. The same pod through "
            "`default-scheduler` on the same full pool is the baseline."),
    Section("failover", "Warm standby takeover and requeue on the real control plane",
            "python -m loadtest.failover --rounds 3 --json loadtest/results/failover.json",
            figures,
            "The real 1.37 control plane of `tests/e2e/cluster.py` with two drax replicas "
            "(`--replicas 2`: kube-scheduler + drax each, own hostname, the Lease "
            "kube-system/drax-scheduler) and manifests/deployment.yaml's kube-scheduler flags. "
            "Failover: 48 one-GPU pods on 8 nodes, the leader's kube-scheduler and drax killed "
            "with SIGKILL once 12 are bound; seconds to the standby holding the Lease, to its "
            "first bind and to every pod bound. Requeue: a pod drax rejected (its node has no "
            "devices yet), the node's ResourceSlices published 8 s later; seconds to the pod "
            "bound (how: `loadtest/failover.py`)."),
    Section("freeze-soak", "Soak of slice events: what the informer freezes",
            "python -m loadtest.bench_freeze --nodes 2000 --events 20000 --json "
            "loadtest/results/freeze-soak.json", _of("bench_freeze", "markdown"),
            "The real kube source in-process against the API-server double (its own "
            "process) holding a generated cluster (8 GPUs + 8 RDMA NICs per node, a quarter "
            "of the nodes partitionable); the double republishes slices with a new pool "
            "generation in rounds, and after each round the informer has applied: the "
            "objects in the collector's permanent generation (`gc.get_freeze_count()`; the "
            "slice informer freezes every few devices of slice events), the objects still "
            "tracked, the process's RSS and the devices held (how: "
            "`loadtest/bench_freeze.py`).",
            _of("bench_freeze", "targets")),
    Section("soak", "Soak", "python -m loadtest --soak 600 --json loadtest/results/soak.json",
            _soak,
            "`drax serve` in kube mode (allocator) against the API-server double: 100 nodes x "
            "8 GPUs, pods of 1/1/2/4 GPUs scheduled one after another, the oldest bound pods "
            "deleted with their claims at half occupancy, and 10 % of pods followed by a slice "
            "republished or a node relabelled. Windows of 30 s; the RSS is drax's own process; "
            "the p99 drift is judged on drax's handler time (its `Server-Timing` header) after "
            "a warm-up of a fifth of the run and at least 5,000 pods.",
            soak_targets),
)


def _load(name: str, results: Path) -> dict[str, Any] | None:
    path = results / f"{name}.json"
    return orjson.loads(path.read_bytes()) if path.exists() else None


def _section(section: Section, doc: Mapping[str, Any] | None) -> list[str]:
    about = section.about or (doc or {}).get("about", "")
    lines = [f"## {section.title}", "", *([about, ""] if about else [])]
    if doc is None:
        return [*lines, f"Not measured yet: `{section.refresh}`, then "
                "`python -m loadtest.report`.", ""]
    lines += [*provenance_lines(doc), ""]
    targets = section.targets(doc)
    if targets:
        lines += ["### Targets", "", *targets_table(targets), ""]
    return [*lines, section.render(doc).strip(), ""]


def _summary(docs: Sequence[tuple[Section, Mapping[str, Any] | None]]) -> list[str]:
    lines = [_row(["section", "targets met", "commit", "measured", "JSON"]), _row(["---"] * 5)]
    for section, doc in docs:
        if doc is None:
            lines.append(_row([section.title, "not measured yet", "–", "–", "–"]))
            continue
        targets = section.targets(doc)
        met = sum(t["met"] is True for t in targets)
        lines.append(_row([section.title, f"{met} of {len(targets)}" if targets else "–",
                           commits(doc), doc.get("date", "–"),
                           f"`results/{section.name}.json`"]))
    return lines


def render_results(results: Path = RESULTS_DIR) -> str:
    """RESULTS.md from the JSON files in `results`."""
    docs = [(s, _load(s.name, results)) for s in SECTIONS]
    lines = ["# drax benchmark results", "",
             "<!-- Generated by `python -m loadtest.report` from loadtest/results/*.json; "
             "edit those, not this file. -->", "",
             "Each section is one benchmark of `loadtest/` (how each works: "
             "`loadtest/README.md`): the command that produced its figures, the commit and "
             "machine they were measured on, its targets met or missed, and its tables. "
             "Re-running a section's command rewrites its JSON; `python -m loadtest.report` "
             "then rewrites this file. Absolute times depend on the machine and on what else "
             "runs on it; the ratios to a baseline measured in the same run (the floor "
             "server, the in-tree scheduler, upstream's allocator) carry across machines.", "",
             *_summary(docs), ""]
    for section, doc in docs:
        lines += _section(section, doc)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.report",
                                     description="Render loadtest/RESULTS.md from "
                                                 "loadtest/results/*.json.")
    parser.add_argument("--check", action="store_true",
                        help="render, compare with RESULTS.md and exit 1 when they differ")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR)
    parser.add_argument("--out", type=Path, default=RESULTS_MD)
    args = parser.parse_args(argv)
    unknown = sorted(p.stem for p in args.results.glob("*.json")
                     if p.stem not in {s.name for s in SECTIONS})
    if unknown:
        print(f"no section renders {', '.join(unknown)}: add a Section to "
              "loadtest/report.py", file=sys.stderr)
        return 2
    text = render_results(args.results)
    if args.check:
        if not args.out.exists() or args.out.read_text() != text:
            print(f"{args.out} is not what `python -m loadtest.report` renders", file=sys.stderr)
            return 1
        return 0
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
