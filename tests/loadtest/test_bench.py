"""The benchmark harness: statistics, the scheduler's candidate choice, and a
real run of the kube-scheduler-like driver against the floor server on loopback."""

from __future__ import annotations

import socket
import sys

import orjson
import pytest

from loadtest import bench, generator, report
from loadtest.bench import BenchmarkError, Client, PodJob, serving
from loadtest.stats import percentile, summarize


def test_percentiles_are_observed_samples():
    ordered = [float(i) for i in range(1, 101)]
    assert percentile(ordered, 50) == 50.0
    assert percentile(ordered, 99) == 99.0
    assert percentile(ordered[:10], 99) == 10.0
    assert percentile([], 99) == 0.0
    s = summarize([0.001, 0.003, 0.002])
    assert (s.count, s.p50_ms, s.max_ms) == (3, 2.0, 3.0)
    assert s.mean_ms == pytest.approx(2.0)


@pytest.mark.parametrize(("nodes", "expected"), [
    (50, 50), (500, 230), (1000, 420), (5000, 500), (10_000, 500), (20_000, 1000)])
def test_scheduler_candidate_count_matches_kube_scheduler(nodes, expected):
    assert bench.scheduler_candidate_count(nodes) == expected


def test_scheduler_candidates_rotate_through_the_cluster():
    names = [f"n{i}" for i in range(500)]
    nxt = bench.candidate_lists(names, mode="scheduler")
    first, second, third = nxt(), nxt(), nxt()
    assert first == names[:230] and second == names[230:460]
    assert third == names[460:] + names[:190]
    assert bench.candidate_lists(names, mode="all")() == names


def test_best_node_is_highest_score_then_first_listed():
    scores = [{"Host": "b", "Score": 3}, {"Host": "a", "Score": 7}, {"Host": "c", "Score": 7}]
    assert bench._best(scores, ["c", "a", "b"]) == "c"
    assert bench._best([], ["x"]) == "x"


