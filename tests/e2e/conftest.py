"""One real control plane for the whole e2e session (starting it costs ~15 s).

Every test module shares the `cluster` fixture; tests keep to their own
object names (node pools, pod prefixes) so they do not see each other's work.
The suite skips, with one reason, only when `go` is not on PATH.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.e2e.build import go_available
from tests.e2e.cluster import SAMPLE_CLASSES, Cluster, start, stop
from tests.e2e.kube import Kube


@contextmanager
def running_cluster(directory: Path, *, drax_mode: str = "allocator",
                    drax_tls: bool = False, replicas: int = 1,
                    profiles: Sequence[str] = ("drax",)) -> Iterator[Cluster]:
    """A started control plane with the sample DeviceClasses, stopped on exit."""
    if not go_available():
        pytest.skip("e2e tests need `go` on PATH to build the upstream control plane")
    running = start(directory, drax_mode=drax_mode, drax_tls=drax_tls, replicas=replicas,
                    profiles=profiles)
    try:
        kube = running.kube()
        kube.apply_file(SAMPLE_CLASSES)
        kube.close()
        yield running
    finally:
        stop(running)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("e2e-cluster")) as running:
        yield running


@pytest.fixture()
def kube(cluster: Cluster) -> Iterator[Kube]:
    client = cluster.kube()
    yield client
    client.close()
