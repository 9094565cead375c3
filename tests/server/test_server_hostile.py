"""Generated hostile input against a real `drax serve` process on loopback.

hypothesis builds the requests (see docs/decisions.md for why not
schemathesis): valid-but-odd ExtenderArgs, BindingArgs and preemption args,
arbitrary JSON, deep nesting, huge numbers and strings, invalid UTF-8,
duplicate keys, truncated JSON, random bytes, wrong content types and methods,
on every verb (with and without the URL prefix) and every probe. Batches go
over one keep-alive client so more than 10,000 requests fit in CI time.
Raw sockets then send what no HTTP client sends: bodies shorter than their
Content-Length, bodies that trickle in, and hundreds of idle connections.

Required throughout: no 5xx, the process alive, every answer either
well-formed for its verb or a 4xx carrying a message; afterwards a real
filter answers exactly as before, and the resident set grew by a bounded amount.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.server.test_server_cli import REPO, free_port, wait_ready
from tests.server.test_server_tls import FILTER

BODY_LIMIT = 256 * 1024
READ_TIMEOUT = 1.0
BATCH = 5
EXAMPLES = int(__import__("os").environ.get("DRAX_HOSTILE_EXAMPLES", "2100"))  # x BATCH requests
RSS_GROWTH_LIMIT_KIB = 64 * 1024

NODES = ["h100-node-1", "h100-node-2", "mi300-node-1", "cpu-node-1", "h100-mig-node-1"]
TEMPLATES = ["1gpu", "8gpu", "2gpu-1nic-same-pcieroot", "mig-1g"]
VERBS = ["filter", "prioritize", "bind", "preempt"]
PROBES = ["/healthz", "/readyz", "/metrics", "/version"]


@dataclass(slots=True)
class Drax:
    url: str
    proc: subprocess.Popen[bytes]
    rss_start_kib: int = 0
    requests: int = 0
    statuses: dict[int, int] = field(default_factory=dict)

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def drax(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Drax]:
    port = free_port()
    log = (tmp_path_factory.mktemp("hostile") / "serve.log").open("w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--port", str(port), "--log-level", "error",
         "--max-body-bytes", str(BODY_LIMIT), "--body-read-timeout", str(READ_TIMEOUT)],
        cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    d = Drax(url=f"http://127.0.0.1:{port}", proc=proc)
    try:
        wait_ready(d.url, proc)
        with httpx.Client(base_url=d.url, timeout=30) as c:
            for _ in range(50):  # warm-up: caches and allocator state settle
                c.post("/filter", json=FILTER)
        d.rss_start_kib = d.rss_kib()
        yield d
    finally:
        alive = proc.poll() is None
        proc.terminate()
        proc.wait(timeout=30)
        log.seek(0)
        assert alive, "drax died:\n" + log.read()[-4000:]


# ------------------------------------------------------------------ strategies

text = st.text(max_size=16)
node_name = st.sampled_from(NODES) | text
json_leaf = (st.none() | st.booleans() | st.integers() | text
             | st.floats(allow_nan=False, allow_infinity=False))
json_any = st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=5)
                        | st.dictionaries(st.text(max_size=10), inner, max_size=5),
                        max_leaves=8)
claim_ref = st.fixed_dictionaries(
    {"name": text},
    optional={"resourceClaimTemplateName": st.sampled_from(TEMPLATES) | text,
              "resourceClaimName": text})
pod = st.fixed_dictionaries(
    {"metadata": st.fixed_dictionaries(
        {"name": st.sampled_from(["infer-0", "train-0", "notebook-0"]) | text},
        optional={"namespace": st.just("default") | text, "uid": text,
                  "labels": st.dictionaries(text, text, max_size=3)})},
    optional={"spec": st.fixed_dictionaries(
        {}, optional={"resourceClaims": st.lists(claim_ref, max_size=4) | json_any,
                      "nodeName": node_name}),
        "status": json_any})
node_list = st.fixed_dictionaries({"items": st.lists(st.fixed_dictionaries(
    {"metadata": st.fixed_dictionaries({"name": node_name})}), max_size=4)})
extender_args = st.fixed_dictionaries(
    {"Pod": pod | json_any},
    optional={"NodeNames": st.lists(node_name, max_size=8) | json_any,
              "Nodes": node_list | json_any})
# Random pod names only: a bind of a sample pod would take its devices for real.
binding_args = st.fixed_dictionaries(
    {}, optional={"PodName": text | json_any, "PodNamespace": text, "PodUID": text,
                  "Node": node_name | json_any})
victims = st.fixed_dictionaries(
    {"Pods": st.lists(st.fixed_dictionaries({"UID": text | json_any}), max_size=3)},
    optional={"NumPDBViolations": st.integers()})
preemption_args = st.fixed_dictionaries(
    {"Pod": pod},
    optional={"NodeNameToMetaVictims": st.dictionaries(node_name, victims, max_size=3),
              "NodeNameToVictims": st.dictionaries(node_name, json_any, max_size=3)})
documents = extender_args | binding_args | preemption_args | json_any


def _dumps(doc: Any) -> bytes:
    try:
        return orjson.dumps(doc)
    except TypeError:  # integers past 64 bits: the standard encoder writes them
        return json.dumps(doc).encode()


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    doc = _dumps(draw(documents))
    shape = draw(st.sampled_from(["doc", "doc", "doc", "nest", "number", "string", "utf8",
                                  "duplicate", "truncated", "binary", "lowercase"]))
    if shape == "nest":
        depth = draw(st.sampled_from([1, 2, 64, 1_000, 50_000]))
        opener = draw(st.sampled_from([b"[", b'{"Pod":', b'{"Pod":{"metadata":']))
        closer = b"]" if opener == b"[" else b"}" * opener.count(b"{")
        return opener * depth + b"1" + closer * depth
    if shape == "number":
        digits = draw(st.sampled_from([1, 19, 20, 400, 20_000]))
        number = draw(st.sampled_from([b"9" * digits, b"1e" + b"9" * min(digits, 20),
                                       b"-0.0000" + b"1" * digits, b"NaN", b"Infinity"]))
        return b'{"Pod": {"metadata": {"name": ' + number + b'}}, "NodeNames": [' + number + b"]}"
    if shape == "string":
        size = draw(st.sampled_from([1_000, 60_000, BODY_LIMIT + 1_000]))
        return b'{"Pod": {"metadata": {"name": "' + b"x" * size + b'"}}, "NodeNames": []}'
    if shape == "utf8":
        at = draw(st.integers(0, len(doc)))
        junk = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\\ud800", b"\x00"]))
        return doc[:at] + junk + doc[at:]
    if shape == "duplicate":
        return b'{"Pod": ' + _dumps(draw(pod)) + b', "Pod": ' + doc + b', "NodeNames": ["a"],' \
               b' "NodeNames": ' + _dumps(draw(json_any)) + b"}"
    if shape == "truncated":
        return doc[:draw(st.integers(0, max(0, len(doc) - 1)))]
    if shape == "binary":
        return draw(st.binary(max_size=300))
    if shape == "lowercase":
        return doc.lower()
    return doc


@dataclass(slots=True, frozen=True)
class Call:
    method: str
    path: str
    body: bytes
    content_type: str | None


content_types = st.sampled_from([
    None, "application/json", "application/json", "application/json; charset=utf-8",
    "application/merge-patch+json", "text/plain", "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x", "application/octet-stream", "", "json"])
verb_paths = st.builds(lambda prefix, verb: f"{prefix}/{verb}",
                       st.sampled_from(["", "/scheduler"]), st.sampled_from(VERBS))
other_paths = st.sampled_from([*PROBES, "/", "/scheduler", "/filter/", "/nope",
                               "/scheduler/scheduler/filter", "/%2e%2e/filter"])
calls = (st.builds(Call, method=st.just("POST"), path=verb_paths, body=bodies(),
                   content_type=content_types)
         | st.builds(Call, method=st.sampled_from(["GET", "PUT", "DELETE", "PATCH", "HEAD"]),
                     path=verb_paths | other_paths, body=bodies(), content_type=content_types)
         | st.builds(Call, method=st.just("GET"), path=other_paths, body=st.just(b""),
                     content_type=st.none()))


# ------------------------------------------------------------------ checks

def check_answer(call: Call, response: httpx.Response) -> None:
    status = response.status_code
    where = f"{call.method} {call.path} {call.content_type!r} {call.body[:200]!r}"
    assert status < 500, f"{status} for {where}: {response.text[:500]}"
    verb = call.path.rsplit("/", 1)[-1] if call.path.count("/") <= 2 else ""
    routed = verb in VERBS and call.path in (f"/{verb}", f"/scheduler/{verb}")
    if 400 <= status < 500:
        if call.method == "HEAD":
            return
        assert response.content, f"{status} without a message for {where}"
        if routed and call.method == "POST":
            error = orjson.loads(response.content)["error"]
            assert isinstance(error, str) and error, where
        return
    if 300 <= status < 400:  # Starlette's trailing-slash redirect
        assert not routed and response.headers.get("location"), where
        return
    if not routed or call.method != "POST":
        assert call.method in ("GET", "HEAD") and call.path in PROBES, where
        return
    assert status == 200, where
    answer = orjson.loads(response.content)
    if verb == "filter":
        assert set(answer) == {"Nodes", "NodeNames", "FailedNodes",
                               "FailedAndUnresolvableNodes", "Error"}, where
        assert isinstance(answer["Error"], str)
    elif verb == "prioritize":
        assert isinstance(answer, list), where
        assert all(set(e) == {"Host", "Score"} and 0 <= e["Score"] <= 10 for e in answer)
    elif verb == "bind":
        assert set(answer) == {"Error"} and isinstance(answer["Error"], str), where
    else:
        assert "NodeNameToMetaVictims" in answer, where


def send(client: httpx.Client, call: Call) -> httpx.Response:
    headers = {} if call.content_type is None else {"content-type": call.content_type}
    return client.request(call.method, call.path, content=call.body or None, headers=headers)


# ------------------------------------------------------------------ tests

def test_generated_requests_get_no_5xx_and_well_formed_answers(drax: Drax) -> None:
    with httpx.Client(base_url=drax.url, timeout=30) as client:

        @settings(max_examples=EXAMPLES, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(st.lists(calls, min_size=BATCH, max_size=BATCH))
        def batch(batch_calls: list[Call]) -> None:
            for call in batch_calls:
                response = send(client, call)
                drax.requests += 1
                drax.statuses[response.status_code] = drax.statuses.get(
                    response.status_code, 0) + 1
                check_answer(call, response)

        batch()
    assert drax.requests >= EXAMPLES * BATCH, drax.requests
    assert drax.proc.poll() is None
    print(f"{drax.requests} generated requests, statuses {sorted(drax.statuses.items())}")


def _raw(drax: Drax) -> socket.socket:
    port = int(drax.url.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    return sock


def _head(length: int, path: str = "/filter") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: drax\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()


def _read_all(sock: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (TimeoutError, ConnectionResetError):
            break
        if not chunk:
            break
        out += chunk
    return out


def test_a_body_that_trickles_in_is_cut_with_408_after_the_read_timeout(drax: Drax) -> None:
    body = orjson.dumps(FILTER)
    sock = _raw(drax)
    sock.sendall(_head(len(body)))
    started = time.monotonic()
    answer = b""
    for byte in body:
        try:
            sock.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            break
        time.sleep(0.2)
        if time.monotonic() - started > READ_TIMEOUT + 5:
            break
        sock.setblocking(False)
        try:
            answer += sock.recv(65536)
        except BlockingIOError:
            pass
        finally:
            sock.setblocking(True)
        if b"not received within" in answer:
            break
    answered_after = time.monotonic() - started
    sock.close()
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b"not received within" in answer
    assert answered_after < READ_TIMEOUT + 5


def test_bodies_shorter_than_their_content_length(drax: Drax) -> None:
    body = orjson.dumps(FILTER)
    for cut in (0, 1, len(body) // 2, len(body) - 1):
        sock = _raw(drax)
        sock.sendall(_head(len(body)) + body[:cut])
        sock.shutdown(socket.SHUT_WR)  # the client gives up: the body ends early
        answer = _read_all(sock)
        sock.close()
        assert not answer.startswith(b"HTTP/1.1 5"), answer
    # And one that simply stops sending, with the connection left open.
    sock = _raw(drax)
    sock.sendall(_head(len(body)) + body[:5])
    sock.settimeout(READ_TIMEOUT + 5)
    answer = _read_all(sock)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 408"), answer


def test_many_idle_connections_do_not_stop_the_scheduler_path(drax: Drax) -> None:
    idle = [_raw(drax) for _ in range(300)]
    half = [_raw(drax) for _ in range(50)]
    for sock in half:
        sock.sendall(b"POST /filter HTTP/1.1\r\nHost: drax\r\n")  # headers never finished
    try:
        with httpx.Client(base_url=drax.url, timeout=10) as c:
            for _ in range(20):
                assert c.post("/filter", json=FILTER).json()["NodeNames"] == ["h100-node-1"]
    finally:
        for sock in idle + half:
            sock.close()


def test_afterwards_a_real_filter_answers_correctly_and_rss_is_bounded(drax: Drax) -> None:
    with httpx.Client(base_url=drax.url, timeout=30) as c:
        answer = c.post("/scheduler/filter", json=FILTER).json()
        assert answer["NodeNames"] == ["h100-node-1"] and answer["Error"] == ""
        assert c.get("/readyz").status_code == 200
    growth = drax.rss_kib() - drax.rss_start_kib
    print(f"RSS {drax.rss_start_kib} KiB after warm-up, grew by {growth} KiB")
    assert growth < RSS_GROWTH_LIMIT_KIB, growth
    assert drax.proc.poll() is None
