"""Build the kubernetes-asyncio ApiClient from a kubeconfig or the pod's service account.

The choice mirrors kubectl and client-go: an explicit `--kubeconfig` wins;
otherwise, inside a pod (`KUBERNETES_SERVICE_HOST` set), the in-cluster
service-account token and CA are used. A configuration that cannot be loaded
raises `KubeConfigError` with the reason, so `drax serve` fails at start-up
instead of serving a cluster it cannot see.
"""

from __future__ import annotations

import os

from kubernetes_asyncio import client, config
from kubernetes_asyncio.config import ConfigException


class KubeConfigError(Exception):
    """The cluster connection cannot be configured."""


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
