"""drax in allocator mode behind a real kube-scheduler and API server.

A pool of 8 generated nodes; pods of every loadtest claim shape (1/2/4/8 GPUs,
GPU+NIC on one PCIe root, MIG, shared GPU) through templates, plus a pod on a
named ResourceClaim, all with `schedulerName: drax`. Each must be bound with
its claim allocated on its node, reserved for it, constraints met and no
device in two claims; a pod that cannot fit stays Pending with drax's reason.
A claim drax allocated can be shared by a pod of the in-tree scheduler.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.cluster import Cluster, make_node_ready
from tests.e2e.kube import ApiError, Kube, load_documents, wait_for
from tests.e2e.workload import (
    add_pool,
    add_templates,
    check_workload,
    claim,
    create_too_big,
    pod,
    schedule_every_shape,
    unschedulable_message,
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
    pods = schedule_every_shape(kube, prefix=POOL, scheduler="drax", pool=POOL)
    check_workload(kube, pods, nodes=pool)


def test_a_template_pod_is_first_tried_once_its_claim_exists(pool: list[str], kube: Kube
                                                             ) -> None:
    """The profile keeps DynamicResources' PreEnqueue: kube-scheduler holds a template
    pod back until the resourceclaim controller has created its claim. With the
    whole plugin disabled, the first attempt came first and drax rejected every
    node ("is not created yet"): a FailedScheduling event and a requeue per pod."""
    names = [f"{POOL}-gated-{i}" for i in range(6)]
    for name in names:
        kube.create(pod(name, scheduler="drax", template=f"{POOL}-1gpu",
                        node_selector={"e2e/pool": POOL}))
    wait_bound(kube, names, timeout=60)
    failed = [(e["involvedObject"]["name"], e.get("message"))
              for e in kube.list("Event", "default")
              if e.get("involvedObject", {}).get("name") in names
              and e.get("reason") == "FailedScheduling"]
    assert failed == [], failed


def test_drax_filters_every_node_not_a_window_of_them(pool: list[str], kube: Kube) -> None:
    """Above 100 nodes kube-scheduler stops its filters once it has found a share of
    the nodes feasible (percentageOfNodesToScore, adaptive: 48 % of 251) and offers
    only those to the extender. With DynamicResources off every node passes the
    in-tree filters, so a pod whose devices are on one node outside that window was
    rejected on all it was offered. The profile asks for every node."""
    prefix = f"{POOL}-window"
    (devices,) = add_pool(kube, prefix=prefix, nodes=1, seed=6)
    bare = [f"{prefix}-bare-{i}" for i in range(250)]
    names = [f"{prefix}-{i}" for i in range(3)]
    try:
        for name in bare:
            make_node_ready(kube, name, labels={"e2e/pool": prefix})
        for name in names:
            kube.create(pod(name, scheduler="drax", template=f"{POOL}-1gpu",
                            node_selector={"e2e/pool": prefix}))
        bound = wait_bound(kube, names, timeout=60)
        assert {p["spec"]["nodeName"] for p in bound.values()} == {devices}
        failed = [(e["involvedObject"]["name"], e.get("message"))
                  for e in kube.list("Event", "default")
                  if e.get("involvedObject", {}).get("name") in names
                  and e.get("reason") == "FailedScheduling"]
        assert failed == [], failed
    finally:
        for name in names:
            kube.delete("Pod", name, "default")
        for name in bare:
            kube.delete("Node", name)


def test_a_pod_that_cannot_fit_stays_pending_with_drax_reason(pool: list[str], kube: Kube
                                                              ) -> None:
    name = f"{POOL}-too-big"
    create_too_big(kube, name, scheduler="drax", pool=POOL)
    message = wait_for(f"{name} PodScheduled=False", lambda: unschedulable_message(kube, name))
    assert kube.get("Pod", name, "default")["spec"].get("nodeName") is None
    # drax's per-node reason, passed through by kube-scheduler's FitError.
    assert f"claim default/{name}: request \"gpu\"" in message, message
    assert "9 needed" in message, message


def test_a_claim_drax_allocated_is_shared_by_an_in_tree_scheduled_pod(kube: Kube) -> None:
    """The in-tree PreBind stamps allocationTimestamp on a claim it reserves when the
    allocation has none (DRADeviceBindingConditions, on in 1.37), and the API server
    refuses that change to a set allocation: before drax stamped its allocations, the
    second pod failed PreBind on every attempt ("field cannot be modified once set")."""
    prefix = f"{POOL}-share"
    (node,) = add_pool(kube, prefix=prefix, nodes=1, seed=4)
    on_node = {"kubernetes.io/hostname": node}
    kube.create(claim(f"{prefix}-gpu", "1gpu"))
    kube.create(pod(f"{prefix}-drax", scheduler="drax", claim_name=f"{prefix}-gpu",
                    node_selector=on_node))
    wait_bound(kube, [f"{prefix}-drax"], timeout=60)
    allocation = kube.get("ResourceClaim", f"{prefix}-gpu", "default")["status"]["allocation"]
    assert allocation.get("allocationTimestamp"), allocation
    kube.create(pod(f"{prefix}-in-tree", scheduler="default-scheduler",
                    claim_name=f"{prefix}-gpu", node_selector=on_node))
    bound = wait_bound(kube, [f"{prefix}-in-tree"], timeout=60)
    assert bound[f"{prefix}-in-tree"]["spec"]["nodeName"] == node
    shared = kube.get("ResourceClaim", f"{prefix}-gpu", "default")
    assert sorted(r["name"] for r in shared["status"]["reservedFor"]) == [
        f"{prefix}-drax", f"{prefix}-in-tree"]
    assert shared["status"]["allocation"] == allocation
