"""`drax allocate` run as a real command on the shared examples and the sample cluster."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SAMPLE = Path(__file__).resolve().parents[2] / "app" / "sample"


def drax(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", "allocate", *args],
                          capture_output=True, text=True, timeout=120, check=False)


def test_examples_pod_from_template_fits_on_one_pcie_root() -> None:
    run = drax("--objects", str(EXAMPLES), "--pod", "default/train-0")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)  # JSON is the default when stdout is not a terminal
    assert doc["pod"] == "default/train-0"
    [node] = doc["nodes"]
    assert node["node"] == "h100-node-1"
    assert node["feasible"] is True and node["reason"] is None and node["error"] is None
    assert isinstance(node["score"], int) and 0 <= node["score"] <= 10
    [claim] = node["claims"]
    assert claim["claim"] == "default/train-0-gpus-nic"
    assert [r["request"] for r in claim["results"]] == ["gpu", "gpu", "nic"]
    assert claim["nodeSelector"] == {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["h100-node-1"]}]}]}
    assert set(claim["results"][0]) == {"request", "driver", "pool", "device", "adminAccess",
                                        "tolerations", "consumedCapacity", "shareID"}
    devices = {r["device"] for r in claim["results"]}
    # gpu-0, gpu-1 and the first NIC share pci0000:15 in the example slices
    assert devices == {"gpu-0", "gpu-1", "pci-0000-19-00-0"}


def test_table_output_and_node_selection() -> None:
    run = drax("--objects", str(EXAMPLES), "--pod", "default/train-0", "-o", "table",
               "--node", "h100-node-1", "--node", "elsewhere")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "pod default/train-0"
    assert lines[2].split()[:3] == ["h100-node-1", "yes", lines[2].split()[2]]
    assert lines[3].split()[:3] == ["elsewhere", "no", "-"]
    assert "unknown to drax" in lines[3]


def test_sample_cluster_explains_nodes_without_matching_devices() -> None:
    run = drax("--objects", str(SAMPLE), "--pod", "default/notebook-0", "-o", "json")
    assert run.returncode == 0, run.stderr
    nodes = {n["node"]: n for n in json.loads(run.stdout)["nodes"]}
    assert nodes["h100-mig-node-1"]["feasible"] is True
    assert nodes["cpu-node-1"]["feasible"] is False
    assert "0 devices match class" in nodes["cpu-node-1"]["reason"]


def test_feature_gates_reach_the_allocator(tmp_path: Path) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text("""
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
    - name: gpu
      firstAvailable:
      - {name: one, deviceClassName: gpu.nvidia.com}
""")
    run = drax("--objects", str(EXAMPLES), str(pod), "--pod", "default/p",
               "--feature-gates", "DRAPrioritizedList=false")
    assert run.returncode == 0, run.stderr
    [node] = json.loads(run.stdout)["nodes"]
    assert node["feasible"] is False
    assert node["error"] is not None
    run = drax("--objects", str(EXAMPLES), str(pod), "--pod", "default/p")
    [node] = json.loads(run.stdout)["nodes"]
    assert node["feasible"] is True
    assert node["claims"][0]["results"][0]["request"] == "gpu/one"


def test_unreadable_input_exits_2_with_a_message(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: [unclosed\n")
    run = drax("--objects", str(broken), "--pod", "default/p")
    assert run.returncode == 2
    assert "broken.yaml" in run.stderr and run.stdout == ""

    invalid = tmp_path / "invalid.yaml"
    invalid.write_text("kind: ResourceSlice\nmetadata: {name: s}\nspec: {driver: d}\n")
    run = drax("--objects", str(invalid), "--pod", "default/p")
    assert run.returncode == 2
    assert "ResourceSlice s" in run.stderr

    run = drax("--objects", str(tmp_path / "absent"), "--pod", "default/p")
    assert run.returncode == 2 and "no such file" in run.stderr

    run = drax("--objects", str(EXAMPLES), "--pod", "default/ghost")
    assert run.returncode == 2 and "default/ghost" in run.stderr

    run = drax("--objects", str(EXAMPLES), "--pod", "nonamespace")
    assert run.returncode == 2 and "NAMESPACE/NAME" in run.stderr

    run = drax("--objects", str(EXAMPLES), "--pod", "default/train-0",
               "--feature-gates", "NoSuchGate=true")
    assert run.returncode == 2 and "NoSuchGate" in run.stderr
