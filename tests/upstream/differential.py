"""Allocator differential run: drax against upstream's structured allocator.

For each generated scenario (tests/upstream/scenarios.py) the upstream oracle
binary answers the `allocate` line, and drax answers the same objects through
its real inventory and allocator in both modes:

- advisor mode (first fit) must give exactly upstream's answer: the same
  devices for the same requests, or the same verdict (unschedulable, or an
  error; an invalid-pools error is a failed node flagged `invalid_pools`);
- allocator mode (best topology) must agree on the verdict, and its
  allocation must pass `validity.check`.

`python -m tests.upstream.differential --allocator N --seed S` runs N
scenarios and prints one line per mismatch and a summary (`--json FILE`: also
the record that `loadtest/RESULTS.md` renders); the pytest module runs a
CI-sized batch through the same `compare`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.allocator import AllocationOutcome, allocate
from app.features import GATES, FeatureGates
from app.inventory import Inventory, NodeState
from app.model import DeviceClass, ResourceClaim, parse_object
from app.topology import TopologyConfig, make_objective
from loadtest.report import provenance
from tests.upstream.oracle import Oracle
from tests.upstream.scenarios import Scenario, generate
from tests.upstream.validity import check

# The gates as a 1.37.2 kube-scheduler runs them by default, named as upstream.
DEFAULT_FEATURES = {name: spec.default for name, spec in GATES.items()}
_KINDS = ("Node", "ResourceSlice", "DeviceClass", "ResourceClaim")
# drax's step budget: a scenario this small never gets near it, so running out
# would itself be a finding.
_INVALID_POOLS = "invalid resource pools were encountered"


def open_oracle() -> Oracle:
    """The oracle process: the binary named by DRAX_ORACLE, else the cached build."""
    given = os.environ.get("DRAX_ORACLE")
    return Oracle(Path(given) if given else None)


@dataclass(slots=True)
class Drax:
    """drax's answers for one scenario, both modes, and what they were computed from."""

    advisor: AllocationOutcome
    allocator: AllocationOutcome
    claims: list[ResourceClaim]
    state: NodeState
    classes: Mapping[str, DeviceClass]
    features: FeatureGates


def run_drax(scenario: Scenario) -> Drax:
    inventory = Inventory(expected_kinds=_KINDS)
    by_kind: dict[str, list[dict[str, Any]]] = {kind: [] for kind in _KINDS}
    for obj in scenario.objects:
        by_kind[obj["kind"]].append(obj)
    for kind, objs in by_kind.items():
        inventory.replace(kind, objs)
        inventory.mark_synced(kind)
    state = inventory.node_state(scenario.node)
    assert state is not None
    claims: list[ResourceClaim] = [parse_object("ResourceClaim", c) for c in scenario.claims]
    features = FeatureGates().with_overrides(
        {k: v for k, v in scenario.features.items() if k in GATES})
    outcomes = []
    for mode in ("advisor", "allocator"):
        objective = make_objective(node_view=state.view, allocated=state.allocated,
                                   config=TopologyConfig(), mode=mode)
        outcomes.append(allocate(claims, node_view=state.view, classes=inventory.classes,
                                 allocated=state.allocated, features=features,
                                 class_matcher=inventory.class_matcher, objective=objective))
    return Drax(advisor=outcomes[0], allocator=outcomes[1], claims=claims, state=state,
                classes=inventory.classes, features=features)


def verdict_of_upstream(answer: dict[str, Any]) -> str:
    if answer.get("feasible"):
        return "feasible"
    # An error wrapping ErrFailedAllocationOnNode (only "invalid resource
    # pools were encountered" in v0.37.2) comes as `reason` or flagged
    # `failedOnNode`: the scheduler's "unschedulable on this node".
    error, reason = answer.get("error"), answer.get("reason")
    if answer.get("failedOnNode") or str(error or reason or "").startswith(_INVALID_POOLS):
        return "invalid-pools"
    return "error" if error else "unschedulable"


def verdict_of_drax(outcome: AllocationOutcome) -> str:
    if outcome.feasible:
        return "feasible"
    if outcome.error is not None:
        return "error"
    return "invalid-pools" if outcome.invalid_pools else "unschedulable"


def upstream_devices(answer: dict[str, Any]) -> list[list[tuple[str, str, str, str]]]:
    return [[(r["request"], r["driver"], r["pool"], r["device"]) for r in claim]
            for claim in answer.get("results") or []]


def drax_devices(outcome: AllocationOutcome) -> list[list[tuple[str, str, str, str]]]:
    return [[(r.request, r.driver, r.pool, r.device) for r in c.allocation.results]
            for c in outcome.claims]


