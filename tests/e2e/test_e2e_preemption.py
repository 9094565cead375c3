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
  nothing is preempted (kube-scheduler 1.37 never preempts for DRA devices);
- pools of their own: a PDB sends the victims to the node that violates none;
  a claim shared with a pod that stays is not counted as freed; on a
  partitionable node, freeing one GPU's counters is enough for a MIG slice;
  no victim goes on a node where the preemptor would still lack cpu, nor
  where a pending pod of no lower priority nominated there by the same
  scheduler takes it (one of another scheduler does not count); in
  advisor mode a lower pod without claims goes too when the freed GPU's node
  would lack cpu.

There is no kubelet: the test plays it for deletions (a terminating pod of the
pool is removed with grace 0, as a kubelet would once its containers stopped);
the resource-claim controller then deallocates the victims' claims. Advisor
mode (the in-tree DynamicResources plugin allocates) runs the 2 GPU + 1 NIC
case and the 8-GPU pod with a low-priority pod behind it on a control plane of
its own, with two drax replicas; there, last, and on a control plane of two
allocator-mode replicas, a new leader holds a preemptor's devices after the
old one is stopped (advisor: SIGTERM, allocator: SIGKILL) while the victims
terminate. That control plane's kube-scheduler has two profiles, `drax` and
`drax-gpu`, both calling drax: a drax-gpu pod preempts and binds, and while
its victims terminate its nomination leaves a drax pod no room, for
kube-scheduler (one nominator for both profiles) and drax alike.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from loadtest.generator import GPU_CLASS, GPU_DRIVER, MODE_LABEL, NIC_DRIVER
from tests.e2e.cluster import LEASE, Cluster, drax_name, scheduler_name
from tests.e2e.conftest import running_cluster
from tests.e2e.kube import ApiError, Kube, wait_for
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
from tests.e2e.workload import add_pool, published_devices, wait_bound

SCHEDULER, GPU_SCHEDULER = "drax", "drax-gpu"


def check_pair_preemption(kube: Kube, cluster: Cluster, prefix: str) -> dict[str, Any]:
    """The 2 GPU + 1 NIC case on a full pool; returns what was seen, with the
    preemptor's `nominatedNodeName` as each poll found it until bound."""
    kubelet = Kubelet(kube, prefix)
    started = time.monotonic()
    kube.create(pod(prefix, "pair", "pair", priority_class=HIGH))
    name = f"{prefix}-pair"
    nominations: list[str] = []

    def bound() -> str | None:
        current = kube.get("Pod", name, "default")
        nominated = current.get("status", {}).get("nominatedNodeName") or ""
        if not nominations or nominations[-1] != nominated:
            nominations.append(nominated)
        return current["spec"].get("nodeName")

    node = kubelet.until(f"{name} bound", bound, timeout=180)
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
    return {"node": node, "victims": sorted(victims), "seconds": round(bound_after, 1),
            "nominations": nominations}


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


def attempts_counted(cluster: Cluster, kube: Kube) -> dict[str, float]:
    """The leading drax's count of nominated preemptors' attempts, by what
    their victims' claims were (`drax_preemptor_attempts_total{claims}`)."""
    leader = lease_holder(cluster, kube) or 0
    return {claims: drax_metric(cluster, "drax_preemptor_attempts_total", replica=leader,
                                claims=claims)
            for claims in ("allocated", "freed", "unread")}


def test_a_2gpu_nic_pod_preempts_two_pods_on_one_root_and_binds_aligned(
        pool: list[str], cluster: Cluster, kube: Kube) -> None:
    """... and binds within 2 scheduling attempts after its victims' claims
    are deallocated, by drax's count (which counts its binding attempt, after
    the deallocation or, when that attempt's first filter still read a claim
    allocated, before it: every attempt reaches drax in allocator mode)."""
    before = attempts_counted(cluster, kube)
    seen = check_pair_preemption(kube, cluster, "pre")
    counted = {k: v - before[k] for k, v in attempts_counted(cluster, kube).items()}
    print(f"allocator mode: attempts counted {counted}; the preemptor's nominatedNodeName "
          f"as polled: {seen['nominations']}")
    assert seen["node"] in pool
    assert drax_metric(cluster, "drax_preemptions_total") >= 1
    assert sum(counted.values()) >= 1, counted
    assert counted["freed"] + counted["unread"] <= 2, counted


