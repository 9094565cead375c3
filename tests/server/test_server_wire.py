"""Request parsing and response building for the extender wire format."""

from __future__ import annotations

import gc
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.extender import NodeScores
from app.server import wire
from app.server.wire import BadRequest

POD: dict[str, Any] = {
    "metadata": {"name": "train-0", "namespace": "ml", "uid": "u-1"},
    "spec": {"resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "t"}]},
    "status": {"resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "train-0-gpus"}]},
}


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": {"cpu": "8"}}}


def test_decode_rejects_malformed_and_empty_json() -> None:
    with pytest.raises(BadRequest) as err:
        wire.decode(b'{"Pod": ')
    assert err.value.status == 400 and "malformed JSON" in err.value.message
    with pytest.raises(BadRequest) as err:
        wire.decode(b"")
    assert err.value.status == 400


def test_node_names_form_parses_pod_and_names() -> None:
    args = wire.parse_extender_args({"Pod": POD, "Nodes": None, "NodeNames": ["a", "b"]})
    assert args.pod.key == "ml/train-0"
    assert args.pod.claim_statuses == {"gpus": "train-0-gpus"}
    assert args.node_names == ["a", "b"]
    assert args.node_items is None


def test_keys_match_case_insensitively_like_go() -> None:
    args = wire.parse_extender_args({"pod": POD, "nodenames": ["a"]})
    assert args.pod.name == "train-0" and args.node_names == ["a"]


def test_full_nodes_form_keeps_items_as_received() -> None:
    items = [node("a", zone="1"), node("b")]
    args = wire.parse_extender_args({"Pod": POD, "Nodes": {"metadata": {"resourceVersion": "7"},
                                                           "items": items},
                                     "NodeNames": None})
    assert args.node_names == ["a", "b"]
    assert args.node_items == items
    assert args.node_list == {"metadata": {"resourceVersion": "7"}}


@pytest.mark.parametrize("doc, fragment", [
    ([1, 2], "expected an ExtenderArgs"),
    ({"NodeNames": ["a"]}, "has no Pod"),
    ({"Pod": "x", "NodeNames": ["a"]}, "expected a Pod object"),
    ({"Pod": {"spec": {}}, "NodeNames": ["a"]}, "metadata.name: required"),
    ({"Pod": POD}, "neither NodeNames nor Nodes"),
    ({"Pod": POD, "NodeNames": "a"}, "expected an array of node names"),
    ({"Pod": POD, "NodeNames": [1]}, "expected an array of node names"),
    ({"Pod": POD, "Nodes": {"items": "x"}}, "NodeList with an items array"),
    ({"Pod": POD, "Nodes": {"items": [{"metadata": {}}]}}, "items[0]: a Node needs"),
])
def test_not_an_extender_args_is_422_with_reason(doc: Any, fragment: str) -> None:
    with pytest.raises(BadRequest) as err:
        wire.parse_extender_args(doc)
    assert err.value.status == 422
    assert fragment in err.value.message


def test_pod_key_is_known_for_errors_after_the_pod_parsed() -> None:
    with pytest.raises(BadRequest) as err:
        wire.parse_extender_args({"Pod": POD, "NodeNames": 3})
    assert err.value.pod_key == "ml/train-0"
    assert wire.pod_key_hint({"Pod": {"metadata": {"name": "p"}}}) == "default/p"
    assert wire.pod_key_hint({"Pod": {}}) is None
    assert wire.pod_key_hint([]) is None


def test_filter_result_node_names_form_has_every_key() -> None:
    args = wire.parse_extender_args({"Pod": POD, "NodeNames": ["a", "b", "c"]})
    out = wire.filter_result(args, passed=["a"], failed={"b": "busy"},
                             unresolvable={"c": "no GPUs"}, error=None)
    assert out == {"Nodes": None, "NodeNames": ["a"], "FailedNodes": {"b": "busy"},
                   "FailedAndUnresolvableNodes": {"c": "no GPUs"}, "Error": ""}


def test_filter_result_nodes_form_echoes_passing_nodes_unchanged() -> None:
    items = [node("a", zone="1"), node("b"), node("c")]
    args = wire.parse_extender_args({"Pod": POD, "Nodes": {"metadata": {}, "items": items}})
    out = wire.filter_result(args, passed=["c", "a"], failed={}, unresolvable={"b": "x"},
                             error=None)
    assert out["NodeNames"] is None
    assert out["Nodes"] == {"metadata": {}, "items": [items[0], items[2]]}
    assert out["Nodes"]["items"][0] is items[0]


def test_error_filter_result_fails_the_call() -> None:
    assert wire.error_filter_result("boom") == {
        "Nodes": None, "NodeNames": None, "FailedNodes": {}, "FailedAndUnresolvableNodes": {},
        "Error": "boom"}


def test_host_priority_list() -> None:
    assert wire.host_priority_list([("a", 10), ("b", 0)]) == [
        {"Host": "a", "Score": 10}, {"Host": "b", "Score": 0}]


def _dict_encoded(names: list[str], scores: list[int | None], zero_kept: bool) -> bytes:
    """The HostPriorityList as a dict per node, through orjson: the reference."""
    return wire.encode(wire.host_priority_list(
        [(n, s) for n, s in zip(names, scores, strict=True)
         if s is not None and (s or zero_kept)]))


def _fast_encoded(names: list[str], scores: list[int | None], zero_kept: bool) -> bytes:
    """The HostPriorityList as the server encodes a prioritize answer."""
    return wire.encode_host_priority_list(*NodeScores(names, scores, zero_kept).kept())


_NAMES = st.one_of(
    st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,20}[a-z0-9])?", fullmatch=True),
    st.text(max_size=12),  # quotes, backslashes, control characters, any unicode
    st.sampled_from(['a"b', "back\\slash", "tab\there", "ünï", "\u2028", "\x7f", "\x00", ""]))


