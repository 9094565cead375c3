"""How long the inventory takes to converge after a burst of ResourceSlice events.

The real kube source (kubernetes-asyncio over HTTP on 127.0.0.1) watches the
API-server double from `tests/kube/apiserver.py`, which runs in a child
process so its JSON encoding and streaming do not share drax's event loop.
Slices come from `loadtest.generator` (realistic GPU, MIG-partitionable and NIC
slices, about 10 KiB of JSON each) and are handed to the child before the
clock starts. Each phase is one command to the child that commits `--events`
changes back to back; convergence is the time from sending that command until
the ResourceSlice informer has applied the server's final resourceVersion,
i.e. the inventory holds exactly the server's state. Phases:

- `added`: the slices are created;
- `modified`: every slice is republished with the next pool generation;
- `relist`: the connection drops, one slice changes, and the history is
  compacted, so the informer gets 410 Gone and lists all slices again
  (`replace`); this includes the informer's deliberate backoff (0.8-1.6 s:
  the 410 is the second failure in a row after the drop);
- `deleted`: every slice is deleted.

`loadtest.bench_scale` drives the same child with commands of its own: a
generated cluster made in the child (`generate`), slices republished in
place (`republish`), a relist whose missed change removes one device
(`shrink-relist`).

`inventory-only` applies the same ADDED events straight to an `Inventory`
holding the same Nodes and DeviceClasses (no HTTP, no JSON): the floor the
watch path is compared with.

    .venv/bin/python -m loadtest.bench_watch [--events 1000] [--repeat 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import logging
import multiprocessing
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Final

from prometheus_client import CollectorRegistry

from app.inventory import Inventory
from app.sources.kube import WATCHED_KINDS, KubeSource, WatchMetrics, api_client
from loadtest.generator import generate_cluster, iter_cluster
from loadtest.kube_ready import fill

PHASES: Final = ("added", "modified", "relist", "deleted")
PLURALS: Final = {"Node": "nodes", "DeviceClass": "deviceclasses",
                   "ResourceSlice": "resourceslices", "ResourceClaim": "resourceclaims",
                   "Pod": "pods"}
TIMEOUT_SECONDS: Final = 120.0


# --------------------------------------------------------------------------- child process


def _serve(conn: Connection) -> None:
    asyncio.run(_serve_async(conn))


async def _serve_async(conn: Connection) -> None:
    from tests.kube.apiserver import FakeApiServer

    server = FakeApiServer(bookmark_interval=1.0)
    await server.start()
    staged: list[dict[str, Any]] = []
    stop = asyncio.Event()
    cluster: tuple[int, int] = (0, 0)  # (nodes, seed) of a generated cluster
    generations: dict[str, int] = {}  # slice name -> generation republished last

    def command() -> None:
        nonlocal staged, cluster
        op, arg = conn.recv()
        start = time.perf_counter()
        if op == "stage":
            staged = arg
        elif op == "create":
            for obj in arg:
                server.create(obj.pop("plural"), obj)
        elif op == "added":
            for obj in staged:
                server.create("resourceslices", obj)
        elif op == "modified":
            for obj in staged:
                obj["spec"]["pool"]["generation"] += 1
                server.update("resourceslices", obj)
        elif op == "relist":
            server.drop_watches()
            staged[0]["spec"]["pool"]["generation"] += 1  # missed while away...
            server.update("resourceslices", staged[0])
            server.compact()  # ...and no longer in the history: 410 Gone
        elif op == "deleted":
            for obj in staged:
                server.delete("resourceslices", obj["metadata"]["name"])
        elif op == "generate":  # (nodes, seed): a generated cluster, stored as lists serve it
            cluster = arg
            fill(server, nodes=cluster[0], seed=cluster[1], claims=[])
        elif op == "republish":  # `arg` slice events: the cluster's slices in turn, each
            # with the next pool generation (rebuilt by the generator: stored specs are JSON)
            made = 0
            while made < arg:
                for obj in iter_cluster(nodes=cluster[0], seed=cluster[1]):
                    if obj["kind"] == "ResourceSlice" and made < arg:
                        name = obj["metadata"]["name"]
                        generations[name] = generations.get(name, 1) + 1
                        obj["spec"]["pool"]["generation"] = generations[name]
                        server.update("resourceslices", obj)
                        made += 1
                    elif made >= arg:
                        break
        elif op == "shrink-relist":  # as relist, the change being one device fewer
            server.drop_watches()
            obj = next(o for o in iter_cluster(nodes=cluster[0], seed=cluster[1])
                       if o["kind"] == "ResourceSlice" and len(o["spec"].get("devices") or ()) > 1)
            name = obj["metadata"]["name"]
            generations[name] = generations.get(name, 1) + 1
            obj["spec"]["pool"]["generation"] = generations[name]
            obj["spec"]["devices"].pop()
            server.update("resourceslices", obj)
            server.compact()
        elif op == "stop":
            stop.set()
        conn.send((server.port, server.resource_version, time.perf_counter() - start))

    asyncio.get_running_loop().add_reader(conn.fileno(), command)
    conn.send((server.port, server.resource_version, 0.0))
    await stop.wait()
    await server.stop()


class Child:
    """The API double in its own process, driven over a pipe."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child_end = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child_end,), daemon=True)
        self.proc.start()
        self.port, _, _ = self.conn.recv()

    async def call(self, op: str, arg: Any = None) -> tuple[int, float]:
        """Send one command; its final resourceVersion and the child's time to commit it."""
        self.conn.send((op, arg))
        _, rv, took = await asyncio.get_running_loop().run_in_executor(None, self.conn.recv)
        return rv, took

    def close(self) -> None:
        if self.proc.is_alive():
            self.conn.send(("stop", None))
            self.proc.join(timeout=10)
        if self.proc.is_alive():
            self.proc.kill()


