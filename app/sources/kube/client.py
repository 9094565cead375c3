"""Build the kubernetes-asyncio ApiClient from a kubeconfig or the pod's service account.

The choice mirrors kubectl and client-go: an explicit `--kubeconfig` wins;
otherwise, inside a pod (`KUBERNETES_SERVICE_HOST` set), the in-cluster
service-account token and CA are used. A configuration that cannot be loaded
raises `KubeConfigError` with the reason, so `drax serve` fails at start-up
instead of serving a cluster it cannot see.

The proxy comes from the environment once, when the client is made, unless
the kubeconfig names one: HTTPS_PROXY or HTTP_PROXY by the server's scheme,
unless NO_PROXY names the server, read by the rules client-go reads it by
(golang.org/x/net/http/httpproxy): upper-case names first; NO_PROXY entries
are CIDR blocks, IPs and domain names (a name matches itself and its
subdomains, a leading "." or "*." subdomains only), each with an optional
port, or `*` for every host; loopback addresses and localhost never go
through a proxy. The HTTP session then looks at the
environment no more: with `trust_env` aiohttp resolves the proxy and reads
~/.netrc in a worker thread on every request, two thread hops on the path of
every bind write, and a ~/.netrc naming the API server would add Basic
credentials beside the client's own Authorization, which aiohttp refuses.
"""

from __future__ import annotations

import ipaddress
import os
import urllib.parse
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
    matches its host (module doc) or none is named."""
    url = urllib.parse.urlsplit(server)
    names = {"https": ("HTTPS_PROXY", "https_proxy"), "http": ("HTTP_PROXY", "http_proxy")}
    proxy = _env(*names.get(url.scheme, ()))
    if not proxy or not url.hostname:
        return None
    try:
        port = str(url.port or _PORTS[url.scheme])
    except ValueError:  # not a port number
        return None
    if not _use_proxy(url.hostname, port, _env("NO_PROXY", "no_proxy")):
        return None
    scheme = urllib.parse.urlsplit(proxy).scheme
    return proxy if scheme in ("http", "https", "socks5") else f"http://{proxy}"


_PORTS = {"http": 80, "https": 443}


def _env(*names: str) -> str:
    return next((v for v in map(os.environ.get, names) if v), "")


def _use_proxy(host: str, port: str, no_proxy: str) -> bool:
    ip = _ip(host)
    if host == "localhost" or (ip is not None and ip.is_loopback):
        return False
    entries = (e.strip().lower() for e in no_proxy.split(","))
    return not any(_bypasses(e, host, port, ip) for e in entries if e)


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    # Go holds an IPv4 address as its IPv4-mapped IPv6 form: the two are one
    return ip.ipv4_mapped or ip if isinstance(ip, ipaddress.IPv6Address) else ip


def _bypasses(entry: str, host: str, port: str,
              ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> bool:
    """Whether the NO_PROXY `entry` names `host`:`port`; a malformed entry names nothing."""
    if entry == "*":
        return True
    if "/" in entry:
        try:
            return ip is not None and ip in ipaddress.ip_network(entry, strict=False)
        except ValueError:
            pass  # then read as a name, as Go does; it matches no host
    name, entry_port = _split_host_port(entry)
    if not name:
        return False
    if entry_port and entry_port != port:
        return False
    entry_ip = _ip(name)
    if entry_ip is not None:
        return entry_ip == ip
    if name.startswith("*."):
        name = name[1:]
    return host.endswith(name) if name.startswith(".") else (
        host == name or host.endswith("." + name))


def _split_host_port(entry: str) -> tuple[str, str]:
    """Go's net.SplitHostPort where it succeeds, else (`entry`, "")."""
    if entry.startswith("["):
        end = entry.find("]")
        if end > 0 and entry[end + 1:end + 2] == ":" and ":" not in entry[end + 2:]:
            return entry[1:end], entry[end + 2:]
        return entry, ""
    if entry.count(":") == 1:
        name, _, port = entry.partition(":")
        return name, port
    return entry, ""


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