def check_eight_and_thief(kube: Kube, prefix: str, nodes: list[str]) -> None:
    """A high-priority 8-GPU pod takes exactly the node of `nodes` without the
    pair pod (the only one where 8 GPUs can be freed), and a low-priority
    1-GPU pod created right behind it gets none of the held GPUs."""
    kubelet = Kubelet(kube, prefix)
    pair_node = bound_node(kube, f"{prefix}-pair")
    other = next(n for n in nodes if n != pair_node)
    before = {p["metadata"]["name"] for p in alive(kube, prefix)
              if p["spec"].get("nodeName") == other}
    assert len(before) == 8
    kube.create(pod(prefix, "eight", "eight", priority_class=HIGH))
    kube.create(pod(prefix, "thief", "one", priority_class=LOW))
    eight = f"{prefix}-eight"
    node = kubelet.until(f"{eight} bound", lambda: bound_node(kube, eight), timeout=180)
    assert node == other
    assert set(kubelet.removed) == before, (kubelet.removed, before)
    assert len(devices_of(kube, eight)) == 8
    # The low-priority pod right behind it got nothing and took nobody's place.
    time.sleep(3)
    kubelet.step()
    assert bound_node(kube, f"{prefix}-thief") is None
    assert set(kubelet.removed) == before


def test_an_8gpu_pod_takes_one_whole_node_and_a_low_pod_behind_it_gets_nothing(
        pool: list[str], cluster: Cluster, kube: Kube) -> None:
    check_eight_and_thief(kube, "pre", pool)


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
    # Two replicas: the last advisor test stops the leader.
    with running_cluster(tmp_path_factory.mktemp("e2e-preempt-advisor"),
                         drax_mode="advisor", replicas=2) as running:
        yield running


@pytest.fixture(scope="module")
def advisor_pool(advisor: Cluster) -> Iterator[tuple[Kube, list[str]]]:
    kube = advisor.kube()
    try:
        priority_classes(kube)
        nodes = add_pool(kube, prefix="apre", nodes=2, seed=11)
        templates(kube, "apre")
        fill(kube, "apre", nodes)
        yield kube, nodes
    finally:
        kube.close()


def test_advisor_mode_preempts_for_a_2gpu_nic_pod(advisor: Cluster,
                                                  advisor_pool: tuple[Kube, list[str]]) -> None:
    """... and counts only the attempts that reach it: the in-tree
    DynamicResources filter runs before drax's, and kube-scheduler calls an
    extender only with the nodes its own filters passed, so on the full pool
    no attempt before the scheduler sees the victims' claims deallocated
    reaches drax (none is counted `allocated`); the binding one does, and is
    counted after the deallocation."""
    kube, _ = advisor_pool
    before = attempts_counted(advisor, kube)
    seen = check_pair_preemption(kube, advisor, "apre")
    counted = {k: v - before[k] for k, v in attempts_counted(advisor, kube).items()}
    print(f"advisor mode: attempts counted {counted}; the preemptor's nominatedNodeName "
          f"as polled: {seen['nominations']}")
    assert counted["allocated"] == 0, counted
    assert 1 <= counted["freed"] + counted["unread"] <= 2, counted


def test_advisor_mode_holds_the_freed_gpus_from_a_low_pod_behind_the_preemptor(
        advisor_pool: tuple[Kube, list[str]]) -> None:
    """The in-tree plugin allocates in advisor mode: drax's filter keeps it off
    the held GPUs by refusing their node to a pod of lower priority."""
    kube, nodes = advisor_pool
    check_eight_and_thief(kube, "apre", nodes)


