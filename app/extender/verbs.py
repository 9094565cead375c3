"""The extender verbs as plain functions over the inventory and the allocator.

`filter`, `prioritize`, `evaluate` (what `drax allocate` prints) share one
path: resolve the pod's claims, then read the answers kept for that claim
shape (`answers.AnswerBook`: a verdict per node at the node's version, brought
up to date lazily, shared between nodes of one signature). `warming` does the
same work between requests; the verbs never wait for it.

`bind` finds the pod in what filter or prioritize saw (`pods`, forgotten once
bound), and takes the allocation from the answers only when the node's version is
the one that answer was computed at (the answer is a deterministic function of
that version, so this is not trusting a stale cache); otherwise it recomputes
it from the current inventory. It assumes it immediately (so concurrent filters
see the devices as taken), then hands it to the binder and forgets the
assumption if that fails. kube-scheduler may send the next pod's filter
before that bind: `wait_for_binds` (called by the server before `filter`)
holds it until the binds on their way have arrived (`pending`).

kube-scheduler sends a pod's prioritize right after its filter, in the same
scheduling cycle and over nodes that filter passed: both read the claim
shape's answers through `AnswerBook.current`, so prioritize reuses every
verdict the filter computed and searches again only the offered nodes the
inventory changed in between (a claim, bind or class change is never scored
from before it).

`filter` and `prioritize` compute under a deadline (`verb_deadline`, below
kube-scheduler's httpTimeout): past it, filter answers with `Error` (the
scheduler retries the pod) and prioritize with no scores, rather than let the
scheduler's HTTP call time out. The answers computed so far are kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import is_, is_not, not_
from typing import Any, Final, cast

from app.allocator import DEFAULT_STEP_BUDGET
from app.allocator.types import ClaimAllocation, Rejection
from app.extender.answers import (
    NO_CLAIMS,
    AnswerBook,
    Answers,
    CallState,
    DeadlineExceeded,
    Failure,
    Verdict,
    Wording,
    allocated_elsewhere,
    refused,
    request_of,
    with_claim_keys,
    wording,
)
from app.extender.binder import BindCause, Binder, BindError, BindFailure, MemoryBinder
from app.extender.claims import ClaimResolver, PodClaims
from app.extender.extended import ExtendedClaim
from app.extender.pending import PendingBinds
from app.extender.pods import PodMemory
from app.extender.signature import RequestKind
from app.extender.stats import SearchStats
from app.extender.waiting import WaitingPods
from app.extender.warming import Warmer
from app.features import FeatureGates
from app.inventory import Inventory, NodeState
from app.model import Pod
from app.topology import TopologyConfig

log = logging.getLogger(__name__)

DEFAULT_ASSUME_TTL_SECONDS: Final = 120.0
NOT_SYNCED: Final = "inventory not synced yet"
# The bind cause of a claim problem filter would reject with; the rest are `other`.
_BIND_CAUSES: Final = {
    Rejection.CLAIM_NOT_FOUND: BindCause.CLAIM_NOT_FOUND,
    Rejection.ALLOCATED_ELSEWHERE: BindCause.CLAIM_TAKEN,
    Rejection.UNKNOWN_NODE: BindCause.NODE_UNKNOWN,
    Rejection.OUTSIDE_POOL: BindCause.OUTSIDE_POOL,
    Rejection.NOT_SYNCED: BindCause.NOT_SYNCED,
}


@dataclass(slots=True)
class FilterResult:
    passed: list[str]
    failed: dict[str, str]
    unresolvable: dict[str, str]
    error: str | None = None
    # failed and unresolvable nodes per category (`Rejection`), for the metrics
    rejections: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class NodeScores:
    """Prioritize's answer as two parallel sequences, a score per node: None
    leaves the node out of the answer, and so does 0 unless `zero_kept`. No
    Python object per node: the server encodes it in C-level passes."""

    names: Sequence[str]
    scores: Sequence[int | None]
    zero_kept: bool = False  # a score of 0 is answered too (the loadtest floor)

    def kept(self) -> tuple[list[str], list[int]]:
        """The nodes the answer names and their scores, as two parallel lists."""
        if self.zero_kept:
            kept = list(map(is_not, self.scores, repeat(None)))
            values: list[int] = list(compress(self.scores, kept))  # type: ignore[arg-type]
            return list(compress(self.names, kept)), values
        return list(compress(self.names, self.scores)), list(filter(None, self.scores))

    def pairs(self) -> list[tuple[str, int]]:
        """(node, score) for every node the answer names."""
        return list(zip(*self.kept(), strict=True))


@dataclass(slots=True, frozen=True)
class _Filtered:
    """The last filter's passed nodes and their scores, and the answers they were
    read from after `refreshes` verdicts: the prioritize of the same cycle reads
    them."""

    answers: Answers
    refreshes: int
    passed: list[str]
    scores: list[int]


def _word_failures(result: FilterResult, words: Wording, failing: list[str],
                   fails: list[Failure]) -> None:
    """Fill `result`'s failed and unresolvable nodes (in `failing`'s order), its
    rejection counts and its error (the first erring node's) from each failing
    node's `Failure` (`fails`, in the same order): each distinct one is worded once."""
    texts: dict[Failure, str] = {}
    unresolvable: dict[Failure, bool] = {}
    errors: dict[Failure, str] = {}
    rejections = result.rejections
    for failure, count in Counter(fails).items():
        rejection = failure.rejection or Rejection.OTHER
        rejections[rejection] = rejections.get(rejection, 0) + count
        reason, error = words(failure)
        if error is not None:
            texts[failure], unresolvable[failure] = f"error: {error}", True
            errors[failure] = error
        else:
            texts[failure] = reason or "cannot allocate all claims"
            unresolvable[failure] = failure.unresolvable
    lines = list(map(texts.__getitem__, fails))
    kinds = set(unresolvable.values())
    if kinds == {True}:
        result.unresolvable = dict(zip(failing, lines, strict=True))
    elif kinds == {False}:
        result.failed = dict(zip(failing, lines, strict=True))
    else:
        flags = list(map(unresolvable.__getitem__, fails))
        result.unresolvable = dict(zip(compress(failing, flags), compress(lines, flags),
                                       strict=True))
        result.failed = dict(zip(compress(failing, map(not_, flags)),
                                 compress(lines, map(not_, flags)), strict=True))
    if errors:
        name, failure = next((n, f) for n, f in zip(failing, fails, strict=True)
                             if f in errors)
        result.error = f"node {name}: {errors[failure]}"


@dataclass(slots=True, frozen=True)
class NodeEvaluation:
    """The answer for one pod on one node, as `drax allocate` reports it.

    `unresolvable`: infeasible even if every device on the node were free, so
    evicting pods cannot help (FailedAndUnresolvableNodes).
    """

    node: str
    feasible: bool
    score: int | None = None
    claims: tuple[ClaimAllocation, ...] = ()
    reason: str | None = None
    error: str | None = None
    unresolvable: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node, "feasible": self.feasible, "score": self.score,
            "claims": [_claim_dict(ca) for ca in self.claims],
            "reason": self.reason, "error": self.error,
        }


