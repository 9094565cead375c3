"""The typed ResourceSlice decoder against the reference parse.

`app.model.typed` must make exactly what `parse_object` makes of the same
object, on the sample and example objects, on generated clusters and on
every odd input below, and refuse what it refuses with the same words.
"""

from __future__ import annotations

import copy
import gc
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.model import AttributeValue, Device, InvalidObject, ResourceSlice, typed
from app.model.parse import parse_object
from app.model.typed import convert_resource_slice, decode_resource_slice
from app.sources.files import SourceError, iter_sourced, load_objects
from loadtest import generator

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = [ROOT / "app" / "sample", ROOT / "tests" / "examples",
           ROOT / "tests" / "cli" / "v1beta1-objects.yaml"]


def _outcome(parse: Callable[[], ResourceSlice]) -> tuple[str, Any]:
    try:
        return "ok", parse()
    except InvalidObject as exc:
        return "invalid", str(exc)


def _assert_same(raw: dict[str, Any]) -> None:
    """Old and new agree on `raw`: equal objects (same field types, same device
    ids), or the same InvalidObject message. From JSON text the reference reads
    what orjson makes of it (an integer outside 64 bits as a float); the stdlib
    writes the text, as orjson cannot write such integers: compact with UTF-8
    as the API server writes it (what attribute texts are read piece by piece
    from), and spaced and ASCII-escaped as other writers do."""
    texts = [json.dumps(raw, separators=(",", ":"), ensure_ascii=False).encode(),
             json.dumps(raw, separators=(",", ":")).encode(), json.dumps(raw).encode()]
    for old, new in (
            *((_outcome(lambda data=data: parse_object("ResourceSlice", orjson.loads(data))),
               _outcome(lambda data=data: decode_resource_slice(data))) for data in texts),
            (_outcome(lambda: parse_object("ResourceSlice", copy.deepcopy(raw))),
             _outcome(lambda: convert_resource_slice(copy.deepcopy(raw))))):
        assert new[0] == old[0], (old, new)
        if old[0] == "invalid":
            assert new[1] == old[1]
            continue
        assert new[1] == old[1]
        assert repr(new[1]) == repr(old[1])
        assert [d.id for d in new[1].devices] == [d.id for d in old[1].devices]
        for a, b in zip(new[1].devices, old[1].devices, strict=True):
            assert type(a.attributes) is type(b.attributes)
            assert type(a.capacity) is type(b.capacity)


def _slices(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o.get("kind") == "ResourceSlice"]


def test_sample_and_example_slices_decode_as_parsed() -> None:
    slices = _slices(load_objects(SAMPLES))
    assert len(slices) >= 6
    for raw in slices:
        _assert_same(raw)


@pytest.mark.parametrize("seed", [0, 1])
def test_generated_clusters_decode_as_parsed(seed: int) -> None:
    slices = _slices(list(generator.iter_cluster(nodes=40, seed=seed,
                                                 partitionable_fraction=0.3,
                                                 shared_fraction=0.3)))
    assert any(len(s["spec"].get("devices") or ()) >= 32 for s in slices)  # MIG placements
    for raw in slices:
        _assert_same(raw)


def _slice(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"driver": "gpu.example.com", "nodeName": "n1",
                            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1}}
    base.update(spec)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": "s1", "uid": "u1", "resourceVersion": "7"}, "spec": base}


def _device(**fields: Any) -> dict[str, Any]:
    return {"name": "d", **fields}