def test_serving_reports_a_server_that_dies_before_ready(tmp_path):
    with pytest.raises(BenchmarkError, match="exited with code 3"), serving(
            [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"],
            port=bench.free_port(), log=tmp_path / "log", ready_timeout=30):
        pass


def _jobs(count: int) -> list[PodJob]:
    objs = generator.generate_workload(pods=count, mix="default", claims="claim")
    pods = [o for o in objs if o["kind"] == "Pod"]
    shapes = generator.workload_shapes(pods=count)
    return [PodJob(phase="mixed" if i < count // 2 else "tail", shape=s, pod=p)
            for i, (s, p) in enumerate(zip(shapes, pods, strict=True))]


def test_schedule_against_the_floor_mirrored_to_a_second_floor(tmp_path):
    names = [generator.node_name(i) for i in range(120)]
    jobs = _jobs(8)
    ports = bench.free_ports(2)
    with serving([sys.executable, "-m", "loadtest.floor", "--port", str(ports[0])],
                 port=ports[0], log=tmp_path / "a.log", ready_timeout=60) as server, \
            serving([sys.executable, "-m", "loadtest.floor", "--port", str(ports[1])],
                    port=ports[1], log=tmp_path / "b.log", ready_timeout=60) as other:
        client, mirror = Client(server.port), Client(other.port)
        try:
            run, again = bench.schedule(client, jobs, mirror=mirror,
                                        candidates=bench.candidate_lists(names, mode="scheduler"))
            with pytest.raises(BenchmarkError, match="HTTP 4"):
                client.post("filter", b"{not json")
        finally:
            client.close()
            mirror.close()
        assert server.ready_seconds > 0
        handled = bench.handler_seconds(server.port)
        assert handled["filter"]["count"] == 9  # 8 pods + the malformed body
        assert handled["bind"]["count"] == 8 and handled["bind"]["sum"] > 0
        rss, peak = bench.memory_bytes(server.pid)
        assert 0 < rss <= peak
    assert server.process.poll() is not None  # stopped on leaving the block
    assert again is not None and run.aborted is None
    assert [s.outcome for s in run.samples] == ["bound"] * 8
    assert all(s.passed == 100 for s in run.samples)
    assert [s.node for s in run.samples[:2]] == [names[0], names[100]]
    first = orjson.loads(run.samples[0].filter_body)
    assert first["Nodes"] is None and first["NodeNames"] == names[:100]
    assert orjson.loads(run.samples[0].bind_body)["PodUID"] == jobs[0].pod["metadata"]["uid"]
    assert set(run.wall_s) == set(again.wall_s) == {"mixed", "tail"}
    assert [s.filter_body for s in again.samples] == [s.filter_body for s in run.samples]
    assert all(s.bind_s is not None for s in again.samples)

    phases = report.phase_results(run, again)
    assert [p["phase"] for p in phases] == ["mixed", "tail"]
    assert phases[0]["drax"]["cycle"]["count"] == 4
    assert set(phases[0]["cycle_ratio"]) == {"mean", "p50", "p99"}
    doc = {"machine": {"cores": 2, "python": "3", "platform": "x"}, "command": "c",
           "runs": [{"nodes": 500, "devices": 1, "candidates": "all", "build_seconds": 1.0,
                     "rss": {"ready_bytes": 1, "after_bytes": 1, "peak_bytes": 1},
                     "phases": phases, "drax_overall": report.overall(phases, "drax"),
                     "floor_overall": report.overall(phases, "floor")}]}
    doc["targets"] = report.evaluate_targets(doc)
    by_name = {t["target"]: t for t in doc["targets"]}
    # Both servers are the floor, so the ratio is only noise around 1: a target is
    # judged on the run's own figures (test_report pins the threshold).
    ratio = (doc["runs"][0]["drax_overall"]["mean_cycle_ms"]
             / doc["runs"][0]["floor_overall"]["mean_cycle_ms"])
    vs_floor = by_name["cycle time vs floor, 500 nodes"]
    assert (vs_floor["measured"], vs_floor["met"]) == (round(ratio, 2), ratio <= 3)
    assert by_name["RSS holding 5,000 nodes"]["met"] is None
    text = report.markdown(doc)
    assert "| mixed | drax | filter | 4 |" in text and "not measured" in text


def test_a_request_timeout_ends_the_run_with_what_was_measured(tmp_path):
    # A server that accepts connections but never answers.
    with socket.socket() as listener:
        listener.bind((bench.HOST, 0))
        listener.listen()
        client = Client(listener.getsockname()[1], timeout=0.2)
        try:
            run, mirrored = bench.schedule(client, _jobs(2),
                                           candidates=lambda: ["node-00000"])
        finally:
            client.close()
    assert mirrored is None and run.samples == []
    assert run.aborted is not None and "after 0 pods" in run.aborted


def test_the_clients_own_collections_run_outside_its_timed_round_trips(monkeypatch):
    """A prioritize answer of thousands of entries makes the client collect; the
    pass is the client's, not the server's latency, so it runs after the call."""
    import gc
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    answer = orjson.dumps([{"Host": f"node-{i}", "Score": i % 100} for i in range(3000)])

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    inside: list[bool] = []
    timing = threading.local()

    def during_collection(phase, info):
        if phase == "start" and threading.current_thread() is threading.main_thread():
            inside.append(getattr(timing, "in_call", False))

    client = Client(server.server_address[1])
    conn_request = client._conn.request

    def request(*args, **kwargs):
        timing.in_call = True
        return conn_request(*args, **kwargs)

    class DecodeThenStop:
        """orjson as the client uses it; the timed round trip ends with the decode."""

        @staticmethod
        def loads(raw):
            decoded = orjson.loads(raw)
            timing.in_call = False
            return decoded

    client._conn.request = request
    monkeypatch.setattr(bench, "orjson", DecodeThenStop)
    thresholds = gc.get_threshold()
    gc.callbacks.append(during_collection)
    gc.set_threshold(50, 2, 2)
    try:
        for _ in range(5):
            _, decoded = client.post("prioritize", b"{}")
            assert len(decoded) == 3000
    finally:
        gc.set_threshold(*thresholds)
        gc.callbacks.remove(during_collection)
        client.close()
        server.shutdown()
    assert inside, "decoding 3,000 entries per call must bring a pass due"
    assert not any(inside), "a collection ran inside a timed round trip"
    assert len(client.collected_s) == len(inside)


def test_free_ports_are_distinct_and_bindable():
    """Ports picked together are distinct (each socket stays bound until all
    are picked), and each is free to bind once they are returned."""
    ports = bench.free_ports(64)
    assert len(set(ports)) == 64
    for port in ports:
        with socket.socket() as s:
            s.bind((bench.HOST, port))
