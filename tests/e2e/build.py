"""Build upstream Go components for the tests, once per go.sum and Go version.

The binaries live in `~/.cache/drax-e2e/<key>/bin` (or `$DRAX_E2E_CACHE`),
where the key hashes the module's go.mod and go.sum and `go version`: a
changed dependency or toolchain gets a fresh directory, an unchanged one is
reused without invoking Go at all. The build writes to a temporary directory
and renames it into place, so an interrupted build never looks complete.
Other test suites (tests/upstream) build their own modules the same way
through `build_module`.

`python -m tests.e2e.build` builds the control plane and helm and prints the
binaries' paths.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

E2E_DIR: Final = Path(__file__).resolve().parent
KUBE_COMMANDS: Final = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")


class BuildError(RuntimeError):
    """`go` is missing or the build failed; the message carries Go's output tail."""


def go_available() -> bool:
    return shutil.which("go") is not None


def cache_root() -> Path:
    return Path(os.environ.get("DRAX_E2E_CACHE", Path.home() / ".cache" / "drax-e2e"))


def _go_version() -> str:
    try:
        out = subprocess.run(["go", "version"], check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise BuildError(f"`go version` failed: {exc}") from None
    return out.stdout.strip()


def cache_key(module_dir: Path, *, cache_name: str, packages: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        digest.update((module_dir / name).read_bytes())
    for main in sorted([*module_dir.glob("cmd/*/*.go"), *module_dir.glob("*.go")]):
        digest.update(main.read_bytes())
    digest.update(_go_version().encode())
    digest.update("\0".join(packages).encode())
    return f"{cache_name}-{digest.hexdigest()[:16]}"


def build_module(module_dir: Path, packages: tuple[str, ...], cache_name: str, *,
                 test_binary: str | None = None) -> Path:
    """Build `packages` (e.g. "./cmd/...") of the Go module in `module_dir`; return the bin dir.

    With `test_binary`, the one package's tests are compiled (`go test -c`) into
    a binary of that name instead.
    """
    bin_dir = cache_root() / cache_key(module_dir, cache_name=cache_name, packages=packages) / "bin"
    if bin_dir.is_dir():
        return bin_dir
    bin_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="bin.", dir=bin_dir.parent))
    env = {**os.environ, "GOFLAGS": "-trimpath"}
    started = time.monotonic()
    command = (["go", "test", "-c", "-vet=off", "-o", str(staging / test_binary)] if test_binary
               else ["go", "build", "-o", str(staging) + "/"])
    proc = subprocess.run([*command, "-ldflags=-s -w", *packages],
                          cwd=module_dir, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise BuildError(f"go build in {module_dir} failed:\n{proc.stderr[-4000:]}")
    staging.rename(bin_dir)
    print(f"built {cache_name} in {time.monotonic() - started:.0f}s -> {bin_dir}", file=sys.stderr)
    return bin_dir


def control_plane_bins() -> dict[str, Path]:
    """Paths of etcd, kube-apiserver, kube-controller-manager and kube-scheduler."""
    kube = build_module(E2E_DIR, ("./cmd/...",), "kube")
    etcd = build_module(E2E_DIR / "etcd", ("./cmd/...",), "etcd")
    bins = {name: kube / name for name in KUBE_COMMANDS}
    bins["etcd"] = etcd / "etcd"
    return bins


def helm_bin() -> Path:
    """The helm CLI, built from helm.sh/helm/v4 (tests/e2e/helm/go.mod's `tool`)."""
    return build_module(E2E_DIR / "helm", ("helm.sh/helm/v4/cmd/helm",), "helm") / "helm"


if __name__ == "__main__":
    for name, path in {**control_plane_bins(), "helm": helm_bin()}.items():
        print(f"{name}\t{path}")
