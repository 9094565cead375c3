"""loadtest.scheduler_perf without Go: upstream's files read from a fixture tree,
the scheduler configuration and drax command taken from manifests/, the CLI's
errors, the histogram quantile. The runs themselves are in
tests/e2e/test_e2e_scheduler_perf.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from loadtest.scheduler_perf import (
    MANIFESTS,
    CpuSampler,
    PerfError,
    Workload,
    benchmark_settings,
    cpu_per_pod,
    discover,
    drax_argv,
    drax_scheduler_config,
    drax_split,
    drax_test_cases,
    drax_totals,
    histogram_quantile,
    markdown,
    merge_record,
    record_command,
    select,
    smallest,
    targets,
)

BENCH = '''package x

func TestSchedulerPerf(t *testing.T) {
	structured.EnableAllocators("stable")
}

func BenchmarkPerfScheduling(b *testing.B) {
	structured.EnableAllocators("experimental")
	defer structured.EnableAllocators()

	perf.RunBenchmarkPerfScheduling(b, "performance-config.yaml", "dra_thing", nil)
}
'''

CASES = [{
    "name": "Thing",
    "featureGates": {"DynamicResourceAllocation": True, "DRAConsumableCapacity": True},
    "workloadTemplate": [
        {"opcode": "createNodes", "countParam": "$nodesWithDRA"},
        {"opcode": "createPods", "namespace": "init", "countParam": "$initPods"},
        {"opcode": "createPods", "namespace": "test", "countParam": "$measurePods",
         "collectMetrics": True},
    ],
    "workloads": [
        {"name": "big", "threshold": {"dra_thing": 70}, "labels": ["performance"],
         "params": {"nodesWithDRA": 500, "initPods": 0, "measurePods": 10}},
        {"name": "fast", "featureGates": {"DRAConsumableCapacity": False},
         "params": {"nodesWithDRA": 1, "initPods": 0, "measurePods": 1}},
    ],
}, {
    "name": "Grouped",
    "featureGates": {"DRADeviceCompatibilityGroups": True},
    "schedulerConfigPath": "scheduler-config.yaml",
    "workloadTemplate": [{"opcode": "startCollectingMetrics", "namespaces": ["default"]}],
    "workloads": [{"name": "fast", "threshold": 30, "params": {"nodesWithDRA": 1}}],
}]

OWN_CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
    "profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [
        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "LeastAllocated"}}}]}],
}


@pytest.fixture()
def upstream(tmp_path: Path) -> Path:
    dra = tmp_path / "test/integration/scheduler_perf/dra/thing"
    dra.mkdir(parents=True)
    (dra / "thing_test.go").write_text(BENCH)
    (dra / "performance-config.yaml").write_text(yaml.safe_dump(CASES))
    (dra / "scheduler-config.yaml").write_text(yaml.safe_dump(OWN_CONFIG))
    return tmp_path


def test_discover_reads_cases_gates_thresholds_and_the_benchmarks_allocator(upstream) -> None:
    found = {w.full_name: w for w in discover(upstream)}
    assert list(found) == ["Thing/big", "Thing/fast", "Grouped/fast"]
    big, fast, grouped = found.values()
    assert (big.allocator, big.topic, big.threshold) == ("experimental", "dra_thing", 70.0)
    assert big.namespace == "test" and big.labels == ("performance",)
    assert fast.gates == {"DynamicResourceAllocation": True, "DRAConsumableCapacity": False}
    assert fast.threshold is None
    assert grouped.namespace == "default" and grouped.threshold == 30.0
    assert grouped.scheduler_config == "scheduler-config.yaml"
    assert grouped.drax_cannot_run() and "DRADeviceCompatibilityGroups" in grouped.drax_cannot_run()
    assert big.drax_cannot_run() is None
    assert [w.full_name for w in smallest(found.values())] == ["Thing/fast", "Grouped/fast"]


def test_a_workloads_pods_are_those_of_its_measured_create_pods_op(upstream) -> None:
    steady = {**CASES[0], "name": "Steady", "workloadTemplate": [
        {"opcode": "createPods", "namespace": "test", "countParam": "$measurePods",
         "steadyStateParam": "$steadyState", "collectMetrics": True}], "workloads": [
        {"name": "burst", "params": {"measurePods": 7, "steadyState": False}},
        {"name": "steady", "params": {"measurePods": 7, "steadyState": True}}]}
    fixed = {**CASES[0], "name": "Fixed", "workloadTemplate": [
        {"opcode": "createPods", "namespace": "test", "count": 10, "collectMetrics": True}],
        "workloads": [{"name": "fast", "params": {}}]}
    config = upstream / "test/integration/scheduler_perf/dra/thing/performance-config.yaml"
    config.write_text(yaml.safe_dump([*CASES, steady, fixed]))
    found = {w.full_name: w.pods for w in discover(upstream)}
    # the init namespace's pods are not measured; no createPods op creates none
    assert found == {"Thing/big": 10, "Thing/fast": 1, "Grouped/fast": 0,
                     "Steady/burst": 7, "Steady/steady": None, "Fixed/fast": 10}


def test_a_directory_without_the_benchmark_is_an_error(tmp_path) -> None:
    (tmp_path / "x_test.go").write_text("package x\n")
    with pytest.raises(PerfError, match="no BenchmarkPerfScheduling"):
        benchmark_settings(tmp_path)


def test_an_unknown_workload_names_upstreams_workloads_of_that_name(upstream) -> None:
    found = discover(upstream)
    with pytest.raises(PerfError, match=r"'Other/big'.*upstream has Thing/big"):
        select(found, ["Other/big"])
    assert select(found, ["Thing/big"]) == [found[0]]


def _manifest_extender() -> dict:
    text = (MANIFESTS / "kube-scheduler/scheduler-config.yaml").read_text()
    (config,) = [d for d in yaml.safe_load_all(text) if d]
    return config


def test_allocator_config_is_the_manifests_with_only_the_profile_name_and_url_changed(
        upstream) -> None:
    thing = discover(upstream)[0]
    config = drax_scheduler_config(thing, "drax-allocator", 4321)
    manifest = _manifest_extender()
    assert [p["schedulerName"] for p in config["profiles"]] == ["default-scheduler"]
    assert config["profiles"][0]["plugins"] == manifest["profiles"][0]["plugins"]
    assert config["profiles"][0]["percentageOfNodesToScore"] == 100
    (extender,) = config["extenders"]
    assert extender.pop("urlPrefix") == "http://127.0.0.1:4321/scheduler"
    (expected,) = manifest["extenders"]
    expected.pop("urlPrefix")
    assert extender == expected
    # Upstream's nodes are not in drax's node pool.
    assert "pluginConfig" not in config["profiles"][0]


def test_advisor_keeps_the_plugin_and_drops_the_bind_verb(upstream) -> None:
    config = drax_scheduler_config(discover(upstream)[0], "drax-advisor", 4321)
    assert "plugins" not in config["profiles"][0]
    assert "percentageOfNodesToScore" not in config["profiles"][0]
    assert "bindVerb" not in config["extenders"][0]
    assert config["extenders"][0]["filterVerb"] == "filter"


def test_a_cases_own_scheduler_config_keeps_its_plugin_config(upstream) -> None:
    grouped = discover(upstream)[2]
    config = drax_scheduler_config(grouped, "drax-allocator", 1)
    (profile,) = config["profiles"]
    assert profile["pluginConfig"] == OWN_CONFIG["profiles"][0]["pluginConfig"]
    assert profile["plugins"] == _manifest_extender()["profiles"][0]["plugins"]
    assert profile["percentageOfNodesToScore"] == 100


def test_generated_cases_name_the_generated_scheduler_config(upstream, tmp_path) -> None:
    cases = drax_test_cases(discover(upstream)[0], tmp_path / "s.yaml")
    assert [c["schedulerConfigPath"] for c in cases] == [str(tmp_path / "s.yaml")] * 2
    assert cases[0]["workloads"] == CASES[0]["workloads"]


def test_drax_runs_with_the_deployments_args_and_the_cases_gates(upstream) -> None:
    fast = discover(upstream)[1]
    argv = drax_argv(fast, "drax-advisor", 1111, 2222)
    assert argv[1:4] == ["-m", "app", "serve"]
    args = argv[3:]

    def value(flag: str) -> str:
        return args[args.index(flag) + 1]

    assert (value("--host"), value("--port"), value("--metrics-port")) == \
        ("127.0.0.1", "1111", "2222")
    assert value("--mode") == "advisor" and value("--kubeconfig") == "{kubeconfig}"
    # DynamicResourceAllocation is not one of drax's gates; the rest are passed on.
    assert value("--feature-gates") == "DRAConsumableCapacity=false"
    assert args.count("--port") == 1


def test_histogram_quantile_interpolates_within_the_bucket() -> None:
    h = {"bounds": [0.001, 0.01, 0.1], "cumulative_counts": [0, 50, 100], "count": 100,
         "sum": 1.0}
    assert histogram_quantile(h, 0.5) == pytest.approx(0.01)
    assert histogram_quantile(h, 0.75) == pytest.approx(0.055)
    assert histogram_quantile({"count": 0}, 0.5) is None


def test_workload_size_counts_nodes_then_pods() -> None:
    w = Workload(case="c", name="w", directory=Path("."), config_file=Path("x"),
                 allocator="a", topic="t", gates={}, labels=(),
                 params={"nodesWithDRA": 2, "nodesWithoutDRA": 1, "measurePods": 5},
                 namespace="test", scheduler_config=None, threshold=None)
    assert w.size == (3, 5)


def _run(workload: str, scheduler: str, avg: float | None, scheduled: int = 10,
         measured: int = 10) -> dict:
    return {"workload": workload, "scheduler": scheduler,
            "pods_per_second": {"Average": avg, "Perc50": avg, "Perc90": avg, "Perc99": avg},
            "scheduled": scheduled, "measured_pods": measured, "seconds": 1.0}


KEY = "SchedulingWithResourceClaimTemplate/5000pods_500nodes"
PROFILE = {"samples": 1, "self": [], "inclusive": [],
           "by_area": [{"function": "app/server", "samples": 1, "percent": 100.0}]}


def test_targets_compare_averages_to_in_tree_within_the_record() -> None:
    doc = {"runs": [_run(KEY, "in-tree", 50.0), _run(KEY, "drax-allocator", 45.0),
                    _run(KEY, "drax-advisor", 45.0),
                    _run("X/fast", "in-tree", None), _run("X/fast", "drax-allocator", None),
                    _run("Y/w", "in-tree", 10.0), _run("Y/w", "drax-allocator", 9.0, 9, 10)]}
    got = {t["target"]: t for t in targets(doc)}
    # The key workloads need 1.0x for drax-allocator, everything else 0.8x.
    assert got[f"drax-allocator / in-tree, {KEY}"]["met"] is False
    assert got[f"drax-advisor / in-tree, {KEY}"]["met"] is True
    assert got["drax-allocator / in-tree, Y/w"]["measured"] == 0.9
    assert not any("X/fast" in name for name in got)  # too short to have a rate
    every = got["every pod in-tree schedules, drax schedules"]
    assert every["met"] is False and "Y/w (drax-allocator: 9/10)" in every["note"]
    # A run that failed before creating pods (0/0) is a miss too.
    doc["runs"].append(_run("Z/w", "drax-allocator", None, 0, 0))
    doc["details"] = [{"workload": "Z/w", "scheduler": "drax-allocator", "ok": False}]
    every = {t["target"]: t for t in targets(doc)}["every pod in-tree schedules, drax schedules"]
    assert "Z/w (drax-allocator: 0/0)" in every["note"]


def test_record_merges_runs_by_workload_and_scheduler(tmp_path) -> None:
    path = tmp_path / "record.json"
    merge_record(path, command="a", runs=[_run(KEY, "in-tree", 1.0)], details=[],
                 not_run=[{"workload": "G/f", "scheduler": "drax-allocator", "reason": "r"}],
                 profiles={})
    doc = merge_record(path, command="b", runs=[_run(KEY, "in-tree", 2.0),
                                                _run(KEY, "drax-allocator", 3.0)],
                       details=[], not_run=[], profiles={"p": PROFILE})
    assert [(r["scheduler"], r["pods_per_second"]["Average"]) for r in doc["runs"]] == \
        [("in-tree", 2.0), ("drax-allocator", 3.0)]
    assert doc["commands"] == ["a", "b"] and doc["kubernetes"] == "v1.37.2"
    assert doc["not_run"][0]["reason"] == "r"
    assert doc["profiles"] == {"p": {**PROFILE, "command": "b", "commit": doc["commit"]}}
    assert json.loads(path.read_text()) == doc
    text = markdown(doc)
    assert f"| {KEY} | drax-allocator | 3.0 | 3.0 | 1.50 | 10 / 10 |" in text
    assert "G/f under drax-allocator: r" in text
    assert "| app/server | 100.0 |" in text


def test_a_recorded_command_names_no_scratch_path() -> None:
    argv = ["--workloads", KEY, "--json", "/tmp/x/half.json", "--keep=/tmp/keep",
            "--profile", "/tmp/prof", "--record", "/tmp/x/record.json"]
    assert record_command(argv) == (
        f"python -m loadtest.scheduler_perf --workloads {KEY} --profile DIR "
        "--record loadtest/results/scheduler-perf.json")


def test_the_record_lists_the_commands_its_figures_come_from(tmp_path) -> None:
    path = tmp_path / "record.json"
    merge_record(path, command="a", runs=[_run(KEY, "in-tree", 1.0)], details=[],
                 not_run=[], profiles={})
    merge_record(path, command="b", runs=[_run("Y/w", "in-tree", 1.0)], details=[],
                 not_run=[], profiles={})
    merge_record(path, command="a", runs=[_run(KEY, "in-tree", 2.0)], details=[],
                 not_run=[], profiles={})
    # "a" ran again: listed once, after "b", which still has its row.
    doc = merge_record(path, command="c", runs=[_run(KEY, "in-tree", 3.0)], details=[],
                       not_run=[], profiles={})
    # "c" replaced the only row of "a": "a" reproduces nothing left in the record.
    assert doc["commands"] == ["b", "c"]
    assert {r["workload"]: r["command"] for r in doc["runs"]} == {"Y/w": "b", KEY: "c"}
    assert all(r["commit"] == doc["commit"] for r in doc["runs"])
    assert doc["commits"] == [doc["commit"]]


def test_cpu_per_pod_is_read_off_between_the_first_and_last_pod_bound() -> None:
    # go uses 1 core, etcd 0.5, drax 0.25; the machine 2 cores busy in all.
    samples = [{"t": t, "go": 1.0 * t, "etcd": 0.5 * t, "drax": 0.25 * t, "machine": 2.0 * t}
               for t in (0.0, 1.0, 2.0, 3.0, 4.0)]
    # 11 pods bound from t=0.5 to t=3.5: 10 after the first, in 3 s.
    cpu = cpu_per_pod(samples, first=0.5, last=3.5, pods=11)
    assert cpu == {"go": 300.0, "etcd": 150.0, "drax": 75.0, "total": 525.0, "outside": 0.25}
    # In-tree runs have no drax; a window without two samples or two pods has no figure.
    no_drax = [{k: v for k, v in s.items() if k != "drax"} for s in samples]
    assert cpu_per_pod(no_drax, first=0.5, last=3.5, pods=11) == \
        {"go": 300.0, "etcd": 150.0, "total": 450.0, "outside": 0.5}
    assert cpu_per_pod(samples, first=0.5, last=1.5, pods=11) is None
    assert cpu_per_pod(samples, first=0.5, last=3.5, pods=1) is None


def test_the_sampler_reads_this_processes_cpu() -> None:
    import os
    import time

    with CpuSampler(os.getpid(), None) as sampler:
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            sum(range(1000))
    assert len(sampler.samples) >= 2
    first, last = sampler.samples[0], sampler.samples[-1]
    assert last["go"] > first["go"] and last["machine"] >= first["machine"]
    assert "drax" not in last


def test_the_table_shows_cpu_per_pod_and_outside_load() -> None:
    doc = {"runs": [_run(KEY, "in-tree", 2.0), _run(KEY, "drax-allocator", 3.0)],
           "details": [{"workload": KEY, "scheduler": "drax-allocator",
                        "cpu_ms_per_pod": {"go": 30.0, "etcd": 9.0, "drax": 8.1,
                                           "total": 47.1, "outside": 0.02}},
                       {"workload": KEY, "scheduler": "in-tree"}]}
    text = markdown(doc)
    assert "| 30.0 / 9.0 / 8.1 | 0.02 |" in text
    assert f"| {KEY} | in-tree | 2.0 | 2.0 | – | 10 / 10 | – / – | – / – | – | – | – |" in text


METRICS = """# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 2.5
# TYPE drax_request_duration_seconds histogram
drax_request_duration_seconds_count{verb="filter"} 10.0
drax_request_duration_seconds_sum{verb="filter"} 0.02
drax_request_duration_seconds_count{verb="prioritize"} 10.0
drax_request_duration_seconds_sum{verb="prioritize"} 0.01
drax_request_duration_seconds_count{verb="bind"} 9.0
drax_request_duration_seconds_sum{verb="bind"} 0.3
# TYPE drax_watch_event_apply_seconds histogram
drax_watch_event_apply_seconds_sum{kind="Pod"} 0.004
drax_watch_event_apply_seconds_sum{kind="ResourceClaim"} 0.006
# TYPE drax_watch_events_total counter
drax_watch_events_total{kind="Pod",type="ADDED"} 20.0
drax_watch_events_total{kind="ResourceClaim",type="MODIFIED"} 30.0
# TYPE drax_gc_pause_seconds histogram
drax_gc_pause_seconds_sum{generation="0"} 0.001
drax_gc_pause_seconds_sum{generation="2"} 0.002
"""


def test_drax_split_is_per_filter_call_between_two_scrapes() -> None:
    later = drax_totals(METRICS)
    assert later["filter_calls"] == 10 and later["watch_apply"] == pytest.approx(0.01)
    assert later["watch_events"] == 50 and later["gc"] == pytest.approx(0.003)
    first = {**later, "cpu": 1.5, "filter_calls": 5.0, "filter": 0.01, "prioritize": 0.005,
             "bind": 0.1, "watch_apply": 0.005, "watch_events": 25.0, "gc": 0.003}
    assert drax_split(first, later) == {"cpu": 200.0, "filter": 2.0, "prioritize": 1.0,
                                        "bind": 40.0, "watch_apply": 1.0, "gc": 0.0,
                                        "watch_events": 5.0}
    assert drax_split(later, later) is None
    doc = {"runs": [_run(KEY, "drax-allocator", 3.0)],
           "details": [{"workload": KEY, "scheduler": "drax-allocator",
                        "drax_ms_per_filter": drax_split(first, later)}]}
    assert f"| {KEY} | drax-allocator | 200.00 | 2.00 | 1.00 | 40.00 | 1.00 | 5.00 | 0.00 |" \
        in markdown(doc)
