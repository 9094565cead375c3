"""The allocator on the bundled sample cluster (real driver-shaped slices, real
CEL class selectors): whole GPUs with NICs on a PCIe root, and MIG partitions
sharing counters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from app.allocator import AllocatedState, AllocationOutcome, allocate
from app.features import FeatureGates
from app.model import ResourceClaim, parse_object
from tests.allocator.helpers import node_view, parse_classes

SAMPLE = Path(__file__).resolve().parents[2] / "app" / "sample"


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return [d for f in sorted(SAMPLE.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text())
            if d]


def _claims(objects: list[dict[str, Any]], template: str, n: int) -> list[ResourceClaim]:
    spec = next(o for o in objects if o["kind"] == "ResourceClaimTemplate"
                and o["metadata"]["name"] == template)["spec"]["spec"]
    return [parse_object("ResourceClaim", {"metadata": {"name": f"{template}-{i}",
                                                        "namespace": "default"}, "spec": spec})
            for i in range(n)]


def _allocate(objects: list[dict[str, Any]], node: str,
              claims: list[ResourceClaim]) -> AllocationOutcome:
    nodes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Node"}
    view = node_view([o for o in objects if o["kind"] == "ResourceSlice"],
                     parse_object("Node", nodes[node]))
    return allocate(claims, node_view=view,
                    classes=parse_classes(o for o in objects if o["kind"] == "DeviceClass"),
                    allocated=AllocatedState(), features=FeatureGates())


def _root(outcome: AllocationOutcome, claim_index: int) -> set[str]:
    return {d.attributes["resource.kubernetes.io/pcieRoot"].value
            for d in outcome.picks[3 * claim_index:3 * claim_index + 3]}


def test_two_gpus_and_a_nic_share_a_pcie_root(objects: list[dict[str, Any]]) -> None:
    outcome = _allocate(objects, "h100-node-1", _claims(objects, "2gpu-1nic-same-pcieroot", 1))
    assert outcome.feasible, outcome.reason or outcome.error
    results = outcome.claims[0].allocation.results
    assert [(r.request, r.driver) for r in results] == [
        ("gpu", "gpu.nvidia.com"), ("gpu", "gpu.nvidia.com"), ("nic", "dra.net")]
    assert len(_root(outcome, 0)) == 1


def test_four_roots_hold_four_such_claims_not_five(objects: list[dict[str, Any]]) -> None:
    four = _allocate(objects, "h100-node-1", _claims(objects, "2gpu-1nic-same-pcieroot", 4))
    assert four.feasible
    assert len(set().union(*(_root(four, i) for i in range(4)))) == 4
    five = _allocate(objects, "h100-node-1", _claims(objects, "2gpu-1nic-same-pcieroot", 5))
    assert not five.feasible and five.error is None
    assert five.reason is not None
    assert "matchAttribute resource.kubernetes.io/pcieRoot" in five.reason


def test_eight_gpus_fit_once(objects: list[dict[str, Any]]) -> None:
    assert _allocate(objects, "h100-node-1", _claims(objects, "8gpu", 1)).feasible
    outcome = _allocate(objects, "h100-node-1",
                        _claims(objects, "8gpu", 1) + _claims(objects, "1gpu", 1))
    assert not outcome.feasible
    assert outcome.reason is not None and "cannot be satisfied together" in outcome.reason


def test_mig_partitions_and_whole_gpus_share_counters(objects: list[dict[str, Any]]) -> None:
    mig = [parse_object("ResourceClaim", o) for o in objects
           if o["kind"] == "ResourceClaim" and o["metadata"]["name"] == "mig-1g10gb"]
    alone = _allocate(objects, "h100-mig-node-1", mig)
    assert alone.feasible, alone.reason or alone.error
    assert "-mig-" in alone.picks[0].name
    whole = _allocate(objects, "h100-mig-node-1", _claims(objects, "8gpu", 1))
    assert whole.feasible, whole.reason or whole.error
    both = _allocate(objects, "h100-mig-node-1", mig + _claims(objects, "8gpu", 1))
    assert not both.feasible and both.error is None
