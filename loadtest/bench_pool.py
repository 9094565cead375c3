"""`python -m loadtest.bench_pool`: what a node pool saves, against the whole cluster.

`drax serve --node-selector` holds one pool of a cluster: its Nodes, their
node-local slices and the network-attached slices that can reach them. This
benchmark measures, in one run and on one generated cluster
(`loadtest.generator`, the default node kinds; every node labelled
`loadtest.drax.dev/shard` = index modulo 4), the real `drax serve`:

- `api`: kube mode against the API-server double of `loadtest.bench_watch` (its own
  process), which pages its lists as the API server does: the whole cluster,
  then `--node-selector loadtest.drax.dev/shard=0` (a quarter), and
- `files`: file mode over the cluster written as JSON (`write_cluster`): the
  whole cluster, then the quarter.

In the same run, in this process, the kube source's two ways of reading a
slice list page for a pool are timed over the cluster's slices in pages of
500 (`list_decode`): decoding the whole page (orjson), then dropping the
items of other nodes (`Inventory.admits`), against `slice_page`, which finds
each item's `spec.nodeName` without building it, then decoding only the pool's.

Each start is timed from process start to `/readyz` = 200, with RSS then
(VmRSS) and the peak (VmHWM), and the nodes and devices drax holds
(`drax_inventory_nodes` / `_devices`). The cluster carries no claims, so file
mode's warming before ready has nothing to do and both modes time the load
alone. A pool still receives the whole cluster's slices (by the list in kube
mode, by reading the files in file mode) and drops the other pools' slices
before parsing them, so its ready time is not a quarter of the whole's.

    .venv/bin/python -m loadtest.bench_pool --nodes 100000 [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import orjson

from app import garbage_collector
from app.inventory import Inventory, NodePool
from app.sources.kube.watch import slice_page
from loadtest import bench, generator, report
from loadtest.bench import serving
from loadtest.bench_scale import metric, scrape
from loadtest.bench_watch import Child, kubeconfig

POOL: Final = f"{generator.SHARD_LABEL}=0"
MB: Final = 2**20
# The node-pool targets: a quarter of a 100,000-node cluster.
TARGET_NODES: Final = 100_000
READY_TARGET_S: Final = 20.0
RSS_TARGET_BYTES: Final = 2**30


def start_once(source: list[str], *, pool: bool, log: Path, timeout: float) -> dict[str, Any]:
    """One `drax serve` start over `source` args; its figures at ready."""
    port = bench.free_port()
    argv = [sys.executable, "-m", "app", "serve", "--host", bench.HOST, "--port", str(port),
            "--log-level", "warning", *source]
    if pool:
        argv += ["--node-selector", POOL]
    with serving(argv, port=port, log=log, ready_timeout=timeout) as server:
        rss, peak = bench.memory_bytes(server.pid)
        samples = scrape(port)
    return {"pool": POOL if pool else None, "ready_s": round(server.ready_seconds, 2),
            "rss_bytes": rss, "peak_bytes": peak,
            "nodes": int(metric(samples, "drax_inventory_nodes")),
            "devices": int(metric(samples, "drax_inventory_devices"))}


def _page(items: list[dict[str, Any]]) -> bytes:
    return orjson.dumps({"metadata": {"resourceVersion": "1"}, "items": items})


def list_decode(nodes: int, seed: int, *, repeat: int = 3) -> dict[str, Any]:
    """Seconds to read every slice list page for the pool: whole decode then
    `admits`, against `slice_page`; the best of `repeat` passes each."""
    label, _, value = POOL.partition("=")
    inventory = Inventory(pool=NodePool({label: value}))
    # Pages are encoded as the cluster streams by: at 100,000 nodes its slices
    # held as dicts would take about 15 GB, which this process would keep
    # from the double and drax started after it.
    pages: list[bytes] = []
    slices: list[dict[str, Any]] = []
    for obj in generator.iter_cluster(nodes=nodes, seed=seed):
        if obj["kind"] == "Node":
            inventory.apply("Node", "ADDED", obj)
        elif obj["kind"] == "ResourceSlice":
            slices.append(obj)
            if len(slices) == 500:
                pages.append(_page(slices))
                slices = []
    if slices:
        pages.append(_page(slices))
    del slices
    assert inventory.pool is not None
    keeps = inventory.pool.members.__contains__

    def whole() -> int:
        return sum(1 for page in pages for item in orjson.loads(page)["items"]
                   if inventory.admits("ResourceSlice", item))

    def skimmed() -> int:  # the pool's items found, then decoded as a list's are
        return sum(1 for page in pages for raw in slice_page(page, keeps)["items"]
                   if orjson.loads(memoryview(raw)))

    timings: dict[str, float] = {}
    kept: dict[str, int] = {}
    with garbage_collector.paused():
        for name, read in (("decode_then_admit", whole), ("skim", skimmed)):
            best = float("inf")
            for _ in range(repeat):
                began = time.perf_counter()
                kept[name] = read()
                best = min(best, time.perf_counter() - began)
            timings[name] = round(best, 3)
    if kept["skim"] != kept["decode_then_admit"]:
        raise RuntimeError(f"skim kept {kept['skim']} items, the whole decode "
                           f"{kept['decode_then_admit']}")
    return {"pages": len(pages), "bytes": sum(map(len, pages)), "items_kept": kept["skim"],
            "seconds": timings}


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    result: dict[str, Any] = {"nodes": args.nodes, "pool": POOL, "runs": []}
    runs: list[dict[str, Any]] = result["runs"]
    if "api" in args.sources:
        result["list_decode"] = decode = list_decode(args.nodes, args.seed)
        print(f"[{args.nodes} nodes] slice list pages for the pool: whole decode "
              f"{decode['seconds']['decode_then_admit']} s, skim {decode['seconds']['skim']} s",
              file=sys.stderr)
    if "api" in args.sources:
        loop = asyncio.new_event_loop()
        child = Child()
        try:
            began = time.monotonic()
            loop.run_until_complete(child.call("generate", (args.nodes, args.seed)))
            print(f"[{args.nodes} nodes] the double holds the cluster after "
                  f"{time.monotonic() - began:.0f} s", file=sys.stderr)
            config = kubeconfig(workdir / "kubeconfig", child.port)
            for pool in (False, True):
                one = start_once(["--kubeconfig", str(config)], pool=pool,
                                 log=workdir / f"drax-api-{pool}.log", timeout=args.ready_timeout)
                runs.append({"source": "api", **one})
                _print(args.nodes, runs[-1])
        finally:
            child.close()
            loop.close()
    if "files" in args.sources:
        began = time.monotonic()
        cluster = workdir / "cluster"
        generator.write_cluster(cluster, generator.iter_cluster(nodes=args.nodes,
                                                                seed=args.seed), fmt="json")
        print(f"[{args.nodes} nodes] cluster written after {time.monotonic() - began:.0f} s",
              file=sys.stderr)
        for pool in (False, True):
            one = start_once(["--inventory", str(cluster)], pool=pool,
                             log=workdir / f"drax-files-{pool}.log", timeout=args.ready_timeout)
            runs.append({"source": "files", **one})
            _print(args.nodes, runs[-1])
    return result


def _print(nodes: int, r: dict[str, Any]) -> None:
    print(f"[{nodes} nodes, {r['source']}, {r['pool'] or 'whole cluster'}] ready after "
          f"{r['ready_s']} s, RSS {r['rss_bytes'] / MB:.0f} MB, {r['nodes']} nodes held",
          file=sys.stderr)


def sizing(result: Mapping[str, Any], source: str) -> dict[str, float] | None:
    """From the whole cluster and the pool of one source: what each node held
    adds to RSS (their difference over the nodes between them), what the
    process holds with no node, and seconds to ready per 10,000 nodes of the
    cluster (the whole cluster's start, which parses every node)."""
    runs = {r["pool"] is not None: r for r in result["runs"] if r["source"] == source}
    whole, pool = runs.get(False), runs.get(True)
    if whole is None or pool is None or whole["nodes"] == pool["nodes"]:
        return None
    per_node = (whole["rss_bytes"] - pool["rss_bytes"]) / (whole["nodes"] - pool["nodes"])
    return {"rss_per_node_bytes": per_node,
            "rss_base_bytes": pool["rss_bytes"] - per_node * pool["nodes"],
            "ready_s_per_10k_nodes": whole["ready_s"] * 10_000 / whole["nodes"]}


def targets(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pool targets, met or missed when the run had TARGET_NODES nodes;
    otherwise not measured, with the figures scaled to it (marked as such)."""
    out = []
    nodes = result["nodes"]
    measured_there = nodes == TARGET_NODES
    for r in result["runs"]:
        if r["pool"] is None:
            continue
        size = sizing(result, r["source"])
        ready = r["ready_s"]
        rss = r["rss_bytes"] / MB
        note = f"{r['source']}; {r['nodes']:,} of {nodes:,} nodes served"
        if measured_there:
            ready_met: bool | None = ready <= READY_TARGET_S
            rss_met: bool | None = rss * MB <= RSS_TARGET_BYTES
            ready_note = rss_note = note
        else:
            ready_met = rss_met = None
            scale = TARGET_NODES / nodes
            ready_note = (f"{note}; measured at {nodes:,} nodes. Scaled linearly to "
                          f"{TARGET_NODES:,} (an extrapolation, not a measurement): "
                          f"{ready * scale:.0f} s")
            rss_note = note
            if size is not None:
                quarter = size["rss_base_bytes"] + size["rss_per_node_bytes"] * TARGET_NODES / 4
                rss_note = (f"{note}; measured at {nodes:,} nodes. {quarter / MB:,.0f} MB for "
                            f"{TARGET_NODES // 4:,} pool nodes from the per-node figure "
                            "(an extrapolation, not a measurement)")
        out.append({"target": f"pool of a quarter of {TARGET_NODES:,} nodes, start to ready "
                              f"({r['source']})", "goal": f"<= {READY_TARGET_S:.0f} s",
                    "measured": ready, "unit": "s", "met": ready_met, "note": ready_note})
        out.append({"target": f"pool of a quarter of {TARGET_NODES:,} nodes, RSS at ready "
                              f"({r['source']})", "goal": "<= 1 GB", "measured": round(rss),
                    "unit": "MB", "met": rss_met, "note": rss_note})
    return out


def markdown(result: Mapping[str, Any]) -> str:
    rows = [f"Generated cluster of {result['nodes']:,} nodes; the pool is "
            f"`--node-selector {result['pool']}` (a quarter of the nodes).", "",
            "| source | served | nodes held | devices held | start to ready | RSS at ready "
            "| peak RSS | ready / whole | RSS / whole |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    whole = {r["source"]: r for r in result["runs"] if r["pool"] is None}
    for r in result["runs"]:
        base = whole.get(r["source"])
        ratio = (f"{r['ready_s'] / base['ready_s']:.2f} | {r['rss_bytes'] / base['rss_bytes']:.2f}"
                 if base else "– | –")
        rows.append(f"| {r['source']} | {'pool' if r['pool'] else 'whole cluster'} "
                    f"| {r['nodes']:,} | {r['devices']:,} | {r['ready_s']:.1f} s "
                    f"| {r['rss_bytes'] / MB:,.0f} MB | {r['peak_bytes'] / MB:,.0f} MB "
                    f"| {ratio} |")
    decode = result.get("list_decode")
    if decode:
        s = decode["seconds"]
        rows += ["", f"Reading the {decode['pages']:,} slice list pages "
                 f"({decode['bytes'] / MB:,.0f} MB of JSON) for the pool, in-process, same run: "
                 f"decoding each page whole, then dropping other nodes' items, "
                 f"{s['decode_then_admit']:.2f} s; skimming (`slice_page`: only the pool's "
                 f"{decode['items_kept']:,} items decoded) {s['skim']:.2f} s "
                 f"({s['decode_then_admit'] / s['skim']:.1f}x)."]
    for source in ("api", "files"):
        size = sizing(result, source)
        if size is not None:
            rows += ["", f"Sizing ({source}): {size['rss_per_node_bytes'] * 10_000 / MB:,.0f} MB "
                     f"of RSS per 10,000 nodes served (8 GPUs + 8 NICs each, a quarter "
                     f"MIG-partitionable), on {size['rss_base_bytes'] / MB:,.0f} MB with none; "
                     f"{size['ready_s_per_10k_nodes']:.1f} s to ready per 10,000 nodes of "
                     "the whole cluster."]
    return "\n".join(rows)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_pool",
                                     description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sources", nargs="+", choices=("api", "files"),
                        default=["api", "files"])
    parser.add_argument("--ready-timeout", type=float, default=900.0)
    parser.add_argument("--workdir", help="keep the cluster files and drax's logs here")
    parser.add_argument("--json", help="write every figure to this file")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    command = "python -m loadtest.bench_pool " + " ".join(
        sys.argv[1:] if argv is None else argv)
    with tempfile.TemporaryDirectory(prefix="drax-bench-pool-") as tmp:
        workdir = Path(args.workdir) if args.workdir else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        try:
            result = run(args, workdir)
        except (bench.BenchmarkError, RuntimeError, OSError) as exc:
            print(f"bench_pool failed: {exc}", file=sys.stderr)
            return 1
    result.update(report.provenance(command))
    print(markdown(result))
    if args.json:
        Path(args.json).write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
