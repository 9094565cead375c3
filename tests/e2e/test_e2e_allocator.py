"""drax in allocator mode behind a real kube-scheduler and API server.

A pool of 8 generated nodes; pods of every loadtest claim shape (1/2/4/8 GPUs,
GPU+NIC on one PCIe root, MIG, shared GPU) through templates, plus a pod on a
named ResourceClaim, all with `schedulerName: drax`. Each must be bound with
its claim allocated on its node, reserved for it, constraints met and no
device in two claims; a pod that cannot fit stays Pending with drax's reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtest.generator import SHAPES
from tests.e2e.cluster import Cluster
from tests.e2e.kube import ApiError, Kube, load_documents, wait_for
from tests.e2e.workload import (
    add_pool,
    add_templates,
    check_allocation,
    claim,
    exclusive_devices,
    pod,
    pod_claim,
    published_devices,
    wait_bound,
)

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
POOL = "alloc"


def test_manifests_pass_server_side_dry_run(kube: Kube) -> None:
    checked = 0
    for path in sorted(MANIFESTS.glob("*.yaml")):
        for doc in load_documents(path):
            if doc.get("kind") == "KubeSchedulerConfiguration":
                continue  # loaded by the running drax-scheduler (test below), not an API object
            try:
                kube.create(doc, dry_run=True)
            except ApiError as exc:
                # AlreadyExists is decided after validation and admission passed.
                assert exc.status == 409, f"{path.name} {doc['kind']}: {exc}"
            checked += 1
    assert checked >= 8


def test_drax_scheduler_runs_the_manifest_config(cluster: Cluster, kube: Kube) -> None:
    log = Path(cluster.logs["drax-scheduler"]).read_text(errors="replace")
    assert "drax" in log
    lease = kube.get("Lease", "drax-scheduler", "kube-system")
    assert lease["spec"]["holderIdentity"]


@pytest.fixture(scope="module")
def pool(cluster: Cluster) -> list[str]:
    kube = cluster.kube()
    try:
        nodes = add_pool(kube, prefix=POOL, nodes=8, seed=3)
        add_templates(kube, prefix=POOL)
    finally:
        kube.close()
    return nodes


def test_every_shape_is_bound_with_a_valid_allocation(pool: list[str], kube: Kube) -> None:
    names = []
    for shape in SHAPES:
        for i in range(2):
            name = f"{POOL}-{shape}-{i}"
            kube.create(pod(name, scheduler="drax", template=f"{POOL}-{shape}",
                            node_selector={"e2e/pool": POOL}))
            names.append(name)
    kube.create(claim(f"{POOL}-named", "2gpu-1nic-same-root"))
    kube.create(pod(f"{POOL}-named", scheduler="drax", claim_name=f"{POOL}-named",
                    node_selector={"e2e/pool": POOL}))
    names.append(f"{POOL}-named")
    pods = wait_bound(kube, names)
    devices = published_devices(kube)
    claims = []
    for name, pod_obj in pods.items():
        assert pod_obj["spec"]["nodeName"] in pool, name
        claim_obj = pod_claim(kube, pod_obj)
        check_allocation(claim_obj, pod_obj=pod_obj, devices_by_key=devices)
        claims.append(claim_obj)
    taken = exclusive_devices(claims)
    assert len(taken) == len(set(taken)), "a device is in two claims"


def test_a_pod_that_cannot_fit_stays_pending_with_drax_reason(pool: list[str], kube: Kube
                                                              ) -> None:
    name = f"{POOL}-too-big"
    spec = {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "count": 9}}]}}
    kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": name, "namespace": "default"}, "spec": spec})
    kube.create(pod(name, scheduler="drax", claim_name=name, node_selector={"e2e/pool": POOL}))

    def unschedulable() -> str | None:
        conditions = kube.get("Pod", name, "default").get("status", {}).get("conditions", [])
        for c in conditions:
            if c["type"] == "PodScheduled" and c["status"] == "False":
                return str(c.get("message", ""))
        return None

    message = wait_for(f"{name} PodScheduled=False", unschedulable)
    assert kube.get("Pod", name, "default")["spec"].get("nodeName") is None
    # drax's per-node reason, passed through by kube-scheduler's FitError.
    assert f"claim default/{name}: request \"gpu\"" in message, message
    assert "9 needed" in message, message
