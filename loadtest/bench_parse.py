"""What a ResourceSlice device costs to read, in CPU per device.

The slices of a generated cluster (`loadtest.generator`, the default node
kinds: 8 GPUs and 8 NICs a node, a quarter MIG-partitionable) are encoded as
the API server sends them, then read in this process, each way in the same
run, with the cyclic collector paused as drax's lists and loads run, every
object kept until the pass ends (the inventory keeps them too):

- `reference`: orjson's dict tree, then the reference parse
  (`app.model.parse.parse_object`), the baseline;
- `typed`: the JSON straight into the model (`decode_resource_slice`), what
  list pages, watch events and JSON files go through; best of the passes, so
  the decoder's caches hold every value of the cluster, even those unique to
  one device (a uuid) that a process start meets once;
- `typed_cold`: the same with the decoder's caches emptied before each pass
  (`forget_shared`), as a process start reads the cluster;
- `typed_unique_names`: `typed_cold` with every device renamed to a name no
  other device has (drivers that put a serial or uuid in device names), so no
  device has a namesake on another node by name: it is read by its place in
  the slice;
- `event`: one watch event of each partitionable node's largest slice, its
  JSON decoded and applied to an inventory that holds the cluster (MODIFIED,
  a new pool generation), freezing what it built as the slice informer does
  (`FREEZE_AFTER_DEVICES`): p50 and p99 per event;
- `memory`: for the read of the cluster as named and with every name unique,
  each from empty caches, what the decoded slices and the decoder's caches
  hold together (traced bytes per device) and what the caches alone hold
  once the slices are dropped (MB): the caches are bounded, so this stays
  put however large the cluster (what `tracemalloc` sees, so the pass runs
  untimed, last).

Each figure is the best of `--repeat` passes (the machine is shared). The
targets: the typed read's CPU per device within "a few µs" (3 µs taken as its
bound), the reference parse of the same run beside it; one watch event within
1 ms at p99, as for the whole cluster.

    .venv/bin/python -m loadtest.bench_parse [--nodes 5000] [--json FILE]
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import sys
import time
import tracemalloc
from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

from app import garbage_collector
from app.inventory import Inventory
from app.model import decode_resource_slice
from app.model.parse import parse_object as reference_parse
from app.model.typed import forget_shared
from app.sources.kube.watch import FREEZE_AFTER_DEVICES
from loadtest import generator, report

TYPED_US_PER_DEVICE_MAX: Final = 3.0  # "a few µs" per device
EVENT_P99_MS_MAX: Final = 1.0


def _best(repeat: int, run: Callable[[], Any],
          before: Callable[[], None] = lambda: None) -> float:
    """The least CPU time of `repeat` passes of `run` (each after `before`), its
    result kept until the pass ends."""
    best = float("inf")
    for _ in range(repeat):
        before()
        gc.collect()
        gc.disable()
        try:
            started = time.process_time()
            kept = run()
            best = min(best, time.process_time() - started)
            del kept
        finally:
            gc.enable()
    return best


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(*, nodes: int, repeat: int) -> dict[str, Any]:
    objects = list(generator.iter_cluster(nodes=nodes))
    slices = [o for o in objects if o["kind"] == "ResourceSlice"]
    bodies = [orjson.dumps(s) for s in slices]
    devices = sum(len(s["spec"].get("devices") or ()) for s in slices)
    reference = _best(repeat, lambda: [reference_parse("ResourceSlice", orjson.loads(b))
                                       for b in bodies])
    typed = _best(repeat, lambda: [decode_resource_slice(b) for b in bodies])
    cold = _best(repeat, lambda: [decode_resource_slice(b) for b in bodies],
                 before=forget_shared)
    unique_bodies = _unique_names(slices)
    unique = _best(repeat, lambda: [decode_resource_slice(b) for b in unique_bodies],
                   before=forget_shared)

    inventory = Inventory()
    for obj in objects:
        inventory.apply(obj["kind"], "ADDED", obj)
    largest: dict[str, dict[str, Any]] = {}
    for s in slices:
        node = s["spec"].get("nodeName")
        if len(s["spec"].get("devices") or ()) > len(
                (largest.get(node) or {"spec": {}})["spec"].get("devices") or ()):
            largest[node] = s
    events = []
    for s in largest.values():
        if not any("consumesCounters" in d for d in s["spec"]["devices"]):
            continue  # not a partitionable node's
        changed = copy.deepcopy(s)
        changed["spec"]["pool"]["generation"] += 1
        events.append((orjson.dumps(changed), len(changed["spec"]["devices"])))
    seconds = []
    built = 0
    garbage_collector.freeze()  # the inventory was loaded, as a list leaves it
    for body, devices_of in events:
        started = time.perf_counter()
        inventory.apply_parsed("ResourceSlice", "MODIFIED", decode_resource_slice(body))
        seconds.append(time.perf_counter() - started)
        built += devices_of
        if built >= FREEZE_AFTER_DEVICES:
            garbage_collector.freeze()
            built = 0
    memory = {"named": _memory(bodies, devices), "unique_names": _memory(unique_bodies, devices)}
    return {
        "nodes": nodes, "slices": len(slices), "devices": devices, "repeat": repeat,
        "reference_us_per_device": round(reference * 1e6 / devices, 2),
        "typed_us_per_device": round(typed * 1e6 / devices, 2),
        "typed_over_reference": round(typed / reference, 3),
        "typed_cold_us_per_device": round(cold * 1e6 / devices, 2),
        "typed_unique_names_us_per_device": round(unique * 1e6 / devices, 2),
        "event": {"events": len(events), "devices_per_event": max((n for _, n in events),
                                                                  default=0),
                  "p50_ms": round(_percentile(seconds, 0.5) * 1e3, 3) if seconds else None,
                  "p99_ms": round(_percentile(seconds, 0.99) * 1e3, 3) if seconds else None},
        "memory": memory,
    }


def _memory(bodies: list[bytes], devices: int) -> dict[str, float]:
    """What reading `bodies` from empty caches keeps: the slices and the
    caches together, in traced bytes per device, and the caches alone (what
    emptying them frees once the slices are dropped), in MB."""
    forget_shared()
    gc.collect()
    tracemalloc.start()
    try:
        kept = [decode_resource_slice(b) for b in bodies]
        together = tracemalloc.get_traced_memory()[0]
        del kept
        gc.collect()
        caches = tracemalloc.get_traced_memory()[0]
        forget_shared()
        gc.collect()
        caches -= tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return {"bytes_per_device": round(together / devices), "caches_mb": round(caches / 1e6, 1)}


def _unique_names(slices: list[dict[str, Any]]) -> list[bytes]:
    """The slices' JSON with each device named apart from every other device
    of the cluster (its name and a serial, as some drivers name devices)."""
    bodies, serial = [], 0
    for s in slices:
        renamed = copy.deepcopy(s)
        for d in renamed["spec"].get("devices") or ():
            serial += 1
            d["name"] = f"{d['name']}-{serial:012x}"
        bodies.append(orjson.dumps(renamed))
    return bodies


def targets(r: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The per-device read against "a few µs", and one watch event's p99."""
    typed, p99 = r["typed_us_per_device"], r["event"]["p99_ms"]
    return [
        {"target": "typed read, CPU per device", "goal": f"<= {TYPED_US_PER_DEVICE_MAX} us",
         "measured": typed, "unit": "us", "met": typed <= TYPED_US_PER_DEVICE_MAX,
         "beside": f"reference parse {r['reference_us_per_device']} us "
                   f"({r['typed_over_reference']:.2f} x)",
         "note": "the goal asks for a few µs per device, read as at most 3"},
        {"target": "one watch event of a partitionable node's slice, p99",
         "goal": f"<= {EVENT_P99_MS_MAX} ms", "measured": p99, "unit": "ms",
         "met": None if p99 is None else p99 <= EVENT_P99_MS_MAX, "beside": "",
         "note": f"{r['event']['devices_per_event']} devices, decoded and applied to "
                 f"{r['nodes']:,} nodes"}]


