"""filter and prioritize under their deadline: a search that would
run past it answers with Error (prioritize: no scores) in time, keeps what it
computed, and later calls finish the job with the right answer. No timing is
asserted: the deadline is set far below what 2,000 uncomputed nodes take."""

from __future__ import annotations

import httpx

from app.extender import Extender
from app.server.app import create_app
from tests.extender.cluster import GPU_CLASS, extender, gpu_node, load, the_pod
from tests.inventory.objects import claim, exactly, pod

NODES = [f"n{i}" for i in range(2000)]
TINY_DEADLINE = 1e-6


def cluster() -> tuple[Extender, Extender]:
    objs = [GPU_CLASS, claim("c", requests=[exactly("gpu", "gpu", count=2)]),
            pod("p", claims={"g": "c"})]
    objs += [gpu_node(n, roots=["r0"] if i % 2 else ["r0", "r0", "r1", "r1"])
             for i, n in enumerate(NODES)]
    inv = load(*objs)
    return extender(inv, verb_deadline=TINY_DEADLINE), extender(load(*objs))


def test_filter_past_its_deadline_answers_with_error_then_completes() -> None:
    hurried, patient = cluster()
    p = the_pod(hurried._inventory)
    first = hurried.filter(p, NODES)
    assert first.error is not None and "deadline" in first.error, first.error
    assert "after node n0 of 2000" in first.error
    assert first.passed == [] and not first.failed and not first.unresolvable
    # Each attempt keeps what it computed, so the scheduler's retries get there.
    attempts = 1
    answer = hurried.filter(p, NODES)
    while answer.error is not None and attempts <= len(NODES):
        attempts += 1
        answer = hurried.filter(p, NODES)
    expected = patient.filter(p, NODES)
    assert (answer.passed, answer.unresolvable) == (expected.passed, expected.unresolvable)
    assert len(answer.passed) == len(NODES) // 2
    print(f"\nfilter complete after {attempts + 1} attempts")


def test_prioritize_past_its_deadline_gives_no_scores() -> None:
    hurried, patient = cluster()
    p = the_pod(hurried._inventory)
    assert hurried.prioritize(p, NODES) == []
    assert patient.prioritize(p, NODES) != []


async def test_over_http_the_error_is_a_well_formed_answer_and_the_server_stays_healthy(
        ) -> None:
    hurried, _ = cluster()
    app = create_app(verbs=hurried, ready=lambda: True, max_body_bytes=1 << 24)
    body = {"Pod": {"metadata": {"name": "p", "namespace": "default", "uid": "uid-p"},
                    "spec": {"resourceClaims": [{"name": "g", "resourceClaimName": "c"}]}},
            "NodeNames": NODES}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://drax") as c:
        r = await c.post("/filter", json=body)
        assert r.status_code == 200
        assert "deadline" in r.json()["Error"] and not r.json()["NodeNames"]
        assert (await c.get("/healthz")).status_code == 200
        small = await c.post("/filter", json={**body, "NodeNames": NODES[:1]})
        assert small.status_code == 200
