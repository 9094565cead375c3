"""`drax serve` as a process with TLS, client certificates and a probe port,
and SIGTERM arriving while a request is still being received."""

from __future__ import annotations

import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson

from loadtest.bench import free_ports
from tests.server.pki import issue, make_ca
from tests.server.test_server_cli import REPO, wait_ready
from tests.server.test_server_tls import FILTER


def test_https_verbs_plain_probes_and_sigterm_drains_an_in_flight_request(
        tmp_path: Path) -> None:
    server_ca, client_ca = make_ca(tmp_path, "server-ca"), make_ca(tmp_path, "client-ca")
    leaf = issue(tmp_path, server_ca, "server", client=False)
    scheduler = issue(tmp_path, client_ca, "scheduler", client=True)
    port, probe_port = free_ports(2)
    log = (tmp_path / "serve.log").open("w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--port", str(port),
         "--tls-cert-file", str(leaf.cert), "--tls-private-key-file", str(leaf.key),
         "--client-ca-file", str(client_ca.cert), "--metrics-port", str(probe_port)],
        cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_ready(f"http://127.0.0.1:{probe_port}", proc)
        assert b"drax_requests_total" in httpx.get(f"http://127.0.0.1:{probe_port}/metrics"
                                                   ).content
        # The probe port serves no verbs.
        assert httpx.post(f"http://127.0.0.1:{probe_port}/filter", json=FILTER
                          ).status_code in (404, 405)
        ctx = ssl.create_default_context(cafile=str(server_ca.cert))
        ctx.load_cert_chain(str(scheduler.cert), str(scheduler.key))
        url = f"https://127.0.0.1:{port}"
        with httpx.Client(base_url=url, verify=ctx, timeout=10) as c:
            assert c.post("/filter", json=FILTER).json()["NodeNames"] == ["h100-node-1"]
        bare = ssl.create_default_context(cafile=str(server_ca.cert))
        try:
            httpx.post(f"{url}/filter", json=FILTER, verify=bare, timeout=5)
            raise AssertionError("a client without a certificate got an answer")
        except httpx.TransportError:
            pass

        # Half a request on the wire, then SIGTERM: the request still gets its
        # answer, then the process exits 0.
        body = orjson.dumps(FILTER)
        raw = socket.create_connection(("127.0.0.1", port))
        sock = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        sock.sendall(b"POST /filter HTTP/1.1\r\nHost: drax\r\nContent-Type: application/json"
                     b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n"
                     + body[:10])
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        sock.sendall(body[10:])
        sock.settimeout(10)
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
        sock.close()
        assert answer.startswith(b"HTTP/1.1 200"), answer
        assert b'"h100-node-1"' in answer
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log.seek(0)
    output = log.read()
    assert code == 0, output
    assert "client certificates required" in output