def render(r: Mapping[str, Any]) -> str:
    e = r["event"]
    return "\n".join([
        f"{r['nodes']:,} generated nodes: {r['slices']:,} slices, {r['devices']:,} devices "
        f"(best of {r['repeat']} passes, CPU time)",
        "",
        "| read | CPU per device | / reference |",
        "| --- | --- | --- |",
        f"| reference: orjson dict, then the reference parse | "
        f"{r['reference_us_per_device']} us | 1.00 |",
        f"| typed: JSON straight into the model | {r['typed_us_per_device']} us | "
        f"{r['typed_over_reference']:.2f} |",
        *([f"| typed, the decoder's caches emptied first (a process start) | "
           f"{r['typed_cold_us_per_device']} us | "
           f"{r['typed_cold_us_per_device'] / r['reference_us_per_device']:.2f} |"]
          if "typed_cold_us_per_device" in r else []),
        *([f"| typed, caches emptied first, every device name unique | "
           f"{r['typed_unique_names_us_per_device']} us | "
           f"{r['typed_unique_names_us_per_device'] / r['reference_us_per_device']:.2f} |"]
          if "typed_unique_names_us_per_device" in r else []),
        "",
        f"One watch event of a partitionable node's slice ({e['devices_per_event']} devices, "
        f"decoded and applied, {e['events']} events): p50 {e['p50_ms']} ms, "
        f"p99 {e['p99_ms']} ms.",
        *(_render_memory(r["memory"]) if "memory" in r else []),
    ])


def _render_memory(m: Mapping[str, Mapping[str, float]]) -> list[str]:
    return [
        "",
        "What a read from empty caches keeps (traced by `tracemalloc`, untimed): the decoded "
        "slices and the decoder's caches together, per device, and the caches alone, which "
        "are bounded and so do not grow with the cluster.",
        "",
        "| read | slices + caches, per device | caches |",
        "| --- | --- | --- |",
        *(f"| {label} | {m[key]['bytes_per_device']:,} bytes | {m[key]['caches_mb']} MB |"
          for key, label in (("named", "as named"),
                             ("unique_names", "every device name unique"))
          if key in m)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_parse", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.repeat < 1:
        parser.error("--nodes and --repeat must be positive")
    command = "python -m loadtest.bench_parse " + " ".join(
        sys.argv[1:] if argv is None else argv)
    result = measure(nodes=args.nodes, repeat=args.repeat)
    result.update(report.provenance(command.strip()))
    print("\n".join(report.targets_table(targets(result))))
    print()
    print(render(result))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
