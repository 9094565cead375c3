"""`drax serve` as a process, and how it loads inventory files."""

from __future__ import annotations

import json
import logging
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from app import runtime
from app.cli import build_parser, main
from app.cli import serve as serve_cli
from app.config import DEFAULT_SCHEDULER_NAMES, Settings
from app.inventory import Inventory
from app.runtime import SAMPLE_DIR, build_runtime, load_files
from app.sources import files
from app.sources.files import ParsedSlice, RawSlice, SourceError, iter_sourced
from loadtest import generator
from loadtest.bench import free_port

REPO = Path(__file__).resolve().parents[2]


def wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    """Wait until the drax process `proc` answers /readyz at `url` (60 s at most)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/readyz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
        time.sleep(0.1)


def test_drax_serve_process_answers_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    log = (tmp_path / "serve.log").open("w+")
    proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--port", str(port),
                             "--max-body-bytes", "2000"], cwd=REPO, stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, proc)
        r = httpx.post(f"{url}/scheduler/filter", json={
            "Pod": {"metadata": {"name": "infer-0", "namespace": "default"},
                    "spec": {"resourceClaims": [{"name": "gpus",
                                                 "resourceClaimTemplateName": "1gpu"}]}},
            "NodeNames": ["h100-node-1", "cpu-node-1"]})
        assert r.json()["NodeNames"] == ["h100-node-1"]
        too_big = httpx.post(f"{url}/filter", content=b"x" * 2001,
                             headers={"content-type": "application/json"})
        assert too_big.status_code == 413
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    log.seek(0)
    output = log.read()
    assert code == 0, output
    assert "serving sample inventory" in output
    assert "Application shutdown complete" in output


def test_bad_settings_exit_2_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--port", "70000"]) == 2
    assert "port: 70000 is not a TCP port" in capsys.readouterr().err
    # --port 0: the address is checked first, and 8888 may be taken on this machine
    assert main(["serve", "--port", "0", "--inventory", "/no/such/dir"]) == 2
    assert "/no/such/dir: no such file or directory" in capsys.readouterr().err
    assert main(["serve", "--port", "0", "--kubeconfig", "/no/such/kubeconfig"]) == 2
    assert "kubeconfig: /no/such/kubeconfig: no such file" in capsys.readouterr().err


def test_load_files_skips_invalid_objects_and_unknown_kinds(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "objs.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\n"
        "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: broken}\n"
        "spec: {driver: d}\n---\n"
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu}\nspec: {}\n")
    inventory = Inventory()
    with caplog.at_level(logging.WARNING):
        report = load_files(inventory, [tmp_path])
    assert (report.applied, report.invalid, report.unknown_kinds) == (1, 1, {"ConfigMap": 1})
    assert inventory.synced and "gpu" in inventory.classes
    messages = [r.getMessage() for r in caplog.records]
    assert any(f"{tmp_path / 'objs.yaml'}: skipping invalid ResourceSlice broken" in m
               for m in messages)
    assert any("kind ConfigMap" in m for m in messages)


def test_inventory_paths_replace_the_sample(tmp_path: Path) -> None:
    (tmp_path / "node.json").write_text('{"kind": "Node", "metadata": {"name": "n1"}}')
    runtime = build_runtime(Settings(inventory=(str(tmp_path),)))
    assert runtime.source == "files"
    assert runtime.inventory.node_names() == ["n1"]


def test_unreadable_inventory_file_is_a_source_error(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("kind: [\n")
    with pytest.raises(SourceError, match="cannot parse"):
        build_runtime(Settings(inventory=(str(tmp_path),)))


def start_warnings(caplog: pytest.LogCaptureFixture, *paths: Path) -> list[str]:
    with caplog.at_level(logging.WARNING, logger="app.runtime"):
        runtime = build_runtime(Settings(inventory=tuple(map(str, paths))))
    assert runtime.inventory.synced
    return [r.getMessage() for r in caplog.records
            if r.name == "app.runtime" and r.levelno == logging.WARNING]


def test_an_empty_inventory_is_warned_about(tmp_path: Path,
                                            caplog: pytest.LogCaptureFixture) -> None:
    assert start_warnings(caplog, tmp_path) == [
        f"{tmp_path}: no Nodes or node-local ResourceSlices loaded; drax is ready but every "
        "pod that needs devices will fail filter"]


def test_an_inventory_without_devices_is_warned_about(tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "node.yaml").write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n")
    assert start_warnings(caplog, tmp_path) == [
        f"{tmp_path}: 1 nodes but no devices (no ResourceSlices loaded); drax is ready but "
        "every pod that needs devices will fail filter"]


def test_the_sample_starts_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    assert start_warnings(caplog, SAMPLE_DIR) == []


def test_the_verb_deadline_is_described_as_the_code_behaves() -> None:
    # tests/extender/test_extender_deadline.py pins the behaviour: Error, no scores
    serve = build_parser()._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]
    [flag] = [a for a in serve._actions if "--verb-deadline" in a.option_strings]
    root = Path(__file__).resolve().parents[2]
    config = (root / "config" / "drax.yaml").read_text()
    readme = (root / "README.md").read_text()
    for text in (flag.help or "", config.replace("#", ""), readme):
        flat = " ".join(text.split())
        assert re.search(r"filter answers with `?Error`? [^.]{0,60}prioritize with no scores",
                         flat), text
        assert "scores so far" not in flat


def test_the_scheduler_names_default_is_described_from_the_settings(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serve_cli, "DEFAULT_SCHEDULER_NAMES", ("drax", "drax-gpu"))
    serve = build_parser()._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]
    [flag] = [a for a in serve._actions if "--scheduler-name" in a.option_strings]
    assert (flag.help or "").endswith("(default: drax,drax-gpu)")
    assert Settings().scheduler_name == DEFAULT_SCHEDULER_NAMES


def test_without_a_node_pool_a_json_slice_is_read_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No node pool: no head read before the slice (one pass over its JSON),
    # and the inventory holds what the head-first read gives.
    objects = list(generator.iter_cluster(nodes=4, partitionable_fraction=0.5))
    slices = [o for o in objects if o["kind"] == "ResourceSlice"]
    shaped_like_a_slice = {**slices[0], "kind": "Gadget"}
    generator.write_objects(tmp_path / "cluster.json", [*objects, shaped_like_a_slice])
    (tmp_path / "more.json").write_text(json.dumps({"kind": "ResourceSliceList", "items": [
        {k: v for k, v in {**slices[0], "metadata": {"name": "unkinded"}}.items()
         if k != "kind"}]}))
    with monkeypatch.context() as m:  # every slice's head read first, as with a node pool
        m.setattr(runtime, "iter_sourced",
                  lambda paths, **_: files.iter_sourced(paths, raw_slices=True))
        head_first = Inventory()
        assert load_files(head_first, [tmp_path]).unknown_kinds == {"Gadget": 1}
    heads: list[bytes] = []
    real = files._HEAD

    class Counting:
        def decode(self, raw: Any) -> Any:
            heads.append(bytes(raw))
            return real.decode(raw)

    monkeypatch.setattr(files, "_HEAD", Counting())
    parsed = [o.obj for o in iter_sourced([tmp_path], raw_slices=True, parsed_slices=True)]
    assert sum(type(o) is ParsedSlice for o in parsed) == len(slices) + 1
    assert not any(b'"ResourceSlice"' in h for h in heads)  # only the Nodes, classes, the Gadget
    assert any(b'"Gadget"' in h for h in heads)
    inventory = Inventory()
    report = load_files(inventory, [tmp_path])
    assert report.unknown_kinds == {"Gadget": 1} and report.invalid == 0
    assert dict(inventory._table("ResourceSlice")) == dict(head_first._table("ResourceSlice"))
    assert "unkinded" in dict(inventory._table("ResourceSlice"))


def test_json_lists_of_slices_load_as_their_yaml(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    objects = list(generator.iter_cluster(nodes=6, partitionable_fraction=0.5))
    broken = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
              "metadata": {"name": "broken"}, "spec": {"driver": "d"}}
    generator.write_objects(tmp_path / "json" / "cluster.json", [*objects, broken])
    generator.write_objects(tmp_path / "yaml" / "cluster.yaml", [*objects, broken])
    slices = [o for o in iter_sourced([tmp_path / "json"], raw_slices=True)
              if o.obj["kind"] == "ResourceSlice"]
    assert slices and all(type(o.obj) is RawSlice for o in slices)
    loaded = []
    for fmt in ("json", "yaml"):
        inventory = Inventory()
        with caplog.at_level(logging.WARNING):
            report = load_files(inventory, [tmp_path / fmt])
        assert report.invalid == 1
        assert any(f"cluster.{fmt}: skipping invalid ResourceSlice broken: ResourceSlice "
                   "broken spec.pool.name: required" in r.getMessage()
                   for r in caplog.records)
        loaded.append(inventory)
    by_json, by_yaml = (dict(i._table("ResourceSlice")) for i in loaded)
    assert by_json == by_yaml and len(by_json) == len(slices) - 1
