"""A pod's requests as kube-scheduler's NodeResourcesFit counts them (component-helpers'
PodRequests): containers add up, init containers peak, sidecars add to both, overhead
last, pod-level requests replace cpu and memory, and a running pod's status counts
when larger."""

from __future__ import annotations

from typing import Any

from app.model.parse import parse_node, parse_pod, parse_pod_usage
from app.model.requests import NO_RESOURCES, Resources

GI = 1024 ** 3


def pod(spec: dict[str, Any], status: dict[str, Any] | None = None) -> Resources:
    return parse_pod({"metadata": {"name": "p"}, "spec": spec,
                      "status": status or {}}).requests


def c(name: str, cpu: str | None = None, memory: str | None = None, *,
      sidecar: bool = False, limits: dict[str, str] | None = None) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    out: dict[str, Any] = {"name": name, "resources": {"requests": requests}}
    if limits:
        out["resources"]["limits"] = limits
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


def test_containers_add_up_and_round_up_as_the_scheduler() -> None:
    got = pod({"containers": [c("a", "250m", "1Gi"), c("b", "0.0005", "1")]})
    assert got.milli_cpu == 251  # 0.5m rounds up to 1m
    assert got.memory == GI + 1


def test_limits_stand_in_for_missing_requests_and_scalars_are_kept() -> None:
    got = pod({"containers": [{"name": "a", "resources": {
        "limits": {"cpu": "2", "example.com/fpga": "1", "hugepages-2Mi": "4Mi"},
        "requests": {"cpu": "1"}}}]})
    assert got.milli_cpu == 1000
    assert got.scalars == (("example.com/fpga", 1), ("hugepages-2Mi", 4 * 1024 ** 2))


def test_an_init_container_counts_as_its_peak_not_added() -> None:
    got = pod({"initContainers": [c("i", "3", "1Gi")],
               "containers": [c("a", "1", "2Gi"), c("b", "1", "1Gi")]})
    assert got.milli_cpu == 3000  # max(3, 1 + 1)
    assert got.memory == 3 * GI   # max(1Gi, 2Gi + 1Gi)


def test_sidecars_add_to_the_sum_and_to_the_init_containers_after_them() -> None:
    got = pod({"initContainers": [c("first", "2"), c("side", "500m", sidecar=True),
                                  c("later", "2")],
               "containers": [c("main", "1")]})
    # running: main 1 + side 0.5 = 1.5; "later" starts beside the sidecar: 2.5;
    # "first" ran before it: 2
    assert got.milli_cpu == 2500
    got = pod({"initContainers": [c("side", "500m", sidecar=True)],
               "containers": [c("main", "1")]})
    assert got.milli_cpu == 1500


def test_overhead_is_added_last() -> None:
    got = pod({"overhead": {"cpu": "100m", "memory": "64Mi"},
               "initContainers": [c("i", "2")], "containers": [c("a", "1", "1Gi")]})
    assert got.milli_cpu == 2100
    assert got.memory == GI + 64 * 1024 ** 2


def test_pod_level_requests_replace_cpu_and_memory_only() -> None:
    got = pod({"resources": {"requests": {"cpu": "4", "memory": "8Gi"}},
               "containers": [{"name": "a", "resources": {"requests": {
                   "cpu": "1", "ephemeral-storage": "1Gi"}}}]})
    assert (got.milli_cpu, got.memory, got.ephemeral_storage) == (4000, 8 * GI, GI)


def test_a_resized_pod_counts_its_larger_status() -> None:
    spec = {"containers": [c("a", "1", "1Gi")]}
    grown = {"containerStatuses": [{"name": "a", "allocatedResources": {"cpu": "3"},
                                    "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}]}
    assert pod(spec, grown).milli_cpu == 3000
    shrunk = {"containerStatuses": [{"name": "a", "allocatedResources": {"cpu": "500m"}}]}
    assert pod(spec, shrunk).milli_cpu == 1000  # the spec, until the kubelet applies it
    infeasible = {**shrunk, "conditions": [{"type": "PodResizePending", "status": "True",
                                            "reason": "Infeasible"}]}
    assert pod({"containers": [c("a", "8")]}, infeasible).milli_cpu == 500


def test_a_node_reads_its_allocatable_and_none_without_one() -> None:
    node = parse_node({"metadata": {"name": "n"}, "status": {"allocatable": {
        "cpu": "3900m", "memory": "16Gi", "pods": "110", "example.com/fpga": "2"}}})
    assert node.resources == Resources(milli_cpu=3900, memory=16 * GI, pods=110,
                                       scalars=(("example.com/fpga", 2),))
    assert parse_node({"metadata": {"name": "n"}}).resources is None


def test_a_pod_without_claims_is_kept_as_its_requests_and_only_once_bound() -> None:
    raw = {"metadata": {"name": "w", "namespace": "ns", "uid": "u1"},
           "spec": {"containers": [c("a", "2")]}}
    assert parse_pod_usage(raw).requests is NO_RESOURCES
    bound = {**raw, "spec": {**raw["spec"], "nodeName": "n1"}}
    usage = parse_pod_usage(bound)
    assert (usage.key, usage.uid, usage.node_name, usage.requests.milli_cpu) == (
        "ns/w", "u1", "n1", 2000)
    # pods of one workload share one vector
    assert parse_pod_usage({**bound, "metadata": {"name": "x"}}).requests is usage.requests
