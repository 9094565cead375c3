"""`drax capacity --kubeconfig` lists the cluster once: an answer, or one line and exit 2."""

from __future__ import annotations

import asyncio
import io
import json
import socket
import subprocess
import sys
from pathlib import Path

from app.cli import build_parser
from tests.kube.apiserver import FakeApiServer
from tests.kube.harness import device_class, gpu_slice, node


def capacity(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(["capacity", *argv])
    code = args.func(args, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


async def served(tmp_path: Path) -> tuple[FakeApiServer, Path]:
    server = FakeApiServer()
    await server.start()
    server.create("nodes", node("n0"))
    server.create("deviceclasses", device_class("gpu"))
    server.create("resourceslices", gpu_slice("n0", 8))
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(server.kubeconfig())
    return server, kubeconfig


async def test_counts_the_listed_cluster(tmp_path: Path) -> None:
    server, kubeconfig = await served(tmp_path)
    try:
        code, out, err = await asyncio.to_thread(
            capacity, "--kubeconfig", str(kubeconfig), "--gpus", "2", "--gpu-class", "gpu",
            "-o", "json")
    finally:
        await server.stop()
    assert code == 0, err
    assert json.loads(out)["nodes"] == {"n0": 4}
    assert server.open_watches("nodes") == 0


async def test_a_failed_list_is_reported_not_retried(tmp_path: Path) -> None:
    server, kubeconfig = await served(tmp_path)
    server.faults.list_errors = 1
    server.faults.only_plural = "resourceslices"
    try:
        code, out, err = await asyncio.to_thread(
            capacity, "--kubeconfig", str(kubeconfig), "--gpus", "1", "--gpu-class", "gpu")
    finally:
        await server.stop()
    assert code == 2 and out == ""
    assert err.startswith(f"drax capacity: {kubeconfig}: ResourceSlice: list failed: HTTP 500")
    assert len(err.splitlines()) == 1
    assert server.count("GET", "/resourceslices") == 1


def test_an_unreachable_server_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\n"
        "users:\n- name: u\n  user:\n    token: t\n"
        "contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n")
    run = subprocess.run([sys.executable, "-m", "app", "capacity", "--kubeconfig",
                          str(kubeconfig), "--gpus", "1"],
                         capture_output=True, text=True, timeout=30, check=False)
    assert run.returncode == 2 and run.stdout == ""
    assert "list failed" in run.stderr and "Cannot connect" in run.stderr
    assert len(run.stderr.splitlines()) == 1, run.stderr
