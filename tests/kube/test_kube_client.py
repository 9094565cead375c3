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
