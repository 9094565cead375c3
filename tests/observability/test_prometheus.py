"""Dashboards and alert rules against the real Prometheus (Debian's `prometheus`
package, which .ci/run installs): every panel query of every dashboard returns
data from drax under load, and promtool accepts and unit-tests the rules."""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.observability.stack import (
    DASHBOARDS,
    GRAFANA,
    PROMETHEUS,
    RULES,
    Stack,
    dashboards,
    panels,
    prometheus_binaries,
    running,
    substitute,
)

BINARIES = prometheus_binaries()
needs_prometheus = pytest.mark.skipif(
    BINARIES is None, reason="prometheus/promtool not on PATH (apt-get install prometheus; "
                             ".ci/run installs it)")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    assert BINARIES is not None
    with running(tmp_path_factory.mktemp("prometheus"), prometheus=BINARIES[0]) as s:
        yield s


@needs_prometheus
def test_the_load_bound_pods_until_some_no_longer_fit(stack: Stack) -> None:
    assert stack.outcomes.get("bound", 0) >= 20
    assert stack.outcomes.get("unschedulable", 0) >= 1
    assert set(stack.outcomes) <= {"bound", "unschedulable"}, stack.outcomes


@needs_prometheus
def test_every_panel_query_of_every_dashboard_returns_data(stack: Stack) -> None:
    empty = []
    checked = 0
    for name, dashboard in dashboards().items():
        values = stack.variables(dashboard)
        for panel in panels(dashboard):
            for target in panel["targets"]:
                expr = substitute(target["expr"], values, range_seconds=stack.range_seconds)
                series = stack.query_range(expr)
                numbers = [float(v) for s in series for _, v in s["values"]
                           if not math.isnan(float(v))]
                checked += 1
                if not numbers:
                    empty.append(f"{name} / {panel['title']} / {target['refId']}: {expr}")
    assert checked >= 40
    assert not empty, "queries without data:\n" + "\n".join(empty)


@needs_prometheus
def test_placement_and_capacity_show_what_happened(stack: Stack) -> None:
    def last(expr: str) -> float:
        result = stack.api("/api/v1/query", {"query": expr, "time": f"{stack.finished:.3f}"})
        return sum(float(s["value"][1]) for s in result["result"])

    assert last('sum(drax_pods_bound_total{job="drax"})') == stack.outcomes["bound"]
    assert last('sum(drax_bound_placements_total{job="drax"})') == stack.outcomes["bound"]
    assert last('sum(drax_devices{job="drax",state="allocated"})') > 0
    assert last('sum(drax_inventory_nodes{job="drax"})') == 6
    # The cluster was filled until pods stopped fitting: some shape has no room left.
    assert last('min(drax_capacity_pods{job="drax"})') == 0
    # Every reason drax gave for a node not fitting fell into a named category.
    assert last('sum(drax_filter_node_rejections_total{job="drax"})') > 0
    assert last('sum(drax_filter_node_rejections_total{job="drax",reason="other"})') == 0
    assert last('sum(drax_bind_failures_total{job="drax"})') == 0


@needs_prometheus
def test_range_panels_count_the_binds_of_series_born_inside_the_range(stack: Stack) -> None:
    # Prometheus started with the load, so every drax_bound_* series was born
    # inside the dashboard's range: a plain increase() sees only what changed
    # after a series' first scrape (a burst of one shape's first binds is lost
    # whole), so the stat panels must equal the raw counters at the end.
    def at_end(expr: str) -> float:
        result = stack.api("/api/v1/query", {"query": expr, "time": f"{stack.finished:.3f}"})
        assert result["result"], expr
        return float(result["result"][0]["value"][1])

    placement = dashboards()["drax-placement.json"]
    values = stack.variables(placement)
    by_title = {p["title"]: p["targets"][0]["expr"] for p in panels(placement)}
    raw = {
        "Aligned placements share (one PCIe root)":
            'sum(drax_bound_placements_total{job="drax",tier="one_pcie_root"})'
            ' / sum(drax_bound_placements_total{job="drax"})',
        "GPUs bound with a NIC on their own root":
            'sum(drax_bound_gpus_total{job="drax",nic="same_root"})'
            ' / sum(drax_bound_gpus_total{job="drax",nic!="no_nic"})',
    }
    for title, counters in raw.items():
        panel = substitute(by_title[title], values, range_seconds=stack.range_seconds + 60)
        assert at_end(panel) == pytest.approx(at_end(counters)), title


