"""The extender wire format: parse kube-scheduler's bodies, build its answers.

kube-scheduler's extender types (`k8s.io/kube-scheduler/extender/v1`) carry no
JSON tags, so the keys are Go field names (`Pod`, `NodeNames`, `Host`, ...),
and Go's decoder matches keys case-insensitively. Older clients and many
third-party tools send `pod` / `nodenames`, so keys are looked up the way Go
does (exact first, then case-insensitive) and answers always use the exact
upstream casing.

Pure functions over decoded JSON, no HTTP types: the server, the CLI and the
unit tests share them. Anything that is not a well-formed request raises
`BadRequest` with the HTTP status and a message that says what is wrong.
Parsing takes only what the extender needs: the Pod goes through
`app.model.parse_pod`, and Node objects are kept as received so the
full-`Nodes` form can echo the passing ones back unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, Final, cast

import orjson

from app import garbage_collector
from app.model import InvalidObject, Pod, parse_object


class BadRequest(Exception):
    """A request drax cannot act on; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, *, status: int = 422, pod_key: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.pod_key = pod_key


@dataclass(slots=True)
class ExtenderArgs:
    pod: Pod
    node_names: list[str]
    # Full-`Nodes` form only: the NodeList without its items, and the items
    # as received, in the same order as `node_names`.
    node_list: dict[str, Any] | None = None
    node_items: list[Any] | None = None


@dataclass(slots=True, frozen=True)
class BindingArgs:
    namespace: str
    name: str
    uid: str
    node: str


@dataclass(slots=True, frozen=True)
class MetaVictims:
    uids: tuple[str, ...]
    pdb_violations: int


def decode(body: bytes) -> Any:
    if not body:
        raise BadRequest("empty request body; expected a JSON object", status=400)
    with garbage_collector.paused():
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise BadRequest(f"malformed JSON: {exc}", status=400) from None


def encode(value: Any) -> bytes:
    return orjson.dumps(value)


def field(doc: Mapping[str, Any], name: str) -> Any:
    """`doc[name]` with Go's key matching: exact key first, then case-insensitive."""
    if name in doc:
        return doc[name]
    folded = name.casefold()
    for key, value in doc.items():
        if isinstance(key, str) and key.casefold() == folded:
            return value
    return None


def pod_key_hint(doc: Any) -> str | None:
    """`namespace/name` of the request's Pod when it can be read, for log lines."""
    if not isinstance(doc, Mapping):
        return None
    pod = field(doc, "Pod")
    meta = pod.get("metadata") if isinstance(pod, Mapping) else None
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        return None
    namespace = meta.get("namespace")
    return f"{namespace if isinstance(namespace, str) and namespace else 'default'}/{meta['name']}"


