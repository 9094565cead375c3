"""End-to-end over real HTTP: uvicorn on loopback serving the sample cluster, driven by httpx."""

from __future__ import annotations

import contextlib
import copy
import logging
import re
import socket
import time
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import pytest

from app.extender import BindCause, BindFailure, Extender
from app.features import FeatureGates
from app.inventory import Inventory
from app.model import Pod
from app.runtime import SAMPLE_DIR
from app.server import create_app, wire
from app.server.metrics import ServerMetrics
from app.server.probes import create_probe_app
from app.sources.files import load_objects
from tests.server.conftest import TEST_BODY_LIMIT
from tests.server.harness import running, sample_runtime

OBJECTS = load_objects([SAMPLE_DIR])
PODS = {o["metadata"]["name"]: o for o in OBJECTS if o["kind"] == "Pod"}
NODES = [o for o in OBJECTS if o["kind"] == "Node"]
NODE_NAMES = [n["metadata"]["name"] for n in NODES]
GPU_NODES = ["h100-node-1", "h100-node-2", "h100-mig-node-1"]
NO_DRA_NODES = ["cpu-node-1", "a100-plugin-node-1"]  # no ResourceSlices
FILTER_KEYS = {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}


def pod(name: str, *, rename: str | None = None) -> dict[str, Any]:
    out = copy.deepcopy(PODS[name])
    if rename:
        out["metadata"]["name"] = rename
        out["metadata"]["uid"] = f"uid-{rename}"
    return out


def names_args(p: dict[str, Any], names: list[str]) -> dict[str, Any]:
    return {"Pod": p, "Nodes": None, "NodeNames": names}


def nodes_args(p: dict[str, Any], nodes: list[dict[str, Any]]) -> dict[str, Any]:
    return {"Pod": p, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}


