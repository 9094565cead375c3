"""The tests' one client for the real API server: httpx with the admin client certificate.

Synchronous on purpose: tests create objects, then poll for the control
plane's reaction, and a blocking client keeps those steps readable. Paths
come from a small kind table covering what the manifests and the DRA tests
use, so a manifest can be created (or dry-run) without knowing its URL.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx
import yaml


@dataclass(slots=True, frozen=True)
class Resource:
    prefix: str  # "/api/v1" or "/apis/<group>/<version>"
    plural: str
    namespaced: bool


RESOURCES: Final = {
    "Namespace": Resource("/api/v1", "namespaces", False),
    "Node": Resource("/api/v1", "nodes", False),
    "Pod": Resource("/api/v1", "pods", True),
    "Event": Resource("/api/v1", "events", True),
    "ServiceAccount": Resource("/api/v1", "serviceaccounts", True),
    "ConfigMap": Resource("/api/v1", "configmaps", True),
    "Deployment": Resource("/apis/apps/v1", "deployments", True),
    "ClusterRole": Resource("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": Resource("/apis/rbac.authorization.k8s.io/v1",
                                   "clusterrolebindings", False),
    "Role": Resource("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": Resource("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "Lease": Resource("/apis/coordination.k8s.io/v1", "leases", True),
    "PriorityClass": Resource("/apis/scheduling.k8s.io/v1", "priorityclasses", False),
    "PodDisruptionBudget": Resource("/apis/policy/v1", "poddisruptionbudgets", True),
    "DeviceClass": Resource("/apis/resource.k8s.io/v1", "deviceclasses", False),
    "ResourceSlice": Resource("/apis/resource.k8s.io/v1", "resourceslices", False),
    "ResourceClaim": Resource("/apis/resource.k8s.io/v1", "resourceclaims", True),
    "ResourceClaimTemplate": Resource("/apis/resource.k8s.io/v1",
                                      "resourceclaimtemplates", True),
    "Service": Resource("/api/v1", "services", True),
    "NetworkPolicy": Resource("/apis/networking.k8s.io/v1", "networkpolicies", True),
    "CustomResourceDefinition": Resource("/apis/apiextensions.k8s.io/v1",
                                         "customresourcedefinitions", False),
    # Kinds of the CRDs in tests/e2e/crds (prometheus-operator, cert-manager).
    "ServiceMonitor": Resource("/apis/monitoring.coreos.com/v1", "servicemonitors", True),
    "PrometheusRule": Resource("/apis/monitoring.coreos.com/v1", "prometheusrules", True),
    "Certificate": Resource("/apis/cert-manager.io/v1", "certificates", True),
    "Issuer": Resource("/apis/cert-manager.io/v1", "issuers", True),
}


class ApiError(RuntimeError):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:500]}")
        self.status = status


def tls_context(*, ca: Path, cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca))
    context.load_cert_chain(str(cert), str(key))
    return context


def collection_path(kind: str, namespace: str | None = None) -> str:
    res = RESOURCES[kind]
    if res.namespaced:
        return f"{res.prefix}/namespaces/{namespace or 'default'}/{res.plural}"
    return f"{res.prefix}/{res.plural}"


def object_path(kind: str, name: str, namespace: str | None = None) -> str:
    return f"{collection_path(kind, namespace)}/{name}"


def load_documents(path: Path) -> Iterator[dict[str, Any]]:
    for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
        if doc:
            yield doc


class Kube:
    def __init__(self, *, server: str, ca: Path, cert: Path, key: Path) -> None:
        self.http = httpx.Client(base_url=server, verify=tls_context(ca=ca, cert=cert, key=key),
                                 timeout=30)

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, path: str, *, body: Any = None,
                params: dict[str, str] | None = None,
                content_type: str = "application/json") -> dict[str, Any]:
        headers = {"Content-Type": content_type} if body is not None else {}
        resp = self.http.request(method, path, json=body, params=params, headers=headers)
        if resp.status_code >= 400:
            raise ApiError(resp.status_code, resp.text)
        return resp.json() if resp.content else {}

    def create(self, obj: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        """POST `obj`; a dry run also rejects unknown and duplicate fields (Strict)."""
        ns = obj.get("metadata", {}).get("namespace")
        params = {"dryRun": "All", "fieldValidation": "Strict"} if dry_run else None
        return self.request("POST", collection_path(obj["kind"], ns), body=obj, params=params)

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        return self.request("GET", object_path(kind, name, namespace))

    def list(self, kind: str, namespace: str | None = None, *,
             selector: str | None = None) -> list[dict[str, Any]]:
        params = {"labelSelector": selector} if selector else None
        return list(self.request("GET", collection_path(kind, namespace),
                                 params=params)["items"])

    def delete(self, kind: str, name: str, namespace: str | None = None, *,
               grace_period_seconds: int | None = None) -> None:
        params = ({"gracePeriodSeconds": str(grace_period_seconds)}
                  if grace_period_seconds is not None else None)
        try:
            self.request("DELETE", object_path(kind, name, namespace), params=params)
        except ApiError as exc:
            if exc.status != 404:
                raise

    def patch(self, kind: str, name: str, patch: dict[str, Any], namespace: str | None = None,
              *, subresource: str = "") -> dict[str, Any]:
        path = object_path(kind, name, namespace) + (f"/{subresource}" if subresource else "")
        return self.request("PATCH", path, body=patch,
                            content_type="application/merge-patch+json")

    def apply_file(self, path: Path) -> None:
        """Create every object of a manifest file; ones that already exist are left alone."""
        for doc in load_documents(path):
            try:
                self.create(doc)
            except ApiError as exc:
                if exc.status != 409:
                    raise


def wait_for(what: str, check: Callable[[], Any], *, timeout: float = 60,
             interval: float = 0.2) -> Any:
    """Poll `check` until it returns something truthy; raise TimeoutError naming `what`."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except (httpx.HTTPError, ApiError, OSError) as exc:
            last = exc
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}"
                       + (f" (last error: {last})" if last else ""))
