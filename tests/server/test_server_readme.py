"""The README's walk-through, replayed top to bottom on one `drax serve` process.

Every curl of "Try it against the sample cluster" is sent in order to a
freshly started server, and its answer must be the one the README shows:
later steps see the binds of earlier ones, as a reader's server does.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.server.test_server_cli import free_port, wait_ready

REPO = Path(__file__).resolve().parents[2]
SECTION = ("## Try it against the sample cluster", "### How many more fit")
CURL = re.compile(r"^curl -s -X POST http://127\.0\.0\.1:8888(?P<path>\S+) "
                  r"-H 'Content-Type: application/json' -d '(?P<body>.*)'$")


def walk_through() -> list[tuple[str, str, str]]:
    """(path, body, answer shown) of every curl in the section, in order."""
    readme = (REPO / "README.md").read_text()
    start = readme.index(SECTION[0])
    lines = readme[start:readme.index(SECTION[1], start)].splitlines()
    steps = []
    for i, line in enumerate(lines):
        if not line.startswith("curl "):
            continue
        m = CURL.match(line)
        assert m, f"README curl not in the walk-through's form: {line}"
        if lines[i + 1].startswith("# "):
            shown = lines[i + 1][2:]
        else:
            block = next(j for j in range(i + 1, len(lines)) if lines[j] == "```json")
            shown = lines[block + 1]
        steps.append((m["path"], m["body"], shown))
    return steps


@pytest.fixture()
def serve(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    log = (tmp_path / "serve.log").open("w+")
    proc = subprocess.Popen([sys.executable, "-m", "app", "serve", "--port", str(port)],
                            cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, proc)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_the_walk_through_answers_as_shown_top_to_bottom(serve: str) -> None:
    steps = walk_through()
    assert [path.rsplit("/", 1)[1] for path, _, _ in steps].count("bind") == 2
    with httpx.Client(base_url=serve, timeout=30) as client:
        for path, body, shown in steps:
            answer = client.post(path, content=body,
                                 headers={"content-type": "application/json"})
            assert answer.text == shown, f"POST {path} {body}"


def test_a_bind_before_the_pods_filter_is_refused_as_the_readme_says(serve: str) -> None:
    answer = httpx.post(f"{serve}/scheduler/bind", json={
        "PodName": "train-0", "PodNamespace": "default", "PodUID": "u-train-0",
        "Node": "h100-node-1"}).json()
    assert re.fullmatch(r"pod default/train-0 \(uid u-train-0\) is unknown to drax: .*",
                        answer["Error"])
    assert "`pod ... is unknown to drax`" in (REPO / "README.md").read_text()
