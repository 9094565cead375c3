"""The peer on speed: drax against upstream's Go allocator on the loadtest clusters.

Same generated clusters (loadtest/generator.py) and claim shapes (SHAPES) for
both sides, in one run:

- per node: one pod's claim allocated on one node, drax's `allocate` (advisor
  = first fit, allocator = best topology) against upstream's `NewAllocator`
  + `Allocate` as the oracle times it inside the Go process (`timing`,
  `repeat`; JSON transport is not counted);
- a whole filter over every node of the cluster: drax's `filter` verb on an
  extender that has not seen the shape (cold caches, what a pod of a new
  shape meets) against one `NewAllocator` and `Allocate` once per node, as
  the in-tree PreFilter and Filter do (the oracle's `nodes` request).

The upstream side needs the oracle binary (`python -m tests.upstream.oracle
--build`, or DRAX_ORACLE). Ratios are drax / upstream within this run.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from app.allocator import allocate
from app.extender import Extender
from app.features import GATES, FeatureGates
from app.inventory import KINDS, Inventory
from app.model import ResourceClaim, parse_object
from app.topology import TopologyConfig, make_objective
from loadtest import report
from loadtest.generator import POD_CLAIM_NAME, SHAPES, generate_cluster
from tests.upstream.oracle import Oracle

FEATURES = {name: spec.default for name, spec in GATES.items()}


@dataclass(slots=True)
class PeerRow:
    nodes: int
    shape: str
    feasible_nodes: int
    upstream_feasible_nodes: int
    drax_advisor_us: float  # median per node
    drax_allocator_us: float
    upstream_us: float
    drax_filter_ms: float  # whole filter, cold
    upstream_filter_ms: float  # Allocate once per node, summed

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}  # type: ignore[attr-defined]


def _claim(shape: str) -> dict[str, Any]:
    """The shape's claim as the API server stores it: `allocationMode`
    defaulted (upstream's allocator reads it, it does not default it)."""
    spec = json.loads(json.dumps(SHAPES[shape]))
    for request in spec["devices"]["requests"]:
        for exact in [request.get("exactly"), *request.get("firstAvailable", ())]:
            if exact is not None:
                exact.setdefault("allocationMode", "ExactCount")
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": f"peer-{shape}", "namespace": "default",
                         "uid": f"uid-peer-{shape}"},
            "spec": spec}


def _pod(shape: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"peer-{shape}", "namespace": "default",
                         "uid": f"uid-pod-{shape}"},
            "spec": {"schedulerName": "drax", "resourceClaims": [
                {"name": POD_CLAIM_NAME, "resourceClaimName": f"peer-{shape}"}]}}


def run(*, node_counts: Sequence[int], oracle: Oracle, sample: int = 40, repeat: int = 20,
        seed: int = 0) -> list[PeerRow]:
    rows = []
    for n in node_counts:
        cluster = generate_cluster(nodes=n, seed=seed)
        classes = [o for o in cluster if o["kind"] == "DeviceClass"]
        per_node: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for o in cluster:
            if o["kind"] == "ResourceSlice":
                per_node[o["spec"]["nodeName"]].append(o)
            elif o["kind"] == "Node":
                per_node[o["metadata"]["name"]].append(o)
        names = [o["metadata"]["name"] for o in cluster if o["kind"] == "Node"]
        pods = [o for shape in SHAPES for o in (_claim(shape), _pod(shape))]
        inventory = _inventory(cluster, pods)
        # One extender for every shape: each shape's first filter meets cold
        # caches, as a pod of a new shape does in `drax serve`.
        extender = Extender(inventory, features=FeatureGates(), file_mode=True)
        for shape in SHAPES:
            rows.append(_one(n, shape, inventory=inventory, extender=extender,
                             objects=cluster, classes=classes, per_node=per_node,
                             names=names, oracle=oracle, sample=sample, repeat=repeat))
    return rows


def _inventory(cluster: list[dict[str, Any]], extra: list[dict[str, Any]]) -> Inventory:
    inventory = Inventory()
    for obj in [*cluster, *extra]:
        inventory.apply(obj["kind"], "ADDED", obj)
    for kind in KINDS:
        inventory.mark_synced(kind)
    return inventory


