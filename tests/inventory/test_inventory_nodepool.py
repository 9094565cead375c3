"""A node pool (`drax serve --node-selector`): which nodes and slices the
inventory keeps, how they follow a Node's labels, what the verbs answer for
a node outside the pool, and the file load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app import runtime
from app.config import ConfigError, load_settings, parse_node_selector
from app.extender import BindCause
from app.inventory import KINDS, Inventory, NodePool
from app.model import decode_resource_slice
from app.runtime import load_files
from tests.extender.cluster import GPU_CLASS, extender, gpu_node, the_pod
from tests.inventory.objects import claim, device, exactly, node, pod, resource_slice

POOL = {"pool": "a"}


def pooled(*objs: dict[str, Any] | list[dict[str, Any]]) -> Inventory:
    inv = Inventory(pool=NodePool(POOL))
    for obj in objs:
        for o in obj if isinstance(obj, list) else [obj]:
            inv.apply(o["kind"], "ADDED", o)
    for kind in KINDS:
        inv.mark_synced(kind)
    return inv


def selector(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeSelectorTerms": list(terms)}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return {"matchExpressions": [out]}


def test_only_the_pools_nodes_and_their_slices_are_held() -> None:
    inv = pooled(node("a1", pool="a"), node("b1", pool="b"), node("x"),
                 gpu_node("a1"), gpu_node("b1"), gpu_node("x"), gpu_node("ghost"))
    assert inv.node_names() == ["a1"]
    assert inv.counts().devices == 4
    assert inv.in_pool("a1") and not inv.in_pool("b1") and not inv.in_pool("ghost")


def test_a_node_local_slice_outside_the_pool_is_not_parsed() -> None:
    inv = pooled(node("a1", pool="a"))
    broken = resource_slice("b1-gpus", node_name="b1", devices=[{"name": 5}])
    inv.apply("ResourceSlice", "ADDED", broken)  # would raise InvalidObject if parsed
    assert inv.counts().devices == 0
    assert not inv.admits("ResourceSlice", broken)


def test_network_attached_slices_are_kept_when_their_selector_can_reach_the_pool() -> None:
    def net(name: str, **selection: Any) -> dict[str, Any]:
        return resource_slice(name, driver="net.example.com", devices=[device("d")],
                              **selection)

    inv = pooled(
        node("a1", pool="a", zone="z1"),
        net("all", allNodes=True),
        net("same-pool", nodeSelector=selector(expr("pool", "In", "a", "c"))),
        net("other-pool", nodeSelector=selector(expr("pool", "In", "b"))),
        net("not-a", nodeSelector=selector(expr("pool", "NotIn", "a"))),
        net("no-pool-label", nodeSelector=selector(expr("pool", "DoesNotExist"))),
        # A label the pool does not fix may hold on some pool node.
        net("zone", nodeSelector=selector(expr("zone", "In", "z9"))),
        net("either", nodeSelector=selector(expr("pool", "In", "b"), expr("zone", "Exists"))),
        net("by-name", nodeSelector=selector({"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["b1"]}]})),
    )
    kept = {s.name for s in inv._objects.slices.values()}
    assert kept == {"all", "same-pool", "zone", "either", "by-name"}


def test_per_device_selection_is_kept_when_a_device_can_reach_the_pool() -> None:
    def per_device(name: str, **where: Any) -> dict[str, Any]:
        return resource_slice(name, driver="net.example.com", perDeviceNodeSelection=True,
                              devices=[{**device("d"), **where}])

    inv = pooled(node("a1", pool="a"),
                 per_device("on-a1", nodeName="a1"), per_device("on-b1", nodeName="b1"),
                 per_device("everywhere", allNodes=True),
                 per_device("pool-b", nodeSelector=selector(expr("pool", "In", "b"))))
    assert {s.name for s in inv._objects.slices.values()} == {"on-a1", "everywhere"}


def test_a_node_that_leaves_the_pool_takes_its_slices_and_one_that_joins_is_announced(
) -> None:
    inv = pooled(node("a1", pool="a"), node("a2", pool="a"), gpu_node("a1"), gpu_node("a2"))
    joined: list[str] = []
    assert inv.pool is not None
    inv.pool.on_join = joined.append
    before = inv.version("a1")
    inv.apply("Node", "MODIFIED", node("a1", pool="b"))
    assert inv.node_names() == ["a2"]
    assert inv.counts().devices == 4
    assert inv.node_state("a1") is None and inv.version("a1") != before
    # Its slices' events are dropped while it is outside.
    inv.apply("ResourceSlice", "MODIFIED", gpu_node("a1")[0])
    assert inv.counts().devices == 4
    inv.apply("Node", "MODIFIED", node("a1", pool="a"))
    assert joined == ["a1"]
    inv.apply("Node", "MODIFIED", node("a1", pool="a", extra="1"))
    assert joined == ["a1"]  # a member's update is no join
    inv.apply("ResourceSlice", "ADDED", gpu_node("a1")[0])
    assert inv.counts().devices == 8
    inv.apply("Node", "DELETED", node("a1", pool="a"))
    assert inv.node_names() == ["a2"] and inv.counts().devices == 4


def test_filter_and_bind_refuse_a_node_outside_the_pool_for_any_pod() -> None:
    inv = pooled(GPU_CLASS, node("a1", pool="a"), node("b1", pool="b"),
                 gpu_node("a1"), gpu_node("b1"),
                 claim("c", requests=[exactly("gpu", "gpu")]), pod("p", uid="u1",
                                                                   claims={"g": "c"}),
                 pod("plain", uid="u2"))
    ext = extender(inv)
    for key in ("default/p", "default/plain"):
        result = ext.filter(the_pod(inv, key), ["a1", "b1", "elsewhere"])
        assert result.passed == ["a1"]
        assert set(result.unresolvable) == {"b1", "elsewhere"}
        assert "outside this drax's node pool (--node-selector pool=a)" in \
            result.unresolvable["b1"]
        assert result.rejections.get("outside_pool") == 2
    assert [n for n, _ in ext.prioritize(the_pod(inv), ["a1", "b1"])] == ["a1"]


async def test_bind_outside_the_pool_is_refused() -> None:
    inv = pooled(GPU_CLASS, node("a1", pool="a"), gpu_node("a1"), pod("plain", uid="u2"))
    ext = extender(inv, file_mode=True)
    ext.filter(the_pod(inv, "default/plain"), ["a1", "b1"])
    error = await ext.bind(namespace="default", name="plain", uid="u2", node="b1")
    assert error is not None and "outside this drax's node pool" in error.message
    assert error.cause == BindCause.OUTSIDE_POOL
    assert await ext.bind(namespace="default", name="plain", uid="u2", node="a1") is None


def test_file_load_keeps_slices_read_before_their_nodes(tmp_path: Path) -> None:
    # Slices sort before Nodes here: their nodes' labels are known only later.
    (tmp_path / "a-slices.json").write_text(json.dumps(
        {"kind": "List", "items": gpu_node("a1") + gpu_node("b1") + gpu_node("ghost")}))
    (tmp_path / "b-nodes.json").write_text(json.dumps(
        {"kind": "List", "items": [node("a1", pool="a"), node("b1", pool="b")]}))
    inv = Inventory(pool=NodePool(POOL))
    report = load_files(inv, [tmp_path])
    assert report.invalid == 0
    assert inv.node_names() == ["a1"] and inv.counts().devices == 4


def test_node_selector_setting_parses_and_rejects_clearly() -> None:
    assert parse_node_selector("pool=a, tier = gpu") == {"pool": "a", "tier": "gpu"}
    settings = load_settings(environ={}, overrides={"node_selector": "pool=a"})
    assert settings.node_selector == {"pool": "a"}
    for bad in ("pool", "pool!=a", "=a", "pool=a,pool=b"):
        with pytest.raises(ConfigError, match="--node-selector"):
            load_settings(environ={}, overrides={"node_selector": bad})
    assert load_settings(environ={"DRAX_NODE_SELECTOR": "x=y"}).node_selector == {"x": "y"}
    with pytest.raises(ValueError):
        NodePool({})


def test_a_file_load_never_decodes_other_nodes_slices(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[bytes] = []

    def recording(raw: Any) -> Any:
        decoded.append(bytes(raw))
        return decode_resource_slice(raw)

    monkeypatch.setattr(runtime, "decode_resource_slice", recording)
    (tmp_path / "a-nodes.json").write_text(json.dumps(
        {"kind": "List", "items": [node("a1", pool="a"), node("b1", pool="b")]}))
    (tmp_path / "b-slices.json").write_text(json.dumps(
        {"kind": "ResourceSliceList", "items": [
            {k: v for k, v in s.items() if k != "kind"}
            for s in gpu_node("a1") + gpu_node("b1")]}))
    inv = Inventory(pool=NodePool(POOL))
    report = load_files(inv, [tmp_path])
    assert report.invalid == 0
    assert inv.node_names() == ["a1"] and inv.counts().devices == 4
    assert decoded and all(b'"a1"' in d for d in decoded)
