"""`drax simulate` on small generated clusters: the report's shape, drax against
first-fit on alignment and on keeping whole nodes for 8-GPU pods, bad input."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from app.cli import build_parser
from app.cli.simulate import Simulation
from app.extender import BindCause, BindFailure
from app.features import FeatureGates
from app.topology import TopologyConfig
from app.topology.plot import FREE, MIN_WIDTH, PALETTE
from loadtest.generator import generate_cluster, write_objects
from tests.cli.readme import shown_output
from tests.extender import cluster
from tests.inventory import objects

GPU_CLASS = "gpu.nvidia.com"


def template(name: str, gpus: int, nics: int = 0) -> dict[str, Any]:
    requests: list[dict[str, Any]] = [
        {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": gpus}}]
    if nics:
        requests.append({"name": "nic", "exactly": {"deviceClassName": "rdma.dra.net",
                                                    "count": nics}})
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": requests}}}}


def pod(index: int, template_name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{index:02d}-{template_name}", "namespace": "default",
                         "uid": f"uid-{index}"},
            "spec": {"resourceClaims": [{"name": "gpus",
                                         "resourceClaimTemplateName": template_name}]}}


TEMPLATES = [template("g1", 1), template("g2", 2), template("g2n2", 2, 2), template("g8", 8)]


def files(tmp_path: Path, *, nodes: int, shapes: list[str]) -> tuple[Path, Path]:
    cluster = write_objects(tmp_path / "cluster.yaml", generate_cluster(
        nodes=nodes, partitionable_fraction=0, shared_fraction=0))
    workload = write_objects(tmp_path / "workload.yaml",
                             [*TEMPLATES, *(pod(i, s) for i, s in enumerate(shapes))])
    return cluster, workload


def simulate(*argv: str) -> tuple[int, str, str]:
    args = build_parser().parse_args(["simulate", *argv])
    out, err = io.StringIO(), io.StringIO()
    code = args.func(args, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def report(cluster: Path, workload: Path, policy: str, seed: int = 0) -> dict[str, Any]:
    code, out, err = simulate("--objects", str(cluster), "--workload", str(workload),
                              "--policy", policy, "--seed", str(seed), "-o", "json")
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def test_report_shape(tmp_path: Path) -> None:
    cluster, workload = files(tmp_path, nodes=1, shapes=["g2n2", "g8"])
    doc = report(cluster, workload, "drax")
    assert set(doc) == {"policy", "placed", "unschedulable", "firstFailure", "pods", "summary"}
    assert (doc["policy"], doc["placed"], doc["unschedulable"], doc["firstFailure"]) == (
        "drax", 1, 1, 1)
    placed, failed = doc["pods"]
    assert set(placed) == set(failed) == {"pod", "node", "claims", "reason"}
    assert (placed["pod"], placed["node"], placed["reason"]) == (
        "default/p00-g2n2", "node-00000", None)
    [claim] = placed["claims"]
    assert claim["claim"] == "default/p00-g2n2-gpus"
    assert [r["device"] for r in claim["results"]] == [
        "gpu-0", "gpu-1", "pci-0000-13-00-0", "pci-0000-14-00-0"]
    assert failed["node"] is None and failed["claims"] == []
    assert failed["reason"].startswith("0/1 nodes are available: 1 ")
    summary = doc["summary"]
    assert summary["oneRootShare"] == 1.0 and summary["gpusWithoutSameRootNic"] == 0
    assert summary["strandedDevices"]["total"] == 0


def test_drax_aligns_where_first_fit_splits(tmp_path: Path) -> None:
    cluster, workload = files(tmp_path, nodes=1, shapes=["g1", "g2", "g2", "g2n2"])
    drax, first_fit = report(cluster, workload, "drax"), report(cluster, workload, "first-fit")
    assert drax["placed"] == first_fit["placed"] == 4
    assert drax["summary"]["oneRootShare"] == 1.0
    assert first_fit["summary"]["oneRootShare"] < 0.5
    assert drax["summary"]["oneRootMissed"] == 0 < first_fit["summary"]["oneRootMissed"]
    assert drax["summary"]["gpusWithoutSameRootNic"] == 0
    # The advisor places like drax but allocates like upstream.
    advisor = report(cluster, workload, "advisor")
    assert [p["claims"] for p in advisor["pods"]] == [p["claims"] for p in first_fit["pods"]]


def test_drax_keeps_a_whole_node_for_the_8_gpu_pod(tmp_path: Path) -> None:
    cluster, workload = files(tmp_path, nodes=2, shapes=["g1", "g2", "g1", "g2", "g8"])
    drax = report(cluster, workload, "drax")
    assert (drax["placed"], drax["firstFailure"]) == (5, None)
    nodes = [p["node"] for p in drax["pods"]]
    assert len(set(nodes[:4])) == 1 and nodes[4] != nodes[0]
    first_fit = [report(cluster, workload, "first-fit", seed) for seed in range(4)]
    assert min(r["placed"] for r in first_fit) < 5


def test_table_output(tmp_path: Path) -> None:
    cluster, workload = files(tmp_path, nodes=1, shapes=["g2", "g8"])
    code, out, _ = simulate("--objects", str(cluster), "--workload", str(workload),
                            "-o", "table")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["POD", "NODE", "TOPOLOGY", "DEVICES", "/", "REASON"]
    assert lines[1].split()[:3] == ["default/p00-g2", "node-00000", "root"]
    assert lines[2].split()[:3] == ["default/p01-g8", "-", "-"]
    assert "policy drax: 1 placed, 1 unschedulable, first failure at 1" in out


@pytest.mark.parametrize(("workload_text", "message"), [
    (None, "no such file"),
    ("kind: ResourceClaimTemplate\nmetadata: {name: t}\n", "no Pods to replay"),
    ("kind: Pod\nmetadata: {namespace: default}\n", "metadata.name"),
    ("kind: [", "cannot parse"),
])
def test_bad_input_is_a_clear_error(tmp_path: Path, workload_text: str | None,
                                    message: str) -> None:
    cluster, _ = files(tmp_path, nodes=1, shapes=[])
    workload = tmp_path / "bad.yaml"
    if workload_text is not None:
        workload.write_text(workload_text)
    code, out, err = simulate("--objects", str(cluster), "--workload", str(workload))
    assert code == 2 and out == ""
    assert err.startswith("drax simulate: ") and message in err


def test_plot_draws_devices_coloured_by_pod(tmp_path: Path) -> None:
    cluster, workload = files(tmp_path, nodes=2, shapes=["g2n2"])
    png = tmp_path / "plot.png"
    code, out, err = simulate("--objects", str(cluster), "--workload", str(workload),
                              "--plot", str(png), "-o", "json")
    assert code == 0, err
    node = json.loads(out)["pods"][0]["node"]
    with Image.open(png) as image:
        picture = image.convert("RGB")
    assert picture.width >= MIN_WIDTH and picture.height >= 250
    # the one pod has the palette's first colour, on its node's row only: the
    # layout is the one HolderPlot computes for the same rows
    pod_color = PALETTE[0]
    colours = {picture.getpixel((x, y)) for x in range(picture.width)
               for y in range(0, picture.height, 2)}
    assert pod_color in colours and FREE in colours
    title = picture.crop((0, 0, picture.width, 40))
    assert title.getcolors(maxcolors=100_000) and len(title.getcolors(100_000) or []) > 10
    assert node in ("node-00000", "node-00001")


def test_plot_to_an_unwritable_path_is_an_error(tmp_path: Path) -> None:
    cluster, workload = files(tmp_path, nodes=1, shapes=["g1"])
    code, _, err = simulate("--objects", str(cluster), "--workload", str(workload),
                            "--plot", str(tmp_path / "missing" / "plot.png"), "-o", "json")
    assert code == 1 and "cannot write" in err


def test_a_failed_bind_is_reported_with_its_message() -> None:
    inv = cluster.load(cluster.GPU_CLASS, cluster.gpu_node("n1"),
                       objects.claim("c", requests=[objects.exactly("gpu", "gpu", count=2)]),
                       objects.pod("p", uid="u", claims={"g": "c"}))
    sim = Simulation(inv, features=FeatureGates(), config=TopologyConfig(), policy="drax", seed=1)

    async def refuse(**kwargs: Any) -> BindFailure:
        return BindFailure("the claim went elsewhere", BindCause.CLAIM_TAKEN)

    sim._extender.bind = refuse  # type: ignore[method-assign]
    [placed] = asyncio.run(sim.run([cluster.the_pod(inv)]))
    assert placed.node is None
    assert placed.reason == "bind to n1 failed: the claim went elsewhere"


def test_readme_shows_the_real_packing_output() -> None:
    repo = Path(__file__).resolve().parents[2]
    block = shown_output(".venv/bin/drax simulate --objects app/sample "
                         "--workload app/sample/40-pods.yaml --packing spread")
    sample = repo / "app" / "sample"
    # the README's reader is at a terminal: a table
    code, out, err = simulate("--objects", str(sample), "--workload", str(sample / "40-pods.yaml"),
                              "--packing", "spread", "-o", "table")
    assert code == 0, err
    assert out == block
    # spread moves the last pod off the node binpack fills
    placed = {line.split()[0]: line.split()[1] for line in out.splitlines()[1:6]}
    assert placed["default/legacy-2gpu-0"] == "h100-mig-node-1"
    code, out, err = simulate("--objects", str(sample), "--workload", str(sample / "40-pods.yaml"),
                              "-o", "table")
    assert code == 0, err
    assert "default/legacy-2gpu-0  h100-node-1" in out
