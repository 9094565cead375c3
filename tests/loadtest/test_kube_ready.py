"""The kube start-up benchmark's machinery at a small size: the API double
filled with a generated cluster (slice specs pre-encoded), drax serve listing
it in pages until ready. Speed is not asserted (that is the benchmark)."""

from __future__ import annotations

from pathlib import Path

from loadtest import generator, kube_ready


def test_drax_lists_the_generated_cluster_in_pages_and_becomes_ready(tmp_path: Path) -> None:
    nodes = 300  # more than one page (500) of slices
    claims = [o for o in generator.generate_workload(pods=4, seed=1) if o["kind"] != "Pod"]
    result = kube_ready.run(nodes=nodes, seed=1, claims=claims, workdir=tmp_path,
                            ready_timeout=120, server_args=[])
    expected = sum(len(o["spec"].get("devices", ()))
                   for o in generator.iter_cluster(nodes=nodes, seed=1)
                   if o["kind"] == "ResourceSlice")
    assert result["devices"] == expected
    assert result["slice_list_requests"] >= 2  # paged with limit/continue
    assert result["ready_seconds"] > 0 and result["ready_bytes"] > 0
    assert "| 300 |" in kube_ready.markdown([result])
