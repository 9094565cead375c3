"""The shipped manifests point kube-scheduler at drax the way drax serves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from app.cli import build_parser
from app.cli.serve import settings_from
from app.config import Settings

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
KUBE_SCHEDULER = MANIFESTS / "kube-scheduler"


def scheduler_config() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((KUBE_SCHEDULER / "scheduler-config.yaml").read_text())
    return doc


def test_deployment_embeds_the_same_scheduler_config() -> None:
    docs = list(yaml.safe_load_all((MANIFESTS / "deployment.yaml").read_text()))
    config_map = next(d for d in docs if d["kind"] == "ConfigMap")
    assert yaml.safe_load(config_map["data"]["scheduler-config.yaml"]) == scheduler_config()


def test_scheduler_config_uses_drax_for_filter_prioritize_bind() -> None:
    cfg = scheduler_config()
    (profile,) = cfg["profiles"]
    assert profile["schedulerName"] == "drax"
    assert {"name": "DynamicResources"} in profile["plugins"]["multiPoint"]["disabled"]
    (ext,) = cfg["extenders"]
    defaults = Settings()
    assert ext["urlPrefix"] == f"http://{defaults.host}:{defaults.port}{defaults.url_prefix}"
    assert (ext["filterVerb"], ext["prioritizeVerb"], ext["bindVerb"]) == (
        "filter", "prioritize", "bind")
    assert ext["nodeCacheCapable"] is True and ext["weight"] > 0


def test_https_scheduler_config_matches_the_plain_one_and_the_certificates() -> None:
    https: dict[str, Any] = yaml.safe_load(
        (KUBE_SCHEDULER / "scheduler-config-https.yaml").read_text())
    plain = scheduler_config()
    assert https["profiles"] == plain["profiles"]
    (ext,), (plain_ext,) = https["extenders"], plain["extenders"]
    assert ext["enableHTTPS"] is True
    assert ext["urlPrefix"] == plain_ext["urlPrefix"].replace("http://", "https://")
    assert set(ext["tlsConfig"]) >= {"caFile", "certFile", "keyFile"}
    certs = {d["metadata"]["name"]: d for d in
             yaml.safe_load_all((MANIFESTS / "tls" / "certificate.yaml").read_text())}
    serving = certs["drax-serving"]["spec"]
    assert ext["tlsConfig"]["serverName"] in serving["dnsNames"]
    assert "client auth" in certs["drax-scheduler-client"]["spec"]["usages"]


def test_deployment_serves_metrics_where_the_service_monitor_scrapes() -> None:
    docs = list(yaml.safe_load_all((MANIFESTS / "deployment.yaml").read_text()))
    template = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]
    drax = next(c for c in template["spec"]["containers"] if c["name"] == "drax")
    settings = settings_from(build_parser().parse_args(drax["args"]))
    (port,) = (p for p in drax["ports"] if p["name"] == "metrics")
    assert settings.metrics_port == port["containerPort"] and settings.metrics_host == "0.0.0.0"
    assert settings.host == "127.0.0.1"  # the verbs stay on loopback
    for probe in ("livenessProbe", "readinessProbe"):
        assert drax[probe]["httpGet"]["port"] == "metrics"
    service, monitor = yaml.safe_load_all(
        (MANIFESTS / "prometheus" / "drax-service-monitor.yaml").read_text())
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()
    (service_port,) = service["spec"]["ports"]
    assert service_port["targetPort"] == "metrics"
    assert monitor["spec"]["endpoints"][0]["port"] == service_port["name"]
