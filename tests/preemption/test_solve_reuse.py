"""What one search shares between its nodes, and what it reads again:
nodes of other hardware whose devices the preemptor's requests match alike
share one problem skeleton; whether the preemptor has room on a node as it
is is read once per node.
"""

from __future__ import annotations

from typing import Any

from app.preemption.fit import NodeFit
from tests.extender.cluster import GPU_CLASS, gpu_node
from tests.inventory.objects import exactly, template
from tests.preemption.builders import load, preemptor, searcher
from tests.preemption.test_fit import gpu_holder, sized
from tests.preemption.test_part_sharing import ROOT_CLAIM, build, each_as_alone

FREE = None


def alike(*nics: tuple[int | None, int | None]) -> dict[str, Any]:
    """Nodes of three roots, each root's two GPUs held by its own pod (0, 1,
    2), the NICs of roots r0 and r1 per node as `nics` gives them (the root's
    own pod, pod 3 or 4, or free): every node uses the same devices, so the
    nodes differ only in who holds a NIC. The preemptor wants two GPUs and a
    NIC of one root."""
    nodes = [{"pods": [(0, False)] * 5,
              "owner": (*[ROOT_CLAIM] * 6, r0, r1, FREE),
              "holders": [[0], [1], [2], [3], [4]]} for r0, r1 in nics]
    return {"nodes": nodes, "gpus": 2, "nic": True, "board": None, "rootless": False}


def test_nodes_of_other_hardware_whose_devices_match_alike_share_a_skeleton() -> None:
    spec = alike((ROOT_CLAIM, 3), (ROOT_CLAIM, 3))
    objs = build(spec)
    for obj in objs:  # n1's GPUs are another model: other hardware, matched alike
        if obj["kind"] == "ResourceSlice" and obj["metadata"]["name"] == "n1-gpus":
            for device in obj["spec"]["devices"]:
                device["attributes"]["model"] = {"string": "b"}
    inv = load(*objs)
    assert inv.node_state("n0") is not None and inv.node_state("n1") is not None
    _, search = searcher(inv)
    plan = search.search(inv.pod("default/p"))
    assert len(plan.nodes) == 2
    assert search.skeletons == 1 and search.problems == 2
    each_as_alone(lambda only: build(spec, only), 2, "allocator")


def test_room_as_the_node_is_is_read_once_per_node() -> None:
    # "roomy" has room for one more pod whoever goes; "full" takes one pod, so
    # the preemptor has room there only once its victim goes.
    objs: list[Any] = [GPU_CLASS, template("want", requests=[exactly("gpu", "gpu")]),
                       preemptor()]
    for name, pods in (("roomy", "110"), ("full", "1")):
        objs += [sized(name, pods=pods), *gpu_node(name, roots=("r0",)),
                 *gpu_holder(f"{name}-0", name, 0, 1, "1")]
    inv = load(*objs)
    p, roomy0, full0 = (inv.pod(f"default/{n}") for n in ("p", "roomy-0", "full-0"))
    assert p is not None and roomy0 is not None and full0 is not None
    fit = NodeFit(p, inv)
    assert fit.fits("roomy", [roomy0]) and fit.fits("roomy", []) and fit.roomy("roomy")
    assert fit.room_reads == 1
    assert fit.fits("full", [full0]) and not fit.fits("full", []) and not fit.roomy("full")
    assert fit.room_reads == 2
