"""HTTPS with client-certificate authentication on the real server (loopback).

The server holds a certificate signed by one CA and accepts only client
certificates signed by the configured client CA, as kube-scheduler's extender
`tlsConfig` presents them; rotation replaces the files the way cert-manager's
secret volume does (a rename), and the next handshake uses the new ones.
"""

from __future__ import annotations

import os
import shutil
import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.server.tls import ReloadingContext, TLSFiles
from tests.server.harness import running, sample_runtime
from tests.server.pki import Pair, issue, make_ca

FILTER = {"Pod": {"metadata": {"name": "infer-0", "namespace": "default"},
                  "spec": {"resourceClaims": [{"name": "gpus",
                                               "resourceClaimTemplateName": "1gpu"}]}},
          "NodeNames": ["h100-node-1", "cpu-node-1"]}


class Served:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.server_ca = make_ca(folder, "server-ca")
        self.client_ca = make_ca(folder, "client-ca")
        self.other_ca = make_ca(folder, "other-ca")
        leaf = issue(folder, self.server_ca, "server", client=False)
        # The paths drax is given; tests swap their contents.
        self.cert, self.key, self.ca = folder / "tls.crt", folder / "tls.key", folder / "ca.crt"
        shutil.copy(leaf.cert, self.cert)
        shutil.copy(leaf.key, self.key)
        shutil.copy(self.client_ca.cert, self.ca)
        self.tls = ReloadingContext(TLSFiles(cert_file=str(self.cert), key_file=str(self.key),
                                             client_ca_file=str(self.ca)), check_interval=0)
        self.url = ""

    def client(self, pair: Pair | None, *, trust: Pair | None = None,
               maximum: ssl.TLSVersion | None = None) -> httpx.Client:
        ctx = ssl.create_default_context(cafile=str((trust or self.server_ca).cert))
        if maximum is not None:
            ctx.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
            ctx.maximum_version = maximum
        if pair is not None:
            ctx.load_cert_chain(str(pair.cert), str(pair.key))
        return httpx.Client(base_url=self.url, verify=ctx, timeout=10)

    def rename_into(self, src: Path, dst: Path) -> None:
        tmp = dst.with_suffix(".new")
        shutil.copy(src, tmp)
        os.replace(tmp, dst)


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[Served]:
    s = Served(tmp_path)
    with running(sample_runtime().app, tls=s.tls) as url:
        s.url = url
        yield s


def refused(client: httpx.Client) -> bool:
    try:
        client.post("/filter", json=FILTER)
    except httpx.TransportError:
        return True
    return False


def test_a_client_cert_signed_by_the_client_ca_gets_real_answers(served: Served) -> None:
    scheduler = issue(served.folder, served.client_ca, "scheduler", client=True)
    with served.client(scheduler) as c:
        assert c.post("/scheduler/filter", json=FILTER).json()["NodeNames"] == ["h100-node-1"]
        assert c.get("/healthz").status_code == 200
        assert c.get("/healthz").http_version == "HTTP/1.1"


def test_no_client_cert_is_refused(served: Served) -> None:
    with served.client(None) as c:
        assert refused(c)


def test_a_client_cert_from_another_ca_is_refused(served: Served) -> None:
    intruder = issue(served.folder, served.other_ca, "intruder", client=True)
    with served.client(intruder) as c:
        assert refused(c)


def test_an_expired_client_cert_is_refused(served: Served) -> None:
    expired = issue(served.folder, served.client_ca, "expired", client=True, days=-1)
    with served.client(expired) as c:
        assert refused(c)


def test_plain_http_on_the_tls_port_is_refused_and_the_server_carries_on(served: Served
                                                                         ) -> None:
    plain = served.url.replace("https://", "http://")
    with pytest.raises(httpx.TransportError):
        httpx.post(f"{plain}/filter", json=FILTER, timeout=5)
    scheduler = issue(served.folder, served.client_ca, "scheduler", client=True)
    with served.client(scheduler) as c:
        assert c.post("/filter", json=FILTER).status_code == 200


def test_tls_1_1_is_refused_and_1_2_accepted(served: Served) -> None:
    scheduler = issue(served.folder, served.client_ca, "scheduler", client=True)
    with served.client(scheduler, maximum=ssl.TLSVersion.TLSv1_1) as c:
        assert refused(c)
    with served.client(scheduler, maximum=ssl.TLSVersion.TLSv1_2) as c:
        assert c.post("/filter", json=FILTER).status_code == 200


def test_rotated_certificate_and_client_ca_are_used_without_a_restart(served: Served) -> None:
    old_client = issue(served.folder, served.client_ca, "old-client", client=True)
    with served.client(old_client) as c:
        assert c.post("/filter", json=FILTER).status_code == 200

    new_ca = make_ca(served.folder, "rotated-ca")
    new_leaf = issue(served.folder, new_ca, "rotated-server", client=False)
    new_client = issue(served.folder, new_ca, "new-client", client=True)
    served.rename_into(new_leaf.key, served.key)
    served.rename_into(new_leaf.cert, served.cert)
    served.rename_into(new_ca.cert, served.ca)

    with served.client(new_client, trust=new_ca) as c:
        assert c.post("/filter", json=FILTER).json()["NodeNames"] == ["h100-node-1"]
    # The old server certificate is gone, and so is the old client CA.
    with served.client(old_client) as c:
        assert refused(c)
    with served.client(old_client, trust=new_ca) as c:
        assert refused(c)
    assert served.tls.reloads >= 1


def test_a_half_rotated_pair_keeps_the_previous_certificate(served: Served) -> None:
    scheduler = issue(served.folder, served.client_ca, "scheduler", client=True)
    other = issue(served.folder, served.server_ca, "other-server", client=False)
    served.rename_into(other.key, served.key)  # the new key, the old certificate
    with served.client(scheduler) as c:
        assert c.post("/filter", json=FILTER).status_code == 200
    served.rename_into(other.cert, served.cert)  # now whole again
    with served.client(scheduler) as c:
        assert c.post("/filter", json=FILTER).status_code == 200
    assert served.tls.reloads == 1
