"""Device-aware preemption on the real control plane, both modes, and what
`default-scheduler` does with the same pods.

A pool of 2 nodes (8 GPUs and 8 NICs each, 2 GPUs and 2 NICs per PCIe root)
is filled with low-priority 1-GPU pods (claims from a template). Then:

- a high-priority 2 GPU + 1 NIC same-root pod: exactly 2 victims, on one
  root of one node, and it binds with its devices aligned;
- a high-priority 8-GPU pod: exactly the other node's 8 pods go; a
  low-priority pod created right behind it does not get those GPUs;
- a `preemptionPolicy: Never` pod preempts nothing;
- the same 2 GPU + 1 NIC pod through `default-scheduler` stays Pending and
  nothing is preempted (kube-scheduler 1.37 never preempts for DRA devices).

There is no kubelet: the test plays it for deletions (a terminating pod of the
pool is removed with grace 0, as a kubelet would once its containers stopped);
the resource-claim controller then deallocates the victims' claims. Advisor
mode (the in-tree DynamicResources plugin allocates) runs the 2 GPU + 1 NIC
case on a control plane of its own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from loadtest.generator import GPU_DRIVER, NIC_DRIVER
from tests.e2e.cluster import Cluster
from tests.e2e.conftest import running_cluster
from tests.e2e.kube import Kube
from tests.e2e.preemption import (
    HIGH,
    LOW,
    NEVER,
    Kubelet,
    alive,
    bound_node,
    devices_of,
    drax_metric,
    fill,
    pod,
    priority_classes,
    root_of,
    templates,
)
from tests.e2e.workload import add_pool, published_devices


def check_pair_preemption(kube: Kube, cluster: Cluster, prefix: str) -> dict[str, Any]:
    """The 2 GPU + 1 NIC case on a full pool; returns what was seen."""
    kubelet = Kubelet(kube, prefix)
    started = time.monotonic()
    kube.create(pod(prefix, "pair", "pair", priority_class=HIGH))
    name = f"{prefix}-pair"
    node = kubelet.until(f"{name} bound", lambda: bound_node(kube, name), timeout=180)
    bound_after = time.monotonic() - started
    victims = kubelet.removed
    assert len(victims) == 2, victims
    assert {v["node"] for v in victims.values()} == {node}, (victims, node)
    for v in victims.values():
        cond = v["condition"]
        assert cond and cond["reason"] == "PreemptionByScheduler", v
        assert name in cond["message"], cond
    published = published_devices(kube)
    mine = devices_of(kube, name)
    gpus = [d for d in mine if d[0] == GPU_DRIVER]
    nics = [d for d in mine if d[0] == NIC_DRIVER]
    assert len(gpus) == 2 and len(nics) == 1, mine
    assert len({root_of(published, d) for d in mine}) == 1, mine
    freed = sorted(d for v in victims.values() for d in v["devices"])
    assert sorted(gpus) == freed, (gpus, freed)
    events = [e for e in kube.list("Event", "default")
              if e.get("involvedObject", {}).get("name") in (name, *victims)
              and e.get("reason") in ("Preempted", "Preempting")]
    assert {e["involvedObject"]["name"] for e in events} >= {name, *victims}, events
    return {"node": node, "victims": sorted(victims), "seconds": round(bound_after, 1)}


@pytest.fixture(scope="module")
def pool(cluster: Cluster) -> Iterator[list[str]]:
    kube = cluster.kube()
    try:
        priority_classes(kube)
        nodes = add_pool(kube, prefix="pre", nodes=2, seed=11)
        templates(kube, "pre")
        fill(kube, "pre", nodes)
        yield nodes
    finally:
        kube.close()


def test_a_2gpu_nic_pod_preempts_two_pods_on_one_root_and_binds_aligned(
        pool: list[str], cluster: Cluster, kube: Kube) -> None:
    seen = check_pair_preemption(kube, cluster, "pre")
    assert seen["node"] in pool
    assert drax_metric(cluster, "drax_preemptions_total") >= 1


def test_an_8gpu_pod_takes_one_whole_node_and_a_low_pod_behind_it_gets_nothing(
        pool: list[str], cluster: Cluster, kube: Kube) -> None:
    kubelet = Kubelet(kube, "pre")
    # The node without the pair pod is the only one where 8 GPUs can be freed.
    pair_node = bound_node(kube, "pre-pair")
    other = next(n for n in pool if n != pair_node)
    before = {p["metadata"]["name"] for p in alive(kube, "pre")
              if p["spec"].get("nodeName") == other}
    assert len(before) == 8
    kube.create(pod("pre", "eight", "eight", priority_class=HIGH))
    kube.create(pod("pre", "thief", "one", priority_class=LOW))
    node = kubelet.until("pre-eight bound", lambda: bound_node(kube, "pre-eight"), timeout=180)
    assert node == other
    assert set(kubelet.removed) == before, (kubelet.removed, before)
    assert len(devices_of(kube, "pre-eight")) == 8
    # The low-priority pod right behind it got nothing and took nobody's place.
    time.sleep(3)
    kubelet.step()
    assert bound_node(kube, "pre-thief") is None
    assert set(kubelet.removed) == before


def test_a_never_pod_preempts_nothing(pool: list[str], cluster: Cluster, kube: Kube) -> None:
    kubelet = Kubelet(kube, "pre")
    refused = drax_metric(cluster, "drax_preemptions_refused_total", reason="never")
    kube.create(pod("pre", "never", "one", priority_class=NEVER))
    kubelet.until("drax refusing the Never pod", lambda: drax_metric(
        cluster, "drax_preemptions_refused_total", reason="never") > refused, timeout=60)
    time.sleep(2)
    kubelet.step()
    assert kubelet.removed == {}
    assert bound_node(kube, "pre-never") is None


def test_default_scheduler_preempts_nothing_for_devices(pool: list[str], cluster: Cluster,
                                                        kube: Kube) -> None:
    kubelet = Kubelet(kube, "pre")
    body = pod("pre", "in-tree", "pair", priority_class=HIGH, scheduler="default-scheduler")
    kube.create(body)
    message = kubelet.until("default-scheduler's verdict", lambda: next(
        (c.get("message") for c in kube.get("Pod", "pre-in-tree", "default")
         .get("status", {}).get("conditions", [])
         if c["type"] == "PodScheduled" and c["status"] == "False"), None), timeout=60)
    time.sleep(5)
    kubelet.step()
    assert kubelet.removed == {}, kubelet.removed
    current = kube.get("Pod", "pre-in-tree", "default")
    assert not current["spec"].get("nodeName")
    assert not current.get("status", {}).get("nominatedNodeName")
    print(f"default-scheduler: {message}")


# --------------------------------------------------------------------------- advisor mode


@pytest.fixture(scope="module")
def advisor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("e2e-preempt-advisor"),
                         drax_mode="advisor") as running:
        yield running


def test_advisor_mode_preempts_for_a_2gpu_nic_pod(advisor: Cluster) -> None:
    kube = advisor.kube()
    try:
        priority_classes(kube)
        add_pool(kube, prefix="apre", nodes=2, seed=11)
        templates(kube, "apre")
        fill(kube, "apre", ["a", "b"])
        check_pair_preemption(kube, advisor, "apre")
    finally:
        kube.close()
