"""A soak of ResourceSlice events: what the slice informer freezes stays bounded.

The slice informer freezes the collector's generations every
`FREEZE_AFTER_DEVICES` devices of slice events (and every
`FREEZE_AFTER_EVENTS` events), so that a burst of slices sets off no young or
middle collection inside an event. A frozen object leaves every later pass
for good and is freed only by reference counting: whatever an event builds
that outlives it, or any cycle, would stay in the permanent generation for
the life of the process. This soak shows that it does not pile up.

The real kube source runs in this process (`gc.get_freeze_count()` and the
RSS are drax's own) and watches the API-server double of
`loadtest.bench_watch`, in its own process, holding a generated cluster
(8 GPUs + 8 RDMA NICs per node, a quarter of the nodes partitionable). The
double republishes slices, each with the next pool generation, `--events` in
all, in rounds of `--round` (each round from the cluster's first slice on);
once the informer has applied a round (the server's last resourceVersion),
the soak records the frozen objects, the objects the collector still
tracks, this process's RSS and the devices the inventory holds. The first round is the warm-up (the
caches of shared values fill); the targets: from there to the last round the
frozen objects and the RSS grow by at most 5 %, and the inventory holds the
cluster's devices throughout.

    .venv/bin/python -m loadtest.bench_freeze [--nodes 2000] [--events 20000] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from app.inventory import Inventory
from app.sources.kube.watch import FREEZE_AFTER_DEVICES, FREEZE_AFTER_EVENTS
from loadtest import report
from loadtest.bench import memory_bytes
from loadtest.bench_watch import Child, converge, kubeconfig, watching

GROWTH_MAX: Final = 0.05
MB: Final = 1024 * 1024


async def soak(*, nodes: int, events: int, per_round: int, seed: int) -> dict[str, Any]:
    child = Child()
    try:
        await child.call("generate", (nodes, seed))
        with tempfile.TemporaryDirectory(prefix="drax-bench-freeze-") as tmp:
            config = kubeconfig(Path(tmp) / "kubeconfig", child.port)
            return await _rounds(child, config, nodes=nodes, events=events,
                                 per_round=per_round)
    finally:
        child.close()


async def _rounds(child: Child, config: Path, *, nodes: int, events: int, per_round: int
                  ) -> dict[str, Any]:
    rounds: list[dict[str, Any]] = []
    started = time.perf_counter()
    async with watching(config) as (source, inventory, registry):
        rounds.append(_sample(inventory, events=0, seconds=time.perf_counter() - started))
        applied = 0
        while applied < events:
            batch = min(per_round, events - applied)
            started = time.perf_counter()
            rv, _ = await child.call("republish", batch)
            seconds = await converge(source, rv, started=started, registry=registry,
                                     relists_before=None)
            applied += batch
            rounds.append(_sample(inventory, events=applied, seconds=seconds))
    return {"nodes": nodes, "events": events, "per_round": per_round,
            "freeze_after_devices": FREEZE_AFTER_DEVICES,
            "freeze_after_events": FREEZE_AFTER_EVENTS, "rounds": rounds}


def _sample(inventory: Inventory, *, events: int, seconds: float) -> dict[str, Any]:
    rss, _ = memory_bytes(os.getpid())
    return {"events": events, "seconds": round(seconds, 2), "frozen": gc.get_freeze_count(),
            "tracked": len(gc.get_objects()), "rss_mb": round(rss / MB, 1),
            "devices": inventory.counts().devices}


def _growth(doc: Mapping[str, Any], key: str) -> tuple[float, float, float]:
    """(after the warm-up round, at the end, growth) of one figure."""
    rounds = doc["rounds"]
    first, last = rounds[min(1, len(rounds) - 1)][key], rounds[-1][key]
    return first, last, (last - first) / first if first else 0.0


def targets(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key, name, unit in (("frozen", "frozen objects", ""), ("rss_mb", "RSS", " MB")):
        first, last, growth = _growth(doc, key)
        out.append({"target": f"{name}, growth after the warm-up round",
                    "goal": f"<= +{GROWTH_MAX:.0%}", "measured": f"{growth:+.1%}", "unit": "",
                    "met": growth <= GROWTH_MAX,
                    "note": f"{first:,}{unit} -> {last:,}{unit} over "
                            f"{doc['events'] - doc['rounds'][1]['events']:,} events"
                    if len(doc["rounds"]) > 1 else "one round only"})
    held = {r["devices"] for r in doc["rounds"]}
    out.append({"target": "devices held", "goal": "the same in every round",
                "measured": ", ".join(f"{d:,}" for d in sorted(held)), "unit": "",
                "met": len(held) == 1, "note": ""})
    return out


def markdown(doc: Mapping[str, Any]) -> str:
    lines = [f"{doc['nodes']:,} generated nodes, {doc['events']:,} slice events in rounds of "
             f"{doc['per_round']:,}; the informer freezes every "
             f"{doc['freeze_after_devices']} devices and every "
             f"{doc['freeze_after_events']} events.", "",
             "| events applied | round converged | frozen objects | tracked objects | RSS "
             "| devices held |", "| --- | --- | --- | --- | --- | --- |"]
    for r in doc["rounds"]:
        lines.append(f"| {r['events']:,} | {r['seconds']} s | {r['frozen']:,} | "
                     f"{r['tracked']:,} | {r['rss_mb']} MB | {r['devices']:,} |")
    lines += ["", "The first row is the initial lists; the row after it ends the warm-up."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_freeze",
                                     description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--round", type=int, default=2000, dest="per_round",
                        help="slice events per round (default 2000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args(argv)
    if min(args.nodes, args.events, args.per_round) < 1:
        parser.error("--nodes, --events and --round must be positive")
    command = "python -m loadtest.bench_freeze " + " ".join(
        sys.argv[1:] if argv is None else argv)
    result = asyncio.run(soak(nodes=args.nodes, events=args.events, per_round=args.per_round,
                              seed=args.seed))
    result.update(report.provenance(command.strip()))
    print("\n".join(report.targets_table(targets(result))))
    print()
    print(markdown(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
