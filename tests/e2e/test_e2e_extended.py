"""Extended resources served by DRA on the real control plane: the same pod
(`nvidia.com/gpu: 2`, no claims) through drax and through the in-tree
scheduler, compared field by field; and a device-plugin node left to the
resource fit by both."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.cluster import Cluster, make_node_ready
from tests.e2e.kube import Kube, wait_for
from tests.e2e.workload import add_pool, wait_bound

POOL = "ext"
PLUGIN_NODE = "ext-plugin-node"
GPU = "nvidia.com/gpu"
ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


@pytest.fixture(scope="module")
def nodes(cluster: Cluster) -> list[str]:
    kube = cluster.kube()
    try:
        names = add_pool(kube, prefix=POOL, nodes=1, seed=5)
        make_node_ready(kube, PLUGIN_NODE, labels={"e2e/pool": PLUGIN_NODE},
                        capacity={GPU: "8"})
    finally:
        kube.close()
    return names


def gpu_pod(name: str, *, scheduler: str, pool: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedulerName": scheduler, "terminationGracePeriodSeconds": 0,
                     "nodeSelector": {"e2e/pool": pool},
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"limits": {GPU: "2"}}}]}}


def special_claim(kube: Kube, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    status = wait_for(f"extendedResourceClaimStatus of {name}", lambda: kube.get(
        "Pod", name, "default").get("status", {}).get("extendedResourceClaimStatus"))
    claim = wait_for(f"the claim of {name} allocated", lambda: (
        c if (c := kube.get("ResourceClaim", status["resourceClaimName"], "default"))
        .get("status", {}).get("allocation") else None))
    return status, claim


def comparable(pod: dict[str, Any], status: dict[str, Any], claim: dict[str, Any]
               ) -> dict[str, Any]:
    meta = claim["metadata"]
    [owner] = meta["ownerReferences"]
    results = claim["status"]["allocation"]["devices"]["results"]
    return {
        "name_base": meta["name"][:-5], "generate_name": meta.get("generateName"),
        "annotations": meta.get("annotations"),
        "owner": {k: owner.get(k) for k in ("apiVersion", "kind", "name", "controller")},
        "owner_uid_is_pod": owner["uid"] == pod["metadata"]["uid"],
        "requests": claim["spec"]["devices"]["requests"],
        "results": sorted((r["request"], r["driver"]) for r in results),
        "node_pool": {r["pool"] for r in results} == {pod["spec"]["nodeName"]},
        "reserved_for": [(r["resource"], r["name"]) for r in claim["status"]["reservedFor"]],
        "finalizers": meta.get("finalizers"),
        "mappings": status["requestMappings"],
    }


def test_drax_builds_the_same_special_claim_as_the_in_tree_scheduler(nodes: list[str],
                                                                     kube: Kube) -> None:
    seen = {}
    for scheduler in ("drax", "default-scheduler"):
        name = f"{POOL}-gpu2-{scheduler}"
        kube.create(gpu_pod(name, scheduler=scheduler, pool=POOL))
        pod = wait_bound(kube, [name])[name]
        status, claim = special_claim(kube, name)
        view = comparable(pod, status, claim)
        assert view["annotations"] == {ANNOTATION: "true"}
        assert view["node_pool"] and view["owner_uid_is_pod"]
        view["name_base"] = view["name_base"].replace(scheduler, "<scheduler>")
        view["generate_name"] = (view["generate_name"] or "").replace(scheduler, "<scheduler>")
        view["reserved_for"] = [(r, n.replace(scheduler, "<scheduler>"))
                                for r, n in view["reserved_for"]]
        view["owner"]["name"] = view["owner"]["name"].replace(scheduler, "<scheduler>")
        seen[scheduler] = view
    assert seen["drax"] == seen["default-scheduler"]


def test_a_device_plugin_node_is_left_to_the_resource_fit(nodes: list[str], kube: Kube
                                                         ) -> None:
    for scheduler in ("drax", "default-scheduler"):
        name = f"{POOL}-plugin-{scheduler}"
        kube.create(gpu_pod(name, scheduler=scheduler, pool=PLUGIN_NODE))
        pod = wait_bound(kube, [name])[name]
        assert pod["spec"]["nodeName"] == PLUGIN_NODE
        assert not pod.get("status", {}).get("extendedResourceClaimStatus")
    claims = [c for c in kube.list("ResourceClaim", "default")
              if c["metadata"]["name"].startswith(f"{POOL}-plugin-")]
    assert claims == []


def test_own_claim_plus_device_plugin_resource_drax_binds_where_in_tree_fails(
        cluster: Cluster, kube: Kube) -> None:
    """A pod with its own claim whose extended resource the node's device plugin
    serves. The in-tree scheduler (1.37.2) builds a special claim with no
    requests there and its PreBind then refuses the empty request mapping, so
    the pod never binds; drax needs no special claim and binds it. A kept
    deviation (docs/decisions.md), pinned here so an upstream fix shows up."""
    from tests.e2e.workload import add_templates

    [node] = add_pool(kube, prefix="extboth", nodes=1, seed=7)
    add_templates(kube, prefix="extboth")
    allocatable = {**kube.get("Node", node)["status"]["allocatable"], GPU: "8"}
    kube.patch("Node", node, {"status": {"allocatable": allocatable, "capacity": allocatable}},
               subresource="status")
    for scheduler in ("drax", "default-scheduler"):
        obj = gpu_pod(f"extboth-{scheduler}", scheduler=scheduler, pool="extboth")
        obj["spec"]["resourceClaims"] = [{"name": "d",
                                          "resourceClaimTemplateName": "extboth-1gpu"}]
        obj["spec"]["containers"][0]["resources"]["claims"] = [{"name": "d"}]
        kube.create(obj)
    bound = wait_bound(kube, ["extboth-drax"])["extboth-drax"]
    assert bound["spec"]["nodeName"] == node
    assert not bound.get("status", {}).get("extendedResourceClaimStatus")

    def in_tree_refused() -> str | None:
        p = kube.get("Pod", "extboth-default-scheduler", "default")
        for c in p.get("status", {}).get("conditions") or []:
            if c["type"] == "PodScheduled" and "request mappings" in (c.get("message") or ""):
                return str(c["message"])
        return None

    assert "nil or empty request mappings" in wait_for("in-tree PreBind refusal",
                                                       in_tree_refused)
    assert not kube.get("Pod", "extboth-default-scheduler", "default")["spec"].get("nodeName")