def kubeconfig(path: Path, port: int) -> Path:
    """A kubeconfig at `path` pointing the real client at the double on `port`."""
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: bench\n"
        f"clusters:\n- name: bench\n  cluster:\n    server: http://127.0.0.1:{port}\n"
        "users:\n- name: bench\n  user:\n    token: bench\n"
        "contexts:\n- name: bench\n  context:\n    cluster: bench\n    user: bench\n")
    return path


# --------------------------------------------------------------------------- measurement


def burst_slices(events: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`events` ResourceSlices of a generated cluster, and the Nodes and classes they need."""
    nodes = events // 2 + 1
    objects = generate_cluster(nodes=nodes)
    while sum(o["kind"] == "ResourceSlice" for o in objects) < events:
        nodes *= 2
        objects = generate_cluster(nodes=nodes)
    slices = [o for o in objects if o["kind"] == "ResourceSlice"][:events]
    rest = [{**o, "plural": PLURALS[o["kind"]]} for o in objects
            if o["kind"] in ("Node", "DeviceClass")]
    return slices, rest


async def converge(source: KubeSource, rv: int, *, started: float, registry: CollectorRegistry,
                   relists_before: float | None) -> float:
    """Seconds until the slice informer is at `rv` (after one more relist, if
    `relists_before` is given: a relist keeps the resourceVersion)."""
    informer = next(i for i in source.informers if i.kind == "ResourceSlice")
    want = str(rv)
    while informer.resource_version != want or (
            relists_before is not None and _relists(registry) <= relists_before):
        if time.perf_counter() - started > TIMEOUT_SECONDS:
            raise TimeoutError(f"no convergence to resourceVersion {want} in "
                               f"{TIMEOUT_SECONDS:.0f}s")
        await asyncio.sleep(0.001)
    return time.perf_counter() - started


@asynccontextmanager
async def watching(config: Path) -> AsyncIterator[tuple[KubeSource, Inventory,
                                                         CollectorRegistry]]:
    """The real kube source in this process watching the double, its initial
    lists in: the source, its inventory and its metrics' registry."""
    inventory = Inventory(expected_kinds=[w.kind for w in WATCHED_KINDS])
    registry = CollectorRegistry()
    metrics = WatchMetrics(registry, kinds=[w.kind for w in WATCHED_KINDS])
    api = await api_client(kubeconfig=str(config))
    source = KubeSource(api, inventory, metrics=metrics)
    source.start()
    try:
        started = time.perf_counter()
        while not inventory.synced:
            if time.perf_counter() - started > TIMEOUT_SECONDS:
                raise TimeoutError("the initial lists never completed")
            await asyncio.sleep(0.005)
        yield source, inventory, registry
    finally:
        await source.stop()
        await api.close()


async def run_once(child: Child, slices: list[dict[str, Any]], kubeconfig: Path
                   ) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    async with watching(kubeconfig) as (source, inventory, registry):
        await child.call("stage", copy.deepcopy(slices))
        for phase in PHASES:
            await asyncio.sleep(0.2)  # every watch open and idle before the clock starts
            relists = _relists(registry) if phase == "relist" else None
            started = time.perf_counter()
            rv, produced = await child.call(phase)
            seconds = await converge(source, rv, started=started, registry=registry,
                                     relists_before=relists)
            out[phase] = {"seconds": seconds, "server_seconds": produced,
                          "devices": float(inventory.counts().devices)}
    return out


def _relists(registry: CollectorRegistry) -> float:
    return registry.get_sample_value("drax_watch_relists_total",
                                     {"kind": "ResourceSlice"}) or 0.0


def inventory_only(slices: Sequence[dict[str, Any]], rest: Sequence[dict[str, Any]]) -> float:
    inventory = Inventory()
    for obj in rest:  # the same Nodes and DeviceClasses as in the watched cluster
        inventory.apply(obj["kind"], "ADDED", obj)
    started = time.perf_counter()
    for obj in slices:
        inventory.apply("ResourceSlice", "ADDED", obj)
    return time.perf_counter() - started


async def bench(*, events: int, repeat: int) -> dict[str, Any]:
    slices, rest = burst_slices(events)
    child = Child()
    try:
        await child.call("create", rest)
        with tempfile.TemporaryDirectory() as tmp:
            config = kubeconfig(Path(tmp) / "kubeconfig", child.port)
            runs = [await run_once(child, slices, config) for _ in range(repeat)]
    finally:
        child.close()
    floor = [inventory_only(slices, rest) for _ in range(repeat)]
    result: dict[str, Any] = {"events": events, "repeat": repeat,
                              "slice_json_bytes": sum(len(json.dumps(s)) for s in slices),
                              "phases": {}}
    for phase in PHASES:
        secs = [r[phase]["seconds"] for r in runs]
        result["phases"][phase] = {
            "median_seconds": statistics.median(secs), "max_seconds": max(secs),
            "server_median_seconds": statistics.median(r[phase]["server_seconds"]
                                                       for r in runs),
            "devices_after": runs[-1][phase]["devices"]}
    result["inventory_only_median_seconds"] = statistics.median(floor)
    return result


def markdown(result: dict[str, Any]) -> str:
    lines = [f"Burst of {result['events']} ResourceSlice events "
             f"({result['slice_json_bytes'] / 1e6:.1f} MB of JSON), {result['repeat']} runs:",
             "", "| phase | converged (median) | max | events/s | server commit (median) "
             "| devices after |", "|---|---|---|---|---|---|"]
    for phase, p in result["phases"].items():
        lines.append(f"| {phase} | {p['median_seconds'] * 1000:.0f} ms | "
                     f"{p['max_seconds'] * 1000:.0f} ms | "
                     f"{result['events'] / p['median_seconds']:.0f} | "
                     f"{p['server_median_seconds'] * 1000:.0f} ms | {p['devices_after']:.0f} |")
    lines.append(f"| inventory-only (apply, no HTTP) | "
                 f"{result['inventory_only_median_seconds'] * 1000:.0f} ms | | | | |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", help="also write every number to this file")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)  # the relist phase's expected warnings
    if args.events < 1 or args.repeat < 1:
        parser.error("--events and --repeat must be at least 1")
    result = asyncio.run(bench(events=args.events, repeat=args.repeat))
    print(markdown(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