def busy_pod(prefix: str, name: str, node: str, cpu: str, priority_class: str) -> dict[str, Any]:
    """A pod without claims bound to `node` taking `cpu` (the test's kubelet
    removes it once it is deleted)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{prefix}-{name}", "namespace": "default",
                         "labels": {"e2e/pool": prefix}},
            "spec": {"nodeName": node, "priorityClassName": priority_class, "containers": [
                {"name": "main", "image": "registry.k8s.io/pause:3.10",
                 "resources": {"requests": {"cpu": cpu}}}]}}


def test_advisor_mode_takes_a_lower_pod_without_claims_for_the_cpu_a_freed_gpu_lacks(
        advisor: Cluster) -> None:
    """A full 1-node pool (64 cpus) where two lower-priority pods without
    claims take 62: freeing one GPU leaves the 4-cpu preemptor 2. drax adds
    victims as SelectVictimsOnNode does: every lower pod goes, then they are
    reprieved highest priority first, so the 2-cpu pod of the GPU pods'
    priority stays and the 60-cpu pod of the lowest priority goes. In advisor
    mode the in-tree DynamicResources filter rejects the node as unresolvable,
    so kube-scheduler's own preemption never touches it: drax chose both."""
    prefix = "aroom"
    kube = advisor.kube()
    try:
        priority_classes(kube)
        try:
            kube.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                         "metadata": {"name": "e2e-lowest"}, "value": 10})
        except ApiError as exc:
            if exc.status != 409:
                raise
        (node,) = add_pool(kube, prefix=prefix, nodes=1, seed=11)
        templates(kube, prefix)
        fill(kube, prefix, [node])
        kube.create(busy_pod(prefix, "big", node, "60", "e2e-lowest"))
        kube.create(busy_pod(prefix, "small", node, "2", LOW))
        kubelet = Kubelet(kube, prefix)
        body = pod(prefix, "wide", "one", priority_class=HIGH)
        body["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "4"}
        kube.create(body)
        assert kubelet.until("aroom-wide bound", lambda: bound_node(kube, "aroom-wide"),
                             timeout=180) == node
        removed = kubelet.removed
        assert sorted(removed)[0] == "aroom-big" and len(removed) == 2, removed
        (gpu_victim,) = [name for name in removed if name.startswith("aroom-low-")]
        assert removed[gpu_victim]["devices"], removed
        condition = removed["aroom-big"]["condition"]
        assert condition and condition["reason"] == "PreemptionByScheduler", removed
        assert "aroom-wide" in condition["message"], condition  # drax's own words
        # It goes for the preemptor's cpu, and is told so; the GPU's holder for devices.
        assert condition["message"].endswith(f"; room on node {node}: cpu)"), condition
        assert "; devices " in removed[gpu_victim]["condition"]["message"], removed
        assert bound_node(kube, "aroom-small") == node
    finally:
        kube.close()


def test_advisor_mode_a_new_leader_holds_the_devices_of_a_preemptor_whose_victims_still_terminate(
        advisor: Cluster) -> None:
    """`check_failover` in advisor mode on a 1-node pool, the leader stopped as
    a rolling update stops it (SIGTERM: its kube-scheduler releases the
    Lease). The new leader's kube-scheduler clears the preemptor's
    nominatedNodeName at its first failed attempt (the DynamicResources
    filter refuses the node while the victims' claims are allocated); the
    hold comes back all the same. It stops the advisor control plane's
    leader, so it runs last there."""
    check_failover(advisor, "afo", nodes=1, sig=signal.SIGTERM)


def test_a_pdb_sends_the_preemption_to_the_node_that_violates_none(cluster: Cluster,
                                                                   kube: Kube) -> None:
    """Every low pod of the node drax would otherwise pick (the first by name:
    without a kubelet no pod has a start time) is covered by a PDB that allows
    no disruption: the victims come from the other node."""
    prefix = "pdb"
    priority_classes(kube)
    nodes = sorted(add_pool(kube, prefix=prefix, nodes=2, seed=11))
    templates(kube, prefix)
    fill(kube, prefix, nodes)
    for p in alive(kube, prefix):
        if p["spec"]["nodeName"] == nodes[0]:
            kube.request("PATCH", f"/api/v1/namespaces/default/pods/{p['metadata']['name']}",
                         body={"metadata": {"labels": {"e2e/guarded": "yes"}}},
                         content_type="application/merge-patch+json")
    kube.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                 "metadata": {"name": "pdb-guard", "namespace": "default"},
                 "spec": {"minAvailable": 8,
                          "selector": {"matchLabels": {"e2e/guarded": "yes"}}}})
    kubelet = Kubelet(kube, prefix)
    kube.create(pod(prefix, "pair", "pair", priority_class=HIGH))
    node = kubelet.until("pdb-pair bound", lambda: bound_node(kube, "pdb-pair"), timeout=180)
    assert node == nodes[1]
    assert len(kubelet.removed) == 2
    assert {v["node"] for v in kubelet.removed.values()} == {nodes[1]}


