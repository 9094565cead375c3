"""Build the kubernetes-asyncio ApiClient from a kubeconfig or the pod's service account.

The choice mirrors kubectl and client-go: an explicit `--kubeconfig` wins;
otherwise, inside a pod (`KUBERNETES_SERVICE_HOST` set), the in-cluster
service-account token and CA are used. A configuration that cannot be loaded
raises `KubeConfigError` with the reason, so `drax serve` fails at start-up
instead of serving a cluster it cannot see.
"""

from __future__ import annotations

import os
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
    return client.ApiClient(configuration=cfg)


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
