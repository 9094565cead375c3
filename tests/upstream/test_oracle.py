"""The oracle process itself: its ops, its answers to bad input, its pipelining."""

from __future__ import annotations

from typing import Any

from tests.upstream.oracle import Oracle

DRIVER = "gpu.example.com"


def _slice(devices: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": "node-a-gpus"},
            "spec": {"driver": DRIVER, "nodeName": "node-a",
                     "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}}


def _objects() -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
         "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}},
        _slice([{"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(2)]),
    ]


def _claim(name: str, count: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"devices": {"requests": [
                {"name": "gpus", "exactly": {"deviceClassName": "gpu", "count": count}}]}}}


def test_version_names_the_pinned_modules(oracle: Oracle) -> None:
    modules = oracle.version()["modules"]
    assert modules["k8s.io/dynamic-resource-allocation"] == "v0.37.2"
    assert modules["k8s.io/api"] == "v0.37.2"


def test_malformed_lines_get_an_error_and_the_process_keeps_answering(oracle: Oracle) -> None:
    answers = oracle.batch([{"op": "nope"}, {"op": "cel"},
                            {"op": "allocate", "objects": [{"kind": "Pod"}], "node": "x"},
                            {"op": "allocate", "objects": [], "claims": [], "node": "ghost"}])
    assert all("error" in a for a in answers), answers
    assert "unknown op" in answers[0]["error"]
    assert "unsupported kind" in answers[2]["error"]
    assert oracle.version()["modules"]


def test_cel_outcomes(oracle: Oracle) -> None:
    device = {"driver": DRIVER, "attributes": {"index": {"int": 3}}, "capacity": {"mem": "2Gi"}}
    assert oracle.cel("device.attributes['gpu.example.com'].index == 3", device)["result"] is True
    assert oracle.cel("device.capacity['gpu.example.com'].mem.isLessThan(quantity('1Gi'))",
                      device)["result"] is False
    assert "compileError" in oracle.cel("1 +", device)
    assert "no such key" in oracle.cel("device.attributes['x.io'].y == 1", device)["runtimeError"]
    nested = "[1,2,3,4,5,6,7,8,9,10]"
    costly = f"{nested}.all(a, {nested}.all(b, {nested}.all(c, {nested}.all(d, " \
             f"{nested}.all(e, {nested}.all(f, true))))))"
    assert "cost limit" in oracle.cel(costly, device)["costError"]


def test_allocate_feasible_infeasible_and_timed(oracle: Oracle) -> None:
    fits = oracle.allocate(objects=_objects(), claims=[_claim("two", 2)], node="node-a",
                           timing=True)
    assert fits["feasible"] is True and fits["error"] is None
    assert sorted(d["device"] for d in fits["results"][0]) == ["gpu-0", "gpu-1"]
    assert fits["nanos"] > 0
    too_many = oracle.allocate(objects=_objects(), claims=[_claim("three", 3)], node="node-a")
    assert too_many == {"feasible": False, "error": None, "results": None}


def test_allocated_claims_block_their_devices(oracle: Oracle) -> None:
    taken = _claim("taken", 1)
    taken["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpus", "driver": DRIVER, "pool": "node-a", "device": "gpu-0"}]}}}
    answer = oracle.allocate(objects=[*_objects(), taken], claims=[_claim("one", 1)],
                             node="node-a")
    assert answer["results"][0][0]["device"] == "gpu-1"


def test_unknown_class_is_an_error_not_a_failed_node(oracle: Oracle) -> None:
    claim = _claim("c", 1)
    claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "missing"
    answer = oracle.allocate(objects=_objects(), claims=[claim], node="node-a")
    assert answer["feasible"] is False and "missing" in answer["error"]


def test_per_node_mode_allocates_on_each_node(oracle: Oracle) -> None:
    answer = oracle.request({"op": "allocate", "objects": _objects(), "claims": [_claim("c", 1)],
                             "nodes": ["node-a", "node-a"], "repeat": 3, "timing": True})
    assert [n["feasible"] for n in answer["perNode"]] == [True, True]
    assert answer["repeat"] == 3


def test_invalid_pool_is_an_error_that_fails_only_the_node(oracle: Oracle) -> None:
    objects = _objects()
    objects[2] = _slice([{"name": "gpu-0"}, {"name": "gpu-0"}])
    answer = oracle.allocate(objects=objects, claims=[_claim("c", 1)], node="node-a")
    assert answer["feasible"] is False and answer["failedOnNode"] is True
    assert "invalid resource pool" in answer["error"]
