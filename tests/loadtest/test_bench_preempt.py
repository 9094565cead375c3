"""The victim-search benchmark's clusters: every node's shared answer is its
answer alone, the search for the best node alone finds the full search's best,
and the benchmark runs end to end on a small cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.extender import Extender
from app.features import FeatureGates
from app.preemption import NodePreemption, VictimSearch
from app.preemption.held import held_index
from loadtest.bench_preempt import (
    PRIORITIES,
    Searches,
    Turnover,
    full_cluster,
    inventory_of,
    main,
)

NODE_KINDS = ("Node", "ResourceSlice", "Pod", "ResourceClaim")


def alone(objs: list[dict[str, Any]], node: str) -> list[dict[str, Any]]:
    """The cluster with `node` the only node: its slices, its pods and their
    claims, and everything that is not per node."""
    pods = [o for o in objs if o["kind"] == "Pod" and o["spec"].get("nodeName") == node]
    claims = {c["resourceClaimName"] for p in pods for c in p["spec"]["resourceClaims"]}
    return [o for o in objs if o["kind"] not in NODE_KINDS
            or (o["kind"] == "Node" and o["metadata"]["name"] == node)
            or (o["kind"] == "ResourceSlice" and o["spec"].get("nodeName") == node)
            or (o["kind"] == "Pod" and (o in pods or not o["spec"].get("nodeName")))
            or (o["kind"] == "ResourceClaim" and o["metadata"]["name"] in claims)]


def answer(found: NodePreemption) -> tuple[Any, ...]:
    return (sorted(v.pod.name for v in found.victims), found.score,
            sorted(r.device_id for ca in found.allocation for r in ca.allocation.results))


def search(objs: list[dict[str, Any]], mode: str, *, best_only: bool = False) -> Any:
    inv = inventory_of(objs)
    ext = Extender(inv, features=FeatureGates(), mode=mode, file_mode=True)
    return VictimSearch.of(ext).search(inv.pod("default/preemptor"), best_only=best_only)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6), st.booleans(), st.sampled_from(["allocator", "advisor"]),
       st.sampled_from(list(PRIORITIES)))
def test_each_node_gets_the_answer_it_gets_alone(seed: int, varied: bool, mode: str,
                                                 priorities: str) -> None:
    objs = full_cluster(nodes=8, varied=varied, priorities=priorities, seed=seed)
    plan = search(objs, mode)
    best = search(objs, mode, best_only=True).best
    assert plan.best is not None and best is not None
    assert (best.node, answer(best)) == (plan.best.node, answer(plan.best))
    found = {n.node: n for n in plan.nodes}
    for node in (o["metadata"]["name"] for o in objs if o["kind"] == "Node"):
        single = search(alone(objs, node), mode)
        assert (node in found) == bool(single.nodes), (plan.refused.get(node), single.refused)
        if single.best is not None:
            assert answer(found[node]) == answer(single.best)
        else:
            assert plan.refused[node] == single.refused[node]


def test_a_tenth_of_nodes_changed_rebuilds_their_holdings_alone() -> None:
    # The benchmark's changed row: a pod replaced on 2 of 20 nodes, as the
    # watch applies it, has the next search rebuild those nodes' holdings and
    # reuse every other node's.
    objs = full_cluster(nodes=20, varied=True)
    searches = Searches.of(inventory_of(objs))
    inv, index = searches.inventory, held_index(searches.inventory)

    def helds() -> dict[str, Any]:
        return {n: index.of(inv.node_state(n).view, inv.occupants.occupancy(n))
                for n in searches.names}

    searches.search_first(False)()()
    before, built = helds(), index.built
    assert built == 20
    turnover = Turnover(inv, objs, priorities="random")
    rebuilt: list[int] = []
    make = searches.search_changed(turnover, 2, rebuilt)
    call = make()
    changed = set(turnover.last)
    plan = call()
    assert rebuilt == [2] and index.built == built + 2 and len(changed) == 2
    after = helds()
    assert {n for n in searches.names if after[n] is not before[n]} == changed
    # the replacing pods are the candidates the search reads on those nodes
    for node in changed:
        names = {c.key for n in plan.nodes if n.node == node for c in n.candidates}
        assert any("-r1" in name for name in names), names


def test_the_benchmark_runs_and_records(tmp_path: Path) -> None:
    out = tmp_path / "victim-search.json"
    assert main(["--nodes", "6", "--runs", "1", "--json", str(out)]) == 0
    doc = orjson.loads(out.read_bytes())
    assert [t["met"] for t in doc["targets"]] and doc["format"] == "figures"
    facts = doc["tables"][1]["rows"]
    assert [row[0] for row in facts] == ["uniform, random", "varied, random",
                                         "uniform, 3 levels", "varied, 3 levels"]
    assert len(doc["targets"]) == 12
    # per cluster: the best node, every node, and every node after churn, each
    # measured from its own row of the timings
    rows = {(row[0], row[1]): row[3] for row in doc["tables"][0]["rows"]}
    threes = [doc["targets"][i:i + 3] for i in range(0, len(doc["targets"]), 3)]
    for cluster, targets in zip(facts, threes, strict=True):
        assert [f"{t['measured']:.1f}" for t in targets] == [
            rows[(cluster[0], "best node, first")], rows[(cluster[0], "every node, first")],
            rows[(cluster[0], "every node, first, a tenth of nodes changed")]]
        assert "a tenth of the nodes changed" in targets[2]["target"]
        assert "1 of 6 nodes" in targets[2]["note"]