def _one(n: int, shape: str, *, inventory: Inventory, extender: Extender,
         objects: list[dict[str, Any]], classes: list[dict[str, Any]],
         per_node: dict[str, list[dict[str, Any]]],
         names: list[str], oracle: Oracle, sample: int, repeat: int) -> PeerRow:
    raw_claim, raw_pod = _claim(shape), _pod(shape)
    claim: ResourceClaim = parse_object("ResourceClaim", raw_claim)
    features = FeatureGates()
    step = max(1, len(names) // sample)
    sampled = names[::step][:sample]
    times: dict[str, list[float]] = {"advisor": [], "allocator": [], "upstream": []}
    for name in sampled:
        state = inventory.node_state(name)
        assert state is not None
        for mode in ("advisor", "allocator"):
            objective = make_objective(node_view=state.view, allocated=state.allocated,
                                       config=TopologyConfig(), mode=mode)
            start = time.perf_counter()
            for _ in range(repeat):
                allocate([claim], node_view=state.view, classes=inventory.classes,
                         allocated=state.allocated, features=features,
                         class_matcher=inventory.class_matcher, objective=objective)
            times[mode].append((time.perf_counter() - start) / repeat)
        answer = oracle.request({"op": "allocate", "objects": [*classes, *per_node[name]],
                                 "claims": [raw_claim], "node": name, "features": FEATURES,
                                 "repeat": repeat, "timing": True})
        times["upstream"].append(float(answer["nanos"]) / answer["repeat"] / 1e9)
    pod = parse_object("Pod", raw_pod)
    start = time.perf_counter()
    result = extender.filter(pod, names)
    drax_filter = time.perf_counter() - start
    feasible = len(result.passed)
    answer = oracle.request({"op": "allocate", "objects": objects, "claims": [raw_claim],
                             "nodes": names, "features": FEATURES, "timing": True})
    upstream_total = float(answer["nanos"]) / 1e9
    upstream_feasible = sum(bool(a.get("feasible")) for a in answer["perNode"])
    return PeerRow(nodes=n, shape=shape, feasible_nodes=feasible,
                   upstream_feasible_nodes=upstream_feasible,
                   drax_advisor_us=statistics.median(times["advisor"]) * 1e6,
                   drax_allocator_us=statistics.median(times["allocator"]) * 1e6,
                   upstream_us=statistics.median(times["upstream"]) * 1e6,
                   drax_filter_ms=drax_filter * 1e3, upstream_filter_ms=upstream_total * 1e3)


def markdown(rows: Sequence[PeerRow]) -> str:
    lines = ["| nodes | shape | feasible (drax / upstream) | per node: drax advisor µs | "
             "drax allocator µs | upstream µs | advisor ÷ upstream | whole filter: drax ms "
             "(cold) | upstream ms (Allocate × nodes) | drax ÷ upstream |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r.nodes} | {r.shape} | {r.feasible_nodes} / {r.upstream_feasible_nodes} | "
            f"{r.drax_advisor_us:.0f} | {r.drax_allocator_us:.0f} | {r.upstream_us:.0f} | "
            f"{r.drax_advisor_us / r.upstream_us:.1f} | {r.drax_filter_ms:.0f} | "
            f"{r.upstream_filter_ms:.0f} | {r.drax_filter_ms / r.upstream_filter_ms:.2f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    from tests.upstream.differential import open_oracle
    parser = argparse.ArgumentParser(prog="python -m loadtest.peer")
    parser.add_argument("--nodes", type=int, nargs="+", default=[500, 5000])
    parser.add_argument("--sample", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the rows, with their provenance, here")
    args = parser.parse_args(argv)
    oracle = open_oracle()
    try:
        rows = run(node_counts=args.nodes, oracle=oracle, sample=args.sample, seed=args.seed)
    finally:
        oracle.close()
    print(markdown(rows))
    if args.json:
        command = " ".join(["python -m loadtest.peer", *(sys.argv[1:] if argv is None else argv)])
        doc = {**report.provenance(command), "rows": [r.to_dict() for r in rows]}
        Path(args.json).write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
