"""What every what-if command shares: bad input named where the user can find it."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from app.cli import build_parser

SAMPLE = Path(__file__).resolve().parents[2] / "app" / "sample"
UNNAMED_SLICE = ("apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {}\n"
                 "spec: {driver: d, nodeName: n, pool: {name: p, resourceSliceCount: 1}}\n")


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(list(argv))
    code = args.func(args, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("command", [
    ["allocate", "--pod", "default/train-0"],
    ["capacity", "--gpus", "1"],
    ["simulate", "--workload", str(SAMPLE / "40-pods.yaml")],
    ["selector", "true"],
])
def test_an_invalid_object_is_named_by_its_file(tmp_path: Path, command: list[str]) -> None:
    bad = tmp_path / "extra" / "slices.yaml"
    bad.parent.mkdir()
    bad.write_text(UNNAMED_SLICE)
    name, *rest = command
    code, out, err = run(name, "--objects", str(SAMPLE), str(bad), *rest)
    assert code == 2 and out == ""
    assert err.startswith(f"drax {name}: {bad}: ResourceSlice"), err
    assert "metadata.name: required" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("command", [
    ["allocate", "--pod", "default/train-0"],
    ["capacity", "--gpus", "1"],
    ["simulate", "--workload", str(SAMPLE / "40-pods.yaml")],
    ["preempt", "--pod", "default/train-0"],
    ["selector", "true"],
])
def test_a_file_that_does_not_parse_is_one_line_with_where(tmp_path: Path,
                                                           command: list[str]) -> None:
    bad = tmp_path / "slices.yaml"
    bad.write_text("kind: ResourceSlice\nmetadata: {name: [s}\n")
    name, *rest = command
    code, out, err = run(name, "--objects", str(SAMPLE), str(bad), *rest)
    assert code == 2 and out == ""
    assert err.startswith(f"drax {name}: {bad}: cannot parse: line 2 column "), err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize("special", ["fifo", "/dev/null"])
def test_a_path_neither_file_nor_folder_is_named_as_what_it_is(tmp_path: Path,
                                                               special: str) -> None:
    if special == "fifo":
        special = str(tmp_path / "objects.yaml")
        os.mkfifo(special)
    code, out, err = run("allocate", "--pod", "default/train-0", "--objects", special)
    assert (code, out, err) == (2, "", f"drax allocate: {special}: not a regular file or folder\n")
    code, out, err = run("allocate", "--pod", "default/train-0",
                         "--objects", str(tmp_path / "none.yaml"))
    assert err == f"drax allocate: {tmp_path / 'none.yaml'}: no such file or directory\n"


def test_an_invalid_pod_of_a_workload_is_named_by_its_file(tmp_path: Path) -> None:
    workload = tmp_path / "workload.yaml"
    workload.write_text("apiVersion: v1\nkind: Pod\nmetadata: {namespace: default}\nspec: {}\n")
    code, _, err = run("simulate", "--objects", str(SAMPLE), "--workload", str(workload))
    assert code == 2 and err.startswith(f"drax simulate: {workload}: Pod"), err


def test_v1beta1_objects_are_read_as_the_api_server_converts_them() -> None:
    # a v1beta1 slice (devices under `basic`), class and template (request fields
    # on the request): two A100s with a selector on their attribute
    objects = str(Path(__file__).with_name("v1beta1-objects.yaml"))
    code, out, err = run("capacity", "--objects", objects, "--template", "default/two",
                         "-o", "json")
    assert code == 0, err
    assert json.loads(out)["nodes"] == {"old-node": 1}
