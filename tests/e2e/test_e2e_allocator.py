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

from tests.e2e.cluster import Cluster
from tests.e2e.kube import ApiError, Kube, load_documents, wait_for
from tests.e2e.workload import (
    add_pool,
    add_templates,
    check_workload,
    create_too_big,
    schedule_every_shape,
    unschedulable_message,
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
    pods = schedule_every_shape(kube, prefix=POOL, scheduler="drax", pool=POOL)
    check_workload(kube, pods, nodes=pool)


def test_a_pod_that_cannot_fit_stays_pending_with_drax_reason(pool: list[str], kube: Kube
                                                              ) -> None:
    name = f"{POOL}-too-big"
    create_too_big(kube, name, scheduler="drax", pool=POOL)
    message = wait_for(f"{name} PodScheduled=False", lambda: unschedulable_message(kube, name))
    assert kube.get("Pod", name, "default")["spec"].get("nodeName") is None
    # drax's per-node reason, passed through by kube-scheduler's FitError.
    assert f"claim default/{name}: request \"gpu\"" in message, message
    assert "9 needed" in message, message
