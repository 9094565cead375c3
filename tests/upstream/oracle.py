"""Client of the upstream oracle (tests/upstream/cmd/oracle): one Go process, many requests.

The binary links k8s.io/dynamic-resource-allocation v0.37.2 and answers JSON
lines (see its main.go for the ops). `Oracle` starts it once and keeps the
pipe open; `batch` writes a whole list of requests before reading any answer
(the process answers in order and flushes only when its input runs dry), so a
differential run pays one round trip per batch instead of per expression.
A writer thread feeds stdin so a large batch cannot deadlock on full pipes.

`python -m tests.upstream.oracle --build` builds (or finds cached) and prints
the binary's path on its last line.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Final

from tests.e2e.build import build_module

MODULE_DIR: Final = Path(__file__).resolve().parent
BINARY: Final = "oracle"


def build() -> Path:
    """The oracle binary, built on first use (raises BuildError)."""
    return build_module(MODULE_DIR, ("./cmd/oracle",), "upstream-oracle") / BINARY


class OracleError(RuntimeError):
    """The oracle process died or answered something that is not a JSON line."""


class Oracle:
    """A running oracle process; not thread-safe (one caller at a time)."""

    def __init__(self, binary: Path | None = None) -> None:
        self.binary = binary or build()
        self._proc = subprocess.Popen([str(self.binary)], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True, bufsize=1 << 20)

    def request(self, req: dict[str, Any]) -> dict[str, Any]:
        return self.batch([req])[0]

    def batch(self, reqs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        payload = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in reqs)
        stdin = self._proc.stdin
        failure: list[BaseException] = []

        def write() -> None:
            try:
                stdin.write(payload)
                stdin.flush()
            except OSError as exc:
                failure.append(exc)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        answers = []
        for _ in reqs:
            line = self._proc.stdout.readline()
            if not line:
                raise OracleError(f"oracle exited (code {self._proc.poll()}) {failure}")
            answers.append(json.loads(line))
        writer.join()
        return answers

    def cel(self, expression: str, device: dict[str, Any],
            features: dict[str, bool] | None = None) -> dict[str, Any]:
        return self.request({"op": "cel", "expression": expression, "device": device,
                             "features": features or {}})

    def allocate(self, *, objects: list[dict[str, Any]], claims: list[dict[str, Any]],
                 node: str, features: dict[str, bool] | None = None,
                 timing: bool = False) -> dict[str, Any]:
        return self.request({"op": "allocate", "objects": objects, "claims": claims,
                             "node": node, "features": features or {}, "timing": timing})

    def version(self) -> dict[str, Any]:
        return self.request({"op": "version"})

    def close(self) -> None:
        if self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def __enter__(self) -> Oracle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.upstream.oracle")
    parser.add_argument("--build", action="store_true",
                        help="build the oracle (cached) and print its path last")
    args = parser.parse_args(argv)
    if not args.build:
        parser.print_help()
        return 2
    started = time.monotonic()
    binary = build()
    print(f"oracle ready in {time.monotonic() - started:.1f}s")
    print(binary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
