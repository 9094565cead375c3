"""The API server's own conversion of resource.k8s.io objects to v1, as a test oracle.

`conversion/cmd/convert` is a thin Go main over k8s.io/kubernetes v1.37.2's
scheme (see its doc); this builds it like the other upstream components
(cached by go.sum, `tests.e2e.build`) and runs it on a batch of objects.
`python -m tests.model.upstream_conversion --build` builds it ahead, for CI.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from tests.e2e.build import build_module

MODULE: Final = Path(__file__).resolve().parent / "conversion"


def binary() -> Path:
    return build_module(MODULE, ("./cmd/...",), "conversion") / "convert"


def to_v1(objects: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each object as the API server serves it in resource.k8s.io/v1, or {"error": ...}."""
    lines = "".join(json.dumps(o) + "\n" for o in objects)
    done = subprocess.run([str(binary())], input=lines, capture_output=True, text=True,
                          timeout=120, check=True)
    # the encoder ends each object with a newline of its own
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


if __name__ == "__main__":
    if sys.argv[1:] != ["--build"]:
        raise SystemExit("usage: python -m tests.model.upstream_conversion --build")
    print(binary())
