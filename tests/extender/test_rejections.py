"""Filter's rejection categories (the `drax_filter_node_rejections_total`
labels) come typed with each reason, not from its wording."""

from __future__ import annotations

import pytest

from app.allocator import reasons
from app.allocator.types import Rejection
from tests.extender.cluster import GPU_CLASS, extender, gpu_node, load, the_pod
from tests.inventory.objects import claim, device_class, exactly, pod


def _cluster():
    return load(GPU_CLASS, device_class("tpu", "device.driver == 'tpu.example.com'"),
                gpu_node("n0"), gpu_node("n1"),
                claim("eight", requests=[exactly("g", "gpu", count=8)]),
                claim("tpu", requests=[exactly("t", "tpu")]),
                pod("big", claims={"c": "eight"}), pod("odd", claims={"c": "tpu"}),
                pod("lost", claims={"c": "missing"}))


def test_each_rejection_is_counted_under_its_category() -> None:
    inv = _cluster()
    ext = extender(inv)
    big = ext.filter(the_pod(inv, "default/big"), ["n0", "n1", "gone"])
    assert big.rejections == {Rejection.NOT_ENOUGH_FREE: 2, Rejection.UNKNOWN_NODE: 1}
    odd = ext.filter(the_pod(inv, "default/odd"), ["n0"])
    assert odd.rejections == {Rejection.NO_DEVICE_OF_CLASS: 1}
    lost = ext.filter(the_pod(inv, "default/lost"), ["n0", "n1"])
    assert lost.rejections == {Rejection.CLAIM_NOT_FOUND: 2}


def test_rewording_a_reason_keeps_its_category(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reasons, "_describe",
                        lambda search, request, st: "constraint incomplete, does not exist")
    inv = _cluster()
    result = extender(inv).filter(the_pod(inv, "default/big"), ["n0"])
    text = {**result.failed, **result.unresolvable}["n0"]
    assert text.endswith("constraint incomplete, does not exist")
    assert result.rejections == {Rejection.NOT_ENOUGH_FREE: 1}