def test_a_claim_shared_with_a_pod_that_stays_is_not_freed(cluster: Cluster,
                                                            kube: Kube) -> None:
    """One node: 6 pods of priority 100 hold a GPU each; a pod of priority 50 and
    one of the preemptor's own priority share one claim of 2 GPUs. Deleting the
    lowest pod would free nothing (its claim stays reserved for the other), so
    a 2-GPU preemptor takes two of the priority-100 pods and no sharer."""
    prefix = "shr"
    priority_classes(kube)
    try:
        kube.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                     "metadata": {"name": "e2e-lowest"}, "value": 50})
    except ApiError as exc:
        assert exc.status == 409
    (node,) = add_pool(kube, prefix=prefix, nodes=1, seed=11)
    templates(kube, prefix)
    kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": "shr-shared", "namespace": "default"},
                 "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                     "deviceClassName": GPU_CLASS, "count": 2}}]}}})
    names = []
    for i, priority_class in enumerate(("e2e-lowest", HIGH)):
        body = pod(prefix, f"sharer-{i}", "one", priority_class=priority_class)
        body["spec"]["resourceClaims"] = [{"name": "devices", "resourceClaimName": "shr-shared"}]
        kube.create(body)
        names.append(body["metadata"]["name"])
    wait_bound(kube, names, timeout=120)
    for i in range(6):
        body = pod(prefix, f"low-{i}", "one", priority_class=LOW)
        kube.create(body)
        names.append(body["metadata"]["name"])
    wait_bound(kube, names, timeout=120)
    kubelet = Kubelet(kube, prefix)
    kube.create(pod(prefix, "two", "two", priority_class=HIGH))
    assert kubelet.until("shr-two bound", lambda: bound_node(kube, "shr-two"),
                         timeout=180) == node
    assert len(kubelet.removed) == 2
    assert all(name.startswith("shr-low-") for name in kubelet.removed), kubelet.removed


def test_freeing_one_gpus_counters_is_enough_for_a_mig_slice(cluster: Cluster,
                                                             kube: Kube) -> None:
    """A partitionable H100 node whose 8 GPUs are held whole by low pods (a whole
    GPU consumes all the counters its MIG slices draw on): a high-priority
    1g.10gb pod takes exactly one victim and binds to a slice of that GPU."""
    prefix = "mig"
    priority_classes(kube)
    nodes = add_pool(kube, prefix=prefix, nodes=4, seed=11)
    mig = next(n for n in nodes if kube.get("Node", n)["metadata"]["labels"].get(
        MODE_LABEL) == "partitionable")
    templates(kube, prefix)
    on_node = {"kubernetes.io/hostname": mig}
    names = []
    for i in range(8):
        body = pod(prefix, f"low-{i}", "one", priority_class=LOW)
        body["spec"]["nodeSelector"] = on_node
        kube.create(body)
        names.append(body["metadata"]["name"])
    wait_bound(kube, names, timeout=120)
    kubelet = Kubelet(kube, prefix)
    body = pod(prefix, "slice", "mig-1g", priority_class=HIGH)
    body["spec"]["nodeSelector"] = on_node
    kube.create(body)
    assert kubelet.until("mig-slice bound", lambda: bound_node(kube, "mig-slice"),
                         timeout=180) == mig
    assert len(kubelet.removed) == 1, kubelet.removed
    ((victim,),) = [v["devices"] for v in kubelet.removed.values()]
    (mine,) = devices_of(kube, "mig-slice")
    parent = published_devices(kube)[mine]["attributes"]
    gpu = published_devices(kube)[victim]["attributes"]
    assert parent["parentUUID"] == gpu["uuid"], (mine, victim)


