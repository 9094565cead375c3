"""`drax preempt` run as a command on the sample cluster with its running pods."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.cli import main
from app.cli.preempt import run
from tests.cli.readme import shown_output

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = [str(ROOT / "app" / "sample"), str(ROOT / "app" / "sample-running")]


def drax(*argv: str) -> tuple[int, str, str]:
    from app.cli import build_parser

    args = build_parser().parse_args(list(argv))
    out, err = io.StringIO(), io.StringIO()
    code = run(args, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def as_json(*argv: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = drax("preempt", *argv, "-o", "json")
    return code, json.loads(out)


def preemptor(name: str, uid: str, *, cpu: str | None = None, **spec: Any) -> dict[str, Any]:
    """A pod of PriorityClass `research` (1000) asking for one GPU, and `cpu` if given."""
    containers = [{"name": "main", "resources": {"requests": {"cpu": cpu}}}] if cpu else []
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": uid},
            "spec": {**spec, "priorityClassName": "research",
                     **({"containers": containers} if containers else {}),
                     "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "1gpu"}]}}


def test_the_8gpu_pod_frees_the_node_of_three_notebooks() -> None:
    code, doc = as_json("--objects", *SAMPLE, "--pod", "default/prod-train-8gpu-0")
    assert code == 0 and doc["priority"] == 100000 and doc["problem"] is None
    ranked = [(n["node"], sorted(v["pod"] for v in n["victims"]), n["pdbViolations"])
              for n in doc["nodes"]]
    assert ranked == [
        ("h100-mig-node-1", ["default/notebook-a", "default/notebook-b", "default/notebook-c"],
         0),
        ("h100-node-1", [f"default/batch-{x}" for x in "abcd"], 0),
        ("h100-node-2", ["default/batch-e", "default/batch-f", "default/research-4gpu-0"], 1),
    ]
    best = doc["nodes"][0]
    assert best["rank"] == 1 and best["exact"]
    assert len(best["allocation"][0]["devices"]) == 8
    assert best["freedDevices"] == sorted(
        f"gpu.nvidia.com/h100-mig-node-1/gpu-{g}-mig-1g10gb-19-0" for g in (0, 3, 5))
    assert set(doc["refused"]) == {"cpu-node-1", "a100-plugin-node-1"}


def test_table_names_victims_devices_and_why_others_fail() -> None:
    code, out, _ = drax("preempt", "--objects", *SAMPLE, "--pod", "default/prod-train-8gpu-0",
                        "--node", "h100-node-2", "--node", "cpu-node-1", "-o", "table")
    assert code == 0
    assert "default/research-4gpu-0 (priority 1000): frees" in out
    assert "(gpu-0, gpu-1, gpu-2, gpu-3)" in out
    assert "preempting cannot help" in out


def test_a_never_pod_does_not_preempt() -> None:
    code, doc = as_json("--objects", *SAMPLE, "--pod", "default/polite-train-8gpu-0")
    assert code == 1 and "Never" in doc["problem"] and doc["nodes"] == []


def test_a_pod_from_a_file(tmp_path: Path) -> None:
    pod = preemptor("urgent", "u-1")
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(pod))
    code, doc = as_json("--objects", *SAMPLE, "--pod", str(path), "--node", "h100-node-1")
    assert code == 0 and doc["pod"] == "default/urgent" and doc["priority"] == 1000
    assert [len(n["victims"]) for n in doc["nodes"]] == [1]


def test_bad_input_exits_2() -> None:
    code, _, err = drax("preempt", "--objects", *SAMPLE, "--pod", "nobody")
    assert code == 2 and "NAMESPACE/NAME" in err
    code, _, err = drax("preempt", "--objects", *SAMPLE, "--pod", "default/ghost")
    assert code == 2 and "not among the objects" in err
    code, _, err = drax("preempt", "--objects", *SAMPLE, "--pod", "default/prod-train-8gpu-0",
                        "--node", "nowhere")
    assert code == 2 and "unknown node" in err


def test_registered_as_a_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["preempt", "--help"])
    assert exited.value.code == 0
    assert "usage: drax preempt" in capsys.readouterr().out


def test_a_tainted_node_is_refused_and_the_next_one_chosen(tmp_path: Path) -> None:
    sample = tmp_path / "sample"
    shutil.copytree(ROOT / "app" / "sample", sample)
    nodes = list(yaml.safe_load_all((sample / "10-nodes.yaml").read_text()))
    for obj in nodes:
        if obj["metadata"]["name"] == "h100-mig-node-1":
            obj["spec"] = {"taints": [{"key": "mig", "value": "reserved",
                                       "effect": "NoSchedule"}]}
    (sample / "10-nodes.yaml").write_text(yaml.safe_dump_all(nodes))
    code, doc = as_json("--objects", str(sample), SAMPLE[1], "--pod",
                        "default/prod-train-8gpu-0")
    assert code == 0
    assert [n["node"] for n in doc["nodes"]] == ["h100-node-1", "h100-node-2"]
    assert doc["refused"]["h100-mig-node-1"] == (
        "node has taint {mig=reserved:NoSchedule} the pod does not tolerate")


def test_a_node_the_pod_would_lack_cpu_on_is_refused_with_the_shortfall(tmp_path: Path) -> None:
    pod = preemptor("wide", "u-2", cpu="200")
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(pod))
    code, out, _ = drax("preempt", "--objects", *SAMPLE, "--pod", str(path),
                        "--node", "h100-node-1", "-o", "table")
    assert code == 1
    assert ("node would lack cpu: requests 200, free with every lower-priority pod gone 192"
            in out)


def test_a_pod_that_goes_for_room_is_shown_as_such(tmp_path: Path) -> None:
    filler = {"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": "filler", "namespace": "default", "uid": "u-3"},
              "spec": {"nodeName": "h100-node-1", "priority": 0, "containers": [
                  {"name": "main", "resources": {"requests": {"cpu": "100"}}}]},
              "status": {"phase": "Running"}}
    pod = preemptor("wide", "u-2", cpu="150")
    (tmp_path / "filler.json").write_text(json.dumps(filler))
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(pod))
    code, out, _ = drax("preempt", "--objects", *SAMPLE, str(tmp_path / "filler.json"),
                        "--pod", str(path), "--node", "h100-node-1", "-o", "table")
    assert code == 0
    assert ("- default/filler (priority 0): makes room for the pod's cpu, memory or "
            "pod count") in out
    code, doc = as_json("--objects", *SAMPLE, str(tmp_path / "filler.json"), "--pod",
                        str(path), "--node", "h100-node-1")
    assert [(v["pod"], v["forRoom"]) for v in doc["nodes"][0]["victims"]] == [
        ("default/batch-a", False), ("default/filler", True)]


def test_the_pods_nominated_by_every_profile_drax_serves_count_against_the_room(
        tmp_path: Path) -> None:
    # A pending drax pod of the preemptor's priority nominated to h100-node-1
    # takes 190 of its 192 free cpus. One kube-scheduler serving profiles drax
    # and drax-gpu counts it for a drax-gpu preemptor: freeing a GPU there
    # leaves that pod short of cpu. Without the names, the drax pod belongs to
    # another scheduler and does not count.
    ahead = {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "ahead", "namespace": "default", "uid": "u-4"},
             "spec": {"schedulerName": "drax", "priority": 1000, "containers": [
                 {"name": "main", "resources": {"requests": {"cpu": "190"}}}]},
             "status": {"phase": "Pending", "nominatedNodeName": "h100-node-1"}}
    pod = preemptor("wide", "u-2", cpu="4", schedulerName="drax-gpu")
    (tmp_path / "ahead.json").write_text(json.dumps(ahead))
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(pod))
    argv = ("--objects", *SAMPLE, str(tmp_path / "ahead.json"), "--pod", str(path),
            "--node", "h100-node-1")
    code, doc = as_json(*argv)
    assert code == 0 and [len(n["victims"]) for n in doc["nodes"]] == [1]
    code, doc = as_json(*argv, "--scheduler-name", "drax,drax-gpu")
    assert code == 1 and doc["nodes"] == []
    assert doc["refused"] == {"h100-node-1": "node would lack cpu: requests 4, free with "
                                             "every lower-priority pod gone 2"}
    code, _, err = drax("preempt", *argv, "--scheduler-name", "drax,")
    assert code == 2 and "--scheduler-name" in err


def test_readme_shows_the_real_output() -> None:
    block = shown_output(".venv/bin/drax preempt --objects app/sample app/sample-running "
                         "--pod default/prod-train-8gpu-0 -o table")
    code, out, err = drax("preempt", "--objects", *SAMPLE, "--pod", "default/prod-train-8gpu-0",
                          "-o", "table")
    assert code == 0, err
    assert out == block