def _claim_dict(ca: ClaimAllocation) -> dict[str, Any]:
    selector = ca.allocation.node_selector
    return {
        "claim": ca.claim_key,
        "results": [{
            "request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device,
            "adminAccess": r.admin_access,
            "tolerations": [t.to_dict() for t in r.tolerations],
            "consumedCapacity": {k: str(v) for k, v in r.consumed_capacity.items()} or None,
            "shareID": r.share_id,
        } for r in ca.allocation.results],
        "nodeSelector": selector.to_dict() if selector is not None else None,
    }


class Extender:
    """filter / prioritize / bind / evaluate over one inventory (see module doc)."""

    def __init__(self, inventory: Inventory, *, features: FeatureGates,
                 mode: str = "allocator", topology_config: TopologyConfig | None = None,
                 binder: Binder | None = None, file_mode: bool = False,
                 step_budget: int = DEFAULT_STEP_BUDGET,
                 assume_ttl: float = DEFAULT_ASSUME_TTL_SECONDS,
                 bind_wait: float = 0.0, verb_deadline: float = math.inf) -> None:
        if mode not in ("allocator", "advisor"):
            raise ValueError(f"mode: {mode!r} is not one of allocator, advisor")
        self._inventory = inventory
        self._mode = mode
        self._binder: Binder | None = binder or (MemoryBinder(inventory) if file_mode else None)
        self._resolver = ClaimResolver(inventory, generate=file_mode,
                                       extended_resources=features.extended_resource)
        self._assume_ttl = assume_ttl
        self._verb_deadline = verb_deadline
        # Only a binder assumes devices, so only then is a bind worth waiting for.
        self._pending = PendingBinds(wait=bind_wait if self._binder is not None else 0.0)
        self._book = AnswerBook(inventory, features=features, mode=mode,
                                topology_config=topology_config or TopologyConfig(),
                                step_budget=step_budget)
        self._warmer = Warmer(inventory, book=self._book, resolver=self._resolver)
        self._pods = PodMemory()
        # Pods filter left without a node, for the requeuer (app/binder/requeue.py).
        self.waiting = WaitingPods()
        self._catching_up: set[asyncio.Task[None]] = set()
        self._filtered: _Filtered | None = None

    # ------------------------------------------------------------------ verbs

    def filter(self, pod: Pod, node_names: Sequence[str]) -> FilterResult:
        # The previous filter's scores are superseded, even when this filter
        # leaves none (no claims, past its deadline): they would keep answers
        # the book evicted alive.
        self._filtered = None
        try:
            with self._deadline(), self._inventory.holds_lifted_for(pod):
                result = self._filter(pod, node_names)
        except DeadlineExceeded as exc:
            return FilterResult(passed=[], failed={}, unresolvable={},
                                error=self._past_deadline("filter", pod, node_names, exc))
        if result.passed or result.error is not None:
            self.waiting.discard(pod.namespace, pod.name)
        elif node_names:
            self.waiting.rejected(pod)
        return result

    def _filter(self, pod: Pod, node_names: Sequence[str]) -> FilterResult:
        if not self._inventory.synced:
            return FilterResult(passed=[], failed={}, unresolvable={},
                                error=f"{NOT_SYNCED}; drax answers once the initial list of "
                                      "every watched kind is in")
        node_names, outside = self._in_pool(node_names)
        result = self._filter_in_pool(pod, node_names)
        if outside:
            reason = self._outside_pool_reason()
            result.unresolvable.update(dict.fromkeys(outside, reason))
            result.rejections[Rejection.OUTSIDE_POOL] = len(outside)
        return result

    def _in_pool(self, node_names: Sequence[str]) -> tuple[Sequence[str], list[str]]:
        """The candidates this drax serves, and those outside its node pool."""
        pool = self._inventory.pool
        if pool is None:
            return node_names, []
        members = pool.members
        outside = [n for n in node_names if n not in members]
        if not outside:
            return node_names, []
        return [n for n in node_names if n in members], outside

    def _outside_pool_reason(self) -> str:
        pool = self._inventory.pool
        assert pool is not None
        return (f"node is outside this drax's node pool (--node-selector {pool.describe()}); "
                "the scheduler serving that pool places pods there")

    def _filter_in_pool(self, pod: Pod, node_names: Sequence[str]) -> FilterResult:
        result = FilterResult(passed=[], failed={}, unresolvable={})
        judged = self._judge(pod, node_names)
        if isinstance(judged, Verdict):
            if judged.feasible:
                result.passed.extend(node_names)
            else:
                result.unresolvable.update(dict.fromkeys(node_names, judged.reason or ""))
                if node_names:
                    result.rejections[judged.rejection or Rejection.OTHER] = len(node_names)
            return result
        answers, words, request = judged
        # At 5,000 candidates a Python step per name costs a measurable share of
        # the cycle, and a Python object per name feeds the cyclic collector: the
        # names are sorted by C-level passes over one read of the answers per
        # name, and only the distinct failures are worded in Python.
        marks = self._marks(request, answers, node_names)
        ok = list(map(isinstance, marks, repeat(int)))
        if all(ok):
            result.passed = list(node_names)
            passed_scores = cast(list[int], marks)
        else:
            result.passed = list(compress(node_names, ok))
            passed_scores = cast(list[int], list(compress(marks, ok)))
            _word_failures(result, words, list(compress(node_names, map(not_, ok))),
                           cast(list[Failure], list(compress(marks, map(not_, ok)))))
        self._expect_bind(pod, request, passed=bool(result.passed))
        self._filtered = _Filtered(answers=answers, refreshes=answers.refreshes,
                                   passed=result.passed, scores=passed_scores)
        return result

    def _marks(self, request: CallState, answers: Answers, node_names: Sequence[str]
               ) -> list[int | Failure]:
        """Each name's mark (`Answers.marks`): the verdicts the answers lack or hold
        stale are computed first, in the names' order."""
        known = answers.marks
        marks = list(map(known.get, node_names))
        if None not in marks:
            return cast(list[int | Failure], marks)
        for name in compress(node_names, map(is_, marks, repeat(None))):
            if name not in known:  # a name given twice is computed once
                self._book.refresh(request, answers, name)
        return list(map(known.__getitem__, node_names))

    def prioritize(self, pod: Pod, node_names: Sequence[str]) -> list[tuple[str, int]]:
        """`node_scores` as (node, score) pairs, the nodes scoring 0 left out."""
        return self.node_scores(pod, node_names).pairs()

    def node_scores(self, pod: Pod, node_names: Sequence[str]) -> NodeScores:
        """The nodes' scores; a node scoring 0 is left out of the answer, which
        kube-scheduler reads as 0 (a host missing from a `HostPriorityList` adds
        nothing), so the answer stays small. Past the deadline: no scores (all 0),
        which leaves the order to the scheduler's own plugins; scores for only the
        nodes reached would favour those."""
        try:
            with self._deadline(), self._inventory.holds_lifted_for(pod):
                return self._node_scores(pod, node_names)
        except DeadlineExceeded as exc:
            self._past_deadline("prioritize", pod, node_names, exc)
            return NodeScores(names=(), scores=())

    @contextlib.contextmanager
    def _deadline(self) -> Iterator[None]:
        self._book.deadline = time.monotonic() + self._verb_deadline
        try:
            yield
        finally:
            self._book.deadline = math.inf

    def _past_deadline(self, verb: str, pod: Pod, node_names: Sequence[str],
                       exc: DeadlineExceeded) -> str:
        message = (f"{verb} of pod {pod.key} ran past its {self._verb_deadline:g} s deadline "
                   f"after node {exc} of {len(node_names)} candidates; the answers computed "
                   "so far are kept for the next attempt")
        log.warning("%s", message)
        return message

    def _node_scores(self, pod: Pod, node_names: Sequence[str]) -> NodeScores:
        node_names, _ = self._in_pool(node_names)
        judged = self._judge(pod, node_names)
        if isinstance(judged, Verdict):
            if not judged.priority:
                return NodeScores(names=(), scores=())
            return NodeScores(names=node_names, scores=[judged.priority] * len(node_names))
        answers, _, request = judged
        # kube-scheduler sends prioritize with the nodes filter passed, in that
        # order. When none of them changed since (no verdict computed in between,
        # none of them stale), the filter's scores are the answer: the watch
        # events of the previous pod's bind, arriving in between, leave them be.
        last, self._filtered = self._filtered, None  # one prioritize per filter
        if (last is not None and last.answers is answers
                and answers.refreshes == last.refreshes and node_names == last.passed
                and answers.stale.isdisjoint(node_names)):
            names, scores = node_names, last.scores
        else:
            marks = self._marks(request, answers, node_names)
            ok = list(map(isinstance, marks, repeat(int)))
            names = list(compress(node_names, ok))
            scores = cast(list[int], list(compress(marks, ok)))
        self._expect_bind(pod, request, passed=any(scores))
        return NodeScores(names=names, scores=scores)

    async def wait_for_binds(self, pod: Pod) -> float | None:
        """Before `pod`'s filter: wait for the binds of the pods scheduled just before
        it (`pending`); the seconds waited, or None when no bind was on its way."""
        return await self._pending.settle(pod.key)

    def _expect_bind(self, pod: Pod, request: CallState, *, passed: bool) -> None:
        if passed and (request.pending or request.claims.extended is not None):
            self._pending.expect(pod.key)

    def evaluate(self, pod: Pod, node_names: Sequence[str]) -> list[NodeEvaluation]:
        """Whether and how the pod's claims fit on each node (filter's code path)."""
        judged = self._judge(pod, node_names)
        if isinstance(judged, Verdict):
            return [NodeEvaluation(node=name, feasible=judged.feasible, reason=judged.reason,
                                   unresolvable=judged.unresolvable) for name in node_names]
        answers, words, request = judged
        pending = self._resolver.resolve(pod).pending
        out = []
        for name in node_names:
            if answers.needs(name):
                self._book.refresh(request, answers, name)
            verdict = answers.verdicts[name][1]
            reason, error = words(verdict)
            outcome = verdict.node_outcome() if verdict.feasible else verdict.outcome
            claims: tuple[ClaimAllocation, ...] = ()
            if verdict.feasible and outcome is not None:
                claims = with_claim_keys(outcome, pending).claims
            out.append(NodeEvaluation(
                node=name, feasible=verdict.feasible, claims=claims,
                score=verdict.priority if verdict.feasible and outcome is not None else None,
                reason=reason, error=error, unresolvable=verdict.unresolvable))
        return out

    def _judge(self, pod: Pod, node_names: Sequence[str]
               ) -> Verdict | tuple[Answers, Wording, CallState]:
        """One verdict for every node (the pod's claims cannot be had, or it has none),
        or the current answers for its claim shape plus how to word them for it, and
        the request to `_refresh` the nodes those answers do not hold yet (each verb
        does that in its own single pass over the names)."""
        self._pods.remember(pod)
        self._warmer.note_request()
        claims = self._resolver.resolve(pod)
        if claims.problem is not None:
            return refused(claims.problem, claims.rejection or Rejection.OTHER)
        if not claims.claims and claims.extended is None:
            return NO_CLAIMS
        request = request_of(claims, pod=pod)
        answers = self._book.current(request)
        return answers, wording(tuple(c.key for c in request.pending)), request

    async def bind(self, *, namespace: str, name: str, uid: str, node: str
                   ) -> BindFailure | None:
        """Allocate on `node` (see the module doc), assume it, and write it; None or
        the error with its cause."""
        bound_at = self._warmer.note_request()
        # Cleared before anything below yields, so a waiting filter resumes only
        # after this bind has assumed its devices (or refused).
        self._pending.arrived(f"{namespace}/{name}")
        pod = self._pod(namespace=namespace, name=name, uid=uid)
        if pod is None:
            return BindFailure(f"pod {namespace}/{name} (uid {uid or '-'}) is unknown to "
                               "drax: it was not seen in filter or prioritize recently",
                               BindCause.POD_UNKNOWN)
        if self._binder is None:
            return BindFailure("bind is not served: drax runs without a binder",
                               BindCause.NOT_SERVED)
        if not self._inventory.in_pool(node):
            return BindFailure(f"node {node}: {self._outside_pool_reason()}",
                               BindCause.OUTSIDE_POOL)
        # Devices held for a preemptor count as free only for it and for pods of
        # higher priority; nothing below yields until they are assumed.
        with self._inventory.holds_lifted_for(pod):
            placed = self._place(pod, node)
        if isinstance(placed, BindFailure):
            return placed
        claims, allocations, special = placed
        try:
            created = await self._binder.bind(pod=pod, node=node, allocations=allocations,
                                              reserve=claims.claims, extended=special)
        except BindError as exc:
            self._inventory.forget_assumed(pod=pod)
            return exc.failure
        except BaseException:
            self._inventory.forget_assumed(pod=pod)
            raise
        self._pods.forget(pod.uid)
        self.waiting.discard(pod.namespace, pod.name)
        if special is not None and created is not None:
            self._assume_created(pod, special, created, allocations)
        if claims.pending or special is not None:
            task = asyncio.get_running_loop().create_task(
                self._catch_up(request_of(claims, pod=pod), node, bound_at=bound_at))
            self._catching_up.add(task)
            task.add_done_callback(self._catching_up.discard)
        return None

    def _place(self, pod: Pod, node: str) -> (
            BindFailure | tuple[PodClaims, tuple[ClaimAllocation, ...], ExtendedClaim | None]):
        """Bind's allocation on `node`, assumed; or why there is none."""
        claims = self._resolver.resolve(pod)
        if claims.problem is not None:
            return BindFailure(claims.problem, _BIND_CAUSES.get(
                claims.rejection or Rejection.OTHER, BindCause.OTHER))
        state = self._inventory.node_state(node)
        if (claims.claims or claims.extended) and state is None:
            return BindFailure(f"node {node} is unknown to drax", BindCause.NODE_UNKNOWN)
        allocations: tuple[ClaimAllocation, ...] = ()
        special: ExtendedClaim | None = None
        if state is not None:
            elsewhere = allocated_elsewhere(claims, state)
            if elsewhere is not None:
                return BindFailure(elsewhere, BindCause.CLAIM_TAKEN)
            pending = claims.pending
            if claims.extended is not None:
                variant = self._book.variant(request_of(claims, pod=pod), state.view.node)
                if isinstance(variant, str):
                    return BindFailure(variant, BindCause.OTHER)
                pending, special = variant.pending, variant.special
            outcome = (self._book.answered(claims, node, state, pending=pending)
                       or self._book.allocate(pending, state, state.allocated))
            if outcome.error is not None:
                return BindFailure(f"cannot allocate on node {node}: {outcome.error}",
                                   BindCause.ALLOCATION_ERROR)
            if not outcome.feasible:
                return BindFailure(
                    f"node {node} can no longer hold the pod's claims: {outcome.reason}",
                    BindCause.NO_LONGER_FITS)
            allocations = outcome.claims
        self._inventory.assume(pod=pod, allocations=allocations, ttl=self._assume_ttl)
        return claims, allocations, special

    def _assume_created(self, pod: Pod, special: ExtendedClaim, created: str,
                        allocations: Sequence[ClaimAllocation]) -> None:
        """Hold the special claim's devices under the name the API server gave it
        until the watch delivers the claim (file mode has it in the inventory)."""
        self._inventory.forget_assumed(pod=pod, claim_key=special.claim.key)
        real = self._inventory.claim(f"{pod.namespace}/{created}")
        if real is not None and real.allocation is not None:
            return
        self._inventory.assume(pod=pod, ttl=self._assume_ttl, allocations=[
            ClaimAllocation(claim_key=f"{pod.namespace}/{created}", allocation=ca.allocation)
            for ca in allocations if ca.claim_key == special.claim.key])

    async def _catch_up(self, request: CallState, node: str, *, bound_at: float) -> None:
        """After a bind, once its answer is out: recompute the bound node's answer
        for the shape just placed. The next pod of a Deployment or Job usually
        has that shape, and the bound node is the one its filter would otherwise
        recompute while the scheduler waits. Skipped when the next request has
        already arrived: it does what its own shape needs, and a catch-up for
        another shape would only sit in front of it."""
        await asyncio.sleep(0)
        if self._warmer.last_call == bound_at:
            answers = self._book.current(request)
            if node in answers.stale:
                self._book.refresh(request, answers, node)


    def equivalence(self, state: NodeState, kinds: Sequence[RequestKind]) -> Hashable:
        """`AnswerBook.equivalence`: equal on nodes where requests of `kinds`
        face the same problem."""
        return self._book.equivalence(state, kinds)

    @property
    def inventory(self) -> Inventory:
        return self._inventory

    @property
    def book(self) -> AnswerBook:
        """The answers and the allocator runs behind them (preemption asks the same)."""
        return self._book

    @property
    def resolver(self) -> ClaimResolver:
        return self._resolver

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def stats(self) -> SearchStats:
        """Counters of the allocator searches and answers this extender computed."""
        return self._book.stats

    @property
    def last_request(self) -> float:
        """When a verb request last arrived (time.monotonic)."""
        return self._warmer.last_call

    def note_request(self) -> None:
        """A request has arrived (the server calls this before reading its body):
        background work waits until the scheduler is quiet again."""
        self._warmer.note_request()

    def warm(self, *, budget_seconds: float = 0.005) -> bool:
        """One slice of `Warmer.warm`; True if work remains."""
        return self._warmer.warm(budget_seconds=budget_seconds)

    async def keep_warm(self, *, slice_seconds: float = 0.0005, quiet_seconds: float = 0.005,
                        idle_seconds: float = 0.5,
                        on_settled: Callable[[], None] | None = None,
                        on_progress: Callable[[], None] | None = None,
                        progress_seconds: float = 1.0) -> None:
        """`Warmer.keep_warm`: warming slices while no verb is asked, forever."""
        await self._warmer.keep_warm(slice_seconds=slice_seconds, quiet_seconds=quiet_seconds,
                                     idle_seconds=idle_seconds, on_settled=on_settled,
                                     on_progress=on_progress, progress_seconds=progress_seconds)

    def _pod(self, *, namespace: str, name: str, uid: str) -> Pod | None:
        """The pod a verb saw (`pods`), else the inventory's (file mode)."""
        pod = self._pods.recall(namespace=namespace, name=name, uid=uid)
        if pod is not None:
            return pod
        pod = self._inventory.pod(f"{namespace}/{name}")
        if pod is not None and (not uid or not pod.uid or pod.uid == uid):
            return pod
        return None
