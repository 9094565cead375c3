"""Compact device storage: shared key tables and shared parsed values keep the
model's meaning (lookups, equality, quantity text, attribute kinds)."""

from collections.abc import Callable
from typing import Any

import pytest

from app.model import ResourceSlice, interning, parse_object, typed
from app.model.compact import FieldMap, shared_layout
from app.model.parse import parse_object as reference_parse


def _slice(name: str, devices: list[dict[str, Any]],
           parse: Callable[[str, dict[str, Any]], Any] = parse_object) -> ResourceSlice:
    s = parse("ResourceSlice", {"kind": "ResourceSlice", "metadata": {"name": name},
                                "spec": {"driver": "gpu.example.com", "nodeName": name,
                                         "pool": {"name": name}, "devices": devices}})
    assert isinstance(s, ResourceSlice)
    return s


def test_field_map_is_a_read_only_mapping() -> None:
    m = FieldMap({"a": 1, "b": 2})
    assert m["b"] == 2 and m.get("a") == 1 and m.get("z") is None and m.get("z", 5) == 5
    assert "a" in m and "z" not in m
    assert list(m) == ["a", "b"] and len(m) == 2
    assert list(m.items()) == [("a", 1), ("b", 2)] and list(m.values()) == [1, 2]
    assert m == {"a": 1, "b": 2} and m == FieldMap({"a": 1, "b": 2})
    assert m != FieldMap({"a": 1, "b": 3}) and m != FieldMap({"b": 2, "a": 1, "c": 0})
    assert FieldMap({"b": 2, "a": 1}) == m  # same content, other order


def test_a_map_built_on_a_kept_layout_shares_it() -> None:
    layout = shared_layout(("a", "b"))
    m = FieldMap.on_layout(layout, (1, 2))
    assert m._layout is layout and m == FieldMap({"a": 1, "b": 2}) == {"a": 1, "b": 2}
    assert FieldMap.from_layout(("a", "b"), (3, 4))._layout is layout


def test_devices_with_the_same_names_share_one_key_table() -> None:
    a = _slice("n1", [{"name": "gpu-0", "attributes": {"uuid": {"string": "u1"}}}])
    b = _slice("n2", [{"name": "gpu-0", "attributes": {"uuid": {"string": "u2"}}}])
    ma, mb = a.devices[0].attributes, b.devices[0].attributes
    assert isinstance(ma, FieldMap) and isinstance(mb, FieldMap)
    assert ma._layout is mb._layout
    assert ma["gpu.example.com/uuid"].value == "u1" and mb["gpu.example.com/uuid"].value == "u2"


def test_equal_quantities_written_differently_stay_apart() -> None:
    s = _slice("n1", [{"name": "a", "capacity": {"memory": {"value": "1Gi"}}},
                      {"name": "b", "capacity": {"memory": {"value": "1024Mi"}}},
                      {"name": "c", "capacity": {"memory": {"value": "1Gi"}}}])
    a, b, c = (d.capacity["gpu.example.com/memory"].value for d in s.devices)
    assert c.text == "1Gi"
    assert a == b and a.text == "1Gi" and b.text == "1024Mi"
    assert s.devices[0].capacity is s.devices[2].capacity  # identical raw maps are shared


def test_scalar_attribute_kinds_are_not_confused_by_equal_values() -> None:
    s = _slice("n1", [{"name": "a", "attributes": {"x": {"int": 1}}},
                      {"name": "b", "attributes": {"x": {"bool": True}}},
                      {"name": "c", "attributes": {"x": {"int": True}}},
                      {"name": "d", "attributes": {"x": {"string": 1}}}])
    kinds = [(d.attributes["gpu.example.com/x"].kind, d.attributes["gpu.example.com/x"].value)
             for d in s.devices]
    assert kinds == [("int", 1), ("bool", True), ("", None), ("", None)]


def test_counter_consumptions_are_shared_by_their_raw_form() -> None:
    use = [{"counterSet": "gpu-0", "counters": {"memory": {"value": "10Gi"}}}]
    s = _slice("n1", [{"name": "a", "consumesCounters": use},
                      {"name": "b", "consumesCounters": use},
                      {"name": "c", "consumesCounters": [
                          {"counterSet": "gpu-0", "counters": {"memory": {"value": "10240Mi"}}}]}])
    a, b, c = (d.consumes_counters for d in s.devices)
    assert a is b and a == c and c[0].counters["memory"].text == "10240Mi"


@pytest.mark.parametrize("parse", [parse_object, reference_parse], ids=["typed", "reference"])
def test_a_full_value_cache_starts_over_so_nearby_repeats_stay_shared(
        monkeypatch: Any, parse: Callable[[str, dict[str, Any]], Any]) -> None:
    # Unique values (uuids) fill the bounded cache; a value that repeats only
    # within one slice (a MIG partition's parentUUID) must still be shared after.
    # Each cache starts empty, so what earlier tests left in it does not count.
    caches = (interning.SCALARS, interning.SHARED_ATTRIBUTES, typed._ATTRIBUTES)
    for cache in caches:
        monkeypatch.setattr(cache, "limit", 8)
        cache.clear()
    _slice("fill", [{"name": f"gpu-{i}", "attributes": {"uuid": {"string": f"fill-{i}"}}}
                    for i in range(20)], parse)
    s = _slice("n1", [{"name": f"mig-{i}", "attributes": {"parentUUID": {"string": "GPU-7"}}}
                      for i in range(3)], parse)
    values = [d.attributes["gpu.example.com/parentUUID"] for d in s.devices]
    assert values[0].value == "GPU-7"
    assert values[1] is values[0] and values[2] is values[0]
    assert all(len(c) <= 8 for c in caches)
    assert any(len(c) > 0 for c in caches)
