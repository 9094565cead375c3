"""`drax selector` run as a real process on the shared example objects."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
GPU_CLASS = ("device.driver == 'gpu.nvidia.com' && "
             "device.attributes['gpu.nvidia.com'].type == 'gpu'")
RDMA_CLASS = ('device.driver == "dra.net" && device.attributes["dra.net"].?rdma.orValue(false) '
              '&& !device.attributes["dra.net"].?virtual.orValue(false)')


def drax(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", "selector", *args],
                          capture_output=True, text=True, timeout=60, check=False)


def run_json(*args: str) -> list[dict[str, Any]]:
    proc = drax(*args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_device_classes_against_examples() -> None:
    gpu, rdma = run_json("--objects", str(EXAMPLES), GPU_CLASS, RDMA_CLASS)
    assert gpu["expression"] == GPU_CLASS and gpu["compileError"] is None
    assert len(gpu["matches"]) == 8
    assert all(d.startswith("gpu.nvidia.com/h100-node-1/gpu-") for d in gpu["matches"])
    assert all(d.startswith("dra.net/") for d in gpu["nonMatches"])
    assert gpu["errors"] == []
    assert len(rdma["matches"]) == 8 and all(d.startswith("dra.net/") for d in rdma["matches"])
    assert len(rdma["nonMatches"]) == 8


def test_runtime_errors_are_listed_per_device() -> None:
    (report,) = run_json("--objects", str(EXAMPLES / "resourceslice-h100-node-gpus.yaml"),
                         'device.attributes["dra.net"].rdma')
    assert report["matches"] == [] and report["nonMatches"] == []
    assert len(report["errors"]) == 8
    first = report["errors"][0]
    assert first["device"] == "gpu.nvidia.com/h100-node-1/gpu-0"
    assert first["error"].startswith("no such key: rdma. consider using CEL optional chaining")


def test_compile_error_is_reported_in_json_with_exit_2() -> None:
    proc = drax("--objects", str(EXAMPLES), "device.x", "true")
    assert proc.returncode == 2
    assert proc.stderr == "drax selector: 1 of 2 expressions do not compile: 'device.x'\n"
    reports = json.loads(proc.stdout)
    assert reports[0]["compileError"].startswith(
        "compilation failed: ERROR: <input>:1:7: undefined field 'x'")
    assert reports[0]["matches"] == []
    assert len(reports[1]["matches"]) == 16


def test_expressions_after_double_dash() -> None:
    (report,) = run_json("--objects", str(EXAMPLES), "-o", "json", "--",
                         'device.driver == "dra.net"')
    assert len(report["matches"]) == 8


def test_bad_syntax_exits_2() -> None:
    proc = drax("--objects", str(EXAMPLES), "bad syntax ((")
    assert proc.returncode == 2
    assert "do not compile: 'bad syntax (('" in proc.stderr


def test_table_output() -> None:
    proc = drax("-o", "table", "--objects", str(EXAMPLES), GPU_CLASS, "device.x")
    assert proc.returncode == 2, proc.stderr
    assert "8 of 16 devices match, 0 errors" in proc.stdout
    assert "MATCH     gpu.nvidia.com/h100-node-1/gpu-0" in proc.stdout
    assert "undefined field 'x'" in proc.stdout


def test_missing_file_exits_2() -> None:
    proc = drax("--objects", str(EXAMPLES), "no-such-file.yaml", "true")
    assert proc.returncode == 2
    assert "no-such-file.yaml" in proc.stderr and proc.stdout == ""


def test_unparsable_file_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: [unclosed\n")
    proc = drax("--objects", str(bad), "true")
    assert proc.returncode == 2
    assert "cannot parse" in proc.stderr


def test_invalid_slice_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "slice.yaml"
    bad.write_text("apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\n"
                   "metadata: {name: s}\nspec: {pool: {name: p}}\n")
    proc = drax("--objects", str(bad), "true")
    assert proc.returncode == 2
    assert "spec.driver" in proc.stderr


def test_no_expression_exits_2() -> None:
    proc = drax("--objects", str(EXAMPLES))
    assert proc.returncode == 2
    assert "expression" in proc.stderr
