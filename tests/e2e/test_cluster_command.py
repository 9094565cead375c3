"""`python -m tests.e2e.cluster up --profiles`: what it would start, without starting it.

The kube-scheduler configuration and drax's command line are built from the
parsed options alone, so these checks need no control plane (and no `go`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from app.cli import build_parser as drax_parser
from app.cli.serve import settings_from
from tests.e2e.cluster import (
    MANIFESTS,
    Cluster,
    build_parser,
    drax_argv,
    drax_scheduler_config,
    up_summary,
)


def cluster_of(argv: list[str], tmp_path: Path) -> Cluster:
    """The Cluster `up` would start for `argv`, with made-up ports."""
    args = build_parser().parse_args(["up", "--dir", str(tmp_path), *argv])
    return Cluster(dir=str(tmp_path), drax_mode=args.drax_mode, server="https://127.0.0.1:1",
                   drax_url="http://127.0.0.1:2", ports={"drax": 2}, replicas=args.replicas,
                   profiles=args.profiles)


def drax_settings(cluster: Cluster) -> tuple[str, ...]:
    """The scheduler_name drax would run with, read by drax's own parser."""
    argv = drax_argv(cluster)
    serve = argv.index("serve")
    return settings_from(drax_parser().parse_args(argv[serve:])).scheduler_name


@pytest.mark.parametrize("mode", ["allocator", "advisor"])
def test_every_profile_is_the_manifests_drax_profile_and_drax_serves_them_all(
        tmp_path: Path, mode: str) -> None:
    cluster = cluster_of(["--profiles", "drax,drax-gpu,drax", "--drax-mode", mode], tmp_path)
    assert cluster.profiles == ["drax", "drax-gpu"]
    config = drax_scheduler_config(cluster, tmp_path / "kubeconfig")
    assert [p["schedulerName"] for p in config["profiles"]] == ["drax", "drax-gpu"]
    first, second = config["profiles"]
    assert {**second, "schedulerName": "drax"} == first
    if mode == "allocator":
        manifest = yaml.safe_load((MANIFESTS / "kube-scheduler" / "scheduler-config.yaml")
                                  .read_text())
        assert first == manifest["profiles"][0]
    else:
        assert "plugins" not in first and "plugins" not in second
    assert drax_settings(cluster) == ("drax", "drax-gpu")
    assert ", profiles drax,drax-gpu" in up_summary(cluster)


def test_without_profiles_one_drax_profile(tmp_path: Path) -> None:
    cluster = cluster_of([], tmp_path)
    config = drax_scheduler_config(cluster, tmp_path / "kubeconfig")
    assert [p["schedulerName"] for p in config["profiles"]] == ["drax"]
    assert drax_settings(cluster) == ("drax",)
    assert ", profiles" not in up_summary(cluster)


@pytest.mark.parametrize("bad", ["", "drax,", ",drax"])
def test_empty_profile_names_are_a_usage_error(tmp_path: Path, bad: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["up", "--dir", str(tmp_path), "--profiles", bad])
    assert exited.value.code == 2
    assert "argument --profiles: expected non-empty names" in capsys.readouterr().err
