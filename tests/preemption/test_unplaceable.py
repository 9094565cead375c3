"""Nodes whose devices never pass the preemptor's first request share one refusal.

The preemptor wants a GPU of model "a" and a NIC; every node has model "b"
GPUs and NICs, held by low-priority pods, each node used differently (on some
no pod holds a NIC, so no pod holds anything the preemptor could use). No
victim set can help, and
the allocator's words on why (no device passes the request's selectors) come
from the hardware alone: one allocator run answers every node, with the reason
each node gets searched alone.
"""

from __future__ import annotations

from typing import Any

from tests.extender.cluster import GPU_CLASS, NIC_CLASS
from tests.inventory.objects import (
    claim,
    device,
    exactly,
    node,
    resource_slice,
    result,
    template,
)
from tests.preemption.builders import load, preemptor, searcher

MODEL_A = 'device.attributes["gpu.example.com"].model == "a"'


def cluster(nodes: list[list[int]]) -> list[dict[str, Any]]:
    """Per node, per GPU then per NIC the priority of the pod holding it (-1: free)."""
    objs: list[dict[str, Any]] = [
        GPU_CLASS, NIC_CLASS,
        template("want", requests=[exactly("gpu", "gpu", selectors=(MODEL_A,)),
                                   exactly("nic", "nic")]),
        preemptor(priority=1000)]
    for n, held in enumerate(nodes):
        name = f"n{n}"
        gpus = [device(f"gpu-{i}", model="b", uuid=f"GPU-{name}-{i}") for i in range(4)]
        nics = [device(f"nic-{i}", mac=f"{name}-{i}") for i in range(2)]
        objs += [node(name),
                 resource_slice(f"{name}-gpus", node_name=name, pool=name, devices=gpus),
                 resource_slice(f"{name}-nics", driver="nic.example.com", node_name=name,
                                pool=name, devices=nics)]
        for i, prio in enumerate(held):
            if prio < 0:
                continue
            pod = f"{name}-p{i}"
            kind, driver, at = ("gpu", "gpu.example.com", i) if i < 4 else (
                "nic", "nic.example.com", i - 4)
            objs.append(claim(f"{pod}-c", requests=[exactly(kind, kind)],
                              results=[result(kind, f"{driver}/{name}/{kind}-{at}")],
                              reserved_for=[{"resource": "pods", "name": pod,
                                             "uid": f"uid-{pod}"}]))
            objs.append({"kind": "Pod",
                         "metadata": {"name": pod, "namespace": "default", "uid": f"uid-{pod}"},
                         "spec": {"nodeName": name, "priority": prio, "resourceClaims": [
                             {"name": "gpu", "resourceClaimName": f"{pod}-c"}]},
                         "status": {"phase": "Running"}})
    return objs


def test_nodes_no_device_of_serves_share_one_refusal() -> None:
    nodes = [[1, 2, 3, 4, 5, 6], [1, 2000, 3, 4, 5, -1], [1, 2, -1, 4, -1, -1],
             [5, 6, 7, 8, 2000, 9], [1, 2, 3, 4, 2000, 2000]]
    inv = load(*cluster(nodes))
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert not plan.nodes and sorted(plan.refused) == [f"n{n}" for n in range(len(nodes))]
    assert search.trials == 1
    for n, held in enumerate(nodes):
        alone_inv = load(*cluster([held]))
        _, alone = searcher(alone_inv)
        reason = alone.search(alone_inv.pod("default/p")).refused["n0"]
        assert plan.refused[f"n{n}"] == reason.replace("n0", f"n{n}")
        assert "0 pass the request selectors" in reason
