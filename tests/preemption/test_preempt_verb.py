"""The extender `preempt` verb over real HTTP, in kube-scheduler's wire format."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.extender import Extender
from app.features import FeatureGates
from app.server import create_app
from tests.extender.cluster import GPU_CLASS, gpu_node
from tests.inventory.objects import exactly, node, template
from tests.preemption.builders import holder, load, preemptor
from tests.preemption.test_fit import busy, with_cpu
from tests.preemption.test_fit import cluster as fit_cluster
from tests.server.harness import running

GPU = "gpu.example.com"
# n1: priorities 1, 0 (root r0), 3, 2 (root r1); n2: 4, 5, 6, 7.
PRIORITIES = {"n1": (1, 0, 3, 2), "n2": (4, 5, 6, 7)}


def cluster() -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [GPU_CLASS, template("want", requests=[
        exactly("gpu", "gpu", count=2)])]
    for name, priorities in PRIORITIES.items():
        objs += [node(name), *gpu_node(name)]
        for i, prio in enumerate(priorities):
            objs += holder(f"{name}-{i}", name, [f"{GPU}/{name}/gpu-{i}"], priority=prio)
    return objs


OBJECTS = cluster()
PODS = {o["metadata"]["name"]: o for o in OBJECTS if o["kind"] == "Pod"}


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    inventory = load(*OBJECTS)
    extender = Extender(inventory, features=FeatureGates(), file_mode=True)
    app = create_app(verbs=extender, ready=lambda: inventory.synced, max_body_bytes=1 << 20)
    with running(app) as url, httpx.Client(base_url=url, timeout=30) as c:
        yield c


def uid(name: str) -> str:
    return f"uid-{name}"


def meta(*names: str, violations: int = 0) -> dict[str, Any]:
    return {"Pods": [{"UID": uid(n)} for n in names], "NumPDBViolations": violations}


def on(node_name: str) -> list[str]:
    return [f"{node_name}-{i}" for i in range(4)]


def ask(client: httpx.Client, body: dict[str, Any], path: str = "/preempt") -> dict[str, Any]:
    r = client.post(path, json=body)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    answer = r.json()
    assert set(answer) == {"NodeNameToMetaVictims"}
    return answer["NodeNameToMetaVictims"]


def names(entry: dict[str, Any]) -> set[str]:
    assert set(entry) == {"Pods", "NumPDBViolations"}
    assert all(set(p) == {"UID"} for p in entry["Pods"])
    return {p["UID"].removeprefix("uid-") for p in entry["Pods"]}


def test_meta_victims_become_the_device_aware_choice(client: httpx.Client) -> None:
    answer = ask(client, {"Pod": preemptor(), "NodeNameToVictims": None,
                          "NodeNameToMetaVictims": {"n1": meta(*on("n1")),
                                                    "n2": meta(*on("n2"))}})
    assert {n: names(v) for n, v in answer.items()} == {
        "n1": {"n1-0", "n1-1"}, "n2": {"n2-0", "n2-1"}}
    assert all(v["NumPDBViolations"] == 0 for v in answer.values())


def test_full_victims_are_answered_as_meta_victims(client: httpx.Client) -> None:
    full = {"Pods": [copy.deepcopy(PODS[n]) for n in on("n1")], "NumPDBViolations": 0}
    answer = ask(client, {"Pod": preemptor(), "NodeNameToMetaVictims": None,
                          "NodeNameToVictims": {"n1": full}}, path="/scheduler/preempt")
    assert {n: names(v) for n, v in answer.items()} == {"n1": {"n1-0", "n1-1"}}


def test_empty_victim_lists_get_victims_from_drax_own_knowledge(client: httpx.Client) -> None:
    answer = ask(client, {"Pod": preemptor(), "NodeNameToVictims": None,
                          "NodeNameToMetaVictims": {"n1": meta(), "n2": None}})
    assert {n: names(v) for n, v in answer.items()} == {
        "n1": {"n1-0", "n1-1"}, "n2": {"n2-0", "n2-1"}}


def test_a_node_whose_offered_pods_free_too_little_is_dropped(client: httpx.Client) -> None:
    answer = ask(client, {"Pod": preemptor(), "NodeNameToVictims": None,
                          "NodeNameToMetaVictims": {"n1": meta("n1-2", "n1-3"),
                                                    "n2": meta("n2-0")}})
    assert {n: names(v) for n, v in answer.items()} == {"n1": {"n1-2", "n1-3"}}


def test_pods_of_another_node_are_never_named(client: httpx.Client) -> None:
    answer = ask(client, {"Pod": preemptor(), "NodeNameToVictims": None,
                          "NodeNameToMetaVictims": {"n2": meta(*on("n1"))}})
    assert answer == {}


def test_offered_pods_drax_cannot_judge_stay(client: httpx.Client) -> None:
    # A pod drax does not know (no claims, so never watched): the scheduler chose
    # it for CPU or memory, so it stays beside the device victims.
    answer = ask(client, {"Pod": preemptor(), "NodeNameToVictims": None,
                          "NodeNameToMetaVictims": {"n1": meta(*on("n1"), "cpu-hog")}})
    assert names(answer["n1"]) == {"n1-0", "n1-1", "cpu-hog"}


def test_higher_priority_pods_are_not_victims(client: httpx.Client) -> None:
    answer = ask(client, {"Pod": preemptor(priority=3), "NodeNameToVictims": None,
                          "NodeNameToMetaVictims": {"n1": meta(), "n2": meta()}})
    assert {n: names(v) for n, v in answer.items()} == {"n1": {"n1-0", "n1-1"}}


def test_a_never_pod_preempts_nothing(client: httpx.Client) -> None:
    answer = ask(client, {"Pod": preemptor(policy="Never"), "NodeNameToVictims": None,
                          "NodeNameToMetaVictims": {"n1": meta(*on("n1"))}})
    assert answer == {}


def test_a_pod_without_claims_keeps_the_scheduler_choice(client: httpx.Client) -> None:
    pod = preemptor()
    pod["spec"]["resourceClaims"] = []
    answer = ask(client, {"Pod": pod, "NodeNameToVictims": None,
                          "NodeNameToMetaVictims": {"n1": meta("n1-3", violations=1),
                                                    "n2": meta()}})
    assert answer == {"n1": meta("n1-3", violations=1)}


def test_bad_preemption_args_are_refused(client: httpx.Client) -> None:
    r = client.post("/preempt", json={"Pod": preemptor(), "NodeNameToMetaVictims": {
        "n1": {"Pods": [{"name": "x"}], "NumPDBViolations": 0}}})
    assert r.status_code == 422 and "needs a UID" in r.json()["error"]


def test_an_unsynced_inventory_refuses_with_503() -> None:
    from app.inventory import Inventory

    inventory = Inventory()
    extender = Extender(inventory, features=FeatureGates(), file_mode=True)
    app = create_app(verbs=extender, ready=lambda: inventory.synced, max_body_bytes=1 << 20)
    with running(app) as url, httpx.Client(base_url=url, timeout=30) as c:
        r = c.post("/preempt", json={"Pod": preemptor(), "NodeNameToMetaVictims": {
            "n1": meta("n1-0")}})
        assert r.status_code == 503 and "not ready" in r.json()["error"]


def test_the_verb_counts_the_pods_nominated_by_every_profile_drax_serves() -> None:
    """A pod of profile drax-gpu (priority 1000, 5 cpus) nominated to "dear"
    leaves a drax preemptor short of cpu there when drax serves both names,
    as their kube-scheduler's one nominator counts it; not otherwise."""
    base = [o for o in fit_cluster() if o.get("metadata", {}).get("name") != "web"]
    nominated = busy("q", "", "5", priority=1000, nominated="dear", scheduler="drax-gpu")
    pod = with_cpu(preemptor(), "4")
    inventory = load(*base, nominated, pod)
    extender = Extender(inventory, features=FeatureGates(), file_mode=True)
    body = {"Pod": pod, "NodeNameToVictims": None,
            "NodeNameToMetaVictims": {"cheap": meta(), "dear": meta()}}
    for schedulers, nodes in ((("drax", "drax-gpu"), ["cheap"]),
                              (("drax",), ["cheap", "dear"])):
        app = create_app(verbs=extender, ready=lambda: inventory.synced,
                         max_body_bytes=1 << 20, schedulers=schedulers)
        with running(app) as url, httpx.Client(base_url=url, timeout=30) as c:
            assert sorted(ask(c, body)) == nodes, schedulers
