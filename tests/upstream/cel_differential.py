"""CEL differential run: drax's selector engine (`app.cel`) against upstream's DRA CEL.

Each case is one generated expression (tests/upstream/celgen.py) on one
generated device. Upstream answers through the oracle's `cel` op
(k8s.io/dynamic-resource-allocation v0.37.2, cel-go, the scheduler's
StoredExpressions environment and cost limit); drax compiles the same text
with `compile_uncached` and evaluates it on the same device built through its
model parser. Both outcomes are reduced to one verdict (compileError,
runtimeError, costError, true, false); messages may differ, verdicts may not.
Upstream compiles with the DRA gates of the request (`features`; none named
means DRAListTypeAttributes and DRAConsumableCapacity off). The scheduler
compiles in the StoredExpressions environment, which declares every versioned
`device` type and `includes` whatever the gates say, so list-typed
attributes, `includes` and `allowMultipleAllocations` compile and evaluate with
the gates off; drax's engine has no gates and must agree under every
combination (test_cel_differential.py runs each).

The oracle is pipelined: a whole batch of request lines is written (on a
writer thread) before any answer is read, and drax evaluates the batch while
the Go process works on it, so the two processes overlap. `--jobs` splits the
cases over several worker processes, each with its own oracle.

A mismatch is shrunk before it is printed: nodes of the expression are
replaced by their children or by a literal, and attributes are dropped from
the device, while drax and upstream still disagree the same way; the repro
line can be rerun with `--expr/--device`. A mismatch that falls in a
deviation class listed in `DEVIATIONS` (each documented in docs/decisions.md
and pinned by a test) is counted under its name instead.

    python -m tests.upstream.cel_differential --n N --seed S [--from A] [--jobs J]
        [--mismatches FILE]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from app.cel import CelCompileError, CelEvalError, compile_uncached
from app.cel.errors import COST_EXCEEDED
from app.model import Device, parse_object
from tests.upstream.celgen import COSTLY_SHARE, Expr, device, expression, leaf, node
from tests.upstream.oracle import Oracle

VERDICTS: Final = ("compileError", "runtimeError", "costError", "true", "false")
BATCH: Final = 400
SHRINK_ROUNDS: Final = 40
PRINTED_PER_CLASS: Final = 1
PROGRESS: Final = 20_000


@dataclass(slots=True, frozen=True)
class Outcome:
    verdict: str
    detail: str = ""


@dataclass(slots=True)
class Case:
    index: int
    expr: Expr
    device: dict[str, Any]

    @property
    def text(self) -> str:
        return self.expr.render()

    def request(self, text: str | None = None, device_json: dict[str, Any] | None = None,
                features: dict[str, bool] | None = None) -> dict[str, Any]:
        return {"op": "cel", "expression": self.text if text is None else text,
                "device": self.device if device_json is None else device_json,
                "features": features or {}}


def case(seed: int, index: int, *, costly: float = COSTLY_SHARE) -> Case:
    rng = random.Random(seed * 1_000_003 + index)
    return Case(index, expression(rng, costly=costly), device(rng))


# ----------------------------------------------------------------------------- verdicts


def upstream_outcome(answer: dict[str, Any]) -> Outcome:
    if "result" in answer:
        return Outcome("true" if answer["result"] else "false")
    for verdict in ("compileError", "runtimeError", "costError"):
        if verdict in answer:
            return Outcome(verdict, str(answer[verdict]))
    return Outcome("oracleError", str(answer.get("error", answer)))


def model_device(raw: dict[str, Any]) -> Device:
    """The oracle's device shape as drax's model Device (through the real parser)."""
    entry: dict[str, Any] = {"name": "dev-0", "attributes": raw["attributes"],
                             "capacity": {k: {"value": v} for k, v in raw["capacity"].items()}}
    if raw.get("allowMultipleAllocations"):
        entry["allowMultipleAllocations"] = True
    slice_obj = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                 "metadata": {"name": "slice-0"},
                 "spec": {"driver": raw["driver"], "nodeName": "node-0",
                          "pool": {"name": "pool-0", "generation": 1, "resourceSliceCount": 1},
                          "devices": [entry]}}
    return parse_object("ResourceSlice", slice_obj).devices[0]  # type: ignore[no-any-return]


def drax_outcome(text: str, device_json: dict[str, Any]) -> Outcome:
    try:
        selector = compile_uncached(text)
    except CelCompileError as exc:
        return Outcome("compileError", str(exc))
    try:
        dev = model_device(device_json)
        return Outcome("true" if selector.matches(dev) else "false")
    except CelEvalError as exc:
        detail = str(getattr(exc, "detail", exc))
        return Outcome("costError" if detail == COST_EXCEEDED else "runtimeError", detail)
    except Exception as exc:  # a crash is a finding, reported as its own verdict
        return Outcome("crash", f"{type(exc).__name__}: {exc}")


# ----------------------------------------------------------------------------- deviations


@dataclass(slots=True, frozen=True)
class Deviation:
    """A documented class of disagreement (docs/decisions.md, CEL section)."""

    name: str
    matches: Callable[[str, Outcome, Outcome], bool]


def _format_missing(text: str, drax: Outcome, upstream: Outcome) -> bool:
    return drax.verdict == "compileError" and "undeclared reference to 'format'" in drax.detail


def _cost_model(text: str, drax: Outcome, upstream: Outcome) -> bool:
    return "costError" in (drax.verdict, upstream.verdict)


def _upstream_panic(text: str, drax: Outcome, upstream: Outcome) -> bool:
    return upstream.verdict == "oracleError" and upstream.detail.startswith("panic:")


DEVIATIONS: Final[tuple[Deviation, ...]] = (
    # drax leaves the strings library's `format` out (docs/decisions.md, CEL engine:
    # "Left out"); a selector using it fails to compile instead of running.
    Deviation("string.format not implemented", _format_missing),
    # drax charges each comprehension step 1 + its body's static size, not cel-go's
    # per-node runtime tracker: both stop runaway nests at 10^6, but near the limit
    # one may stop where the other finishes (docs/decisions.md, CEL engine: "Cost").
    Deviation("cost accounting near the limit", _cost_model),
    # cel-go panics (the oracle reports it) on an optional map-literal entry whose
    # value fails (`{?'a': <error>}`); drax reports the runtime error.
    Deviation("upstream panics", _upstream_panic),
)


def deviation_of(text: str, drax: Outcome, upstream: Outcome) -> str | None:
    for dev in DEVIATIONS:
        if dev.matches(text, drax, upstream):
            return dev.name
    return None


# ----------------------------------------------------------------------------- running


@dataclass(slots=True)
class Mismatch:
    case: Case
    drax: Outcome
    upstream: Outcome

    @property
    def key(self) -> str:
        return f"drax {self.drax.verdict} / upstream {self.upstream.verdict}"


@dataclass(slots=True)
class Tally:
    verdicts: Counter[str] = field(default_factory=Counter)
    deviations: Counter[str] = field(default_factory=Counter)
    mismatches: list[Mismatch] = field(default_factory=list)
    cases: int = 0

    def merge(self, other: Tally) -> None:
        self.verdicts += other.verdicts
        self.deviations += other.deviations
        self.mismatches += other.mismatches
        self.cases += other.cases


def batches(seed: int, indices: range, *, costly: float,
            size: int = BATCH) -> Iterator[list[Case]]:
    batch: list[Case] = []
    for i in indices:
        batch.append(case(seed, i, costly=costly))
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def run(seed: int, indices: range, *, oracle: Oracle, progress: int = 0,
        costly: float = COSTLY_SHARE, features: dict[str, bool] | None = None) -> Tally:
    """Check every case in `indices`; the oracle works on batch k+1 while drax does batch k.
    With `progress`, a line on stderr every `progress` cases (long runs stay observable).
    `features` are the scheduler's DRA gates upstream compiles with (a gate not named is
    off); drax's engine has no gates, as the scheduler-side compiler ignores them."""
    tally = Tally()
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = None
        for batch in batches(seed, indices, costly=costly):
            future = pool.submit(oracle.batch, [c.request(features=features) for c in batch])
            if pending is not None:
                _check(*pending, tally=tally)
                if progress and tally.cases % progress < BATCH:
                    print(f"progress {indices.start}::{indices.step}: {tally.cases} cases, "
                          f"{len(tally.mismatches)} mismatches, "
                          f"{time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
            pending = (batch, future.result)
        if pending is not None:
            _check(*pending, tally=tally)
    return tally


def _check(batch: list[Case], answers: Callable[[], list[dict[str, Any]]], *,
           tally: Tally) -> None:
    mine = [drax_outcome(c.text, c.device) for c in batch]
    for c, drax, answer in zip(batch, mine, answers(), strict=True):
        upstream = upstream_outcome(answer)
        tally.cases += 1
        tally.verdicts[upstream.verdict] += 1
        if drax.verdict == upstream.verdict:
            continue
        dev = deviation_of(c.text, drax, upstream)
        if dev is not None:
            tally.deviations[dev] += 1
        else:
            tally.mismatches.append(Mismatch(c, drax, upstream))


def _worker(args: tuple[int, int, int, int, float]) -> Tally:
    seed, start, stop, step, costly = args
    oracle = open_oracle()
    try:
        return run(seed, range(start, stop, step), oracle=oracle, progress=PROGRESS,
                   costly=costly)
    finally:
        oracle.close()


def run_parallel(count: int, seed: int, *, jobs: int, start: int = 0,
                 costly: float = COSTLY_SHARE) -> Tally:
    """Cases `start` .. `start + count - 1` of `seed`: a run split into parts
    (`--from`) checks exactly the cases of the whole, so the parts' tallies add up."""
    stop = start + count
    if jobs <= 1:
        return _worker((seed, start, stop, 1, costly))
    tally = Tally()
    ctx = multiprocessing.get_context("spawn")
    parts = [(seed, start + k, stop, jobs, costly) for k in range(jobs)]
    with ctx.Pool(jobs) as pool:
        for part in pool.imap_unordered(_worker, parts):
            tally.merge(part)
    return tally


def open_oracle() -> Oracle:
    given = os.environ.get("DRAX_ORACLE")
    return Oracle(Path(given) if given else None)


# ----------------------------------------------------------------------------- shrinking


def _replace(root: Expr, target: Expr, new: Expr) -> Expr:
    if root is target:
        return new
    parts = tuple(_replace(p, target, new) if isinstance(p, Expr) else p for p in root.parts)
    return Expr(root.type, parts)


_SIMPLE: Final = {"bool": "true", "int": "1", "uint": "1u", "double": "1.0", "string": "'a'",
                  "bytes": "b'a'", "null": "null", "dyn": "dyn(1)"}


def _reductions(expr: Expr) -> Iterator[Expr]:
    """Expressions one step simpler than `expr` (a node by a child or a literal)."""
    for target in (expr, *expr.descendants()):
        for child in target.children():
            yield _replace(expr, target, child)
        simple = _SIMPLE.get(target.type)
        if simple is not None and target.render() != simple:
            yield _replace(expr, target, leaf(target.type, simple))
        if target.size() > 2:
            yield _replace(expr, target, node(target.type, "dyn(", leaf("int", "1"), ")"))


def shrink(mismatch: Mismatch, *, oracle: Oracle) -> Mismatch:
    """The smallest expression and device found that still disagree the same way."""
    best = mismatch
    same = (mismatch.drax.verdict, mismatch.upstream.verdict)
    for _ in range(SHRINK_ROUNDS):
        candidates: list[tuple[Expr, dict[str, Any]]] = []
        seen = {best.case.text}
        for reduced in _reductions(best.case.expr):
            text = reduced.render()
            if text not in seen and len(text) < len(best.case.text):
                seen.add(text)
                candidates.append((reduced, best.case.device))
        dev = best.case.device
        for section in ("attributes", "capacity"):
            for name in dev[section]:
                smaller = {**dev, section: {k: v for k, v in dev[section].items() if k != name}}
                candidates.append((best.case.expr, smaller))
        if not candidates:
            break
        answers = oracle.batch([best.case.request(e.render(), d) for e, d in candidates])
        improved = None
        for (e, d), answer in zip(candidates, answers, strict=True):
            upstream = upstream_outcome(answer)
            drax = drax_outcome(e.render(), d)
            if (drax.verdict, upstream.verdict) == same:
                improved = Mismatch(Case(best.case.index, e, d), drax, upstream)
                break
        if improved is None:
            break
        best = improved
    return best


def report(tally: Tally, *, seed: int, oracle: Oracle | None, out: Any = sys.stdout) -> None:
    classes: Counter[str] = Counter(m.key for m in tally.mismatches)
    printed: Counter[str] = Counter()
    for m in tally.mismatches:
        if printed[m.key] >= PRINTED_PER_CLASS:
            continue
        printed[m.key] += 1
        small = shrink(m, oracle=oracle) if oracle is not None else m
        print(f"MISMATCH case {seed}/{m.case.index}: {small.key}\n"
              f"  expression: {small.case.text}\n"
              f"  device:     {json.dumps(small.case.device, separators=(',', ':'))}\n"
              f"  drax:       {small.drax.detail[:300]}\n"
              f"  upstream:   {small.upstream.detail[:300]}\n"
              f"  original:   {m.case.text}", file=out, flush=True)
    print(f"mismatch classes: {dict(classes.most_common())}", file=out)
    print(f"deviations (documented): {dict(tally.deviations.most_common())}", file=out)


def write_mismatches(tally: Tally, path: Path) -> None:
    with path.open("w") as out:
        for m in sorted(tally.mismatches, key=lambda m: m.case.index):
            out.write(json.dumps({"index": m.case.index, "drax": m.drax.verdict,
                                  "upstream": m.upstream.verdict, "expression": m.case.text,
                                  "drax_detail": m.drax.detail[:300],
                                  "upstream_detail": m.upstream.detail[:300]}) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.upstream.cel_differential")
    parser.add_argument("--n", dest="count", type=int, default=20_000, help="expressions to run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--from", dest="start", type=int, default=0,
                        help="first case index (a long run split into parts)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (one oracle each)")
    parser.add_argument("--costly", type=float, default=COSTLY_SHARE,
                        help="share of expressions near the cost limit (CI: the default)")
    parser.add_argument("--mismatches", type=Path,
                        help="write every mismatch (index, verdicts, expression) as JSON lines")
    parser.add_argument("--expr", help="check one expression (with --device) and print both")
    parser.add_argument("--device", default='{"driver":"dra.example.com","attributes":{},'
                                            '"capacity":{}}')
    args = parser.parse_args(argv)
    if args.expr is not None:
        one = json.loads(args.device)
        with open_oracle() as oracle:
            upstream = upstream_outcome(oracle.cel(args.expr, one))
        drax = drax_outcome(args.expr, one)
        print(f"drax:     {drax.verdict} {drax.detail}\nupstream: {upstream.verdict} "
              f"{upstream.detail}")
        return 0 if drax.verdict == upstream.verdict else 1
    started = time.monotonic()
    tally = run_parallel(args.count, args.seed, jobs=args.jobs, start=args.start,
                         costly=args.costly)
    elapsed = time.monotonic() - started
    if args.mismatches is not None:
        write_mismatches(tally, args.mismatches)
    with open_oracle() as oracle:
        report(tally, seed=args.seed, oracle=oracle)
    print(f"{tally.cases} expressions (seed {args.seed}, cases {args.start}.."
          f"{args.start + args.count - 1}, costly share {args.costly}, {args.jobs} jobs) "
          f"in {elapsed:.0f} s "
          f"({tally.cases / max(elapsed, 1e-9):.0f}/s); upstream verdicts "
          f"{dict(tally.verdicts.most_common())}; {len(tally.mismatches)} mismatches")
    return 1 if tally.mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
