"""Churn and faults on the real control plane, drax in allocator mode.

Each test has a pool of its own (two full nodes: 8 GPUs + 8 NICs each); the
module has a control plane of its own, since some of its tests kill components:
- a ResourceSlice deleted and re-created: its devices are gone (a pod that
  needs them stays Pending with drax's reason), then back (the pod is bound);
- a claim deleted: its devices are free again (a waiting pod gets them);
- drax SIGKILLed and restarted mid-workload: it rebuilds its state from the
  API, every pod is bound, no device is in two claims, and every claim is
  either allocated and reserved for its bound pod or untouched (no
  delete-protection finalizer without an allocation);
- the API server restarted: drax rides it out, its informers follow again (a
  node and slices created after the restart are used) and a new pod is bound.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from loadtest.generator import GPU_DRIVER
from tests.e2e.cluster import READY_TIMEOUT, Cluster, wait_apiserver_ready, wait_drax_ready
from tests.e2e.conftest import running_cluster
from tests.e2e.kube import Kube, wait_for
from tests.e2e.workload import (
    add_pool,
    add_templates,
    check_workload,
    claim,
    exclusive_devices,
    pod,
    pod_claim,
    unschedulable_message,
    wait_bound,
)

FINALIZER = "resource.kubernetes.io/delete-protection"


@pytest.fixture(scope="module")
def churn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("e2e-churn")) as running:
        yield running


@pytest.fixture()
def ckube(churn: Cluster) -> Iterator[Kube]:
    client = churn.kube()
    yield client
    client.close()


def _pool(kube: Kube, prefix: str) -> list[str]:
    nodes = add_pool(kube, prefix=prefix, nodes=2, seed=0)
    add_templates(kube, prefix=prefix)
    return nodes


def _on(node: str) -> dict[str, str]:
    return {"kubernetes.io/hostname": node}


def _slices(kube: Kube, node: str, driver: str) -> list[dict[str, Any]]:
    return [s for s in kube.list("ResourceSlice")
            if s["spec"].get("nodeName") == node and s["spec"]["driver"] == driver]


def _fresh_slice(listed: dict[str, Any]) -> dict[str, Any]:
    """A listed ResourceSlice as its driver creates it: no server-set metadata
    (list items carry no apiVersion and kind)."""
    meta = {k: v for k, v in listed["metadata"].items() if k in ("name", "labels", "annotations")}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": meta,
            "spec": listed["spec"]}


def _devices(claim_obj: dict[str, Any]) -> set[tuple[str, str, str]]:
    return set(exclusive_devices([claim_obj]))


def test_a_deleted_and_recreated_slice_takes_its_devices_away_and_back(ckube: Kube) -> None:
    node, _ = _pool(ckube, "sl")
    gpu_slices = _slices(ckube, node, GPU_DRIVER)
    assert gpu_slices
    for s in gpu_slices:
        ckube.delete("ResourceSlice", s["metadata"]["name"])
    ckube.create(pod("sl-8gpu", scheduler="drax", template="sl-8gpu", node_selector=_on(node)))
    message = wait_for("sl-8gpu PodScheduled=False with drax's reason",
                       lambda: (m := unschedulable_message(ckube, "sl-8gpu")) and "8 needed" in m
                       and m)
    assert f"node {node}" in message or "request \"gpu\"" in message, message

    for s in gpu_slices:
        ckube.create(_fresh_slice(s))
    # No ResourceSlice event requeues a pod an extender rejected (1.37's
    # wildcard set lacks ResourceSlice): drax touches the status of the pods it
    # rejected when slices appear (app/binder/requeue.py), which does.
    bound = wait_bound(ckube, ["sl-8gpu"], timeout=60)
    claims = check_workload(ckube, bound, nodes=[node])
    assert len(_devices(claims[0])) == 8


def test_a_deleted_claim_frees_its_devices(ckube: Kube) -> None:
    node, _ = _pool(ckube, "cl")
    ckube.create(claim("cl-first", "8gpu"))
    ckube.create(pod("cl-first", scheduler="drax", claim_name="cl-first", node_selector=_on(node)))
    first = wait_bound(ckube, ["cl-first"], timeout=60)["cl-first"]
    first_devices = _devices(pod_claim(ckube, first))
    assert len(first_devices) == 8

    ckube.create(claim("cl-second", "8gpu"))
    ckube.create(pod("cl-second", scheduler="drax", claim_name="cl-second",
                     node_selector=_on(node)))
    wait_for("cl-second PodScheduled=False", lambda: unschedulable_message(ckube, "cl-second"))

    # No kubelet: the pod goes at once (grace period 0); the resourceclaim
    # controller then drops it from reservedFor, deallocates the claim being
    # deleted and lifts the finalizer, and only then is the claim gone.
    ckube.delete("Pod", "cl-first", "default", grace_period_seconds=0)
    ckube.delete("ResourceClaim", "cl-first", "default")
    wait_for("claim cl-first gone", lambda: not any(
        c["metadata"]["name"] == "cl-first" for c in ckube.list("ResourceClaim", "default")))
    second = wait_bound(ckube, ["cl-second"], timeout=60)
    (claim_obj,) = check_workload(ckube, second, nodes=[node])
    assert _devices(claim_obj) == first_devices


def _claim_state(claim_obj: dict[str, Any], pods_by_uid: dict[str, dict[str, Any]]) -> str:
    """'allocated' (allocated, reserved for a bound pod) or 'untouched'; anything
    else fails the test."""
    name = claim_obj["metadata"]["name"]
    status = claim_obj.get("status", {})
    finalizers = claim_obj["metadata"].get("finalizers", [])
    if status.get("allocation") is None:
        assert FINALIZER not in finalizers, f"claim {name}: finalizer without an allocation"
        assert not status.get("reservedFor"), f"claim {name}: reserved without an allocation"
        return "untouched"
    assert FINALIZER in finalizers, f"claim {name}: allocated without the finalizer"
    reserved = [r["uid"] for r in status.get("reservedFor", [])]
    assert reserved, f"claim {name}: allocated but reserved for nobody"
    for uid in reserved:
        assert pods_by_uid.get(uid, {}).get("spec", {}).get("nodeName"), (
            f"claim {name}: reserved for a pod that is not bound")
    return "allocated"


def test_drax_killed_mid_workload_rebuilds_from_the_api(churn: Cluster, ckube: Kube) -> None:
    nodes = _pool(ckube, "kl")
    pool = {"e2e/pool": "kl"}
    # 16 GPUs, 16 NICs: 4 + 4 single GPUs, 2 x 2 GPUs with a NIC on their root,
    # 1 x 4 GPUs + 4 NICs = 16 GPUs, 6 NICs. Every pod fits.
    shapes = ["1gpu"] * 8 + ["2gpu-1nic-same-root"] * 2 + ["4gpu-4nic"]
    names = [f"kl-{i}-{shape}" for i, shape in enumerate(shapes)]
    for name, shape in zip(names, shapes, strict=True):
        ckube.create(pod(name, scheduler="drax", template=f"kl-{shape}", node_selector=pool))
    wait_for("a first kl pod bound", lambda: any(
        p["spec"].get("nodeName") for p in ckube.list("Pod", "default")
        if p["metadata"]["name"].startswith("kl-")), interval=0.05)
    churn.restart("drax", sig=signal.SIGKILL)
    wait_drax_ready(churn)

    bound = wait_bound(ckube, names, timeout=120)
    claims = check_workload(ckube, bound, nodes=nodes)
    pods_by_uid = {p["metadata"]["uid"]: p for p in bound.values()}
    for c in ckube.list("ResourceClaim", "default"):
        if c["metadata"]["name"].startswith("kl-"):
            _claim_state(c, pods_by_uid)
    assert sum(len(_devices(c)) for c in claims) == 16 + 6



def _leading_again(cluster: Cluster, kube: Kube, *, since: datetime) -> bool:
    """Whether the drax kube-scheduler holds its Lease again, renewed after `since`.

    With leader election on (scheduler-config.yaml), kube-scheduler exits on
    purpose ("Leaderelection lost") when it cannot renew its Lease within
    renewDeadline (10 s), and an API-server restart takes longer: the old
    server stops listening at once but drains its watches until it is killed.
    In the Deployment the kubelet restarts the container; here this does, for
    that exit only: any other one fails the test."""
    name = "drax-scheduler"
    if not cluster.alive(name):
        tail = Path(cluster.logs[name]).read_text(errors="replace")[-2000:]
        assert '"Leaderelection lost"' in tail, f"{name} exited otherwise:\n{tail}"
        cluster.spawn(name, cluster.commands[name])
        return False
    spec = kube.get("Lease", name, "kube-system")["spec"]
    renewed = spec.get("renewTime")
    return bool(spec.get("holderIdentity") and renewed
                and datetime.fromisoformat(renewed) > since)


def test_api_server_restart_drax_and_its_informers_recover(churn: Cluster, ckube: Kube
                                                           ) -> None:
    before = _pool(ckube, "ap")
    ckube.create(pod("ap-before", scheduler="drax", template="ap-1gpu",
                     node_selector={"e2e/pool": "ap"}))
    wait_bound(ckube, ["ap-before"], timeout=60)

    churn.restart("kube-apiserver")
    wait_apiserver_ready(churn)
    back = datetime.now(UTC)
    wait_for("the drax kube-scheduler leading again",
             lambda: _leading_again(churn, ckube, since=back), timeout=READY_TIMEOUT)
    assert churn.alive("drax"), "drax exited while the API server was away"
    # Objects that exist only after the restart: drax must have watched them.
    after = add_pool(ckube, prefix="ap2", nodes=1, seed=1)
    add_templates(ckube, prefix="ap2")
    ckube.create(pod("ap-after", scheduler="drax", template="ap2-2gpu-1nic-same-root",
                     node_selector=_on(after[0])))
    bound = wait_bound(ckube, ["ap-after"], timeout=90)
    check_workload(ckube, bound, nodes=after)
    assert set(before).isdisjoint(after)