def in_process(app: Any) -> httpx.AsyncClient:
    """A client that calls `app` in this process, no socket between."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://drax")


def metric(client: httpx.Client, name: str, **labels: str) -> float:
    text = client.get("/metrics").text
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        m = re.fullmatch(r"(\w+)(?:\{(.*)\})? (\S+)", line)
        if m and m.group(1) == name:
            got = ",".join(sorted((m.group(2) or "").split(","))) if m.group(2) else ""
            if got == want:
                return float(m.group(3))
    raise AssertionError(f"metric {name}{{{want}}} not exposed")


def assert_still_serving(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    r = client.post("/filter", json=names_args(pod("infer-0"), ["h100-node-2"]))
    assert r.status_code == 200 and r.json()["NodeNames"] == ["h100-node-2"]


# ------------------------------------------------------------------ probes


def test_health_ready_version(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}
    version = client.get("/version").json()
    assert version["mode"] == "allocator" and version["source"] == "sample"
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", version["version"])


# ------------------------------------------------------------------ filter / prioritize


@pytest.mark.parametrize("path", ["/filter", "/scheduler/filter"])
def test_filter_node_names_form(client: httpx.Client, path: str) -> None:
    r = client.post(path, json=names_args(pod("train-0"), NODE_NAMES))
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert set(body) == FILTER_KEYS
    assert body["Nodes"] is None and body["Error"] == ""
    assert sorted(body["NodeNames"]) == sorted(GPU_NODES)
    assert set(body["FailedAndUnresolvableNodes"]) | set(body["FailedNodes"]) == set(NO_DRA_NODES)
    assert all(isinstance(v, str) and v for v in
               {**body["FailedNodes"], **body["FailedAndUnresolvableNodes"]}.values())


def test_filter_full_nodes_form_echoes_node_objects(client: httpx.Client) -> None:
    r = client.post("/filter", json=nodes_args(pod("train-0"), NODES))
    body = r.json()
    assert r.status_code == 200 and set(body) == FILTER_KEYS
    assert body["NodeNames"] is None and body["Error"] == ""
    assert body["Nodes"]["items"] == [n for n in NODES if n["metadata"]["name"] in GPU_NODES]
    assert body["Nodes"]["metadata"] == {}


def test_filter_mig_pod_passes_only_the_partitionable_node(client: httpx.Client) -> None:
    body = client.post("/filter", json=names_args(pod("notebook-0"), NODE_NAMES)).json()
    assert body["NodeNames"] == ["h100-mig-node-1"]


@pytest.mark.parametrize("form", ["names", "nodes"])
def test_prioritize_both_forms(client: httpx.Client, form: str) -> None:
    nodes = [n for n in NODES if n["metadata"]["name"] in GPU_NODES]
    args = (names_args(pod("train-0"), GPU_NODES) if form == "names"
            else nodes_args(pod("train-0"), nodes))
    r = client.post("/scheduler/prioritize", json=args)
    assert r.status_code == 200
    body = r.json()
    assert isinstance(body, list)
    assert all(set(entry) == {"Host", "Score"} for entry in body)
    # a node scoring 0 may be left out (the scheduler reads a missing host as 0)
    assert body and {e["Host"] for e in body} <= set(GPU_NODES)
    assert all(isinstance(e["Score"], int) and 0 < e["Score"] <= 10 for e in body)


def test_lower_case_keys_are_accepted(client: httpx.Client) -> None:
    r = client.post("/filter", json={"pod": pod("infer-0"), "nodenames": ["h100-node-1"]})
    assert r.json()["NodeNames"] == ["h100-node-1"]


# ------------------------------------------------------------------ bind


def test_bind_then_filter_sees_the_devices_taken(fresh_server: str) -> None:
    with httpx.Client(base_url=fresh_server, timeout=30) as c:
        first = pod("train-8gpu-0")
        before = c.post("/filter", json=names_args(first, GPU_NODES)).json()
        assert sorted(before["NodeNames"]) == sorted(GPU_NODES)
        r = c.post("/scheduler/bind", json={
            "PodName": "train-8gpu-0", "PodNamespace": "default",
            "PodUID": first["metadata"]["uid"], "Node": "h100-node-1"})
        assert r.status_code == 200 and r.json() == {"Error": ""}
        second = pod("train-8gpu-0", rename="train-8gpu-1")
        after = c.post("/filter", json=names_args(second, GPU_NODES)).json()
        assert "h100-node-1" not in after["NodeNames"]
        assert "h100-node-1" in after["FailedNodes"]  # evicting the first pod would help
        assert sorted(after["NodeNames"]) == ["h100-mig-node-1", "h100-node-2"]


def test_device_plugin_pod_is_served_by_dra_and_bound_with_its_special_claim(
        fresh_server: str) -> None:
    # legacy-2gpu-0 asks nvidia.com/gpu: 2 in its limits, no claims; the
    # gpu.nvidia.com class takes the name over (extendedResourceName).
    with httpx.Client(base_url=fresh_server, timeout=30) as c:
        legacy = pod("legacy-2gpu-0")
        body = c.post("/filter", json=names_args(legacy, NODE_NAMES)).json()
        # the device-plugin node is left to the in-tree fit: it passes here
        assert sorted(body["NodeNames"]) == sorted([*GPU_NODES, "a100-plugin-node-1"])
        assert body["FailedAndUnresolvableNodes"] == {"cpu-node-1": (
            "nvidia.com/gpu: 2 requested, 0 devices of class gpu.nvidia.com free on this "
            "node")}
        r = c.post("/bind", json={"PodName": "legacy-2gpu-0", "PodNamespace": "default",
                                  "PodUID": legacy["metadata"]["uid"], "Node": "h100-node-1"})
        assert r.json() == {"Error": ""}
        # the special claim holds two of h100-node-1's GPUs now
        eight = c.post("/filter", json=names_args(pod("train-8gpu-0"), ["h100-node-1"])).json()
        assert "6 free; 8 needed" in eight["FailedNodes"]["h100-node-1"]
        many = pod("legacy-2gpu-0", rename="legacy-2gpu-1")
        many["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "7"
        body = c.post("/filter", json=names_args(many, ["h100-node-1"])).json()
        assert body["FailedNodes"] == {"h100-node-1": (
            "nvidia.com/gpu: 7 requested, 6 devices of class gpu.nvidia.com free on this "
            "node")}


def test_bind_unknown_pod_answers_with_error_field(client: httpx.Client) -> None:
    r = client.post("/bind", json={"PodName": "nobody", "PodNamespace": "default",
                                   "PodUID": "x", "Node": "h100-node-1"})
    assert r.status_code == 200
    assert r.json()["Error"]


def test_every_bind_is_logged_at_the_default_level(fresh_server: str,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    first = pod("train-0")
    with caplog.at_level(logging.INFO, logger="app.server.app"), \
            httpx.Client(base_url=fresh_server, timeout=30) as c:
        c.post("/filter", json=names_args(first, GPU_NODES))
        ok = c.post("/bind", json={"PodName": "train-0", "PodNamespace": "default",
                                   "PodUID": first["metadata"]["uid"], "Node": "h100-node-1"})
        failed = c.post("/bind", json={"PodName": "nobody", "PodNamespace": "default",
                                       "PodUID": "x", "Node": "h100-node-2"})
    assert ok.json() == {"Error": ""} and failed.json()["Error"]
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "app.server.app"]
    assert any(level == logging.INFO and re.match(
        rf"bound pod default/train-0 \(uid {first['metadata']['uid']}\) to node h100-node-1 "
        r"in \d+\.\d ms$", text) for level, text in lines), lines
    assert any(level == logging.WARNING and text.startswith(
        "bind of pod default/nobody (uid x) to node h100-node-2 failed after ")
        and text.endswith(failed.json()["Error"]) for level, text in lines), lines


class WordedBinds:
    """Verbs whose every bind fails with the next of `failures`."""

    def __init__(self, failures: list[BindFailure]) -> None:
        self.failures = failures

    def filter(self, pod: Pod, node_names: Sequence[str]) -> Any:
        raise AssertionError("only bind is called")

    def node_scores(self, pod: Pod, node_names: Sequence[str]) -> Any:
        raise AssertionError("only bind is called")

    async def wait_for_binds(self, pod: Pod) -> float | None:
        return None

    async def bind(self, *, namespace: str, name: str, uid: str, node: str
                   ) -> BindFailure | None:
        return self.failures.pop(0)


def test_a_reworded_bind_error_keeps_its_cause_label() -> None:
    # The second wording shares no words with the first: the label comes from
    # the cause the error was raised with, and the scheduler gets the text as is.
    worded = [BindFailure("resourceclaim default/c got allocated elsewhere in the meantime",
                          BindCause.CLAIM_TAKEN),
              BindFailure("resourceclaim default/c now belongs to another pod (HTTP 409)",
                          BindCause.CLAIM_TAKEN)]
    app = create_app(verbs=WordedBinds(list(worded)), ready=lambda: True, max_body_bytes=4096)
    binding = {"PodName": "p", "PodNamespace": "default", "PodUID": "u", "Node": "n1"}
    with running(app) as url, httpx.Client(base_url=url, timeout=30) as c:
        taken = metric(c, "drax_bind_failures_total", cause="claim_taken")
        other = {cause: metric(c, "drax_bind_failures_total", cause=cause)
                 for cause in ("api_error", "conflict", "other")}
        answers = [c.post("/bind", json=binding).json() for _ in worded]
        assert answers == [{"Error": f.message} for f in worded]
        assert metric(c, "drax_bind_failures_total", cause="claim_taken") == taken + 2
        assert {cause: metric(c, "drax_bind_failures_total", cause=cause)
                for cause in other} == other


# ------------------------------------------------------------------ preempt


def test_preempt_meta_victims_pass_through(client: httpx.Client) -> None:
    victims = {"h100-node-1": {"Pods": [{"UID": "v-1"}], "NumPDBViolations": 0}}
    r = client.post("/preempt", json={"Pod": pod("train-0"), "NodeNameToVictims": None,
                                      "NodeNameToMetaVictims": victims})
    assert r.status_code == 200
    assert r.json() == {"NodeNameToMetaVictims": victims}


def test_preempt_never_names_a_pod_drax_knows_is_not_on_the_node(client: httpx.Client
                                                                 ) -> None:
    victim = pod("infer-0")  # pending, bound to no node
    r = client.post("/scheduler/preempt", json={
        "Pod": pod("train-0"), "NodeNameToMetaVictims": None,
        "NodeNameToVictims": {"h100-node-2": {"Pods": [victim], "NumPDBViolations": 1}}})
    assert r.status_code == 200
    assert r.json() == {"NodeNameToMetaVictims": {}}


# ------------------------------------------------------------------ bad input


BAD_BODIES = [
    ("/filter", b'{"Pod": {', 400, "malformed JSON"),
    ("/filter", b"", 400, "empty request body"),
    ("/filter", b"[1, 2]", 422, "expected an ExtenderArgs"),
    ("/filter", b'{"Pod": {"spec": {}}, "NodeNames": ["h100-node-1"]}', 422,
     "metadata.name: required"),
    ("/prioritize", b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": "h100-node-1"}', 422,
     "expected an array of node names"),
    ("/prioritize", b'{"NodeNames": []}', 422, "has no Pod"),
    ("/bind", b'{"PodName": "p"}', 422, "Node: required"),
    ("/preempt", b'{"Pod": {"metadata": {"name": "p"}}}', 422, "neither NodeNameToMetaVictims"),
    ("/preempt", b'{"Pod": {"metadata": {"name": "p"}}, "NodeNameToMetaVictims": '
                 b'{"n": {"Pods": [{}]}}}', 422, "needs a UID"),
]


@pytest.mark.parametrize("path, body, status, fragment", BAD_BODIES)
def test_bad_bodies_get_4xx_with_reason(client: httpx.Client, path: str, body: bytes,
                                        status: int, fragment: str) -> None:
    before = metric(client, "drax_requests_total", verb=path.strip("/"), outcome="bad_request")
    r = client.post(path, content=body, headers={"content-type": "application/json"})
    assert r.status_code == status
    assert fragment in r.json()["error"]
    after = metric(client, "drax_requests_total", verb=path.strip("/"), outcome="bad_request")
    assert after == before + 1
    assert_still_serving(client)


def test_bad_input_is_logged_once_with_the_pod(client: httpx.Client,
                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="app.server")
    r = client.post("/filter", json={"Pod": pod("train-0"), "NodeNames": [1]})
    assert r.status_code == 422
    lines = [rec for rec in caplog.records if rec.name.startswith("app.server")]
    assert len(lines) == 1
    assert lines[0].levelno == logging.WARNING
    assert "default/train-0" in lines[0].getMessage()


def test_unknown_node_names_are_unresolvable(client: httpx.Client) -> None:
    body = client.post("/filter", json=names_args(pod("train-0"),
                                                  ["no-such-node", "h100-node-2"])).json()
    assert body["NodeNames"] == ["h100-node-2"]
    assert "no-such-node" in body["FailedAndUnresolvableNodes"]
    assert "unknown" in body["FailedAndUnresolvableNodes"]["no-such-node"]
    assert_still_serving(client)


def test_pod_with_unknown_claim_template_is_unresolvable_everywhere(client: httpx.Client
                                                                    ) -> None:
    p = pod("infer-0", rename="lost-0")
    p["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = "no-such-template"
    body = client.post("/filter", json=names_args(p, GPU_NODES)).json()
    assert body["NodeNames"] == []
    assert set(body["FailedAndUnresolvableNodes"]) == set(GPU_NODES)
    assert "no-such-template" in body["FailedAndUnresolvableNodes"]["h100-node-1"]


def test_body_over_the_limit_with_content_length_is_413(client: httpx.Client) -> None:
    big = b'{"Pod": {}, "NodeNames": ["' + b"x" * TEST_BODY_LIMIT + b'"]}'
    r = client.post("/filter", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert "exceeds the limit" in r.json()["error"]
    assert_still_serving(client)


def test_a_verb_answers_with_the_headers_of_a_json_response(client: httpx.Client) -> None:
    r = client.post("/scheduler/prioritize", json=names_args(pod("infer-0"), GPU_NODES))
    assert r.status_code == 200
    # date and server come from uvicorn
    assert [k for k, _ in r.headers.items() if k not in ("date", "server")] == [
        "content-length", "content-type", "server-timing"]
    assert r.headers["content-type"] == "application/json"
    assert int(r.headers["content-length"]) == len(r.content)
    over = client.post("/filter", content=b"{" + b" " * TEST_BODY_LIMIT + b"}",
                       headers={"content-type": "application/json"})
    assert over.status_code == 413 and over.headers["connection"] == "close"
    assert over.json()["error"].startswith("request body of ")


def test_streamed_body_over_the_limit_is_413(client: httpx.Client) -> None:
    def chunks() -> Any:
        yield b'{"Pod": {}, "NodeNames": ["'
        for _ in range(8):
            yield b"x" * (TEST_BODY_LIMIT // 4)
        yield b'"]}'

    r = client.post("/filter", content=chunks(), headers={"content-type": "application/json"})
    assert "content-length" not in r.request.headers
    assert r.status_code == 413
    assert_still_serving(client)


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
def test_wrong_content_type_is_415(client: httpx.Client, content_type: str) -> None:
    r = client.post("/filter", content=b'{"Pod": {}}', headers={"content-type": content_type})
    assert r.status_code == 415
    assert "Content-Type" in r.json()["error"]
    assert_still_serving(client)


def test_wrong_method_and_path(client: httpx.Client) -> None:
    r = client.get("/filter")
    assert r.status_code == 405 and r.headers["allow"] == "POST"
    assert r.json() == {"error": "GET /filter: Method Not Allowed"}
    r = client.post("/nope", json={})
    assert r.status_code == 404 and r.json() == {"error": "POST /nope: Not Found"}
    assert r.headers["content-type"] == "application/json"
    assert_still_serving(client)


def test_the_probe_listener_answers_unknown_paths_in_the_same_shape() -> None:
    with running(create_probe_app(ready=lambda: True, metrics=ServerMetrics())) as url:
        r = httpx.get(f"{url}/nope")
        assert r.status_code == 404 and r.json() == {"error": "GET /nope: Not Found"}
        r = httpx.post(f"{url}/healthz")
        assert r.status_code == 405 and r.json() == {"error": "POST /healthz: Method Not Allowed"}


# ------------------------------------------------------------------ metrics


def test_metrics_move(client: httpx.Client) -> None:
    ok = metric(client, "drax_requests_total", verb="prioritize", outcome="ok")
    seen = metric(client, "drax_request_duration_seconds_count", verb="prioritize")
    passed = metric(client, "drax_filter_nodes_total", result="passed")
    client.post("/prioritize", json=names_args(pod("infer-0"), GPU_NODES))
    client.post("/filter", json=names_args(pod("infer-0"), GPU_NODES))
    assert metric(client, "drax_requests_total", verb="prioritize", outcome="ok") == ok + 1
    assert metric(client, "drax_request_duration_seconds_count", verb="prioritize") == seen + 1
    timed = client.post("/filter", json=names_args(pod("infer-0"), GPU_NODES))
    assert re.fullmatch(r"handler;dur=\d+\.\d{3}", timed.headers["server-timing"])
    passed += 3
    assert metric(client, "drax_filter_nodes_total", result="passed") == passed + 3
    text = client.get("/metrics").text
    assert 'drax_request_duration_seconds_bucket{le="0.0001",verb="filter"}' in text
    assert metric(client, "process_resident_memory_bytes") > 0
    assert "python_gc_collections_total" in text


def test_two_runtimes_in_one_process_count_apart() -> None:
    first, second = sample_runtime(), sample_runtime()
    assert first.metrics.registry is not second.metrics.registry
    with running(first.app) as one, running(second.app) as two, \
            httpx.Client(base_url=one, timeout=30) as a, \
            httpx.Client(base_url=two, timeout=30) as b, \
            running(second.probes) as probes, httpx.Client(base_url=probes, timeout=30) as p:
        a.post("/filter", json=names_args(pod("infer-0"), GPU_NODES))
        a.post("/filter", json=names_args(pod("infer-0"), GPU_NODES))
        b.post("/filter", json=names_args(pod("infer-0"), GPU_NODES))
        assert metric(a, "drax_requests_total", verb="filter", outcome="ok") == 2
        assert metric(b, "drax_requests_total", verb="filter", outcome="ok") == 1
        # The probe listener serves its runtime's registry, the same series.
        assert metric(p, "drax_requests_total", verb="filter", outcome="ok") == 1
        assert metric(p, "drax_ready") == 1
        text = b.get("/metrics").text
        assert "drax_inventory_devices" in text and "drax_gc_pause_seconds_count" in text


# ------------------------------------------------------------------ not ready


def test_unsynced_inventory_is_not_ready_and_says_so_per_verb() -> None:
    inventory = Inventory()
    extender = Extender(inventory, features=FeatureGates(), file_mode=True)
    app = create_app(verbs=extender, ready=lambda: inventory.synced, max_body_bytes=4096)
    with running(app) as url, httpx.Client(base_url=url, timeout=30) as c:
        assert c.get("/readyz").status_code == 503
        assert c.get("/healthz").status_code == 200
        args = names_args(pod("infer-0"), ["h100-node-1"])
        answer = c.post("/filter", json=args).json()
        assert "not ready" in answer["Error"] and answer["NodeNames"] is None
        r = c.post("/prioritize", json=args)
        assert r.status_code == 503 and "not ready" in r.json()["error"]
        bind = c.post("/bind", json={"PodName": "infer-0", "Node": "h100-node-1"}).json()
        assert "not ready" in bind["Error"]
        assert metric(c, "drax_requests_total", verb="prioritize", outcome="error") >= 1


def test_client_that_hangs_up_mid_body_does_not_disturb_the_server(client: httpx.Client
                                                                   ) -> None:
    before = metric(client, "drax_requests_total", verb="filter", outcome="bad_request")
    host, port = client.base_url.host, client.base_url.port
    with socket.create_connection((host, port)) as s:
        s.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1000\r\n\r\n" + b'{"Pod": ')
    deadline = time.monotonic() + 10
    while metric(client, "drax_requests_total", verb="filter",
                 outcome="bad_request") == before:
        assert time.monotonic() < deadline, "the cut-off request was never counted"
        time.sleep(0.02)
    assert_still_serving(client)


def test_url_prefix_is_configurable() -> None:
    with running(sample_runtime(url_prefix="/ext/v1").app) as url, \
            httpx.Client(base_url=url, timeout=30) as c:
        args = names_args(pod("infer-0"), ["h100-node-1"])
        assert c.post("/ext/v1/filter", json=args).json()["NodeNames"] == ["h100-node-1"]
        assert c.post("/filter", json=args).status_code == 200
        assert c.post("/scheduler/filter", json=args).status_code == 404


def test_every_verb_request_is_announced_as_it_arrives() -> None:
    inventory = Inventory()
    extender = Extender(inventory, features=FeatureGates(), file_mode=True)
    arrived: list[float] = []
    app = create_app(verbs=extender, ready=lambda: inventory.synced, max_body_bytes=4096,
                     on_request=lambda: arrived.append(time.monotonic()))
    with running(app) as url, httpx.Client(base_url=url, timeout=30) as c:
        assert c.get("/readyz").status_code == 503
        assert arrived == []  # probes are not the scheduler
        c.post("/filter", json=names_args(pod("infer-0"), ["h100-node-1"]))
        c.post("/bind", content=b"{not json", headers={"Content-Type": "application/json"})
    assert len(arrived) == 2  # even a request that turns out to be unusable


# ------------------------------------------------------------------ middleware


class Recorded:
    """An ASGI middleware that notes each HTTP request it sees."""

    def __init__(self, app: Any, seen: list[tuple[str, str]]) -> None:
        self.app, self.seen = app, seen

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.seen.append((scope["method"], scope["path"]))
        await self.app(scope, receive, send)


async def test_a_middleware_added_to_the_app_sees_the_verbs_and_changes_no_answer() -> None:
    plain, wrapped = sample_runtime().app, sample_runtime().app
    seen: list[tuple[str, str]] = []
    wrapped.add_middleware(Recorded, seen=seen)
    args = names_args(pod("infer-0"), GPU_NODES)
    answers = []
    for app in (plain, wrapped):
        async with in_process(app) as c:
            answers.append([(r.status_code, r.content) for r in [
                await c.post("/filter", json=args),
                await c.post("/scheduler/prioritize", json=args),
                await c.post("/bind", json={"PodName": "nobody", "PodNamespace": "default",
                                            "PodUID": "x", "Node": "h100-node-2"})]])
    assert answers[0] == answers[1] and answers[0][0][0] == 200
    assert seen == [("POST", "/filter"), ("POST", "/scheduler/prioritize"), ("POST", "/bind")]


async def test_without_middleware_a_verb_post_skips_starlettes_stack() -> None:
    app = sample_runtime().app
    async with in_process(app) as c:
        r = await c.post("/filter", json=names_args(pod("infer-0"), GPU_NODES))
        assert r.status_code == 200 and r.json()["NodeNames"]
        assert app.middleware_stack is None  # Starlette built nothing for the verb
        assert (await c.get("/healthz")).status_code == 200
        assert app.middleware_stack is not None


class Durations:
    """A meter provider for FastAPI's own telemetry that keeps each request
    duration it records, with its attributes."""

    def __init__(self) -> None:
        self.recorded: list[dict[str, Any]] = []

    def get_meter(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def create_histogram(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def create_up_down_counter(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def record(self, amount: float, attributes: dict[str, Any] | None = None) -> None:
        self.recorded.append(dict(attributes or {}))

    def add(self, amount: int, attributes: dict[str, Any] | None = None) -> None:
        pass


async def test_fastapis_own_telemetry_sees_the_verbs_like_any_path_once_configured() -> None:
    app = sample_runtime().app
    durations = Durations()
    # What FastAPI(telemetry={"meter_provider": ...}) sets; drax configures none itself.
    app._telemetry["meter_provider"] = durations  # type: ignore[attr-defined]
    async with in_process(app) as c:
        assert (await c.post("/filter", json=names_args(pod("infer-0"), GPU_NODES))
                ).status_code == 200
        assert (await c.get("/healthz")).status_code == 200
        text = (await c.get("/metrics")).text
    assert [(d["http.request.method"], d.get("http.route"), d["http.response.status_code"])
            for d in durations.recorded] == [("POST", "/filter", 200), ("GET", "/healthz", 200),
                                             ("GET", "/metrics", 200)]
    # drax's own metrics count the verb the same way.
    assert 'drax_requests_total{outcome="ok",verb="filter"} 1.0' in text


async def test_an_instrumentor_that_rebuilds_the_middleware_stack_sees_the_verbs() -> None:
    import types

    from fastapi import FastAPI

    app = sample_runtime().app
    seen: list[tuple[str, str]] = []
    # What OpenTelemetry's FastAPIInstrumentor.instrument_app does to an app.
    app.build_middleware_stack = types.MethodType(  # type: ignore[method-assign]
        lambda self: Recorded(FastAPI.build_middleware_stack(self), seen), app)
    async with in_process(app) as c:
        r = await c.post("/filter", json=names_args(pod("infer-0"), GPU_NODES))
    assert r.status_code == 200 and r.json()["NodeNames"]
    assert seen == [("POST", "/filter")]


def test_uvicorns_access_log_names_every_verb_request(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="uvicorn.access")
    with running(sample_runtime().app, access_log=True) as url, httpx.Client(base_url=url) as c:
        assert c.post("/filter", json=names_args(pod("infer-0"), GPU_NODES)).status_code == 200
        assert c.post("/scheduler/prioritize",
                      json=names_args(pod("infer-0"), GPU_NODES)).status_code == 200
        assert c.get("/healthz").status_code == 200
    lines = [r.getMessage() for r in caplog.records if r.name == "uvicorn.access"]
    assert [line.split('"')[1] for line in lines] == [
        "POST /filter HTTP/1.1", "POST /scheduler/prioritize HTTP/1.1", "GET /healthz HTTP/1.1"]


# ------------------------------------------------------------------ escaped failures


class FailingReady:
    """A readiness check that raises while `failing`: every verb calls it
    outside its own error handling."""

    def __init__(self) -> None:
        self.failing = False

    def __call__(self) -> bool:
        if self.failing:
            raise RuntimeError("boom")
        return True


VERB_REQUESTS: dict[str, Any] = {
    "filter": names_args(pod("infer-0"), GPU_NODES),
    "prioritize": names_args(pod("infer-0"), GPU_NODES),
    "bind": {"PodName": "infer-0", "PodNamespace": "default", "PodUID": "u",
             "Node": "h100-node-2"},
    "preempt": {"Pod": pod("train-0"), "NodeNameToVictims": None, "NodeNameToMetaVictims": {
        "h100-node-1": {"Pods": [{"UID": "v-1"}], "NumPDBViolations": 0}}},
}


def escaped_answer(verb: str, error: str) -> tuple[int, Any]:
    """Status and body of `verb` failing with `error`, as the scheduler reads them."""
    if verb == "filter":
        return 200, {"Nodes": None, "NodeNames": None, "FailedNodes": {},
                     "FailedAndUnresolvableNodes": {}, "Error": f"drax filter failed: {error}"}
    if verb == "bind":
        return 200, {"Error": f"drax bind failed: {error}"}
    return 503, {"error": f"drax {verb} failed: {error}"}


def sample(metrics: ServerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


async def escaped(app: Any, metrics: ServerMetrics, verb: str, *, fail: Any,
                  caplog: pytest.LogCaptureFixture, error: str = "boom") -> None:
    """`verb` answered in its own error shape while `fail` is on, counted and
    logged, and the app answering normally afterwards."""
    async with in_process(app) as c:
        with fail():
            r = await c.post(f"/{verb}", json=VERB_REQUESTS[verb])
        assert (r.status_code, r.json()) == escaped_answer(verb, error)
        assert r.headers["content-type"] == "application/json"
        assert sample(metrics, "drax_requests_total", verb=verb, outcome="error") == 1
        assert sample(metrics, "drax_request_duration_seconds_count", verb=verb) == 1
        assert [r.exc_info is not None for r in caplog.records
                if r.name == "app.server.app" and r.levelno == logging.ERROR] == [True]
        assert (await c.post(f"/{verb}", json=VERB_REQUESTS[verb])).status_code == 200
        assert (await c.get("/healthz")).status_code == 200


@pytest.mark.parametrize("verb", ["filter", "prioritize", "bind", "preempt"])
async def test_a_failure_outside_a_verbs_own_handling_is_answered_in_its_shape(
        verb: str, caplog: pytest.LogCaptureFixture) -> None:
    ready, metrics = FailingReady(), ServerMetrics()
    extender = Extender(Inventory(), features=FeatureGates(), file_mode=True)
    app = create_app(verbs=extender, ready=ready, max_body_bytes=TEST_BODY_LIMIT,
                     metrics=metrics)

    @contextlib.contextmanager
    def fail() -> Iterator[None]:
        ready.failing = True
        try:
            yield
        finally:
            ready.failing = False

    await escaped(app, metrics, verb, fail=fail, caplog=caplog)


@pytest.mark.parametrize("step", ["before_filter", "wait_for_binds", "encode"])
async def test_a_filter_failing_around_its_own_handling_answers_with_its_error_field(
        step: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    metrics, failing = ServerMetrics(), [False]
    extender = Extender(Inventory(), features=FeatureGates(), file_mode=True)

    async def before_filter(p: Pod, names: list[str]) -> None:
        if failing[0]:
            raise RuntimeError("boom")

    async def wait_for_binds(p: Pod) -> float | None:
        raise RuntimeError("boom")

    def filter_result(*args: Any, **kwargs: Any) -> Any:
        return {"NodeNames": [RuntimeError("boom")]}

    app = create_app(verbs=extender, ready=lambda: True, max_body_bytes=TEST_BODY_LIMIT,
                     metrics=metrics, before_filter=before_filter)

    @contextlib.contextmanager
    def fail() -> Iterator[None]:
        with monkeypatch.context() as m:
            failing[0] = step == "before_filter"
            if step == "wait_for_binds":
                m.setattr(extender, "wait_for_binds", wait_for_binds)
            if step == "encode":
                m.setattr(wire, "filter_result", filter_result)
            yield
            failing[0] = False

    await escaped(app, metrics, "filter", fail=fail, caplog=caplog,
                  error="Type is not JSON serializable: RuntimeError" if step == "encode"
                  else "boom")
