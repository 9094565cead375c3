"""`drax capacity` run as a real command on the sample and on generated files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from tests.capacity.test_fits import exhaustive
from tests.cli.readme import shown_output
from tests.extender.cluster import GPU_CLASS, NIC_CLASS, gpu_node
from tests.inventory.objects import claim, exactly, pod, result, template

SAMPLE = Path(__file__).resolve().parents[2] / "app" / "sample"


def drax(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", "capacity", *args],
                          capture_output=True, text=True, timeout=120, check=False)


def test_sample_gpus_table_and_json() -> None:
    run = drax("--objects", str(SAMPLE), "--gpus", "2", "-o", "table")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].split() == ["NODE", "FITS"]
    assert lines[-1].split()[0] == "TOTAL"
    doc = json.loads(drax("--objects", str(SAMPLE), "--gpus", "2", "-o", "json").stdout)
    assert doc["nodes"]["cpu-node-1"] == 0
    assert doc["nodes"]["h100-node-1"] == 4  # 8 free H100s
    assert doc["total"] == sum(doc["nodes"].values())
    assert int(lines[-1].split()[1]) == doc["total"]


def test_generated_files_match_exhaustive_search(tmp_path: Path) -> None:
    roots = {"n0": (["a", "a", "b", "b"], ["a", "b"]), "n1": (["a", "a", "a", "b"], ["b"]),
             "n2": (["a", "b", "c"], ["a", "c", "c"])}
    objs = [GPU_CLASS, NIC_CLASS]
    for name, (gpus, nics) in roots.items():
        objs += gpu_node(name, roots=gpus, nic_roots=nics)
    objs.append(claim("held", requests=[exactly("gpu", "gpu")],
                      results=[result("gpu", "gpu.example.com/n0/gpu-0")]))
    (tmp_path / "objs.yaml").write_text(yaml.safe_dump_all(objs))
    run = drax("--objects", str(tmp_path), "--gpus", "1", "--nics", "1", "--same-root",
               "--gpu-class", "gpu", "--nic-class", "nic", "-o", "json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    free = {"n0": ["a", "b", "b"], "n1": roots["n1"][0], "n2": roots["n2"][0]}
    want = {n: exhaustive(free[n], roots[n][1], want_gpus=1, want_nics=1, same_root=True)
            for n in roots}
    assert doc == {"total": sum(want.values()), "exact": True, "nodes": want,
                   "inexact": [], "errors": {}}


def test_shape_from_a_pod_a_template_and_a_claim(tmp_path: Path) -> None:
    objs = [GPU_CLASS, *gpu_node("n0", roots=["a"] * 6),
            template("t", requests=[exactly("gpu", "gpu", count=2)]),
            claim("c", requests=[exactly("gpu", "gpu", count=3)]),
            pod("p", templates={"g": "t"})]
    (tmp_path / "objs.yaml").write_text(yaml.safe_dump_all(objs))
    for flags, want in ((["--pod", "default/p"], 3), (["--template", "default/t"], 3),
                        (["--claim", "default/c"], 2)):
        run = drax("--objects", str(tmp_path), *flags, "-o", "json")
        assert run.returncode == 0, run.stderr
        doc = json.loads(run.stdout)
        assert (doc["total"], doc["nodes"], doc["exact"]) == (want, {"n0": want}, True)


def test_piped_output_is_json_as_for_the_other_commands() -> None:
    run = drax("--objects", str(SAMPLE), "--gpus", "2")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["nodes"]["h100-node-1"] == 4


def test_a_cel_runtime_error_is_reported_not_counted_as_zero(tmp_path: Path) -> None:
    # the selector reads an attribute only n1's devices have: n0 errors, n1 counts
    objs = [GPU_CLASS, *gpu_node("n0", roots=["a", "a"]), *gpu_node("n1", roots=["a", "a"])]
    for device in objs[-1]["spec"]["devices"]:
        device["attributes"]["memory"] = {"int": 80}
    objs.append(claim("c", requests=[exactly(
        "gpu", "gpu", selectors=['device.attributes["gpu.example.com"].memory >= 40'])]))
    (tmp_path / "objs.yaml").write_text(yaml.safe_dump_all(objs))
    run = drax("--objects", str(tmp_path), "--claim", "default/c", "-o", "json")
    assert run.returncode == 1, run.stderr
    doc = json.loads(run.stdout)
    assert doc["nodes"] == {"n0": 0, "n1": 2} and doc["total"] == 2
    assert doc["exact"] is False and doc["inexact"] == []
    assert list(doc["errors"]) == ["n0"] and "no such key: memory" in doc["errors"]["n0"]
    assert "1 of 2 nodes not counted" in run.stderr and len(run.stderr.splitlines()) == 1
    table = drax("--objects", str(tmp_path), "--claim", "default/c", "-o", "table")
    assert table.returncode == 1
    assert "error: " in table.stdout and table.stdout.splitlines()[-1].split() == ["TOTAL", "~2"]


def test_a_bound_is_listed_as_inexact() -> None:
    run = drax("--objects", str(SAMPLE), "--pod", "default/legacy-2gpu-0", "-o", "json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["inexact"] == ["a100-plugin-node-1"] and doc["exact"] is False
    assert doc["errors"] == {}


def test_bad_input_is_one_line_and_exit_2() -> None:
    for flags, text in ((["--pod", "default/nope"], "not among the objects"),
                        (["--gpus", "0"], "--gpus"),
                        (["--gpus", "1", "--node", "ghost"], "unknown node"),
                        (["--gpus", "1", "--gpu-class", "ghost"], "ghost")):
        run = drax("--objects", str(SAMPLE), *flags)
        assert run.returncode == 2, (flags, run.stdout)
        assert text in run.stderr and len(run.stderr.splitlines()) == 1


def test_readme_shows_the_real_output() -> None:
    for flags in (["--gpus", "2", "--nics", "1", "--same-root"],
                  ["--pod", "default/legacy-2gpu-0"], ["--template", "default/8gpu", "-o", "json"],
                  ["--gpus", "4", "--gpu-class", "mig.nvidia.com", "--nics", "1", "--same-root"]):
        command = " ".join([".venv/bin/drax capacity --objects app/sample", *flags])
        block = shown_output(command)
        # the README's reader is at a terminal: a table unless -o says otherwise
        terminal = [] if "-o" in flags else ["-o", "table"]
        run = drax("--objects", str(SAMPLE), *flags, *terminal)
        assert run.returncode == 0, run.stderr
        assert run.stdout == block, command