ODD_SLICES = [
    # attribute values of every kind, and every unsupported form
    _slice(devices=[_device(attributes={
        "i": {"int": 3}, "b": {"bool": False}, "s": {"string": ""}, "v": {"version": "1.2.3"},
        "is": {"ints": [1, 2]}, "bs": {"bools": [True]}, "ss": {"strings": ["a"]},
        "vs": {"versions": ["1.0.0"]}, "x.example.com/q": {"string": "qualified"}})]),
    _slice(devices=[_device(attributes={"a": {}, "b": {"int": True}, "c": {"bool": 1},
                                        "d": {"string": 5}, "e": {"ints": []},
                                        "f": {"int": 1, "string": "x"}, "g": {"int": None},
                                        "h": {"ints": [1, "x"]}, "i": {"int": 1.0},
                                        "j": {"nope": 1}, "k": {"strings": "x"}})]),
    # a tuple built in Python is a list too
    _slice(devices=[_device(attributes={"t": {"strings": ("a", "b")}, "u": {"ints": ()}})]),
    _slice(devices=[_device(attributes={"a": "flat"})]),
    _slice(devices=[_device(attributes=None)]),
    _slice(devices=[_device(attributes=[])]),
    _slice(devices=[_device(attributes={"m": {"string": "x"},
                                        "gpu.example.com/m": {"string": "y"}})]),
    # capacity: plain, numbers, policies, bad
    _slice(devices=[_device(capacity={"memory": {"value": "80Gi"}, "cores": {"value": 8}})]),
    _slice(devices=[_device(capacity={"memory": {"value": "80Gi", "requestPolicy": {
        "default": "1Gi", "validValues": ["1Gi", "2Gi"],
        "validRange": {"min": "1Gi", "max": "80Gi", "step": "1Gi"}}}})]),
    _slice(devices=[_device(capacity={"memory": {"value": "80Gi", "requestPolicy": {
        "validValues": None, "validRange": None, "default": None}}})]),
    _slice(devices=[_device(capacity={"memory": {"value": "12K"}})]),
    _slice(devices=[_device(capacity={"memory": {}})]),
    _slice(devices=[_device(capacity={"memory": {"value": True}})]),
    _slice(devices=[_device(capacity={"memory": {"value": "1Gi",
                                                 "requestPolicy": {"default": "x"}}})]),
    _slice(devices=[_device(capacity=None)]),
    # counters
    _slice(sharedCounters=[{"name": "cs", "counters": {"a": {"value": "1"}}}]),
    _slice(sharedCounters=[{"name": "", "counters": {"a": {"value": "1"}}}]),
    _slice(sharedCounters=[{"name": "cs", "counters": {"a": {}}}]),
    _slice(devices=[_device(consumesCounters=[{"counterSet": "cs",
                                               "counters": {"a": {"value": "1"}}}])]),
    _slice(devices=[_device(consumesCounters=[{"counterSet": "",
                                               "counters": {"a": {"value": "1"}}}])]),
    _slice(devices=[_device(consumesCounters=[{"counterSet": "cs", "counters": None}])]),
    _slice(devices=[_device(consumesCounters=[{"counterSet": "cs", "counters": {
        "a": {"value": "x"}}}])]),
    # device fields
    _slice(devices=[_device(nodeName="", allNodes=False, bindsToNode=True,
                            bindingConditions=["a"], bindingFailureConditions=["b"],
                            allowMultipleAllocations=True)]),
    _slice(devices=[_device(allNodes="yes", bindsToNode=1, allowMultipleAllocations=0)]),
    _slice(devices=[_device(bindingConditions=[1, 2])]),
    _slice(devices=[_device(bindingConditions="a")]),
    _slice(devices=[_device(nodeName=3)]),
    _slice(devices=[_device(taints=[{"key": "k", "value": "v", "effect": "NoSchedule",
                                     "timeAdded": "2026-01-01T00:00:00Z"}])]),
    _slice(devices=[_device(taints=[{"value": "v"}])]),
    _slice(devices=[_device(taints=[])]),
    _slice(devices=[_device(nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "k", "operator": "In", "values": ["a"]}]}]})]),
    _slice(devices=[_device(nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [
        {"operator": "In"}]}]})]),
    _slice(devices=[{"name": ""}]),
    _slice(devices=[{"name": 5}]),
    _slice(devices=[{}]),
    _slice(devices=["d"]),
    _slice(devices=None),
    _slice(devices="nope"),
    # slice fields
    _slice(nodeName=None, allNodes=True),
    _slice(nodeName=None, perDeviceNodeSelection=True),
    _slice(nodeName=None, nodeSelector={"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}),
    _slice(nodeName=None),
    _slice(nodeName=""),
    _slice(allNodes=True),
    _slice(allNodes="yes"),
    _slice(pool={"name": "p", "resourceSliceCount": 0}),
    _slice(pool={"name": "p", "generation": True}),
    _slice(pool={"name": "p", "generation": None, "resourceSliceCount": None}),
    _slice(pool={"name": "p", "generation": 10**20, "resourceSliceCount": 2**64}),
    _slice(pool={"name": "p", "generation": -2**63, "resourceSliceCount": 2**64 - 1}),
    _slice(pool={"name": "p", "generation": -2**63 - 1}),
    _slice(devices=[_device(attributes={"a": {"int": 2**64}, "b": {"int": -2**63 - 1},
                                        "c": {"int": 2**64 - 1}, "d": {"ints": [1, 10**20]},
                                        "e": {"ints": [-2**63]}})]),
    _slice(pool={"name": ""}),
    _slice(pool=None),
    _slice(driver=""),
    _slice(driver=None),
    {"kind": "ResourceSlice", "metadata": {"name": ""}, "spec": _slice()["spec"]},
    {"kind": "ResourceSlice", "metadata": {"name": "s1", "uid": 5}, "spec": _slice()["spec"]},
    {"kind": "ResourceSlice", "spec": _slice()["spec"]},
    {"kind": "ResourceSlice", "metadata": {"name": "s1"}},
    {"kind": "ResourceSlice", "metadata": {"name": "s1"}, "spec": []},
    {**_slice(devices=[_device(attributes={"a": {"string": "x"}})]),
     "apiVersion": "resource.k8s.io/v1beta2"},
]


@pytest.mark.parametrize("raw", ODD_SLICES, ids=range(len(ODD_SLICES)))
def test_odd_slices_decode_as_parsed(raw: dict[str, Any]) -> None:
    _assert_same(raw)


def test_a_bad_slice_is_refused_naming_the_slice_and_the_field() -> None:
    raw = _slice(devices=[_device(capacity={"memory": {"value": "12K"}})])
    with pytest.raises(InvalidObject, match=r"ResourceSlice s1 spec.devices\[0\] \(d\)"
                                            r".capacity\[memory\].value"):
        decode_resource_slice(orjson.dumps(raw))


# finite floats: JSON has no infinity (orjson writes it as null); integers of
# any size, as JSON has no bound either
JSON = st.recursive(
    st.none() | st.booleans() | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=4),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.sampled_from(["int", "bool", "string", "version", "ints", "bools",
                                       "strings", "versions", "value", "x"]), children,
                      max_size=3),
    max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(attribute=JSON, capacity=JSON, counters=JSON, generation=JSON, count=JSON)
def test_any_json_in_a_device_decodes_as_parsed(attribute: Any, capacity: Any, counters: Any,
                                                generation: Any, count: Any) -> None:
    _assert_same(_slice(pool={"name": "p", "generation": generation,
                              "resourceSliceCount": count}, devices=[
        _device(attributes={"a": attribute, "b": {"string": "x"}},
                capacity={"c": capacity}),
        _device(consumesCounters=[{"counterSet": "cs", "counters": {"k": counters}}])]))


