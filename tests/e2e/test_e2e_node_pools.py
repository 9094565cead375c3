"""Two drax schedulers sharing one real cluster, each with its own node pool.

The pattern Kubernetes shards scheduling with: two kube-scheduler profiles
(`drax` and `drax-b`), each with its own extender, each extender started with
`--node-selector` for its pool. Pods name their scheduler and carry no node
selector, so only drax's filter keeps them in their pool. Every pod must be
bound with a valid allocation inside its scheduler's pool, neither drax may
hold the other pool's nodes, and a Node relabelled from one pool to the other
moves with its devices: the pool it joins schedules onto it, the one it left
no longer does.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator

import httpx
import pytest
import yaml

from loadtest.bench import free_ports
from tests.e2e.build import control_plane_bins
from tests.e2e.cluster import (
    Cluster,
    drax_argv,
    drax_scheduler_config,
    drax_scheduler_flags,
    kube_scheduler_argv,
    wait_drax_ready,
)
from tests.e2e.conftest import running_cluster
from tests.e2e.kube import Kube, wait_for
from tests.e2e.workload import (
    add_pool,
    add_templates,
    check_workload,
    pod,
    unschedulable_message,
    wait_bound,
)

LABEL = "e2e/pool"
POOL_A, POOL_B = "shard-a", "shard-b"


def _metric(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=5).text
    match = re.search(rf"^{name} ([0-9.e+]+)$", text, re.MULTILINE)
    assert match, f"{name} not in {url}/metrics"
    return float(match.group(1))


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, str]]:
    """The e2e cluster with its drax restarted on pool A, plus a second
    kube-scheduler (profile `drax-b`, no leader election) and drax on pool B.
    Yields the cluster and drax-b's URL."""
    with running_cluster(tmp_path_factory.mktemp("e2e-pools")) as cluster:
        kube = cluster.kube()
        try:
            add_pool(kube, prefix=POOL_A, nodes=3, seed=11)
            add_pool(kube, prefix=POOL_B, nodes=3, seed=12)
            add_templates(kube, prefix="shard")
        finally:
            kube.close()
        cluster.kill("drax")
        cluster.spawn("drax", [*drax_argv(cluster), "--node-selector", f"{LABEL}={POOL_A}"])
        port, cluster.ports["drax-scheduler-b"] = free_ports(2)
        cluster.ports["drax-b"] = port
        url_b = f"http://127.0.0.1:{port}"
        cluster.spawn("drax-b", [
            "env", "DRAX_SCHEDULER_NAME=drax-b", sys.executable, "-m", "app", "serve",
            "--kubeconfig", str(cluster.path / "drax.kubeconfig"), "--port", str(port),
            "--node-selector", f"{LABEL}={POOL_B}"])
        config = drax_scheduler_config(cluster, cluster.path / "drax.kubeconfig")
        config["leaderElection"] = {"leaderElect": False}
        config["profiles"][0]["schedulerName"] = "drax-b"
        for extender in config["extenders"]:
            extender["urlPrefix"] = f"{url_b}/scheduler"
        path = cluster.path / "drax-scheduler-b.yaml"
        path.write_text(yaml.safe_dump(config))
        cluster.spawn("drax-scheduler-b", kube_scheduler_argv(
            cluster, control_plane_bins(), "drax-scheduler-b", config=path,
            kubeconfig=cluster.path / "drax.kubeconfig", flags=drax_scheduler_flags()))
        wait_drax_ready(cluster)
        wait_for("drax-b /readyz", lambda: httpx.get(f"{url_b}/readyz", timeout=5)
                 .status_code == 200, timeout=120)
        wait_for("drax-scheduler-b /healthz", lambda: httpx.get(
            f"https://127.0.0.1:{cluster.ports['drax-scheduler-b']}/healthz", verify=False,
            timeout=5).status_code == 200, timeout=120)
        yield cluster, url_b


def _pool_nodes(kube: Kube, pool: str) -> set[str]:
    return {n["metadata"]["name"] for n in kube.list("Node")
            if n["metadata"].get("labels", {}).get(LABEL) == pool}


def _create(kube: Kube, prefix: str, scheduler: str, count: int,
            node_selector: dict[str, str] | None = None) -> list[str]:
    shapes = ("1gpu", "2gpu-1nic-same-root")
    names = []
    for i in range(count):
        name = f"{prefix}-{i}"
        kube.create(pod(name, scheduler=scheduler, template=f"shard-{shapes[i % len(shapes)]}",
                        node_selector=node_selector))
        names.append(name)
    return names


def test_each_drax_places_its_pods_only_in_its_own_pool(shards: tuple[Cluster, str]) -> None:
    cluster, url_b = shards
    kube = cluster.kube()
    try:
        nodes_a, nodes_b = _pool_nodes(kube, POOL_A), _pool_nodes(kube, POOL_B)
        # Each drax holds its own pool only, though both watch the same API server.
        assert _metric(cluster.drax_url, "drax_inventory_nodes") == len(nodes_a) == 3
        assert _metric(url_b, "drax_inventory_nodes") == len(nodes_b) == 3
        # No node selector on the pods: kube-scheduler offers every node of the
        # cluster, and each drax's filter keeps its pods in its pool.
        pods_a = _create(kube, "shard-a-pod", "drax", 4)
        pods_b = _create(kube, "shard-b-pod", "drax-b", 4)
        bound = wait_bound(kube, pods_a + pods_b, timeout=180)
        for name in pods_a:
            assert bound[name]["spec"]["nodeName"] in nodes_a, name
        for name in pods_b:
            assert bound[name]["spec"]["nodeName"] in nodes_b, name
        check_workload(kube, {n: bound[n] for n in pods_a}, nodes=nodes_a)
        check_workload(kube, {n: bound[n] for n in pods_b}, nodes=nodes_b)
        # A pod pinned to a node outside its scheduler's pool is never bound there.
        stray = _create(kube, "shard-a-stray", "drax", 1,
                        node_selector={"kubernetes.io/hostname": sorted(nodes_b)[0]})[0]
        message = wait_for(f"{stray} unschedulable", lambda: unschedulable_message(kube, stray))
        assert "outside this drax's node pool" in message, message
        assert kube.get("Pod", stray, "default")["spec"].get("nodeName") is None
    finally:
        kube.close()


def test_a_relabelled_node_moves_to_the_other_pool_with_its_devices(
        shards: tuple[Cluster, str]) -> None:
    cluster, url_b = shards
    kube = cluster.kube()
    try:
        moved = sorted(_pool_nodes(kube, POOL_B))[-1]
        kube.patch("Node", moved, {"metadata": {"labels": {LABEL: POOL_A}}})
        wait_for("drax holds the moved node", lambda: _metric(
            cluster.drax_url, "drax_inventory_nodes") == 4)
        wait_for("drax-b let it go", lambda: _metric(url_b, "drax_inventory_nodes") == 2)
        here = {"kubernetes.io/hostname": moved}
        (name,) = _create(kube, "shard-moved-a", "drax", 1, node_selector=here)
        bound = wait_bound(kube, [name], timeout=120)
        assert bound[name]["spec"]["nodeName"] == moved
        check_workload(kube, bound, nodes=[moved])
        (refused,) = _create(kube, "shard-moved-b", "drax-b", 1, node_selector=here)
        message = wait_for(f"{refused} unschedulable", lambda: unschedulable_message(kube, refused))
        assert "outside this drax's node pool" in message, message
    finally:
        kube.close()
