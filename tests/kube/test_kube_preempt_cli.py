"""`drax preempt --kubeconfig` lists the cluster once and prints the victims."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

from app.cli import build_parser
from tests.kube.apiserver import FakeApiServer
from tests.kube.test_kube_preemption import full_cluster, preemptor


def preempt(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(["preempt", *argv])
    code = args.func(args, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


async def test_victims_of_a_listed_cluster(tmp_path: Path) -> None:
    server = FakeApiServer()
    await server.start()
    full_cluster(server)
    c, p = preemptor(count=2, priority=15)
    server.create("resourceclaims", c)
    server.create("pods", p)
    server.create("poddisruptionbudgets", {
        "metadata": {"name": "v0", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "v0"}}},
        "status": {"disruptionsAllowed": 0}})
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(server.kubeconfig())
    try:
        code, out, err = await asyncio.to_thread(
            preempt, "--kubeconfig", str(kubeconfig), "--pod", "default/p", "-o", "json")
    finally:
        await server.stop()
    assert code == 0, err
    doc = json.loads(out)
    assert doc["priority"] == 15
    (found,) = doc["nodes"]
    # GPUs 0-3 share one root: the two lowest-priority holders go, v3 (20) may not.
    assert sorted(v["pod"] for v in found["victims"]) == ["default/v0", "default/v1"]
    assert found["freedDevices"] == [f"gpu.example.com/node-a/gpu-{i}" for i in (0, 1)]