def test_text_that_is_not_utf8_is_refused_as_the_reference_parse_refuses_it(
        tmp_path: Path) -> None:
    """Text the typed decoder skips (an unknown kind of attribute, an unknown
    field of a capacity, a consumption or a counter set, a file's metadata)
    is refused when it is not UTF-8, as the reference parse refuses it."""
    device = (b'{"name":"a","attributes":{"s":{"nope":1},"x":{"\xff":1}}}',
              b'{"name":"a","capacity":{"m":{"value":"1","\xff":1}}}',
              b'{"name":"a","consumesCounters":[{"counterSet":"c","counters":{},"\xff":1}]}')
    spec = [b'"devices":[' + d + b"]" for d in device]
    spec.append(b'"sharedCounters":[{"name":"c","counters":{},"\xff":1}]')
    for part in spec:
        data = (b'{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":'
                b'{"name":"s"},"spec":{"driver":"d","nodeName":"n","pool":{"name":"p"},'
                + part + b"}}")
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(data)
        with pytest.raises(orjson.JSONDecodeError):
            decode_resource_slice(data)
        assert typed.decode_listed_slice(data, "ResourceSlice") is None
    # a file's slice, with text the decoder skips (its labels) not UTF-8
    path = tmp_path / "slices.json"
    path.write_bytes(b'{"kind":"List","items":[{"apiVersion":"resource.k8s.io/v1",'
                     b'"kind":"ResourceSlice","metadata":{"name":"s","labels":{"a":"\xff"}},'
                     b'"spec":{"driver":"d","nodeName":"n","pool":{"name":"p"}}}]}')
    for raw_slices in (False, True):
        with pytest.raises(SourceError, match="cannot parse"):
            list(iter_sourced([path], raw_slices=raw_slices, parsed_slices=raw_slices))


def test_well_formed_slices_never_fall_back_to_the_reference_parse(monkeypatch: Any) -> None:
    def refuse(kind: str, obj: Any) -> Any:
        raise AssertionError(f"fell back for {obj['metadata']['name']}")

    monkeypatch.setattr(typed, "reference_parse", refuse)
    for raw in _slices(list(generator.iter_cluster(nodes=8, partitionable_fraction=0.5))):
        decode_resource_slice(orjson.dumps(raw))
        convert_resource_slice(raw)


def test_identical_device_parts_are_shared_across_nodes() -> None:
    a, b = (decode_resource_slice(orjson.dumps(_slice(nodeName=node, devices=[_device(
        attributes={"model": {"string": "H100"}, "uuid": {"string": f"GPU-{node}"}},
        capacity={"memory": {"value": "80Gi"}},
        consumesCounters=[{"counterSet": "cs", "counters": {"m": {"value": "1"}}}])])))
        for node in ("n1", "n2"))
    da, db = a.devices[0], b.devices[0]
    assert da.capacity is db.capacity and da.consumes_counters is db.consumes_counters
    assert da.attributes["gpu.example.com/model"] is db.attributes["gpu.example.com/model"]
    assert da.attributes["gpu.example.com/uuid"].value == "GPU-n1"
    assert db.attributes["gpu.example.com/uuid"].value == "GPU-n2"


class _Counting:
    """A decoder that records each text it is given, to count what is decoded."""

    def __init__(self, decoder: Any, decoded: list[bytes]) -> None:
        self._decoder = decoder
        self._decoded = decoded

    def decode(self, raw: Any) -> Any:
        self._decoded.append(bytes(raw))
        return self._decoder.decode(raw)


def test_capacity_and_consumption_texts_seen_before_are_not_decoded_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[bytes] = []

    monkeypatch.setattr(typed, "_CAPACITY", _Counting(typed._CAPACITY, decoded))
    monkeypatch.setattr(typed, "_CONSUMPTIONS_JSON", _Counting(typed._CONSUMPTIONS_JSON, decoded))
    device = _device(capacity={"memory": {"value": "79Gi"}},
                     consumesCounters=[{"counterSet": "cs", "counters": {"m": {"value": "3"}}}])
    for node in ("n1", "n2", "n3"):
        decode_resource_slice(orjson.dumps(_slice(nodeName=node, devices=[device])))
    assert len(decoded) == 2  # once each, for the first node


