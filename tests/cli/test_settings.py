"""The what-if commands read `drax serve`'s settings: flag > DRAX_* > --config file > default."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from app.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = [str(ROOT / "app" / "sample"), str(ROOT / "app" / "sample-running")]
WORKLOAD = str(ROOT / "app" / "sample" / "40-pods.yaml")
WHAT_IF = {
    "allocate": ["--objects", *SAMPLE, "--pod", "default/train-0"],
    "capacity": ["--objects", *SAMPLE, "--gpus", "1"],
    "simulate": ["--objects", SAMPLE[0], "--workload", WORKLOAD],
    "preempt": ["--objects", *SAMPLE, "--pod", "default/prod-train-8gpu-0"],
}


@pytest.fixture(autouse=True)
def _no_drax_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DRAX_CONFIG", "DRAX_SCHEDULER_NAME", "DRAX_INVENTORY", "DRAX_KUBECONFIG",
                 "DRAX_MODE", "DRAX_FEATURE_GATES", "DRAX_NODE_SELECTOR", "DRAX_PREEMPTION"):
        monkeypatch.delenv(name, raising=False)


def drax(*argv: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(list(argv))
    out, err = io.StringIO(), io.StringIO()
    code = args.func(args, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def as_json(*argv: str) -> tuple[int, Any]:
    code, out, err = drax(*argv, "-o", "json")
    assert code != 2, err
    return code, json.loads(out)


def config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "drax.yaml"
    path.write_text(text)
    return str(path)


def crowded_pod(tmp_path: Path) -> list[str]:
    """A drax-gpu pod whose one GPU on h100-node-1 can be freed only when the
    drax pod nominated there (190 of the node's 192 free cpus) is not counted:
    the answer tells which profiles the search took drax to serve."""
    ahead = {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "ahead", "namespace": "default", "uid": "u-4"},
             "spec": {"schedulerName": "drax", "priority": 1000, "containers": [
                 {"name": "main", "resources": {"requests": {"cpu": "190"}}}]},
             "status": {"phase": "Pending", "nominatedNodeName": "h100-node-1"}}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "wide", "namespace": "default", "uid": "u-2"},
           "spec": {"schedulerName": "drax-gpu", "priorityClassName": "research",
                    "containers": [{"name": "main", "resources": {"requests": {"cpu": "4"}}}],
                    "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "1gpu"}]}}
    (tmp_path / "ahead.json").write_text(json.dumps(ahead))
    (tmp_path / "pod.json").write_text(json.dumps(pod))
    return ["preempt", "--objects", *SAMPLE, str(tmp_path / "ahead.json"),
            "--pod", str(tmp_path / "pod.json"), "--node", "h100-node-1"]


def test_preempt_takes_the_profiles_from_the_file_the_environment_and_the_flag(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = crowded_pod(tmp_path)
    both = config(tmp_path, "scheduler_name: [drax, drax-gpu]\n")
    assert as_json(*argv)[0] == 0  # default: drax alone, the nominated pod is another's
    code, doc = as_json(*argv, "--config", both)
    assert code == 1 and "lack cpu" in doc["refused"]["h100-node-1"]
    monkeypatch.setenv("DRAX_SCHEDULER_NAME", "drax-gpu")
    assert as_json(*argv, "--config", both)[0] == 0  # the environment beats the file
    assert as_json(*argv, "--config", both, "--scheduler-name", "drax,drax-gpu")[0] == 1
    monkeypatch.setenv("DRAX_CONFIG", both)
    monkeypatch.delenv("DRAX_SCHEDULER_NAME")
    assert as_json(*argv)[0] == 1  # $DRAX_CONFIG names the file, as for serve


def test_the_settings_inventory_is_the_objects_when_no_flag_names_them(tmp_path: Path) -> None:
    settings = config(tmp_path, f"inventory: {json.dumps(SAMPLE)}\n")
    code, doc = as_json("preempt", "--config", settings, "--pod", "default/prod-train-8gpu-0")
    assert code == 0 and doc["nodes"][0]["node"] == "h100-mig-node-1"
    code, out, err = drax("preempt", "--pod", "default/prod-train-8gpu-0")
    assert code == 2 and out == ""
    assert err == ("drax preempt: no objects: give --objects or --kubeconfig, or set them in "
                   "the settings (--config, DRAX_INVENTORY)\n")


def test_the_node_pool_leaves_out_the_nodes_serve_would_not_serve(tmp_path: Path) -> None:
    pool = config(tmp_path, "node_selector: {kubernetes.io/hostname: h100-node-2}\n")
    code, doc = as_json(*["preempt", *WHAT_IF["preempt"]], "--config", pool)
    assert code == 0 and [n["node"] for n in doc["nodes"]] == ["h100-node-2"]
    assert doc["refused"] == {}
    code, doc = as_json(*["capacity", *WHAT_IF["capacity"]], "--config", pool)
    assert list(doc["nodes"]) == ["h100-node-2"]
    code, _, err = drax("preempt", *WHAT_IF["preempt"], "--config", pool,
                        "--node", "h100-node-1")
    assert code == 2
    assert err == ("drax preempt: --node: h100-node-1 outside the node pool "
                   "kubernetes.io/hostname=h100-node-2 (node_selector)\n")


def test_mode_and_feature_gates_come_from_the_file_unless_a_flag_is_given(
        tmp_path: Path) -> None:
    def devices(*argv: str) -> list[list[str]]:
        doc = as_json("allocate", "--objects", *SAMPLE, *argv, "--node", "h100-mig-node-1")[1]
        return [[r["device"] for r in c["results"]] for c in doc["nodes"][0]["claims"]]

    infer = ("--pod", "default/infer-0")
    advisor = config(tmp_path, "mode: advisor\n")
    # allocator mode packs the GPU next to the busy ones; upstream's first fit does not
    assert devices(*infer) == [["gpu-1"]]
    assert devices(*infer, "--config", advisor) == devices(*infer, "--mode", "advisor") == [
        ["gpu-7"]]
    assert devices(*infer, "--config", advisor, "--mode", "allocator") == [["gpu-1"]]
    notebook = ("--pod", "default/notebook-0")
    whole = config(tmp_path, "feature_gates: {DRAPartitionableDevices: false}\n")
    assert devices(*notebook) != [] and devices(*notebook, "--config", whole) == []
    assert devices(*notebook, "--config", whole,
                   "--feature-gates", "DRAPartitionableDevices=true") == devices(*notebook)


def test_simulate_takes_the_topology_section(tmp_path: Path) -> None:
    spread = config(tmp_path, "topology: {packing: spread}\n")
    _, by_file = as_json("simulate", *WHAT_IF["simulate"], "--config", spread)
    _, by_flag = as_json("simulate", *WHAT_IF["simulate"], "--packing", "spread")
    _, binpack = as_json("simulate", *WHAT_IF["simulate"])
    assert by_file == by_flag != binpack
    _, flag_wins = as_json("simulate", *WHAT_IF["simulate"], "--config", spread,
                           "--packing", "binpack")
    assert flag_wins == binpack


def test_preemption_turned_off_is_said_beside_the_answer(tmp_path: Path) -> None:
    off = config(tmp_path, "preemption: false\n")
    code, out, err = drax("preempt", *WHAT_IF["preempt"], "--config", off, "-o", "json")
    assert code == 0 and json.loads(out)["nodes"]
    assert err == ("drax preempt: the settings turn preemption off (preemption: false): this "
                   "is the search drax serve would run, but it preempts for no pod\n")
    assert drax("preempt", *WHAT_IF["preempt"], "-o", "json")[2] == ""


def test_the_servers_tls_files_need_not_exist_where_a_dry_run_runs(tmp_path: Path) -> None:
    deployed = config(tmp_path, "tls_cert_file: /etc/drax/tls/tls.crt\n"
                                "tls_private_key_file: /etc/drax/tls/tls.key\n")
    assert as_json("preempt", *WHAT_IF["preempt"], "--config", deployed)[0] == 0
    serve = build_parser().parse_args(["serve", "--config", deployed])
    assert serve.func(serve) == 2  # the server itself still needs them


@pytest.mark.parametrize("name", sorted(WHAT_IF))
@pytest.mark.parametrize(("text", "says"), [
    (None, "No such file or directory"),
    ("mode: [unclosed\n", "cannot parse"),
    ("- a list\n", "expected a mapping of settings, got list"),
    ("modes: advisor\n", "unknown setting 'modes'"),
    ("mode: greedy\n", "mode: expected one of allocator, advisor, got 'greedy'"),
    ("feature_gates: {DRAMagic: true}\n", "unknown feature gate(s) DRAMagic"),
    ("scheduler_name: []\n", "scheduler_name: expected non-empty names"),
    ("topology: {packing: tight}\n", "topology.packing: 'tight'"),
])
def test_a_bad_settings_file_exits_2_with_one_line(tmp_path: Path, name: str, text: str | None,
                                                   says: str) -> None:
    path = tmp_path / "drax.yaml"
    if text is not None:
        path.write_text(text)
    code, out, err = drax(name, *WHAT_IF[name], "--config", str(path))
    assert code == 2 and out == ""
    assert err.startswith(f"drax {name}: ") and says in err, err
    assert len(err.splitlines()) == 1


def test_a_bad_flag_is_named_by_its_flag() -> None:
    code, _, err = drax("preempt", *WHAT_IF["preempt"], "--feature-gates", "DRAMagic=true")
    assert code == 2 and err.startswith("drax preempt: --feature-gates: unknown feature gate")
