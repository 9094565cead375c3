"""What the metrics cost per request: the edge with and without instrumentation.

One process, one inventory (a generated cluster loaded and warmed as `drax
serve` does in file mode), one `ExtenderEdge` over the real extender. Each
round sends the same filter and prioritize requests (a pod that fits on some
candidates and not on others, so filter's reason categories are exercised)
straight into the edge's ASGI endpoints, once as shipped and once with every
metric call of the edge made a no-op (the baseline), alternating so both see
the same machine load. Reported: per-request time of both and their ratio,
per verb, medians over rounds. The verbs' own work is the same in both, so
the difference is what instrumentation adds on the request path.

`python -m loadtest.bench_metrics --nodes 500 --rounds 400`
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import statistics
import time
from collections.abc import Sequence
from typing import Any

import orjson
from starlette.requests import Request

from app.extender import Extender
from app.features import FeatureGates
from app.inventory import KINDS, Inventory
from app.runtime import warm_fully
from app.server.app import ExtenderEdge
from app.server.metrics import ServerMetrics
from loadtest import generator


class _Null:
    """Stands in for a metric or a metric child: every call does nothing."""

    def labels(self, *args: Any, **kwargs: Any) -> _Null:
        return self

    def inc(self, *args: Any) -> None:
        return None

    def dec(self, *args: Any) -> None:
        return None

    def observe(self, *args: Any) -> None:
        return None


_EDGE_METRICS = ("request_seconds", "requests", "filtered_nodes", "in_flight", "request_bytes",
                 "response_bytes", "filter_rejections", "prioritize_scores", "pods_bound",
                 "bind_failures", "bind_wait_seconds", "answer_cache_hits")


def uninstrumented() -> ServerMetrics:
    """Edge metrics whose every call does nothing."""
    null = ServerMetrics()
    for name in _EDGE_METRICS:
        setattr(null, name, _Null())
    null.rejections_by_reason = collections.defaultdict(_Null)
    return null


def _request(path: str, body: bytes) -> Request:
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    scope = {"type": "http", "method": "POST", "path": path, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        "query_string": b""}
    return Request(scope, receive)


def _cluster(nodes: int) -> tuple[Extender, list[str], dict[str, Any]]:
    inventory = Inventory()
    objects = generator.generate_cluster(nodes=nodes, seed=3)
    workload = generator.generate_workload(pods=nodes, seed=3)
    for obj in objects + [o for o in workload if o["kind"] != "Pod"]:
        inventory.apply(obj["kind"], "ADDED", obj)
    for kind in KINDS:
        inventory.mark_synced(kind)
    extender = Extender(inventory, features=FeatureGates(), file_mode=True)
    warm_fully(extender)
    # 2 GPUs + 1 NIC on one root: fits on the full-GPU nodes, not on every node.
    pod = next(o for o in workload if o["kind"] == "Pod"
               and o["metadata"]["name"].endswith("2gpu-1nic-same-root"))
    return extender, [generator.node_name(i) for i in range(nodes)], pod


def _edge(extender: Extender, metrics: ServerMetrics) -> ExtenderEdge:
    return ExtenderEdge(verbs=extender, ready=lambda: True, max_body_bytes=16 << 20,
                        metrics=metrics)


async def _round(edges: dict[str, ExtenderEdge], bodies: dict[str, bytes]) -> dict[str, float]:
    out = {}
    for verb, body in bodies.items():
        endpoint = edges[verb]
        start = time.perf_counter()
        response = await endpoint(_request(f"/{verb}", body))
        out[verb] = time.perf_counter() - start
        if response.status_code != 200:
            raise RuntimeError(f"{verb}: HTTP {response.status_code}: {bytes(response.body)!r}")
    return out


async def measure(*, nodes: int, rounds: int) -> dict[str, Any]:
    extender, names, pod = _cluster(nodes)
    bodies = {"filter": orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names}),
              "prioritize": orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})}
    with_metrics: dict[str, list[float]] = {v: [] for v in bodies}
    without: dict[str, list[float]] = {v: [] for v in bodies}
    edge = _edge(extender, ServerMetrics())
    shipped = {v: edge.endpoint(v) for v in bodies}
    bare_edge = _edge(extender, uninstrumented())
    bare = {v: bare_edge.endpoint(v) for v in bodies}
    for _ in range(20):  # warm-up: caches, first-call costs
        await _round(shipped, bodies)
    for i in range(rounds):
        order = ((shipped, with_metrics), (bare, without))
        for endpoints, sink in (order if i % 2 == 0 else order[::-1]):
            times = await _round(endpoints, bodies)
            for verb, t in times.items():
                sink[verb].append(t)
    result: dict[str, Any] = {"nodes": nodes, "rounds": rounds, "verbs": {}}
    for verb in bodies:
        a, b = statistics.median(with_metrics[verb]), statistics.median(without[verb])
        result["verbs"][verb] = {"instrumented_ms": a * 1e3, "baseline_ms": b * 1e3,
                                 "ratio": a / b, "added_us": (a - b) * 1e6}
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_metrics",
                                     description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=400)
    args = parser.parse_args(argv)
    result = asyncio.run(measure(nodes=args.nodes, rounds=args.rounds))
    print(f"metrics cost per request, {result['nodes']} candidate nodes, "
          f"{result['rounds']} rounds (medians)")
    print("| verb | instrumented | baseline (no-op metrics) | ratio | added |")
    print("| --- | --- | --- | --- | --- |")
    for verb, r in result["verbs"].items():
        print(f"| {verb} | {r['instrumented_ms']:.3f} ms | {r['baseline_ms']:.3f} ms | "
              f"{r['ratio']:.3f} x | {r['added_us']:.1f} µs |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
