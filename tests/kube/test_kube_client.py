"""The API client: the environment is read once, when the client is made."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes_asyncio import client

from app.sources.kube import api_client
from app.sources.kube.client import env_proxy
from tests.kube.harness import KubeHarness, node


async def test_a_netrc_naming_the_api_server_does_not_break_requests(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """aiohttp with trust_env adds ~/.netrc credentials to every request, beside the
    client's own Authorization header, and refuses the request."""
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login someone password secret\n")
    monkeypatch.setenv("NETRC", str(netrc))
    async with KubeHarness(tmp_path) as h:
        h.server.create("nodes", node("n1"))
        assert h.client is not None
        nodes = await client.CoreV1Api(h.client).list_node()
        assert [n.metadata.name for n in nodes.items] == ["n1"]


def test_the_proxy_is_the_environment_s_unless_no_proxy_names_the_server(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("https_proxy", "http_proxy", "no_proxy", "HTTPS_PROXY", "HTTP_PROXY",
                 "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert env_proxy("https://api.example:6443") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert env_proxy("https://api.example:6443") == "http://proxy.example:3128"
    assert env_proxy("http://api.example:8080") is None  # no HTTP_PROXY
    monkeypatch.setenv("NO_PROXY", "other.example,.example")
    assert env_proxy("https://api.example:6443") is None


@pytest.mark.parametrize(("no_proxy", "server", "direct"), [
    ("10.0.0.0/8", "https://10.96.0.1:443", True),
    ("10.0.0.0/8", "https://11.0.0.1:443", False),
    ("10.1.2.3/8", "https://10.200.0.1", True),  # host bits set, as Go's ParseCIDR
    ("fd00::/8", "https://[fd00::1]:6443", True),
    ("fd00::/8", "https://10.0.0.1:6443", False),
    ("10.0.0.0/8", "https://[::ffff:10.0.0.1]:6443", True),  # IPv4-mapped
    ("10.0.0.0/8", "https://api.example:6443", False),  # a name is not resolved
    ("10.0.0.1", "https://10.0.0.1:6443", True),
    ("10.0.0.1:6443", "https://10.0.0.1:6443", True),
    ("10.0.0.1:443", "https://10.0.0.1:6443", False),
    ("10.0.0.1:443", "https://10.0.0.1", True),  # the scheme's default port
    ("[fd00::1]:6443", "https://[fd00::1]:6443", True),
    ("fd00::1", "https://[fd00::1]:6443", True),
    ("example", "https://api.example:6443", True),
    ("example", "https://example:6443", True),
    ("example", "https://api.notexample:6443", False),  # whole labels only
    ("other.example", "https://api.example:6443", False),
    (".example", "https://example:6443", False),  # a leading dot: subdomains only
    ("*.example", "https://api.example:6443", True),
    ("API.Example:6443", "https://api.example:6443", True),
    ("api.example:443", "https://api.example:6443", False),
    (" , other , *", "https://api.example:6443", True),
    ("", "https://127.0.0.1:6443", True),  # loopback is never proxied
    ("", "https://[::1]:6443", True),
    ("", "https://localhost:6443", True),
    ("", "https://api.example:6443", False),
    ("10.0.0.0/33,/8,:80", "https://10.0.0.1:6443", False),  # malformed: ignored
])
def test_no_proxy_matches_as_client_go_reads_it(
        no_proxy: str, server: str, direct: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """golang.org/x/net/http/httpproxy's rules: CIDR blocks, IPs and domain
    suffixes, each with an optional port, `*`; loopback and localhost direct."""
    for name in ("https_proxy", "http_proxy", "no_proxy", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", no_proxy)
    assert env_proxy(server) == (None if direct else "http://proxy.example:3128")


def test_the_upper_case_variables_win_and_a_bare_proxy_is_http(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "proxy.example:3128")
    monkeypatch.setenv("https_proxy", "http://other.example:3128")
    monkeypatch.setenv("NO_PROXY", "")
    monkeypatch.setenv("no_proxy", "api.example")
    assert env_proxy("https://api.example:6443") is None  # an empty NO_PROXY is unset
    monkeypatch.setenv("NO_PROXY", "elsewhere.example")
    assert env_proxy("https://api.example:6443") == "http://proxy.example:3128"


async def test_the_client_takes_the_proxy_at_creation(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("https_proxy", "http_proxy", "no_proxy", "HTTPS_PROXY", "HTTP_PROXY",
                 "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters:\n- name: c\n  cluster:\n    server: https://api.example:6443\n"
        "    insecure-skip-tls-verify: true\n"
        "users:\n- name: u\n  user:\n    token: t\n"
        "contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n")
    api = await api_client(kubeconfig=str(config))
    try:
        assert api.configuration.proxy == "http://proxy.example:3128"
        assert api.rest_client.pool_manager.trust_env is False
    finally:
        await api.close()
