"""`drax allocate` shows the chosen devices' root and NUMA node and the score,
so a misaligned choice stands out (advisor mode, taken GPU on the first root)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from app.cli import build_parser

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

POD = """
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  resourceClaims: [{name: c, resourceClaimName: c}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c, namespace: default}
spec:
  devices:
    requests:
    - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 2}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: taken, namespace: default}
spec:
  devices:
    requests:
    - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}
status:
  allocation:
    devices:
      results:
      - {request: gpu, driver: gpu.nvidia.com, pool: h100-node-1, device: gpu-0}
"""


def allocate(tmp_path: Path, *argv: str) -> str:
    (tmp_path / "pod.yaml").write_text(POD)
    args = build_parser().parse_args(["allocate", "--objects", str(EXAMPLES),
                                      str(tmp_path / "pod.yaml"), "--pod", "default/p", *argv])
    out = io.StringIO()
    assert args.func(args, out=out, err=io.StringIO()) == 0
    return out.getvalue()


def test_json_reports_root_numa_tier_and_score(tmp_path: Path) -> None:
    [node] = json.loads(allocate(tmp_path, "-o", "json"))["nodes"]
    topology = node["topology"]
    assert topology["tier"] == "one PCIe root"
    assert 0 < topology["score"] <= 1
    assert topology["devices"] == [
        {"device": "gpu.nvidia.com/h100-node-1/gpu-2", "pcieRoot": "pci0000:37",
         "numaNode": 0, "numaInferred": True},
        {"device": "gpu.nvidia.com/h100-node-1/gpu-3", "pcieRoot": "pci0000:37",
         "numaNode": 0, "numaInferred": True}]


def test_table_makes_a_misaligned_first_fit_obvious(tmp_path: Path) -> None:
    row = allocate(tmp_path, "-o", "table", "--mode", "advisor").splitlines()[2]
    assert "one NUMA node (" in row
    assert "gpu-1@pci0000:15/~numa0" in row and "gpu-2@pci0000:37/~numa0" in row
    aligned = allocate(tmp_path, "-o", "table").splitlines()[2]
    assert "one PCIe root (" in aligned
    assert int(aligned.split()[2]) > int(row.split()[2])
