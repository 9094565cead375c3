"""The Dockerfile's install and entrypoint, run on this machine (no container engine here).

The build stage's RUN line runs as written, with only /opt/drax moved into a
temporary folder, on a copy of exactly the files its COPY lines name; then the
final stage's ENTRYPOINT and CMD run with its PATH, serving the bundled sample
(the wheel must carry it) on a free loopback port instead of 0.0.0.0:8888.
The static checks: a pinned base, a non-root user (the one the manifests run
as), and no pip, setuptools or wheel in what the final stage keeps.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import httpx
import yaml

from tests.server.test_server_cli import REPO, free_port, wait_ready
from tests.server.test_server_tls import FILTER

VENV: Final = "/opt/drax"


@dataclass
class Stage:
    base: str
    name: str = ""
    env: dict[str, str] = field(default_factory=dict)
    copies: list[list[str]] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    user: str = ""
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)


def stages() -> list[Stage]:
    """The Dockerfile's stages; each instruction on one line, exec-form ENTRYPOINT and CMD."""
    out: list[Stage] = []
    for line in (REPO / "Dockerfile").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        op, _, rest = line.partition(" ")
        if op == "FROM":
            base, _, name = rest.partition(" AS ")
            out.append(Stage(base=base.strip(), name=name.strip()))
            continue
        stage = out[-1]
        if op == "ENV":
            for item in shlex.split(rest):
                key, _, value = item.partition("=")
                stage.env[key] = value
        elif op == "COPY":
            stage.copies.append(shlex.split(rest))
        elif op == "RUN":
            stage.runs.append(rest)
        elif op == "USER":
            stage.user = rest
        elif op in ("ENTRYPOINT", "CMD"):
            setattr(stage, op.lower(), json.loads(rest))
    return out


def test_the_base_is_pinned_and_the_final_stage_is_lean_and_non_root() -> None:
    build, final = stages()
    for stage in (build, final):
        assert re.fullmatch(r"[\w./-]+(:\d+\.\d+\.\d+[\w.-]*|@sha256:[0-9a-f]{64})",
                            stage.base), stage.base
    assert final.base == build.base
    # The final stage keeps only the venv.
    assert final.copies == [[f"--from={build.name}", VENV, VENV]]
    assert all("uninstall" in run for run in final.runs)
    assert {"pip", "setuptools", "wheel"} <= set(shlex.split(final.runs[0]))
    assert "--without-pip" in build.runs[0]
    uid, _, gid = final.user.partition(":")
    assert int(uid) != 0 and int(gid) != 0
    deployment = next(d for d in yaml.safe_load_all(
        (REPO / "manifests" / "deployment.yaml").read_text()) if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == int(uid)
    (drax,) = (c for c in pod["containers"] if c["name"] == "drax")
    assert drax["image"] == "drax:0.1.0"


def test_the_entrypoint_serves_from_a_fresh_venv_installed_as_the_dockerfile_does(
        tmp_path: Path) -> None:
    build, final = stages()
    src = tmp_path / "src"
    src.mkdir()
    for copy in build.copies:
        *sources, dest = copy
        for name in sources:
            target = src / dest if dest not in ("./", ".") else src / name
            if (REPO / name).is_dir():
                shutil.copytree(REPO / name, target,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(REPO / name, target)
    venv = tmp_path / "opt" / "drax"
    # `python` of the build stage: an interpreter with pip (this one).
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    for run in build.runs:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", run.replace(VENV, str(venv))],
                              cwd=src, env={**os.environ, **build.env, "PATH": path},
                              capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not (venv / "bin" / "pip").exists()
    final_path = final.env["PATH"].replace(VENV, str(venv)).replace("$PATH", os.environ["PATH"])
    env = {**os.environ, **final.env, "PATH": final_path}
    executable = shutil.which(final.entrypoint[0], path=final_path)
    assert executable == str(venv / "bin" / final.entrypoint[0])
    cmd = list(final.cmd)
    port = free_port()
    cmd[cmd.index("--host") + 1] = "127.0.0.1"
    cmd[cmd.index("--port") + 1] = str(port)
    log = (tmp_path / "serve.log").open("w+")
    # Outside the repository, so nothing but the venv can provide `app`.
    proc = subprocess.Popen([executable, *final.entrypoint[1:], *cmd], cwd=tmp_path, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_ready(f"http://127.0.0.1:{port}", proc)
        answer = httpx.post(f"http://127.0.0.1:{port}/filter", json=FILTER, timeout=10).json()
        assert answer["NodeNames"] == ["h100-node-1"], answer
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.seek(0)
        output = log.read()
    assert "Traceback" not in output, output[-3000:]


def test_the_license_file_is_apache_2() -> None:
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert 'license = "Apache-2.0"' in (REPO / "pyproject.toml").read_text()
