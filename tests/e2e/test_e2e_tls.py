"""drax over HTTPS with client certificates behind the real kube-scheduler.

Its own control plane: drax serves the verbs with `--tls-cert-file`,
`--tls-private-key-file` and `--client-ca-file` (probes on `--metrics-port`),
and the drax kube-scheduler runs manifests/kube-scheduler/scheduler-config-https.yaml
(`enableHTTPS`, `tlsConfig` with caFile, certFile, keyFile) with the files of
this cluster's PKI. A pod is bound through drax over mTLS; with a client
certificate from another CA, drax refuses the handshake, the scheduler's
extender call fails and a new pod stays Pending, its condition naming the error.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.e2e.cluster import Cluster, drax_probe_url
from tests.e2e.conftest import running_cluster
from tests.e2e.kube import Kube, wait_for
from tests.e2e.workload import (
    add_pool,
    check_workload,
    claim,
    pod,
    unschedulable_message,
    wait_bound,
)

POOL = "tls"


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("e2e-tls"), drax_tls=True) as running:
        kube = running.kube()
        try:
            add_pool(kube, prefix=POOL, nodes=2, seed=5)
        finally:
            kube.close()
        yield running


def filters_answered(cluster: Cluster) -> float:
    """drax's count of filter calls, read from the plain-HTTP metrics port."""
    text = httpx.get(f"{drax_probe_url(cluster)}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith('drax_requests_total{') and 'verb="filter"' in line)


@pytest.fixture()
def tls_kube(tls_cluster: Cluster) -> Iterator[Kube]:
    client = tls_cluster.kube()
    yield client
    client.close()


def test_the_real_scheduler_binds_through_drax_over_mtls(tls_cluster: Cluster,
                                                        tls_kube: Kube) -> None:
    assert tls_cluster.drax_url.startswith("https://")
    tls_kube.create(claim(f"{POOL}-c1", "1gpu"))
    tls_kube.create(pod(f"{POOL}-p1", scheduler="drax", claim_name=f"{POOL}-c1"))
    pods = wait_bound(tls_kube, [f"{POOL}-p1"])
    check_workload(tls_kube, pods, nodes=[n["metadata"]["name"]
                                          for n in tls_kube.list("Node")])


def test_a_client_certificate_from_another_ca_is_refused(tls_cluster: Cluster,
                                                         tls_kube: Kube) -> None:
    config_path = tls_cluster.path / "drax-scheduler.yaml"
    original = config_path.read_text()
    config = yaml.safe_load(original)
    pki = tls_cluster.path / "pki"
    for extender in config["extenders"]:
        extender["tlsConfig"].update(certFile=str(pki / "stranger.crt"),
                                     keyFile=str(pki / "stranger.key"))
    config_path.write_text(yaml.safe_dump(config))
    log_path = Path(tls_cluster.logs["drax-scheduler"])
    seen = len(log_path.read_bytes())
    tls_cluster.restart("drax-scheduler")
    try:
        name = f"{POOL}-stranger"
        answered_before = filters_answered(tls_cluster)
        tls_kube.create(claim(name, "1gpu"))
        tls_kube.create(pod(name, scheduler="drax", claim_name=name))
        message = wait_for(f"{name} PodScheduled=False",
                           lambda: unschedulable_message(tls_kube, name), timeout=120)
        assert tls_kube.get("Pod", name, "default")["spec"].get("nodeName") is None
        # The handshake fails (TLS 1.3 reports drax's refusal as EOF on the next
        # read): the scheduler's call never reaches drax's handler.
        since_restart = log_path.read_bytes()[seen:].decode(errors="replace")
        failed = [line for line in since_restart.splitlines()
                  if "Error selecting node for pod" in line and name in line]
        assert failed and f'Post \\"{tls_cluster.drax_url}/scheduler/filter\\"' in failed[0], \
            failed[:1] or message
        assert filters_answered(tls_cluster) == answered_before
    finally:
        config_path.write_text(original)
        tls_cluster.restart("drax-scheduler")
