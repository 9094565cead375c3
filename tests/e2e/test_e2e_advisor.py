"""drax in advisor mode: the in-tree DynamicResources plugin allocates and binds,
drax filters and scores (manifests/kube-scheduler/scheduler-config.yaml with the plugin left
enabled and no bindVerb, as the README's advisor section says).

The same workload and checks as allocator mode (tests/e2e/workload.py) on a
control plane of its own, started with `--drax-mode advisor`. One difference
is real kube-scheduler behaviour, not drax's: extenders are only asked about
nodes every in-tree Filter passed (schedule_one.go findNodesThatPassExtenders),
so when the plugin rejects every node the pod's condition carries the plugin's
"cannot allocate all claims" and drax is never consulted; drax's per-node
reason for that pod is what its own filter verb answers.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.cluster import Cluster
from tests.e2e.conftest import running_cluster
from tests.e2e.kube import Kube, wait_for
from tests.e2e.workload import (
    add_pool,
    add_templates,
    check_workload,
    create_too_big,
    schedule_every_shape,
    unschedulable_message,
)

POOL = "adv"


@pytest.fixture(scope="module")
def advisor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("e2e-advisor"), drax_mode="advisor") as running:
        yield running


@pytest.fixture(scope="module")
def pool(advisor: Cluster) -> list[str]:
    kube = advisor.kube()
    try:
        nodes = add_pool(kube, prefix=POOL, nodes=8, seed=3)
        add_templates(kube, prefix=POOL)
    finally:
        kube.close()
    return nodes


@pytest.fixture()
def akube(advisor: Cluster) -> Iterator[Kube]:
    client = advisor.kube()
    yield client
    client.close()


def _requests(cluster: Cluster, verb: str) -> float:
    """drax_requests_total{verb} over every outcome."""
    text = httpx.get(f"{cluster.drax_url}/metrics", timeout=10).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("drax_requests_total{") and f'verb="{verb}"' in line:
            total += float(line.rpartition(" ")[2])
    return total


def test_every_shape_is_bound_by_the_in_tree_plugin_after_drax_scored(
        advisor: Cluster, pool: list[str], akube: Kube) -> None:
    pods = schedule_every_shape(akube, prefix=POOL, scheduler="drax", pool=POOL)
    check_workload(akube, pods, nodes=pool)
    assert _requests(advisor, "filter") >= len(pods)
    assert _requests(advisor, "prioritize") > 0
    assert _requests(advisor, "bind") == 0, "advisor mode: the in-tree binder binds, not drax"


def test_a_pod_that_cannot_fit_stays_pending(advisor: Cluster, pool: list[str], akube: Kube
                                             ) -> None:
    name = f"{POOL}-too-big"
    create_too_big(akube, name, scheduler="drax", pool=POOL)
    message = wait_for(f"{name} PodScheduled=False", lambda: unschedulable_message(akube, name))
    pod_obj = akube.get("Pod", name, "default")
    assert pod_obj["spec"].get("nodeName") is None
    assert "cannot allocate all claims" in message, message
    answer = httpx.post(f"{advisor.drax_url}/scheduler/filter", timeout=10,
                        json={"Pod": pod_obj, "NodeNames": pool}).json()
    assert answer.get("NodeNames") in (None, []), answer
    failed = {**answer.get("FailedNodes", {}), **answer.get("FailedAndUnresolvableNodes", {})}
    assert set(failed) == set(pool), answer
    for reason in failed.values():
        assert f"claim default/{name}: request \"gpu\"" in reason and "9 needed" in reason, reason