def _object(doc: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(doc, Mapping):
        raise BadRequest(f"expected {what} (a JSON object), got {_json_type(doc)}")
    return doc


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def parse_pod_field(doc: Mapping[str, Any], what: str) -> Pod:
    raw = field(doc, "Pod")
    if raw is None:
        raise BadRequest(f"{what} has no Pod")
    if not isinstance(raw, Mapping):
        raise BadRequest(f"{what}.Pod: expected a Pod object, got {_json_type(raw)}")
    try:
        pod: Pod = parse_object("Pod", raw)
    except InvalidObject as exc:
        raise BadRequest(f"{what}.Pod: {exc}", pod_key=pod_key_hint(doc)) from None
    return pod


def parse_extender_args(doc: Any) -> ExtenderArgs:
    """An `ExtenderArgs` (filter and prioritize body) in either node form."""
    args = _object(doc, "an ExtenderArgs")
    pod = parse_pod_field(args, "ExtenderArgs")
    names = field(args, "NodeNames")
    if names is not None:
        if not isinstance(names, list) or not _all_strings(names):
            raise BadRequest("ExtenderArgs.NodeNames: expected an array of node names",
                             pod_key=pod.key)
        return ExtenderArgs(pod=pod, node_names=names)
    nodes = field(args, "Nodes")
    if nodes is None:
        raise BadRequest("ExtenderArgs has neither NodeNames nor Nodes", pod_key=pod.key)
    if not isinstance(nodes, Mapping) or not isinstance(nodes.get("items", []), list | None):
        raise BadRequest("ExtenderArgs.Nodes: expected a NodeList with an items array",
                         pod_key=pod.key)
    items: list[Any] = nodes.get("items") or []
    return ExtenderArgs(pod=pod, node_names=[_node_name(item, i, pod) for i, item in
                                             enumerate(items)],
                        node_list={k: v for k, v in nodes.items() if k != "items"},
                        node_items=items)


def _all_strings(values: list[Any]) -> bool:
    # str.join checks every item's type in C: no Python step per node name.
    try:
        "".join(values)
    except TypeError:
        return False
    return True


def _node_name(item: Any, index: int, pod: Pod) -> str:
    meta = item.get("metadata") if isinstance(item, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not name:
        raise BadRequest(f"ExtenderArgs.Nodes.items[{index}]: a Node needs metadata.name",
                         pod_key=pod.key)
    return name


def filter_result(args: ExtenderArgs, *, passed: Sequence[str], failed: Mapping[str, str],
                  unresolvable: Mapping[str, str], error: str | None) -> dict[str, Any]:
    """An `ExtenderFilterResult` in the node form the request used. Lists and
    dicts are taken as they are (orjson encodes them in C), others copied."""
    out: dict[str, Any] = {
        "Nodes": None,
        "NodeNames": None,
        "FailedNodes": failed if type(failed) is dict else dict(failed),
        "FailedAndUnresolvableNodes": (unresolvable if type(unresolvable) is dict
                                       else dict(unresolvable)),
        "Error": error or "",
    }
    if args.node_items is None:
        out["NodeNames"] = passed if type(passed) is list else list(passed)
    else:
        keep = set(passed)
        out["Nodes"] = {**(args.node_list or {}),
                        "items": [item for name, item in zip(args.node_names, args.node_items,
                                                             strict=True) if name in keep]}
    return out


def error_filter_result(message: str) -> dict[str, Any]:
    """A filter answer that fails the whole call; the scheduler logs `message`."""
    return {"Nodes": None, "NodeNames": None, "FailedNodes": {},
            "FailedAndUnresolvableNodes": {}, "Error": message}


def host_priority_list(scores: Sequence[tuple[str, int]]) -> list[dict[str, Any]]:
    return [{"Host": host, "Score": score} for host, score in scores]


_HOST: Final = '{"Host":"'
# What follows a host name in a HostPriorityList, per score, up to the next name.
_AFTER_HOST: Final = {score: f'","Score":{score}}},{_HOST}' for score in range(101)}


def encode_host_priority_list(hosts: list[str], values: list[int]) -> bytes:
    """`encode(host_priority_list(zip(hosts, values)))` byte for byte (the
    parallel lists of `NodeScores.kept`), built by C-level passes over the two
    lists: at 5,000 nodes a dict per node costs more than the answer's search.
    Names that JSON must escape, and scores outside 0..100, take the dict path."""
    if not hosts:
        return b"[]"
    tails = list(map(_AFTER_HOST.get, values))
    if None in tails or not _plain("".join(hosts)):
        return encode(host_priority_list(list(zip(hosts, values, strict=True))))
    text = "".join(chain.from_iterable(zip(hosts, cast(list[str], tails), strict=True)))
    return f"[{_HOST}{text[:-len(',' + _HOST)]}]".encode()


def _plain(text: str) -> bool:
    """Whether JSON encodes `text` as itself between quotes. orjson escapes
    character by character, so this holds for every part of a joined text."""
    try:
        return encode(text) == b'"' + text.encode() + b'"'
    except (UnicodeEncodeError, orjson.JSONEncodeError):
        return False


def parse_binding_args(doc: Any) -> BindingArgs:
    args = _object(doc, "an ExtenderBindingArgs")
    values = {}
    for key in ("PodName", "PodNamespace", "PodUID", "Node"):
        value = field(args, key)
        if value is not None and not isinstance(value, str):
            raise BadRequest(f"ExtenderBindingArgs.{key}: expected a string, "
                             f"got {_json_type(value)}")
        values[key] = value or ""
    pod_key = f"{values['PodNamespace'] or 'default'}/{values['PodName']}"
    for required in ("PodName", "Node"):
        if not values[required]:
            raise BadRequest(f"ExtenderBindingArgs.{required}: required",
                             pod_key=pod_key if values["PodName"] else None)
    return BindingArgs(namespace=values["PodNamespace"] or "default", name=values["PodName"],
                       uid=values["PodUID"], node=values["Node"])


def binding_result(error: str | None) -> dict[str, Any]:
    return {"Error": error or ""}


def parse_preemption_args(doc: Any) -> tuple[Pod, dict[str, MetaVictims]]:
    """The preemptor and its victims per node, from either victim form, as UIDs."""
    args = _object(doc, "an ExtenderPreemptionArgs")
    pod = parse_pod_field(args, "ExtenderPreemptionArgs")
    meta = field(args, "NodeNameToMetaVictims")
    if meta is not None:
        return pod, _victims(meta, "NodeNameToMetaVictims", _meta_pod_uid, pod)
    full = field(args, "NodeNameToVictims")
    if full is not None:
        return pod, _victims(full, "NodeNameToVictims", _full_pod_uid, pod)
    raise BadRequest("ExtenderPreemptionArgs has neither NodeNameToMetaVictims nor "
                     "NodeNameToVictims", pod_key=pod.key)


def _meta_pod_uid(entry: Any) -> str | None:
    uid = field(entry, "UID") if isinstance(entry, Mapping) else None
    return uid if isinstance(uid, str) and uid else None


def _full_pod_uid(entry: Any) -> str | None:
    meta = entry.get("metadata") if isinstance(entry, Mapping) else None
    uid = meta.get("uid") if isinstance(meta, Mapping) else None
    return uid if isinstance(uid, str) and uid else None


def _victims(raw: Any, what: str, uid_of: Any, pod: Pod) -> dict[str, MetaVictims]:
    if not isinstance(raw, Mapping):
        raise BadRequest(f"ExtenderPreemptionArgs.{what}: expected an object keyed by node",
                         pod_key=pod.key)
    out: dict[str, MetaVictims] = {}
    for node, victims in raw.items():
        if victims is None:
            out[node] = MetaVictims(uids=(), pdb_violations=0)
            continue
        where = f"ExtenderPreemptionArgs.{what}[{node!r}]"
        if not isinstance(victims, Mapping):
            raise BadRequest(f"{where}: expected an object with Pods", pod_key=pod.key)
        pods = field(victims, "Pods") or []
        violations = field(victims, "NumPDBViolations") or 0
        if not isinstance(pods, list) or isinstance(violations, bool) or not isinstance(
                violations, int):
            raise BadRequest(f"{where}: expected Pods (an array) and NumPDBViolations "
                             "(an integer)", pod_key=pod.key)
        uids = []
        for i, entry in enumerate(pods):
            uid = uid_of(entry)
            if uid is None:
                raise BadRequest(f"{where}.Pods[{i}]: a victim needs a UID", pod_key=pod.key)
            uids.append(uid)
        out[node] = MetaVictims(uids=tuple(uids), pdb_violations=violations)
    return out


def preemption_result(victims: Mapping[str, MetaVictims]) -> dict[str, Any]:
    return {"NodeNameToMetaVictims": {
        node: {"Pods": [{"UID": uid} for uid in v.uids], "NumPDBViolations": v.pdb_violations}
        for node, v in victims.items()}}