@given(st.lists(st.tuples(_NAMES, st.one_of(st.none(), st.integers(-3, 12),
                                            st.integers(-(2**40), 2**40))), max_size=40),
       st.booleans())
def test_encoded_host_priority_list_is_the_dict_encoding_byte_for_byte(
        pairs: list[tuple[str, int | None]], zero_kept: bool) -> None:
    names, scores = [n for n, _ in pairs], [s for _, s in pairs]
    try:
        expected = _dict_encoded(names, scores, zero_kept)
    except orjson.JSONEncodeError:  # a lone surrogate: orjson refuses it either way
        with pytest.raises(orjson.JSONEncodeError):
            _fast_encoded(names, scores, zero_kept)
        return
    assert _fast_encoded(names, scores, zero_kept) == expected


@pytest.mark.parametrize("names, scores, zero_kept, expected", [
    ([], [], False, b"[]"),
    (["a", "b"], [0, None], False, b"[]"),
    (["a", "b"], [0, None], True, b'[{"Host":"a","Score":0}]'),
    (["n1", "n2", "n3"], [10, 0, 7], False,
     b'[{"Host":"n1","Score":10},{"Host":"n3","Score":7}]'),
    (['q"t', "n2"], [3, 3], False, b'[{"Host":"q\\"t","Score":3},{"Host":"n2","Score":3}]'),
    (["n1"], [101], False, b'[{"Host":"n1","Score":101}]'),
])
def test_encoded_host_priority_list_examples(names: list[str], scores: list[int | None],
                                             zero_kept: bool, expected: bytes) -> None:
    assert _fast_encoded(names, scores, zero_kept) == expected
    assert _dict_encoded(names, scores, zero_kept) == expected


def test_node_names_of_another_type_are_refused() -> None:
    pod = {"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": []}}
    for names in (["a", 1], ["a", None], [["a"]], [{"a": 1}]):
        with pytest.raises(BadRequest) as err:
            wire.parse_extender_args({"Pod": pod, "NodeNames": names})
        assert "NodeNames: expected an array of node names" in err.value.message


