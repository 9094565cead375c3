"""What one search shares between its nodes, and what it reads again:
whether the preemptor has room on a node as it is, once per node.
"""

from __future__ import annotations

from typing import Any

from app.preemption.fit import NodeFit
from tests.extender.cluster import GPU_CLASS, gpu_node
from tests.inventory.objects import exactly, template
from tests.preemption.builders import load, preemptor
from tests.preemption.test_fit import gpu_holder, sized


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
