"""The search itself: objectives, the step budget, selector caching, injected
matchers, share IDs and the wording of reasons."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from app.allocator import AllocatedState, allocate
from app.cel import CelEvalError
from app.features import FeatureGates
from app.model import Device, parse_object
from tests.allocator.helpers import (
    claim,
    dev,
    first,
    match,
    node_obj,
    node_view,
    parse_classes,
    req,
    sl,
    sub,
)
from tests.allocator.runner import DEFAULT_CLASSES, INFEASIBLE, Case, run, summary, verify


@dataclass
class ByWeight:
    """Score = sum of the `weight` attribute of the picked devices."""

    first_fit: bool = False
    perfect: float | None = None
    calls: int = 0

    def score(self, picks: Sequence[Device]) -> float:
        self.calls += 1
        return float(sum(p.attributes["driver-a/weight"].value for p in picks))

    def is_perfect(self, score: float) -> bool:
        return self.perfect is not None and score >= self.perfect


WEIGHTED = sl("s", [dev(f"d-{i}", {"weight": w, "pair": p}) for i, (w, p) in
                    enumerate([(1, "a"), (5, "b"), (2, "a"), (7, "b"), (3, "c")])])


def test_first_fit_objective_only_scores_the_upstream_answer() -> None:
    objective = ByWeight(first_fit=True)
    outcome = verify(Case("x", claims=[claim("c", req("r", count=2))], slices=[WEIGHTED],
                          objective=objective, expect=[["r:pool-1/d-0", "r:pool-1/d-1"]]))
    assert outcome.score == 6.0
    assert objective.calls == 1


def test_no_objective_means_no_score() -> None:
    outcome = verify(Case("x", claims=[claim("c", req("r"))], slices=[WEIGHTED],
                          expect=[["r:pool-1/d-0"]]))
    assert outcome.score is None


def test_best_mode_returns_highest_score() -> None:
    outcome = verify(Case("x", claims=[claim("c", req("r", count=2))], slices=[WEIGHTED],
                          objective=ByWeight(), expect=[["r:pool-1/d-1", "r:pool-1/d-3"]]))
    assert outcome.score == 12.0


def test_best_mode_respects_constraints() -> None:
    outcome = verify(Case("x", claims=[claim("c", req("r", count=2),
                                             constraints=[match("driver-a/pair")])],
                          slices=[WEIGHTED], objective=ByWeight(),
                          expect=[["r:pool-1/d-1", "r:pool-1/d-3"]]))
    assert outcome.score == 12.0
    outcome = verify(Case("x", claims=[claim("c", req("r", count=2, selectors=[
        'device.attributes["driver-a"].pair != "b"']), constraints=[match("driver-a/pair")])],
                          slices=[WEIGHTED], objective=ByWeight(),
                          expect=[["r:pool-1/d-0", "r:pool-1/d-2"]]))


def test_best_mode_stops_when_perfect() -> None:
    full = run(Case("x", claims=[claim("c", req("r", count=2))], slices=[WEIGHTED],
                    objective=ByWeight()))
    early = run(Case("x", claims=[claim("c", req("r", count=2))], slices=[WEIGHTED],
                     objective=ByWeight(perfect=6.0)))
    assert summary(early) == [["r:pool-1/d-0", "r:pool-1/d-1"]]
    assert early.steps < full.steps


def test_best_mode_keeps_the_first_subrequest_choice() -> None:
    # The first solution uses subrequest "one"; "two" would score higher but
    # firstAvailable means "one" wins whenever it can be satisfied.
    outcome = verify(Case("x", claims=[claim("c", first("r", sub("one"), sub("two", count=2)))],
                          slices=[WEIGHTED], objective=ByWeight(),
                          expect=[["r/one:pool-1/d-3"]]))
    assert outcome.score == 7.0


def test_best_mode_across_claims() -> None:
    verify(Case("x", claims=[claim("c1", req("r")), claim("c2", req("r"))], slices=[WEIGHTED],
                objective=ByWeight(), expect=[["r:pool-1/d-1"], ["r:pool-1/d-3"]]))


def _exhausting() -> Case:
    # 12 devices, 6 needed with matchAttribute, only 5 share a value: every
    # combination is tried before giving up.
    devices = [dev(f"d-{i:02}", {"v": "same" if i < 5 else f"v{i}"}) for i in range(12)]
    return Case("x", claims=[claim("c", req("r", count=6), constraints=[match("driver-a/v")])],
                slices=[sl("s", devices)])


def test_exhaustive_search_within_budget_is_infeasible() -> None:
    outcome = run(_exhausting())
    assert not outcome.feasible and outcome.error is None
    assert outcome.reason is not None and "matchAttribute driver-a/v" in outcome.reason


def test_first_fit_budget_gives_up_with_reason() -> None:
    case = _exhausting()
    case.step_budget = 50
    outcome = run(case)
    assert not outcome.feasible and outcome.error is None
    assert outcome.reason is not None
    assert outcome.reason.startswith("gave up after 50 steps (step budget 50)")


def test_best_mode_budget_returns_best_so_far() -> None:
    slices = [sl("s", [dev(f"d-{i:02}", {"weight": i}) for i in range(30)])]
    case = Case("x", claims=[claim("c", req("r", count=4))], slices=slices,
                objective=ByWeight(), step_budget=40)
    outcome = run(case)
    assert outcome.feasible
    assert outcome.steps == 40
    unbounded = run(Case("x", claims=[claim("c", req("r", count=4))], slices=slices,
                         objective=ByWeight()))
    assert unbounded.score == 26 + 27 + 28 + 29
    assert outcome.score is not None and outcome.score < unbounded.score


def test_steps_are_reported() -> None:
    outcome = run(Case("x", claims=[claim("c", req("r"))], slices=[WEIGHTED]))
    assert outcome.steps == 1


def test_selectors_are_evaluated_once_per_device_and_expression() -> None:
    calls: Counter[tuple[str, str]] = Counter()

    def matches(expression: str, device: Device) -> bool:
        calls[(expression, device.name)] += 1
        return True

    claims = [parse_object("ResourceClaim", claim(
        "c", req("a", "any", count=2, selectors=["s1"]), req("b", "any", selectors=["s1"]),
        constraints=[match("driver-a/pair", "a")]))]
    outcome = allocate(claims, node_view=node_view([WEIGHTED], node_obj()),
                       classes=parse_classes(DEFAULT_CLASSES), allocated=AllocatedState(),
                       features=FeatureGates(), selector_matches=matches)
    assert outcome.feasible
    assert calls and max(calls.values()) == 1


def test_injected_class_matcher_decides_class_membership() -> None:
    claims = [parse_object("ResourceClaim", claim("c", req("r", "gpu")))]
    outcome = allocate(claims, node_view=node_view([WEIGHTED], node_obj()),
                       classes=parse_classes(DEFAULT_CLASSES), allocated=AllocatedState(),
                       features=FeatureGates(),
                       class_matcher=lambda cls, device: device.name == "d-4")
    assert [r.device for r in outcome.claims[0].allocation.results] == ["d-4"]


def test_cel_error_from_injected_matcher_is_an_error() -> None:
    def broken(expression: str, device: Device) -> bool:
        raise CelEvalError(f"selector {expression!r} on device {device.id}: no such key: x")

    claims = [parse_object("ResourceClaim", claim("c", req("r", "any", selectors=["e"])))]
    outcome = allocate(claims, node_view=node_view([WEIGHTED], node_obj()),
                       classes=parse_classes(DEFAULT_CLASSES), allocated=AllocatedState(),
                       features=FeatureGates(), selector_matches=broken)
    assert not outcome.feasible
    assert outcome.error == ("claim default/c, request r: selector 'e' on device "
                             "driver-a/pool-1/d-0: no such key: x")


def test_default_share_ids_are_fresh_uuids() -> None:
    shared = sl("s", [dev("a", capacity={"bw": "10"}, allowMultipleAllocations=True)])
    claims = [parse_object("ResourceClaim", claim(f"c{i}", req("r", capacity={"bw": "1"})))
              for i in range(2)]
    outcome = allocate(claims, node_view=node_view([shared], node_obj()),
                       classes=parse_classes(DEFAULT_CLASSES), allocated=AllocatedState(),
                       features=FeatureGates())
    ids = [c.allocation.results[0].share_id for c in outcome.claims]
    assert all(i is not None and uuid.UUID(i).version == 4 for i in ids)
    assert ids[0] != ids[1]


def test_reason_names_request_class_selectors_free_and_needed() -> None:
    gpus = sl("s", [dev(f"gpu-{i}", {"type": "gpu"}) for i in range(8)])
    held = claim("held", req("x", count=7), allocation={"devices": {"results": [
        {"request": "x", "driver": "driver-a", "pool": "pool-1", "device": f"gpu-{i}"}
        for i in range(7)]}})
    verify(Case("x", claims=[claim("train-0-gpus", req("gpu", count=2, selectors=[
        'device.attributes["driver-a"].type == "gpu"']))], slices=[gpus], allocated=[held],
        expect=INFEASIBLE, reason=[
            'claim default/train-0-gpus: request "gpu": 8 devices match class gpu, 8 pass '
            "the request selectors, 1 free; 2 needed (7 allocated)"]))


def test_outcome_is_written_as_kubernetes_status() -> None:
    outcome = verify(Case("x", claims=[claim("c", req("r"))],
                          slices=[sl("s", [dev("d")], all_nodes=True)], expect=[["r:pool-1/d"]]))
    assert outcome.claims[0].claim_key == "default/c"
    assert outcome.claims[0].allocation.to_dict() == {"devices": {"results": [
        {"request": "r", "driver": "driver-a", "pool": "pool-1", "device": "d"}]}}


def test_thirty_two_claims_of_thirty_two_devices() -> None:
    devices = [dev(f"d-{i:04}") for i in range(32 * 32)]
    claims = [claim(f"c{i:02}", req("r", mode="All", selectors=[
        f'device.attributes["driver-a"].group == {i}'])) for i in range(32)]
    grouped = [dev(d["name"], {"group": i // 32}) for i, d in enumerate(devices)]
    outcome = verify(Case("x", claims=claims, slices=[sl("s", grouped)],
                          expect=[[f"r:pool-1/d-{i * 32 + j:04}" for j in range(32)]
                                  for i in range(32)]))
    assert outcome.steps == 32 * 32


# Two claims that compete for one PCIe root: claim-0 wants any 2 devices, claim-1 prefers all
# devices on PCIe root pci-2, else any 1. First fit hands claim-0 the pci-2
# devices (published first) and claim-1 its second choice.
PCI = sl("s", [dev(f"g-{i}", {"weight": 1, "pcieRoot": root})
               for i, root in enumerate(["pci-2", "pci-2", "pci-1", "pci-1"])])
PCI_CLAIMS = [claim("claim-0", req("r", count=2)),
              claim("claim-1", first("r", sub("all-pci-2", mode="All",
                                              selectors=['device.attributes["driver-a"]'
                                                         '.pcieRoot == "pci-2"']),
                                     sub("any")))]


def test_first_fit_leaves_claim_1_its_second_choice_as_upstream() -> None:
    verify(Case("x", claims=PCI_CLAIMS, slices=[PCI], objective=ByWeight(first_fit=True),
                expect=[["r:pool-1/g-0", "r:pool-1/g-1"], ["r/any:pool-1/g-2"]]))


def test_best_mode_gives_claim_1_its_first_choice() -> None:
    verify(Case("x", claims=PCI_CLAIMS, slices=[PCI], objective=ByWeight(),
                expect=[["r:pool-1/g-2", "r:pool-1/g-3"],
                        ["r/all-pci-2:pool-1/g-0", "r/all-pci-2:pool-1/g-1"]]))


def test_best_mode_prefers_earlier_claims_choices_first() -> None:
    # claim-0's first choice (any 3) and claim-1's first choice (2 on pci-2)
    # cannot both fit in 4 devices: claim-0, earlier in the pod, keeps its first.
    claims = [claim("claim-0", first("r", sub("three", count=3), sub("one"))),
              claim("claim-1", first("r", sub("two", count=2), sub("one")))]
    verify(Case("x", claims=claims, slices=[PCI], objective=ByWeight(),
                expect=[["r/three:pool-1/g-0", "r/three:pool-1/g-1", "r/three:pool-1/g-2"],
                        ["r/one:pool-1/g-3"]]))


def test_best_mode_ranks_topology_under_the_earliest_choices() -> None:
    weighted = sl("s", [dev(f"g-{i}", {"weight": w, "pcieRoot": root}) for i, (w, root) in
                        enumerate([(1, "pci-2"), (1, "pci-2"), (1, "pci-1"), (9, "pci-1"),
                                   (5, "pci-1")])])
    verify(Case("x", claims=PCI_CLAIMS, slices=[weighted], objective=ByWeight(),
                expect=[["r:pool-1/g-3", "r:pool-1/g-4"],
                        ["r/all-pci-2:pool-1/g-0", "r/all-pci-2:pool-1/g-1"]]))


def test_best_mode_keeps_the_first_fit_when_a_later_device_errors() -> None:
    # Upstream's first fit stops at d-0 and never evaluates the selector on
    # d-3; best mode would, so it falls back to the first fit, not an error.
    def errors_on_d3(expression: str, device: Device) -> bool:
        if device.name == "d-3":
            raise CelEvalError(f"selector {expression!r} on device {device.id}: no such key")
        return True

    claims = [parse_object("ResourceClaim", claim("c", req("r", "any", selectors=["e"])))]
    common = dict(node_view=node_view([WEIGHTED], node_obj()),
                  classes=parse_classes(DEFAULT_CLASSES), allocated=AllocatedState(),
                  features=FeatureGates(), selector_matches=errors_on_d3)
    best = allocate(claims, objective=ByWeight(), **common)  # type: ignore[arg-type]
    first = allocate(claims, objective=ByWeight(first_fit=True), **common)  # type: ignore[arg-type]
    assert best.feasible and best.claims == first.claims
    assert [r.device for r in best.claims[0].allocation.results] == ["d-0"]


def _never(*args: object) -> bool:
    raise AssertionError(f"matcher asked about {args}")


def test_known_matches_answer_by_view_position_without_the_matchers() -> None:
    # pool-0 is invalid and keeps its devices (as the inventory's pool views do),
    # so the search skips them but the known columns count them: d-3 of pool-1
    # is position 5
    view = node_view([sl("bad", [dev("x"), dev("y")], pool="pool-0", count=2), WEIGHTED],
                     node_obj())
    complete = node_view([sl("bad", [dev("x"), dev("y")], pool="pool-0")], node_obj())
    view = replace(view, pools=(replace(view.pools[0], devices=complete.pools[0].devices),
                                view.pools[1]))
    assert not view.pools[0].complete and len(view.pools[0].devices) == 2
    classes = parse_classes(DEFAULT_CLASSES)
    asked: list[tuple[str, tuple[str, ...]]] = []

    def known(device_class: object, selectors: tuple[str, ...]) -> Sequence[bool | str]:
        asked.append((getattr(device_class, "name", ""), selectors))
        return [True, True, False, False, False, True, False]

    claims = [parse_object("ResourceClaim", claim("c", req("r", "gpu", selectors=["s1"])))]
    outcome = allocate(claims, node_view=view, classes=classes, allocated=AllocatedState(),
                       features=FeatureGates(), class_matcher=_never, selector_matches=_never,
                       known_matches=known)
    assert [r.device for r in outcome.claims[0].allocation.results] == ["d-3"]
    assert asked == [("gpu", ("s1",))]


def test_known_match_errors_and_unknown_kinds_go_through_the_matchers() -> None:
    classes = parse_classes(DEFAULT_CLASSES)

    def broken(expression: str, device: Device) -> bool:
        raise CelEvalError(f"selector {expression!r} on device {device.id}: no such key: x")

    claims = [parse_object("ResourceClaim", claim("c", req("r", "any", selectors=["e"])))]
    outcome = allocate(claims, node_view=node_view([WEIGHTED], node_obj()), classes=classes,
                       allocated=AllocatedState(), features=FeatureGates(),
                       selector_matches=broken,
                       known_matches=lambda cls, selectors: ["CelEvalError: ..."] * 5)
    assert outcome.error == ("claim default/c, request r: selector 'e' on device "
                             "driver-a/pool-1/d-0: no such key: x")
    unknown = allocate(claims[:1], node_view=node_view([WEIGHTED], node_obj()), classes=classes,
                       allocated=AllocatedState(), features=FeatureGates(),
                       selector_matches=lambda expression, device: device.name == "d-2",
                       known_matches=lambda cls, selectors: None)
    assert [r.device for r in unknown.claims[0].allocation.results] == ["d-2"]