def test_binding_args() -> None:
    args = wire.parse_binding_args({"PodName": "p", "PodNamespace": "ns", "PodUID": "u",
                                    "Node": "n"})
    assert args == wire.BindingArgs(namespace="ns", name="p", uid="u", node="n")
    assert wire.binding_result(None) == {"Error": ""}
    assert wire.binding_result("conflict") == {"Error": "conflict"}


@pytest.mark.parametrize("doc, fragment", [
    ("x", "expected an ExtenderBindingArgs"),
    ({"PodNamespace": "ns", "Node": "n"}, "PodName: required"),
    ({"PodName": "p"}, "Node: required"),
    ({"PodName": 3, "Node": "n"}, "PodName: expected a string"),
])
def test_bad_binding_args(doc: Any, fragment: str) -> None:
    with pytest.raises(BadRequest) as err:
        wire.parse_binding_args(doc)
    assert fragment in err.value.message


def test_preemption_meta_victims_round_trip() -> None:
    doc = {"Pod": POD, "NodeNameToMetaVictims": {
        "n1": {"Pods": [{"UID": "v1"}, {"UID": "v2"}], "NumPDBViolations": 1}}}
    pod, victims = wire.parse_preemption_args(doc)
    assert pod.key == "ml/train-0"
    assert wire.preemption_result(victims) == {"NodeNameToMetaVictims": {
        "n1": {"Pods": [{"UID": "v1"}, {"UID": "v2"}], "NumPDBViolations": 1}}}


def test_preemption_full_victims_answer_with_uids() -> None:
    doc = {"Pod": POD, "NodeNameToVictims": {
        "n1": {"Pods": [{"metadata": {"name": "v", "uid": "v1"}}], "NumPDBViolations": 0},
        "n2": None}}
    _, victims = wire.parse_preemption_args(doc)
    assert wire.preemption_result(victims) == {"NodeNameToMetaVictims": {
        "n1": {"Pods": [{"UID": "v1"}], "NumPDBViolations": 0},
        "n2": {"Pods": [], "NumPDBViolations": 0}}}


@pytest.mark.parametrize("doc, fragment", [
    ({"Pod": POD}, "neither NodeNameToMetaVictims nor NodeNameToVictims"),
    ({"Pod": POD, "NodeNameToMetaVictims": []}, "expected an object keyed by node"),
    ({"Pod": POD, "NodeNameToMetaVictims": {"n": 1}}, "expected an object with Pods"),
    ({"Pod": POD, "NodeNameToMetaVictims": {"n": {"Pods": [{}]}}}, "needs a UID"),
    ({"Pod": POD, "NodeNameToVictims": {"n": {"Pods": [], "NumPDBViolations": "1"}}},
     "NumPDBViolations"),
])
def test_bad_preemption_args(doc: Any, fragment: str) -> None:
    with pytest.raises(BadRequest) as err:
        wire.parse_preemption_args(doc)
    assert fragment in err.value.message


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["Pod", "NodeNames", "Nodes", "metadata", "name", "items", "spec",
                         "PodName", "Node", "NodeNameToVictims", "NodeNameToMetaVictims",
                         "Pods", "UID", "resourceClaims"]), inner, max_size=4),
    max_leaves=12)


@given(JSON)
def test_any_json_either_parses_or_is_a_bad_request(doc: Any) -> None:
    for parse in (wire.parse_extender_args, wire.parse_binding_args,
                  wire.parse_preemption_args):
        try:
            parse(doc)
        except BadRequest as exc:
            assert 400 <= exc.status < 500


def test_encode_is_orjson() -> None:
    assert orjson.loads(wire.encode({"Host": "a", "Score": 1})) == {"Host": "a", "Score": 1}


def test_decode_restores_the_collector_state() -> None:
    assert gc.isenabled()
    wire.decode(b'{"a": [1, 2]}')
    with pytest.raises(BadRequest):
        wire.decode(b"{")
    assert gc.isenabled()
    gc.disable()
    try:
        wire.decode(b"[]")
        assert not gc.isenabled()
    finally:
        gc.enable()