@needs_prometheus
def test_promtool_checks_and_unit_tests_the_rules() -> None:
    assert BINARIES is not None
    promtool = BINARIES[1]
    for args in (["check", "rules", "drax-rules.yaml"], ["test", "rules", "drax-rules.test.yaml"]):
        done = subprocess.run([promtool, *args], cwd=RULES, capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.returncode == 0, done.stdout + done.stderr


def test_every_rule_has_a_runbook_line_and_the_prometheusrule_holds_the_same_groups() -> None:
    plain = yaml.safe_load((RULES / "drax-rules.yaml").read_text())
    operator = yaml.safe_load((PROMETHEUS / "drax-prometheusrule.yaml").read_text())
    assert operator["kind"] == "PrometheusRule"
    assert operator["spec"] == plain
    alerts = {r["alert"]: r for g in plain["groups"] for r in g["rules"]}
    assert {"DraxDown", "DraxNotReady", "DraxFilterLatencyNearTimeout", "DraxWatchStale",
            "DraxBindsFailing", "DraxBindConflicts", "DraxStrandedGPUs",
            "DraxCapacityExhausted", "DraxPreemptorWaiting"} <= set(alerts)
    for name, rule in alerts.items():
        assert rule["annotations"].get("runbook"), name
    tests = yaml.safe_load((RULES / "drax-rules.test.yaml").read_text())
    assert tests["rule_files"] == ["drax-rules.yaml"]
    tested = {t["alertname"] for case in tests["tests"] for t in case["alert_rule_test"]}
    assert tested == set(alerts)


def test_service_monitor_scrapes_the_metrics_service() -> None:
    service, monitor = yaml.safe_load_all((PROMETHEUS / "drax-service-monitor.yaml").read_text())
    assert service["kind"] == "Service" and monitor["kind"] == "ServiceMonitor"
    assert service["metadata"]["name"] == "drax"  # the job label the rules select
    port = service["spec"]["ports"][0]["name"]
    assert monitor["spec"]["endpoints"][0]["port"] == port
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()


def test_dashboards_have_the_variables_descriptions_and_ship_as_a_configmap() -> None:
    found = dashboards()
    titles = {d["title"] for d in found.values()}
    assert {"drax / scheduling", "drax / GPU placement & inventory", "drax / health"} <= titles
    for name, dashboard in found.items():
        variables = {v["name"]: v for v in dashboard["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource"
        assert variables["datasource"]["query"] == "prometheus"
        assert {"job", "instance"} <= set(variables), name
        assert len({p["id"] for p in panels(dashboard)}) == len(panels(dashboard)), name
        for panel in panels(dashboard):
            assert panel.get("description"), f"{name}: {panel['title']}"
            assert panel["datasource"]["uid"] == "${datasource}"
            assert panel["targets"], f"{name}: {panel['title']}"
            for target in panel["targets"]:
                if "$" in target["expr"] or "vector(" not in target["expr"]:
                    assert 'job=~"$job",instance=~"$instance"' in target["expr"], target["expr"]
    configmap = yaml.safe_load((GRAFANA / "drax-dashboards-configmap.yaml").read_text())
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert {k: json.loads(v) for k, v in configmap["data"].items()} == found
    assert all(Path(DASHBOARDS / k).is_file() for k in configmap["data"])
