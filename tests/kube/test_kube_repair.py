"""The start-up pass over claims a killed drax left half written (app.binder.repair)."""

from __future__ import annotations

from pathlib import Path

from app.binder import FINALIZER
from app.binder.repair import RepairMetrics, release_half_written
from tests.kube.harness import KubeHarness, claim


def with_finalizer(name: str, *, allocated: bool = False) -> dict[str, object]:
    obj = claim(name)
    obj["metadata"]["finalizers"] = [FINALIZER, "example.com/other"]
    if allocated:
        obj["status"] = {"allocation": {"devices": {"results": []}}}
    return obj


async def test_only_a_finalizer_without_an_allocation_is_released(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        assert h.client is not None
        h.server.create("resourceclaims", with_finalizer("half"))
        h.server.create("resourceclaims", with_finalizer("allocated", allocated=True))
        h.server.create("resourceclaims", claim("plain"))
        metrics = RepairMetrics(h.registry)
        assert await release_half_written(h.client, metrics=metrics) == 1
        assert h.server.get("resourceclaims", "half", "default")["metadata"]["finalizers"] == [
            "example.com/other"]
        assert FINALIZER in h.server.get("resourceclaims", "allocated",
                                         "default")["metadata"]["finalizers"]
        assert h.metric("drax_bind_half_written_released_total") == 1
        assert await release_half_written(h.client, metrics=metrics) == 0


async def test_a_claim_written_meanwhile_is_left_alone(tmp_path: Path) -> None:
    async with KubeHarness(tmp_path) as h:
        assert h.client is not None
        h.server.create("resourceclaims", with_finalizer("half"))
        faults = h.server.faults
        faults.write_period, faults.write_kinds = 1, ("409",)  # someone writes first
        assert await release_half_written(h.client, metrics=RepairMetrics(h.registry)) == 0
        assert FINALIZER in h.server.get("resourceclaims", "half",
                                         "default")["metadata"]["finalizers"]
