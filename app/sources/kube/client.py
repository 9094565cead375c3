"""Build the kubernetes-asyncio ApiClient from a kubeconfig or the pod's service account.

The choice mirrors kubectl and client-go: an explicit `--kubeconfig` wins;
otherwise, inside a pod (`KUBERNETES_SERVICE_HOST` set), the in-cluster
service-account token and CA are used. A configuration that cannot be loaded
raises `KubeConfigError` with the reason, so `drax serve` fails at start-up
instead of serving a cluster it cannot see.

The proxy comes from the environment once, when the client is made
(HTTPS_PROXY/HTTP_PROXY unless NO_PROXY names the API server), as client-go
reads it, unless the kubeconfig names one. The HTTP session then looks at the
environment no more: with `trust_env` aiohttp resolves the proxy and reads
~/.netrc in a worker thread on every request, two thread hops on the path of
every bind write, and a ~/.netrc naming the API server would add Basic
credentials beside the client's own Authorization, which aiohttp refuses.
"""

from __future__ import annotations

import os
import urllib.parse
import urllib.request
from typing import Any

import orjson
from kubernetes_asyncio import client, config
from kubernetes_asyncio.config import ConfigException


class KubeConfigError(Exception):
    """The cluster connection cannot be configured."""


class ApiReadError(Exception):
    """A raw GET did not answer 200 with a JSON object."""


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


async def api_client(*, kubeconfig: str | None = None, context: str | None = None
                     ) -> client.ApiClient:
    """An ApiClient for `kubeconfig`, or for the in-cluster service account if None."""
    cfg = client.Configuration()
    try:
        if kubeconfig:
            await config.load_kube_config(config_file=kubeconfig, context=context,
                                          client_configuration=cfg, persist_config=False)
        elif in_cluster():
            config.load_incluster_config(client_configuration=cfg)
        else:
            raise KubeConfigError("no --kubeconfig given and not running in a pod "
                                  "(KUBERNETES_SERVICE_HOST is unset)")
    except (ConfigException, OSError) as exc:
        where = kubeconfig or "in-cluster service account"
        raise KubeConfigError(f"{where}: {exc}") from None
    if not cfg.proxy and cfg.host:
        cfg.proxy = env_proxy(cfg.host)
    api = client.ApiClient(configuration=cfg)
    # The session's own per-request look at the environment (module doc).
    api.rest_client.pool_manager._trust_env = False
    return api


def env_proxy(server: str) -> str | None:
    """The proxy the environment names for `server`'s scheme, None if NO_PROXY
    matches its host or none is named."""
    url = urllib.parse.urlsplit(server)
    proxies = urllib.request.getproxies_environment()
    host = url.netloc.rpartition("@")[2]
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    if not url.hostname or bypass(host, proxies):
        return None
    return proxies.get(url.scheme) or None


async def read_object(request: Any, *, what: str) -> dict[str, Any]:
    """The JSON object a raw (`_preload_content=False`) GET answers.

    The response is released whether or not it could be read, so a failed
    read never holds a pooled connection; anything but a 200 with a JSON
    object raises `ApiReadError` naming `what` was read.
    """
    resp = await request
    try:
        raw = await resp.read()
    finally:
        resp.release()
    if resp.status != 200:
        raise ApiReadError(f"{what}: HTTP {resp.status}: {raw[:200]!r}")
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ApiReadError(f"{what}: not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ApiReadError(f"{what}: the answer is not an object")
    return body