def compare(scenario: Scenario, answer: dict[str, Any]) -> list[str]:
    """Mismatches between drax and upstream for one scenario ([] when they agree)."""
    drax = run_drax(scenario)
    expected = verdict_of_upstream(answer)
    if expected == "error" and _unreachable_device_error(answer, drax):
        return []  # documented deviation (docs/decisions.md), pinned by the tests
    problems = []
    advisor = verdict_of_drax(drax.advisor)
    if advisor != expected:
        problems.append(f"advisor verdict {advisor} ({drax.advisor.error or drax.advisor.reason})"
                        f", upstream {expected} ({answer.get('error')})")
    elif expected == "feasible" and drax_devices(drax.advisor) != upstream_devices(answer):
        problems.append(f"advisor devices {drax_devices(drax.advisor)}, "
                        f"upstream {upstream_devices(answer)}")
    allocator = verdict_of_drax(drax.allocator)
    if allocator != expected:
        problems.append(f"allocator verdict {allocator} "
                        f"({drax.allocator.error or drax.allocator.reason}), upstream {expected}")
    elif expected == "feasible":
        problems.extend(f"allocator invalid: {p}" for p in check(
            claims=drax.claims, view=drax.state.view, allocated=drax.state.allocated,
            classes=drax.classes, outcome=drax.allocator,
            list_types=drax.features.list_type_attributes))
    return problems


def _unreachable_device_error(answer: dict[str, Any], drax: Drax) -> bool:
    """Upstream's CEL runtime error is on a device of a perDeviceNodeSelection
    slice that this node cannot use: drax leaves such devices out of the
    node's view and never evaluates a selector on them."""
    error = str(answer.get("error"))
    marker = " on device "
    if marker not in error or drax.advisor.error is not None:
        return False
    device_id = error.split(marker, 1)[1].split(":", 1)[0]
    visible = {d.id for p in drax.state.view.pools for d in p.devices}
    return device_id not in visible


def scenarios(count: int, seed: int) -> Iterator[Scenario]:
    for i in range(count):
        yield generate(seed * 1_000_003 + i, features=DEFAULT_FEATURES)


def run(count: int, seed: int, *, oracle: Oracle,
        out: Any = sys.stdout) -> tuple[int, Counter[str]]:
    mismatches = 0
    verdicts: Counter[str] = Counter()
    batch: list[Scenario] = []
    for scenario in scenarios(count, seed):
        batch.append(scenario)
        if len(batch) < 200:
            continue
        mismatches += _check_batch(batch, oracle=oracle, verdicts=verdicts, out=out)
        batch = []
    mismatches += _check_batch(batch, oracle=oracle, verdicts=verdicts, out=out)
    return mismatches, verdicts


def _check_batch(batch: list[Scenario], *, oracle: Oracle, verdicts: Counter[str],
                 out: Any) -> int:
    mismatches = 0
    answers = oracle.batch([s.request() for s in batch]) if batch else []
    for scenario, answer in zip(batch, answers, strict=True):
        verdicts[verdict_of_upstream(answer)] += 1
        problems = compare(scenario, answer)
        if problems:
            mismatches += 1
            print(f"seed {scenario.seed}: " + "; ".join(problems), file=out, flush=True)
    return mismatches


class _Kept:
    """Echoes what is written to `echo` and keeps its lines."""

    def __init__(self, echo: Any) -> None:
        self._echo = echo
        self.lines: list[str] = []

    def write(self, text: str) -> None:
        self._echo.write(text)
        self.lines += [line for line in text.splitlines() if line]

    def flush(self) -> None:
        self._echo.flush()


def record(*, command: str, count: int, seed: int, mismatches: int, verdicts: Mapping[str, int],
           lines: list[str], seconds: float) -> dict[str, Any]:
    """The run in the generic format of `loadtest/report.py`: one target, no
    mismatch, the upstream verdicts the scenarios reached, the mismatches."""
    return {
        "format": "figures", **provenance(command),
        "targets": [{"target": "scenarios where drax and upstream disagree", "goal": "0",
                     "measured": mismatches, "unit": "", "met": mismatches == 0,
                     "note": f"{count:,} scenarios, seed {seed}, {seconds:.0f} s"}],
        "tables": [{"caption": "Upstream's verdicts over the scenarios:",
                    "columns": ["upstream verdict", "scenarios"],
                    "rows": [[v, f"{n:,}"] for v, n in sorted(verdicts.items())]}],
        "notes": [f"mismatch: `{line}`" for line in lines[:_RECORDED_MISMATCHES]]}


_RECORDED_MISMATCHES = 20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.upstream.differential")
    parser.add_argument("--allocator", type=int, required=True, metavar="N",
                        help="number of allocation scenarios")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", metavar="FILE", type=Path,
                        help="also write the run's record (loadtest/results/"
                             "allocator-differential.json)")
    args = parser.parse_args(argv)
    oracle = open_oracle()
    started = time.monotonic()
    kept = _Kept(sys.stdout)
    try:
        mismatches, verdicts = run(args.allocator, args.seed, oracle=oracle, out=kept)
    finally:
        oracle.close()
    seconds = time.monotonic() - started
    print(f"{args.allocator} scenarios (seed {args.seed}), upstream verdicts "
          f"{dict(sorted(verdicts.items()))}, {mismatches} mismatches, {seconds:.0f} s")
    if args.json:
        command = "python -m tests.upstream.differential " + " ".join(
            sys.argv[1:] if argv is None else argv)
        doc = record(command=command, count=args.allocator, seed=args.seed,
                     mismatches=mismatches, verdicts=verdicts, lines=kept.lines,
                     seconds=seconds)
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 1 if mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