def test_counter_sets_a_node_kind_repeats_are_read_once_and_shared(
        monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[bytes] = []

    typed.forget_shared()
    monkeypatch.setattr(typed, "_COUNTER_SETS_JSON", _Counting(typed._COUNTER_SETS_JSON, decoded))
    sets = [{"name": "gpu-0-counter-set", "counters": {"memory-slice-0": {"value": "1"},
                                                       "multiprocessors": {"value": "132"}}}]
    a, b = (decode_resource_slice(orjson.dumps(_slice(nodeName=node, sharedCounters=sets)))
            for node in ("n1", "n2"))
    assert a.shared_counters is b.shared_counters and len(decoded) == 1
    assert a.shared_counters[0].counters["multiprocessors"].text == "132"


@pytest.mark.parametrize("read", ["typed", "dict", "reference"])
def test_shared_counter_sets_and_consumptions_cannot_be_changed_through_one_node(
        read: str) -> None:
    sets = [{"name": "cs", "counters": {"memory": {"value": "80Gi"}}}]
    devices = [_device(consumesCounters=[{"counterSet": "cs",
                                          "counters": {"memory": {"value": "10Gi"}}}])]
    raw = [_slice(nodeName=node, sharedCounters=sets, devices=devices) for node in ("n1", "n2")]
    a, b = ({"typed": lambda r: decode_resource_slice(orjson.dumps(r)),
             "dict": convert_resource_slice,
             "reference": lambda r: parse_object("ResourceSlice", r)}[read](r) for r in raw)
    for counters in (a.shared_counters[0].counters, a.devices[0].consumes_counters[0].counters):
        with pytest.raises(TypeError):
            counters["memory"] = None  # type: ignore[index]
        assert not hasattr(counters, "pop") and not hasattr(counters, "update")
    assert b.shared_counters[0].counters["memory"].text == "80Gi"
    assert b.devices[0].consumes_counters[0].counters["memory"].text == "10Gi"


def test_devices_and_attribute_values_are_frozen_and_left_out_of_the_collector() -> None:
    s = decode_resource_slice(orjson.dumps(_slice(devices=[_device(
        attributes={"uuid": {"string": "GPU-1"}}, capacity={"memory": {"value": "1Gi"}})])))
    d = s.devices[0]
    value = d.attributes["gpu.example.com/uuid"]
    assert not gc.is_tracked(d) and not gc.is_tracked(value)
    with pytest.raises(AttributeError):
        d.name = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        value.value = "GPU-2"  # type: ignore[misc]
    with pytest.raises(TypeError):
        d.attributes["gpu.example.com/uuid"] = value  # type: ignore[index]
    assert d.id == "gpu.example.com/n1/d"


def test_a_device_id_is_always_derived_from_driver_pool_and_name() -> None:
    d = Device(driver="x.example.com", pool="p", name="a", slice_name="s", id="forged")
    assert d.id == "x.example.com/p/a"
    assert msgspec.structs.replace(d, name="b").id == "x.example.com/p/b"


def test_a_run_of_alike_devices_reads_its_capacity_and_consumption_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    for name in ("_capacity_text", "_consumptions_text"):
        real = getattr(typed, name)
        monkeypatch.setattr(typed, name, lambda *a, _r=real, _n=name: calls.append(_n) or _r(*a))
    a = {"capacity": {"memory": {"value": "1Gi"}},
         "consumesCounters": [{"counterSet": "cs", "counters": {"m": {"value": "1"}}}]}
    b = {"capacity": {"memory": {"value": "2Gi"}},
         "consumesCounters": [{"counterSet": "cs", "counters": {"m": {"value": "2"}}}]}
    kinds = [a, a, a, b, b, a]
    s = decode_resource_slice(orjson.dumps(_slice(devices=[
        _device(name=f"d{i}", **kind) for i, kind in enumerate(kinds)])))
    assert calls.count("_capacity_text") == 3 and calls.count("_consumptions_text") == 3
    assert [str(d.capacity["gpu.example.com/memory"].value) for d in s.devices] == [
        "1Gi", "1Gi", "1Gi", "2Gi", "2Gi", "1Gi"]
    assert [d.consumes_counters[0].counters["m"].text for d in s.devices] == [
        "1", "1", "1", "2", "2", "1"]


def test_a_map_of_scalar_attributes_is_decoded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    class Refusing:
        def decode(self, data: Any) -> Any:
            raise AssertionError("decoded again with the list kinds")

    monkeypatch.setattr(typed, "_ATTRIBUTES_JSON", Refusing())
    for raw in _slices(list(generator.iter_cluster(nodes=4, partitionable_fraction=0.5))):
        decode_resource_slice(orjson.dumps(raw))


def test_devices_publishing_the_same_attributes_share_one_map(
        monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[bytes] = []
    real = typed._attribute_text
    monkeypatch.setattr(typed, "_attribute_text",
                        lambda text, *a: read.append(text) or real(text, *a))
    mig = {"profile": {"string": "1g.10gb"}, "parentUUID": {"string": "GPU-0"}}
    other = {"profile": {"string": "2g.20gb"}, "parentUUID": {"string": "GPU-0"}}
    s = decode_resource_slice(orjson.dumps(_slice(devices=[
        _device(name=f"d{i}", attributes=kind)
        for i, kind in enumerate([mig, mig, mig, other, other, mig])])))
    maps = [d.attributes for d in s.devices]
    assert maps[0] is maps[1] is maps[2] and maps[3] is maps[4]
    assert maps[2] is not maps[3] and maps[5] is not maps[0] and maps[5] == maps[0]
    assert len(read) == 3  # once per run of alike devices
    assert [d.attributes["gpu.example.com/profile"].value for d in s.devices] == [
        "1g.10gb", "1g.10gb", "1g.10gb", "2g.20gb", "2g.20gb", "1g.10gb"]


def _gpu(node: str, uuid: str, device: str = "gpu-0") -> bytes:
    return orjson.dumps(_slice(nodeName=node, devices=[_device(name=device, attributes={
        "model": {"string": "H100"}, "uuid": {"string": uuid}, "numa": {"int": 1},
        "mig": {"bool": False}, "driverVersion": {"version": "580.1.0"}})]))


def test_a_namesake_differing_in_one_value_reads_only_that_value(
        monkeypatch: pytest.MonkeyPatch) -> None:
    typed.forget_shared()
    first = decode_resource_slice(_gpu("n1", "GPU-1"))
    decode_resource_slice(_gpu("n2", "GPU-2"))  # tells which piece varies
    read: list[bytes] = []
    real = typed._member
    monkeypatch.setattr(typed, "_member", lambda piece: read.append(piece) or real(piece))

    def whole(text: bytes, *args: Any) -> Any:
        raise AssertionError("read the whole text")

    monkeypatch.setattr(typed, "_learned", whole)

    class Refusing:
        def decode(self, data: Any) -> Any:
            raise AssertionError("decoded a map")

    monkeypatch.setattr(typed, "_SCALAR_ATTRIBUTES", Refusing())
    monkeypatch.setattr(typed, "_ATTRIBUTES_JSON", Refusing())
    third = decode_resource_slice(_gpu("n3", "GPU-3"))
    assert read == [b'uuid":{"string":"GPU-3"']
    a, c = first.devices[0].attributes, third.devices[0].attributes
    assert c["gpu.example.com/uuid"] == AttributeValue("string", "GPU-3")
    assert list(c.items()) == [(k, v if k != "gpu.example.com/uuid" else c[k])
                               for k, v in a.items()]
    for name in ("model", "numa", "mig", "driverVersion"):
        assert c[f"gpu.example.com/{name}"] is a[f"gpu.example.com/{name}"]
    assert third == parse_object("ResourceSlice", orjson.loads(_gpu("n3", "GPU-3")))
    read.clear()
    decode_resource_slice(_gpu("n4", "GPU-4"))
    assert read == [b'uuid":{"string":"GPU-4"']


@pytest.mark.parametrize("indent", [None, 2])
def test_attribute_texts_written_with_spaces_are_decoded_whole_and_not_kept(
        monkeypatch: pytest.MonkeyPatch, indent: int | None) -> None:
    def refuse(piece: bytes) -> Any:
        raise AssertionError(f"read {piece!r} as a piece")

    monkeypatch.setattr(typed, "_member", refuse)
    for node in ("n1", "n2", "n3"):
        raw = orjson.loads(_gpu(node, f"GPU-{node}"))
        text = json.dumps(raw, indent=indent).encode()
        assert decode_resource_slice(text) == parse_object("ResourceSlice", raw)


def test_a_value_namesakes_share_stays_one_object_when_the_pieces_read_start_over() -> None:
    typed.forget_shared()
    first = decode_resource_slice(_gpu("n1", "GPU-1"))
    decode_resource_slice(_gpu("n2", "GPU-2"))  # "model" is now known to be shared
    typed._RECENT.clear()  # as unique pieces (uuids) fill it
    other = decode_resource_slice(orjson.dumps(_slice(nodeName="n3", devices=[_device(
        name="gpu-9", attributes={"model": {"string": "H100"}, "uuid": {"string": "GPU-9"}})])))
    third = decode_resource_slice(_gpu("n3", "GPU-3"))
    model = first.devices[0].attributes["gpu.example.com/model"]
    assert other.devices[0].attributes["gpu.example.com/model"] is model
    assert third.devices[0].attributes["gpu.example.com/model"] is model


def test_a_namesake_differing_elsewhere_is_read_as_written() -> None:
    typed.forget_shared()
    for node, uuid in (("n1", "GPU-1"), ("n2", "GPU-2")):
        decode_resource_slice(_gpu(node, uuid))
    # same length, another piece differs: learnt, then read as written
    for text in (_gpu("n3", "GPU-3").replace(b"H100", b"H200"),
                 _gpu("n4", "GPU-4").replace(b"580.1.0", b"580.2.0"),
                 _gpu("n5", "GPU-5").replace(b'"numa":{"int":1}', b'"numa":{"int":2}'),
                 _gpu("n6", "GPU-6").replace(b"H100", b"H\\\\0"),
                 _gpu("n7", "GPU-7").replace(b'"numa":{"int":1}', b'"numa":{"x":123}'),
                 _gpu("n8", "GPU-8").replace(b'"GPU-8"', b'"GPU\\\\"')):
        assert _outcome(lambda text=text: decode_resource_slice(text)) == _outcome(
            lambda text=text: parse_object("ResourceSlice", orjson.loads(text)))


class _CountingTemplate:
    """Counts the templates built (the text each is built from)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.built: list[bytes] = []
        built = self.built

        class Counting(typed._Template):
            __slots__ = ()

            def __init__(self, *args: Any) -> None:
                built.append(args[0])
                super().__init__(*args)

        monkeypatch.setattr(typed, "_Template", Counting)


def _read_pieces(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The pieces of attribute texts read from here on."""
    read: list[bytes] = []
    real = typed._member
    monkeypatch.setattr(typed, "_member", lambda piece: read.append(piece) or real(piece))
    return read


def test_a_template_is_built_only_when_a_namesake_comes_round_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    typed.forget_shared()
    built = _CountingTemplate(monkeypatch).built
    # the same text again takes the map read the first time
    a, b = (decode_resource_slice(_gpu(node, "GPU-A")) for node in ("m1", "m2"))
    assert a.devices[0].attributes is b.devices[0].attributes and built == []
    # a namesake differing in a value makes the template, which the next ones use
    for node, uuid in (("m3", "GPU-B"), ("m4", "GPU-C"), ("m5", "GPU-D")):
        text = _gpu(node, uuid)
        assert decode_resource_slice(text) == parse_object("ResourceSlice", orjson.loads(text))
    assert len(built) == 1


def test_devices_named_apart_on_every_node_read_only_what_varies_from_the_second_node(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Device names carrying a uuid or a serial never repeat across nodes; the
    device at the same place in the slice is their namesake."""
    typed.forget_shared()
    built = _CountingTemplate(monkeypatch).built
    read = _read_pieces(monkeypatch)
    real = typed._learned
    for i in range(20):
        if i == 2:  # from here on, no text is read piece by piece
            monkeypatch.setattr(typed, "_learned", lambda *args: pytest.fail("read whole"))
        text = _gpu(f"n{i}", f"GPU-{i:04d}", device=f"gpu-{i:032x}")
        assert decode_resource_slice(text) == parse_object("ResourceSlice", orjson.loads(text))
        if i >= 2:
            assert read == [f'uuid":{{"string":"GPU-{i:04d}"'.encode()]
        read.clear()
    monkeypatch.setattr(typed, "_learned", real)
    assert len(built) == 1
    # a name read by its place keeps nothing of its own: only the first two,
    # read before their place could, keep their text
    assert len(typed._TEMPLATES) == 2


def test_a_device_name_is_kept_once_however_many_nodes_repeat_it_and_the_rest_pass(
        monkeypatch: pytest.MonkeyPatch) -> None:
    typed.forget_shared()
    a, b = (decode_resource_slice(_gpu(node, f"GPU-{node}", device="gpu-0"))
            for node in ("n1", "n2"))
    assert a.devices[0].name is b.devices[0].name
    # names that never repeat fill the names kept, which start over when full
    monkeypatch.setattr(typed._NAMES, "limit", 8)
    for i in range(20):
        decode_resource_slice(_gpu(f"n{i}", f"GPU-{i}", device=f"gpu-{i:032x}"))
        assert len(typed._NAMES) <= 8
    c = decode_resource_slice(_gpu("n3", "GPU-n3", device="gpu-0")).devices[0]
    d = decode_resource_slice(_gpu("n4", "GPU-n4", device="gpu-0")).devices[0]
    assert c.name is d.name and c.name == "gpu-0"
    # never more than the bound, slices of several devices and of more than it
    for i, size in enumerate((3, 5, 7, 2, 8, 20, 1)):
        raw = _slice(nodeName=f"m{i}", devices=[_device(name=f"gpu-{i}-{j:032x}")
                                                for j in range(size)])
        assert decode_resource_slice(orjson.dumps(raw)) == parse_object("ResourceSlice", raw)
        assert len(typed._NAMES) <= 8
    e = decode_resource_slice(_gpu("n5", "GPU-n5", device="gpu-0")).devices[0]
    f = decode_resource_slice(orjson.dumps(_slice(nodeName="n6", devices=[
        _device(name=f"gpu-{j}") for j in range(20)]))).devices[0]
    assert e.name is f.name


def _gpus(node: str, names: list[str], models: list[str] | None = None) -> bytes:
    """A slice of GPUs named `names`, the i-th on PCIe bus i, of model `models[i]`."""
    return orjson.dumps(_slice(nodeName=node, devices=[_device(name=name, attributes={
        "model": {"string": (models or ["H100"] * len(names))[i]},
        "uuid": {"string": f"GPU-{node}-{i}"}, "pciBusID": {"string": f"0000:{i:02x}:00.0"},
        "numa": {"int": i // 2}, "driverVersion": {"version": "580.1.0"}})
        for i, name in enumerate(names)]))


def test_a_place_keeps_a_narrow_template_per_kind_seen_there(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two models whose texts have the same length at one place each keep a
    template that reads only the uuid, rather than share one that also reads
    the model."""
    typed.forget_shared()
    read = _read_pieces(monkeypatch)
    models = ["H100", "H100", "H200", "H200", "H100", "H200", "H100", "H200"]
    for i, model in enumerate(models):
        raw = _slice(nodeName=f"n{i}", devices=[_device(name=f"gpu-{i:012x}", attributes={
            "model": {"string": model}, "uuid": {"string": f"GPU-{i}"}, "numa": {"int": 1},
            "driverVersion": {"version": "580.1.0"}})])
        read.clear()
        assert decode_resource_slice(orjson.dumps(raw)) == parse_object("ResourceSlice", raw)
        if i >= 4:
            assert read == [f'uuid":{{"string":"GPU-{i}"'.encode()]
    (kinds,) = typed._PLACES.values()
    assert [type(k) for k in kinds] == [typed._Template, typed._Template]
    assert [k.varying_names for k in kinds if isinstance(k, typed._Template)] == [
        ("uuid",), ("uuid",)]


def test_a_place_seeing_more_kinds_than_it_keeps_reads_them_all_as_written() -> None:
    typed.forget_shared()
    models = [f"H{i}00" for i in range(2 * typed._KINDS_AT_A_PLACE)]
    for i in range(4 * len(models)):
        raw = _slice(nodeName=f"n{i:03d}", devices=[_device(name=f"gpu-{i:012x}", attributes={
            "model": {"string": models[i % len(models)]}, "uuid": {"string": f"GPU-{i:03d}"}})])
        _assert_same(raw)
    (kinds,) = typed._PLACES.values()
    assert len(kinds) == typed._KINDS_AT_A_PLACE


def test_a_full_place_learns_a_kind_that_comes_after_texts_seen_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One-off texts of the fleet's length fill a place first; the fleet's
    kind is learnt all the same, and later one-offs do not push it out."""
    typed.forget_shared()
    learned: list[bytes] = []
    real = typed._learned
    monkeypatch.setattr(typed, "_learned",
                        lambda text, driver: learned.append(text) or real(text, driver))

    def fleet(i: int) -> dict[str, Any]:
        return _slice(nodeName=f"n{i:04d}", devices=[_device(name=f"gpu-{i:012x}", attributes={
            "model": {"string": "H100"}, "uuid": {"string": f"GPU-{i:04d}"},
            "numa": {"int": 0}})])

    length = len(orjson.dumps(fleet(0)["spec"]["devices"][0]["attributes"]))

    def one_off(i: int) -> dict[str, Any]:
        attributes = {f"o{i:02d}": {"string": "x" * (length - 21)}}
        assert len(orjson.dumps(attributes)) == length
        return _slice(nodeName=f"o{i:02d}", devices=[_device(name=f"odd-{i}",
                                                             attributes=attributes)])

    for i in range(typed._KINDS_AT_A_PLACE):
        _assert_same(one_off(i))
    for i in range(20):
        learned.clear()
        raw = fleet(i)
        assert decode_resource_slice(orjson.dumps(raw)) == parse_object("ResourceSlice", raw)
        assert len(learned) == (i < 2)
        if i % 2:  # one-offs keep coming, at most one kept at a time
            _assert_same(one_off(10 + i))


def test_long_values_from_files_keep_no_more_text_than_the_caches_bound() -> None:
    """The API bounds a value to 64 bytes; a file's are of any length, and the
    texts the decoder keeps are bounded in bytes as well as in count."""
    typed.forget_shared()
    long = 1 << 16
    for i in range(400):  # 400 nodes, 26 MB of attribute text
        raw = _slice(nodeName=f"n{i}", devices=[_device(name=f"gpu-{i % 2}", attributes={
            "note": {"string": f"{i:08d}" + "x" * long}, "model": {"string": "H100"},
            "uuid": {"string": f"GPU-{i:08d}"}, "numa": {"int": 0}})])
        assert decode_resource_slice(orjson.dumps(raw)) == parse_object("ResourceSlice", raw)
        raw["spec"]["nodeName"] = f"f{i}"  # a file's, decoded from its dicts
        assert convert_resource_slice(raw) == parse_object("ResourceSlice", raw)
    assert sum(map(len, typed._RECENT)) <= typed.SHARED_MAX * 64
    assert sum(map(len, typed._SHARED)) <= (1 << 16) * 64
    assert sum(len(a.string or "") for a in typed._ATTRIBUTES) <= typed.SHARED_MAX * 64
    assert sum(key[2] for key in typed._TEMPLATES) <= 1 << 22
    assert sum(key[2] * len(kinds) for key, kinds in typed._PLACES.items()) <= 1 << 22


def test_places_read_devices_named_apart_as_the_reference_parse_does() -> None:
    """A template found by place, never by name, explains only texts whose
    bytes around its varying pieces are its own: uuids that look like other
    values, names equal to another device's attribute values, a device
    moved to another place, other models and other attribute sets at a place
    all read as the reference parse reads them."""
    typed.forget_shared()
    uuid = "0000:01:00.0"  # a uuid written like a bus id
    cases = [
        _slice(nodeName="n1", devices=[_device(name=f"gpu-{i:012x}", attributes={
            "uuid": {"string": f"GPU-{i}"}, "pciBusID": {"string": f"0000:{i:02x}:00.0"}})
            for i in range(4)]),
        # the uuid of one node is the bus id of another
        _slice(nodeName="n2", devices=[_device(name=f"gpu-{i + 4:012x}", attributes={
            "uuid": {"string": uuid}, "pciBusID": {"string": f"0000:{i:02x}:00.0"}})
            for i in range(4)]),
        # names equal to other devices' values, attributes equal to other names
        _slice(nodeName="n3", devices=[_device(name=name, attributes={
            "uuid": {"string": other}, "pciBusID": {"string": f"0000:{i:02x}:00.0"}})
            for i, (name, other) in enumerate([("GPU-1", "gpu-000000000000"),
                                               ("0000:01:00.0", "GPU-0"),
                                               ("gpu-000000000002", "GPU-3"),
                                               ("GPU-3", "0000:03:00.0")])]),
        # the same texts in another order, another kind at a place
        _slice(nodeName="n4", devices=[_device(name=f"x{i}", attributes=attributes)
                                       for i, attributes in enumerate([
                                           {"pciBusID": {"string": "0000:03:00.0"},
                                            "uuid": {"string": "GPU-n4-3"}},
                                           {"uuid": {"string": "GPU-n4-0"},
                                            "pciBusID": {"string": "0000:00:00.0"}},
                                           {"uuid": {"int": 1234567},
                                            "pciBusID": {"string": "0000:01:00.0"}},
                                           {"uuid": {"string": "GPU-n4-2"},
                                            "pciBusID": {"string": "0000:02:00.0"},
                                            "numa": {"int": 0}}])]),
    ]
    for node in range(4):  # every place learnt several kinds before these
        for raw in cases:
            moved = copy.deepcopy(raw)
            moved["spec"]["nodeName"] = f"{raw['spec']['nodeName']}-{node}"
            for d in moved["spec"]["devices"]:
                d["name"] = f"{d['name']}-{node}"
                if "uuid" in d["attributes"] and "string" in d["attributes"]["uuid"]:
                    d["attributes"]["uuid"]["string"] += f"-{node}"
            _assert_same(moved)
        for raw in cases:
            _assert_same(raw)


@settings(max_examples=200, deadline=None)
@given(nodes=st.lists(st.lists(st.tuples(st.sampled_from(["gpu-0", "gpu-1", "GPU-1", "1"]),
                                         st.sampled_from(["GPU-1", "gpu-0", "1", "0000"]),
                                         st.sampled_from(["H100", "H200", "GPU-1"])),
                               min_size=1, max_size=4), min_size=1, max_size=6))
def test_devices_named_apart_or_alike_on_many_nodes_decode_as_parsed(
        nodes: list[list[tuple[str, str, str]]]) -> None:
    """Names that collide with attribute values, uuids that look like other
    values, on places and names seen before."""
    for i, devices in enumerate(nodes):
        _assert_same(_slice(nodeName=f"n{i}", devices=[
            _device(name=f"{name}-{i}-{j}" if j % 2 else name, attributes={
                "uuid": {"string": uuid}, "model": {"string": model},
                "name": {"string": name}})
            for j, (name, uuid, model) in enumerate(devices)]))


ATTRIBUTE_VALUES = st.one_of(
    st.builds(lambda s: {"string": s}, st.text(alphabet='ab"\\é\x01', max_size=2)),
    st.builds(lambda s: {"version": s}, st.sampled_from(["1.0.0", "1.0.1", "x"])),
    st.builds(lambda i: {"int": i}, st.integers(-3, 12) | st.sampled_from([2**63, -2**63])),
    st.builds(lambda b: {"bool": b}, st.booleans()),
    st.builds(lambda v: {"strings": v}, st.lists(st.sampled_from(["a", "b"]), max_size=2)),
    JSON)


@settings(max_examples=300, deadline=None)
@given(maps=st.lists(st.dictionaries(st.sampled_from(["a", "b", "uuid", "x.example.com/a"]),
                                     ATTRIBUTE_VALUES, max_size=4), min_size=1, max_size=6))
def test_namesakes_on_many_nodes_decode_as_parsed(maps: list[dict[str, Any]]) -> None:
    for i, attributes in enumerate(maps):
        _assert_same(_slice(nodeName=f"n{i}", devices=[
            _device(name="d", attributes=attributes), _device(name="e", attributes=attributes),
            _device(name="f", attributes=maps[i - 1])]))


def test_a_list_attribute_is_read_without_the_reference_parse(
        monkeypatch: pytest.MonkeyPatch) -> None:
    raw = _slice(devices=[_device(name="a", attributes={"s": {"string": "x"}}),
                          _device(name="b", attributes={"s": {"string": "x"},
                                                        "l": {"strings": ["p", "q"]}})])
    expected = parse_object("ResourceSlice", copy.deepcopy(raw))

    def refuse(kind: str, obj: Any) -> Any:
        raise AssertionError("fell back to the reference parse")

    monkeypatch.setattr(typed, "reference_parse", refuse)
    s = decode_resource_slice(orjson.dumps(raw))
    assert s == expected
    assert s.devices[1].attributes["gpu.example.com/l"].value == ("p", "q")
    assert s.devices[0].attributes["gpu.example.com/s"] is \
        s.devices[1].attributes["gpu.example.com/s"]


def test_a_bad_device_after_a_list_attribute_is_refused_naming_it() -> None:
    raw = _slice(devices=[_device(name="a", attributes={"l": {"ints": [1]}}),
                          _device(name="b", capacity={"memory": {"value": "12K"}})])
    with pytest.raises(InvalidObject, match=r"ResourceSlice s1 spec.devices\[1\] \(b\)"
                                            r".capacity\[memory\].value"):
        decode_resource_slice(orjson.dumps(raw))


def test_an_update_of_a_slice_changes_no_device_of_another() -> None:
    gpu = {"attributes": {"model": {"string": "H100"}, "numa": {"int": 0}},
           "capacity": {"memory": {"value": "80Gi"}}}
    first = decode_resource_slice(orjson.dumps(_slice(devices=[
        _device(name="d0", **gpu), _device(name="d1", **gpu)])))
    other = decode_resource_slice(orjson.dumps(_slice(nodeName="n2", devices=[
        _device(name="d0", **gpu)])))
    kept = [(d.id, dict(d.attributes), dict(d.capacity)) for d in (*first.devices,
                                                                   *other.devices)]
    changed = copy.deepcopy(gpu)
    changed["attributes"]["model"] = {"string": "H200"}
    changed["capacity"]["memory"] = {"value": "141Gi"}
    update = decode_resource_slice(orjson.dumps(_slice(devices=[
        _device(name="d0", **changed), _device(name="d1", **gpu)])))
    assert [(d.id, dict(d.attributes), dict(d.capacity)) for d in (*first.devices,
                                                                   *other.devices)] == kept
    d0, d1 = update.devices
    assert d0.attributes["gpu.example.com/model"].value == "H200"
    assert str(d0.capacity["gpu.example.com/memory"].value) == "141Gi"
    assert d1.attributes["gpu.example.com/model"].value == "H100"
    assert d1.capacity is first.devices[1].capacity


def test_a_new_string_value_is_built_without_the_general_attribute_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    general: list[Any] = []
    real = typed._attribute
    monkeypatch.setattr(typed, "_attribute", lambda a: general.append(a) or real(a))
    s = decode_resource_slice(orjson.dumps(_slice(devices=[_device(attributes={
        "uuid": {"string": "GPU-never-seen-before"}, "n": {"int": 12345678901}})])))
    values = s.devices[0].attributes
    assert values["gpu.example.com/uuid"] == AttributeValue("string", "GPU-never-seen-before")
    assert values["gpu.example.com/n"] == AttributeValue("int", 12345678901)
    assert not general  # nor the int, read from its text


def test_forgetting_the_shared_parts_keeps_what_was_built() -> None:
    raw = _slice(devices=[_device(attributes={"m": {"string": "H100"}},
                                  capacity={"memory": {"value": "80Gi"}})])
    before = decode_resource_slice(orjson.dumps(raw))
    typed.forget_shared()
    assert len(typed._ATTRIBUTES) == 0
    after = decode_resource_slice(orjson.dumps(raw))
    assert after == before and after.devices[0].capacity is not before.devices[0].capacity
    assert str(before.devices[0].capacity["gpu.example.com/memory"].value) == "80Gi"


def test_a_listed_item_is_decoded_only_when_it_is_a_slice_taken_as_written() -> None:
    s = next(o for o in generator.iter_cluster(nodes=1) if o["kind"] == "ResourceSlice")
    data = orjson.dumps(s)
    assert typed.decode_listed_slice(data, None) == decode_resource_slice(data)
    unkinded = orjson.dumps({k: v for k, v in s.items() if k != "kind"})
    assert typed.decode_listed_slice(unkinded, "ResourceSlice") == decode_resource_slice(data)
    assert typed.decode_listed_slice(unkinded, None) is None  # a List's item names its kind
    assert typed.decode_listed_slice(orjson.dumps({**s, "kind": "Gadget"}), None) is None
    broken = {**s, "spec": {k: v for k, v in s["spec"].items() if k != "pool"}}
    assert typed.decode_listed_slice(orjson.dumps(broken), None) is None  # the reference names it
    with pytest.raises(InvalidObject, match=r"spec\.pool"):
        decode_resource_slice(orjson.dumps(broken))
