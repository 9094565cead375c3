"""Build a test-only Go module once per go.mod/go.sum, mains and Go version.

Binaries land in `~/.cache/drax-e2e/<name>-<key>/bin` (or `$DRAX_E2E_CACHE`),
the cache the e2e harness uses: an unchanged key is reused without running Go
at all, so a warm start costs a hash. The build goes to a temporary directory
that is renamed into place, so an interrupted build never looks complete.
Kept API-compatible with the e2e harness's builder so that one of them can
replace the other.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path


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
    for main in sorted(module_dir.glob("cmd/*/*.go")):
        digest.update(main.read_bytes())
    digest.update(_go_version().encode())
    digest.update("\0".join(packages).encode())
    return f"{cache_name}-{digest.hexdigest()[:16]}"


def build_module(module_dir: Path, packages: tuple[str, ...], cache_name: str) -> Path:
    """Build `packages` (e.g. "./cmd/...") of the module in `module_dir`; return the bin dir."""
    if not go_available():
        raise BuildError("`go` is not on PATH")
    bin_dir = cache_root() / cache_key(module_dir, cache_name=cache_name, packages=packages) / "bin"
    if bin_dir.is_dir():
        return bin_dir
    bin_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="bin.", dir=bin_dir.parent))
    env = {**os.environ, "GOFLAGS": "-trimpath"}
    proc = subprocess.run(["go", "build", "-ldflags=-s -w", "-o", f"{staging}/", *packages],
                          cwd=module_dir, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise BuildError(f"go build in {module_dir} failed:\n{proc.stderr[-4000:]}")
    try:
        staging.rename(bin_dir)
    except OSError:
        # A concurrent build finished first; its result is as good as ours.
        shutil.rmtree(staging, ignore_errors=True)
    return bin_dir
