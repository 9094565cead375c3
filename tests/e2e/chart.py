"""The Helm chart (manifests/helm/drax) rendered by the real helm CLI, per value group.

helm is built from helm.sh/helm/v4 like the control plane (tests/e2e/build.py).
VALUE_GROUPS switches each group of the chart's values away from its default,
one group at a time; `render` returns the objects `helm template` prints.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Final

import yaml

from tests.e2e.build import helm_bin

REPO: Final = Path(__file__).resolve().parents[2]
CHART: Final = REPO / "manifests" / "helm" / "drax"
CRDS: Final = Path(__file__).resolve().parent / "crds"

VALUE_GROUPS: Final[dict[str, dict[str, Any]]] = {
    "defaults": {},
    "mode-advisor": {"mode": "advisor"},
    "one-replica": {"replicaCount": 1},
    "tls-cert-manager": {"tls": {"enabled": True}},
    "tls-issuer-ref": {"tls": {"enabled": True, "certManager": {
        "issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}}}},
    "tls-existing-secret": {"tls": {"enabled": True, "certManager": {"enabled": False},
                                    "existingSecret": {"serving": "drax-serving",
                                                       "client": "drax-scheduler-client"}}},
    "metrics-off": {"metrics": {"serviceMonitor": {"enabled": False},
                                "prometheusRule": {"enabled": False},
                                "dashboards": {"enabled": False}}},
    "metrics-labels": {"metrics": {"port": 9191,
                                   "serviceMonitor": {"interval": "15s",
                                                      "labels": {"release": "prom"}},
                                   "prometheusRule": {"labels": {"release": "prom"}},
                                   "dashboards": {"labels": {"grafana_dashboard": "drax"}}}},
    "node-pool-off": {"nodePool": {"enabled": False}},
    "node-pool-custom": {"nodePool": {"key": "example.com/gpu-scheduler", "value": "drax"}},
    "placement": {
        "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
        "tolerations": [{"key": "node-role.kubernetes.io/control-plane",
                         "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}}},
    "flags-images-names": {
        "schedulerName": "gpu-scheduler",
        "leaderElection": {"leaseName": "gpu-scheduler"},
        "drax": {"image": {"repository": "registry.example.com/drax", "tag": "0.1.0-rc1"},
                 "port": 8899, "logLevel": "debug",
                 "extraArgs": ["--verb-deadline", "3", "--feature-gates",
                               "DRAPrioritizedList=false"],
                 "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                               "limits": {"cpu": "2", "memory": "2Gi"}}},
        "kubeScheduler": {"image": {"repository": "registry.example.com/kube-scheduler",
                                    "tag": "v1.36.4"},
                          "verbosity": 4, "extraArgs": ["--kube-api-qps=100"]}},
    "pdb-and-network-policy-off": {"podDisruptionBudget": {"enabled": False},
                                   "networkPolicy": {"enabled": False}},
    "network-policy-from": {"networkPolicy": {"from": [{"namespaceSelector": {
        "matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]}},
}


class HelmError(RuntimeError):
    """helm exited non-zero; the message carries its output."""


def helm(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run([str(helm_bin()), *args], capture_output=True, text=True,
                          timeout=120, check=False, cwd=cwd)
    if done.returncode != 0:
        raise HelmError(f"helm {' '.join(args)}: exit {done.returncode}\n{done.stdout}"
                        f"{done.stderr}")
    return done.stdout


def values_file(directory: Path, values: dict[str, Any]) -> Path:
    path = directory / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def render(values: dict[str, Any], directory: Path, *, release: str = "drax-scheduler",
           namespace: str = "kube-system") -> list[dict[str, Any]]:
    out = helm("template", release, str(CHART), "--namespace", namespace,
               "--values", str(values_file(directory, values)))
    return [doc for doc in yaml.safe_load_all(out) if doc]


def lint(values: dict[str, Any], directory: Path) -> str:
    return helm("lint", "--strict", str(CHART), "--values", str(values_file(directory, values)))


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    (found,) = (d for d in docs if d["kind"] == kind
                and (name is None or d["metadata"]["name"] == name))
    return found


def scheduler_config(docs: list[dict[str, Any]], release: str = "drax-scheduler"
                     ) -> dict[str, Any]:
    config_map = one(docs, "ConfigMap", f"{release}-config")
    doc: dict[str, Any] = yaml.safe_load(config_map["data"]["scheduler-config.yaml"])
    return doc


def container(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    spec = one(docs, "Deployment")["spec"]["template"]["spec"]
    (found,) = (c for c in spec["containers"] if c["name"] == name)
    return found