def test_no_victim_goes_on_a_node_that_would_still_lack_cpu(cluster: Cluster,
                                                             kube: Kube) -> None:
    """A full 1-node pool whose cpu a pod of the preemptor's own priority (no
    claims, so drax counts only its requests) nearly fills: freeing a GPU
    there would leave the 4-cpu preemptor short of cpu, so nothing is deleted.
    Once that pod is gone, the same preemptor takes exactly one victim."""
    prefix = "cpu"
    priority_classes(kube)
    (node,) = add_pool(kube, prefix=prefix, nodes=1, seed=11)
    templates(kube, prefix)
    fill(kube, prefix, [node])
    kube.create({"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": "cpu-hog", "namespace": "default"},
                 "spec": {"nodeName": node, "priorityClassName": HIGH, "containers": [
                     {"name": "main", "image": "registry.k8s.io/pause:3.10",
                      "resources": {"requests": {"cpu": "62"}}}]}})
    attempted = drax_metric(cluster, "drax_preemptions_attempted_total")
    kubelet = Kubelet(kube, prefix)
    body = pod(prefix, "wide", "one", priority_class=HIGH)
    body["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "4"}
    kube.create(body)
    kubelet.until("cpu-wide unschedulable", lambda: any(
        c["type"] == "PodScheduled" and c["status"] == "False"
        for c in kube.get("Pod", "cpu-wide", "default").get("status", {})
        .get("conditions", [])), timeout=90)
    # drax searches for an unschedulable pod within a second or two of seeing it
    time.sleep(5)
    kubelet.step()
    assert drax_metric(cluster, "drax_preemptions_attempted_total") > attempted
    assert kubelet.removed == {}, kubelet.removed
    assert bound_node(kube, "cpu-wide") is None
    kube.delete("Pod", "cpu-hog", "default", grace_period_seconds=0)
    assert kubelet.until("cpu-wide bound", lambda: bound_node(kube, "cpu-wide"),
                         timeout=150) == node
    assert len(kubelet.removed) == 1, kubelet.removed


def nominated_nowhere(kube: Kube, name: str, node: str, scheduler: str) -> None:
    """A pending pod of `scheduler` asking 62 cpus, nominated to `node`: its
    nodeSelector matches no node and its preemptionPolicy is Never, so its
    scheduler neither places it nor clears the nomination."""
    kube.create({"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": name, "namespace": "default"},
                 "spec": {"schedulerName": scheduler, "priorityClassName": NEVER,
                          "nodeSelector": {"e2e/nowhere": "yes"}, "containers": [
                              {"name": "main", "image": "registry.k8s.io/pause:3.10",
                               "resources": {"requests": {"cpu": "62"}}}]}})
    kube.patch("Pod", name, {"status": {"nominatedNodeName": node}}, "default",
               subresource="status")


def test_a_pod_nominated_there_of_no_lower_priority_counts_against_the_room(
        cluster: Cluster, kube: Kube) -> None:
    """A full 1-node pool (64 cpus) and two pending pods of the preemptor's
    priority nominated to that node (`status.nominatedNodeName`, as a
    scheduler's preemption leaves it) asking 62 cpus each, one of drax's
    scheduler, one of `default-scheduler`. kube-scheduler counts a pod
    nominated to a node for pods of no higher priority (addNominatedPods),
    but only the pods of its own profiles: drax counts the first, so freeing
    a GPU there would leave the 4-cpu preemptor short and nothing is deleted.
    Once that pod is gone, the same preemptor takes one victim, the other
    scheduler's pod still nominated there."""
    prefix = "nom"
    priority_classes(kube)
    (node,) = add_pool(kube, prefix=prefix, nodes=1, seed=11)
    templates(kube, prefix)
    fill(kube, prefix, [node])
    nominated_nowhere(kube, "nom-ahead", node, "drax")
    nominated_nowhere(kube, "nom-other", node, "default-scheduler")
    time.sleep(2)  # both schedulers' watches deliver the nominations
    attempted = drax_metric(cluster, "drax_preemptions_attempted_total")
    kubelet = Kubelet(kube, prefix)
    body = pod(prefix, "wide", "one", priority_class=HIGH)
    body["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "4"}
    kube.create(body)
    kubelet.until("nom-wide unschedulable", lambda: any(
        c["type"] == "PodScheduled" and c["status"] == "False"
        for c in kube.get("Pod", "nom-wide", "default").get("status", {})
        .get("conditions", [])), timeout=90)
    time.sleep(5)  # drax searches for an unschedulable pod within a second or two
    kubelet.step()
    assert drax_metric(cluster, "drax_preemptions_attempted_total") > attempted
    assert kubelet.removed == {}, kubelet.removed
    assert bound_node(kube, "nom-wide") is None
    assert kube.get("Pod", "nom-ahead", "default")["status"].get("nominatedNodeName") == node
    kube.delete("Pod", "nom-ahead", "default", grace_period_seconds=0)
    assert kubelet.until("nom-wide bound", lambda: bound_node(kube, "nom-wide"),
                         timeout=150) == node
    assert len(kubelet.removed) == 1, kubelet.removed
    assert kube.get("Pod", "nom-other", "default")["status"].get("nominatedNodeName") == node
    kube.delete("Pod", "nom-other", "default", grace_period_seconds=0)


# --------------------------------------------------------------------------- two profiles, failover


@pytest.fixture(scope="module")
def two_replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Two replicas whose kube-scheduler has profiles `drax` and `drax-gpu`,
    both calling drax, which serves both names. The failover test stops the
    leader, so it runs last here."""
    with running_cluster(tmp_path_factory.mktemp("e2e-preempt-failover"),
                         replicas=2, profiles=(SCHEDULER, GPU_SCHEDULER)) as running:
        yield running


def replica_metric(cluster: Cluster, replica: int, name: str) -> float:
    text = httpx.get(f"http://127.0.0.1:{cluster.ports[drax_name(replica)]}/metrics",
                     timeout=5).text
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith(name + " ") or line.startswith(name + "{"))


def lease_holder(cluster: Cluster, kube: Kube) -> int | None:
    namespace, name = LEASE
    return cluster.replica_of(str(kube.get("Lease", name, namespace)["spec"]
                                  .get("holderIdentity") or ""))


def check_failover(cluster: Cluster, prefix: str, *, nodes: int, sig: int) -> None:
    """A full pool of `nodes` nodes; the leader preempts for a 2 GPU + 1 NIC
    pod and is stopped with `sig` (its kube-scheduler, then its drax) while
    the victims still terminate. The replica taking the Lease deletes nothing
    more, holds the pod's devices from its nominatedNodeName and the
    terminating victims, and the pod binds there once they are gone; a
    low-priority pod behind it gets nothing."""
    kube = cluster.kube()
    try:
        priority_classes(kube)
        pool_nodes = add_pool(kube, prefix=prefix, nodes=nodes, seed=11)
        templates(kube, prefix)
        fill(kube, prefix, pool_nodes)
        leader = lease_holder(cluster, kube)
        assert leader is not None
        standby = 1 - leader
        name = f"{prefix}-pair"
        kube.create(pod(prefix, "pair", "pair", priority_class=HIGH))
        # No kubelet yet: the victims stay terminating.
        nominated = wait_for(f"{name} nominated, its 2 victims deleting", lambda: (
            kube.get("Pod", name, "default").get("status", {}).get("nominatedNodeName")
            if len([p for p in kube.list("Pod", "default", selector=f"e2e/pool={prefix}")
                    if p["metadata"].get("deletionTimestamp")]) == 2 else None), timeout=120)
        assert replica_metric(cluster, standby, "drax_nominated_devices") == 0
        for component in (scheduler_name(leader), drax_name(leader)):
            cluster.kill(component, sig=sig)
        namespace, lease_name = LEASE
        duration = float(kube.get("Lease", lease_name, namespace)["spec"]
                         ["leaseDurationSeconds"])
        wait_for("the standby holding the Lease",
                 lambda: lease_holder(cluster, kube) == standby, timeout=duration + 40)
        wait_for("the new leader holding the pod's devices", lambda: replica_metric(
            cluster, standby, "drax_nominated_devices") == 3, timeout=30)
        kube.create(pod(prefix, "thief", "one", priority_class=LOW))
        kubelet = Kubelet(kube, prefix)
        node = kubelet.until(f"{name} bound", lambda: bound_node(kube, name), timeout=120)
        assert node == nominated
        assert len(kubelet.removed) == 2, kubelet.removed
        assert replica_metric(cluster, standby, "drax_preemptions_total") == 0
        time.sleep(3)
        kubelet.step()
        assert bound_node(kube, f"{prefix}-thief") is None
        assert len(kubelet.removed) == 2, kubelet.removed
        cluster.note_leader(kube)
    finally:
        kube.close()


def unschedulable(kube: Kube, name: str) -> str | None:
    """The message of the pod's PodScheduled=False condition, if it has one."""
    return next((c.get("message") or "" for c in kube.get("Pod", name, "default")
                 .get("status", {}).get("conditions", [])
                 if c["type"] == "PodScheduled" and c["status"] == "False"), None)


def test_a_pod_of_a_second_profile_preempts_and_its_nomination_counts_for_the_first(
        two_replicas: Cluster) -> None:
    """One kube-scheduler with profiles drax and drax-gpu, both calling drax.
    On a full 1-node pool (64 cpus), a high-priority drax-gpu pod asking 2
    GPUs and 40 cpus gets exactly 2 victims and is nominated to the node.
    While they terminate, a drax pod of the same priority asking 1 GPU and 40
    cpus comes: kube-scheduler keeps one nominator for both profiles and
    counts the drax-gpu pod there against it (24 cpus left), and so does
    drax's search: no victim goes for it. Once the victims are gone, the
    drax-gpu pod binds to their devices."""
    cluster, prefix = two_replicas, "prof"
    kube = cluster.kube()
    try:
        priority_classes(kube)
        (node,) = add_pool(kube, prefix=prefix, nodes=1, seed=11)
        templates(kube, prefix)
        fill(kube, prefix, [node])
        leader = lease_holder(cluster, kube)
        assert leader is not None

        def deleting() -> list[str]:
            return sorted(p["metadata"]["name"] for p in kube.list(
                "Pod", "default", selector=f"e2e/pool={prefix}")
                if p["metadata"].get("deletionTimestamp"))

        gpu = f"{prefix}-gpu"
        body = pod(prefix, "gpu", "two", priority_class=HIGH, scheduler=GPU_SCHEDULER)
        body["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "40"}
        kube.create(body)
        # No kubelet yet: the victims stay terminating.
        wait_for(f"{gpu} nominated, its 2 victims deleting", lambda: kube.get(
            "Pod", gpu, "default").get("status", {}).get("nominatedNodeName") == node
            and len(deleting()) == 2, timeout=120)
        victims = deleting()

        def searched() -> tuple[float, float]:
            return (drax_metric(cluster, "drax_preemptions_attempted_total", replica=leader),
                    drax_metric(cluster, "drax_preemptions_refused_total", replica=leader,
                                reason="no-candidate"))

        # The drax-gpu pod's hold waits for its victims: no search for it counts.
        attempted, refused = searched()
        ahead = f"{prefix}-cpu"
        body = pod(prefix, "cpu", "one", priority_class=HIGH, scheduler=SCHEDULER)
        body["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "40"}
        kube.create(body)
        message = wait_for(f"{ahead} unschedulable", lambda: unschedulable(kube, ahead),
                           timeout=90)
        wait_for(f"drax searching victims for {ahead}",
                 lambda: searched()[0] > attempted, timeout=60)
        time.sleep(2)
        print(f"two profiles: {ahead} unschedulable: {message}")
        assert "Insufficient cpu" in message, message
        assert deleting() == victims
        assert searched()[1] > refused
        kubelet = Kubelet(kube, prefix)
        assert kubelet.until(f"{gpu} bound", lambda: bound_node(kube, gpu),
                             timeout=120) == node
        assert sorted(kubelet.removed) == victims, kubelet.removed
        for v in kubelet.removed.values():
            cond = v["condition"]
            assert cond and cond["message"].startswith(f"{GPU_SCHEDULER}: "), v
            assert gpu in cond["message"], cond
        freed = sorted(d for v in kubelet.removed.values() for d in v["devices"])
        assert sorted(devices_of(kube, gpu)) == freed
        assert bound_node(kube, ahead) is None
        kube.delete("Pod", ahead, "default", grace_period_seconds=0)
    finally:
        kube.close()


def test_a_new_leader_holds_the_devices_of_a_preemptor_whose_victims_still_terminate(
        two_replicas: Cluster) -> None:
    """`check_failover` on a 2-node pool, the leader killed (SIGKILL): the
    standby takes the Lease once it expires."""
    check_failover(two_replicas, "fo", nodes=2, sig=signal.SIGKILL)
