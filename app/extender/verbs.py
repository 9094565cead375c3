"""The extender verbs as plain functions over the inventory and the allocator.

`filter`, `prioritize`, `evaluate` (what `drax allocate` prints) share one
path: resolve the pod's claims, then read the answers kept for that claim
shape (`_Answers`: a verdict per node with the node's version). A call first
catches up on the nodes the inventory stamped since the previous call, and
computes a verdict only for those and for nodes never seen; everything else is
a dictionary read. On a miss, nodes with the same signature (see `signature`)
share one allocator run, so a first cycle over 500 identical fresh nodes runs
the allocator once. `warm` does the same work between requests.

`bind` takes the allocation from the answers only when the node's version is
the one that answer was computed at (the answer is a deterministic function of
that version, so this is not trusting a stale cache); otherwise it recomputes
it from the current inventory. It assumes it immediately (so concurrent filters
see the devices as taken), then hands it to the binder and forgets the
assumption if that fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable, Generator, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from cachetools import LRUCache, TTLCache

from app.allocator import DEFAULT_STEP_BUDGET, allocate
from app.allocator.types import (
    AllocatedState,
    AllocationOutcome,
    ClaimAllocation,
    NodeView,
    Objective,
)
from app.cel import CelCompileError, CelEvalError
from app.extender.binder import Binder, BindError, MemoryBinder
from app.extender.claims import ClaimResolver, PodClaims
from app.extender.signature import (
    StaticSignatures,
    flat_devices,
    map_outcome,
    match_signature,
    rename_words,
    request_kinds,
)
from app.features import FeatureGates
from app.inventory import Inventory, NodeState
from app.model import Device, Pod, ResourceClaim
from app.topology import TopologyConfig, make_objective, priority

_SHAPES_CACHED: Final = 256
_SIGNATURE_CACHE_SIZE: Final = 4096
_POD_CACHE_SIZE: Final = 10_000
_WARM_SCAN: Final = 512  # node versions compared per warming step
_POD_TTL_SECONDS: Final = 600.0
DEFAULT_ASSUME_TTL_SECONDS: Final = 120.0
NOT_SYNCED: Final = "inventory not synced yet"


@dataclass(slots=True)
class FilterResult:
    passed: list[str]
    failed: dict[str, str]
    unresolvable: dict[str, str]
    error: str | None = None


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


@dataclass(slots=True, frozen=True)
class _Verdict:
    """One claim shape on one node, everything the verbs read, computed once.

    `outcome` is the allocator's answer (None when the node was decided
    without it); its claim keys are those of the pod that asked first. A
    feasible answer borrowed from a node with the same signature keeps that
    node's outcome plus both views, and is re-expressed for this node only
    when someone asks for the devices (`node_outcome`): filter and prioritize
    never do, and thousands of copied allocations would cost memory.
    """

    feasible: bool
    outcome: AllocationOutcome | None = None
    priority: int = 0
    reason: str | None = None
    error: str | None = None
    unresolvable: bool = False
    claim_keys: tuple[str, ...] = ()  # the pending claims `reason` and `error` name
    source: NodeView | None = None  # the node `outcome` was computed on, if not this one
    target: NodeView | None = None

    def node_outcome(self) -> AllocationOutcome | None:
        if self.outcome is None or self.source is None or self.target is None:
            return self.outcome
        return map_outcome(self.outcome, source=self.source, target=self.target)


_NO_CLAIMS: Final = _Verdict(feasible=True)


def _from_outcome(outcome: AllocationOutcome, *, claim_keys: tuple[str, ...],
                  unresolvable: bool = False) -> _Verdict:
    if outcome.error is not None:
        return _Verdict(feasible=False, outcome=outcome, error=outcome.error, unresolvable=True,
                        claim_keys=claim_keys)
    if not outcome.feasible:
        return _Verdict(feasible=False, outcome=outcome, unresolvable=unresolvable,
                        reason=outcome.reason or "cannot allocate all claims",
                        claim_keys=claim_keys)
    return _Verdict(feasible=True, outcome=outcome, priority=priority(outcome.score),
                    claim_keys=claim_keys)


def _refused(reason: str) -> _Verdict:
    return _Verdict(feasible=False, reason=reason, unresolvable=True)


@dataclass(slots=True)
class _Answers:
    """Every node's verdict for one claim shape, as of inventory `sequence`.
    `passed`: the feasible nodes and their priority, for the verbs' fast path."""

    sequence: int = -1
    verdicts: dict[str, tuple[int, _Verdict]] = field(default_factory=dict)
    passed: dict[str, int] = field(default_factory=dict)


_Wording = Callable[[_Verdict], tuple[str | None, str | None]]


def _wording(keys: tuple[str, ...]) -> _Wording:
    """A verdict's reason and error as the pod with pending claims `keys` reads them.

    Cached texts name the claims of the pod that asked first; many nodes share
    one text, so each distinct text is reworded once per call.
    """
    reworded: dict[tuple[str | None, str | None, tuple[str, ...]],
                   tuple[str | None, str | None]] = {}

    def words(verdict: _Verdict) -> tuple[str | None, str | None]:
        reason, error = verdict.reason, verdict.error
        if not (reason or error) or not verdict.claim_keys or verdict.claim_keys == keys:
            return reason, error
        text_key = (reason, error, verdict.claim_keys)
        hit = reworded.get(text_key)
        if hit is None:
            names = dict(zip(verdict.claim_keys, keys, strict=True))
            hit = reworded[text_key] = (rename_words(reason, names), rename_words(error, names))
        return hit

    return words


@dataclass(slots=True)
class _Request:
    """Per-call state: the resolved claims and the signatures met in this call."""

    claims: PodClaims
    pending: tuple[ResourceClaim, ...] = ()
    kinds: tuple[Any, ...] = ()
    by_signature: dict[Hashable, tuple[NodeState, _Verdict]] = field(default_factory=dict)


class Extender:
    """filter / prioritize / bind / evaluate over one inventory (see module doc)."""

    def __init__(self, inventory: Inventory, *, features: FeatureGates,
                 mode: str = "allocator", topology_config: TopologyConfig | None = None,
                 binder: Binder | None = None, file_mode: bool = False,
                 step_budget: int = DEFAULT_STEP_BUDGET,
                 assume_ttl: float = DEFAULT_ASSUME_TTL_SECONDS) -> None:
        if mode not in ("allocator", "advisor"):
            raise ValueError(f"mode: {mode!r} is not one of allocator, advisor")
        self._inventory = inventory
        self._features = features
        self._mode = mode
        self._topology = topology_config or TopologyConfig()
        self._binder: Binder | None = binder or (MemoryBinder(inventory) if file_mode else None)
        self._resolver = ClaimResolver(inventory, generate=file_mode)
        self._step_budget = step_budget
        self._assume_ttl = assume_ttl
        # claim shape -> answers; emptied when too many shapes pile up.
        self._results: dict[Hashable, _Answers] = {}
        self._by_signature: LRUCache[tuple[Hashable, Hashable], tuple[NodeState, _Verdict]] = \
            LRUCache(maxsize=_SIGNATURE_CACHE_SIZE)
        self._static = StaticSignatures()
        self._unfit_when_empty: LRUCache[Hashable, bool] = LRUCache(
            maxsize=_SIGNATURE_CACHE_SIZE)
        self._pods: TTLCache[str, Pod] = TTLCache(maxsize=_POD_CACHE_SIZE, ttl=_POD_TTL_SECONDS)
        self._warming: Iterator[None] | None = None
        self._warmed_at = -1
        # what the last warming pass covered: shapes, and each node's version then
        self._warmed_shapes: set[Hashable] = set()
        self._warmed_versions: dict[str, int] = {}
        # claim key -> (its spec, the request for its shape), reused across passes
        self._claim_shapes: dict[str, tuple[Any, _Request]] = {}
        self._full_pass_done = False  # the last warming pass visited every node
        self._last_call = -float("inf")  # when a request last arrived (monotonic)
        self._catching_up: set[asyncio.Task[None]] = set()
        self._warmed_devices: dict[str, tuple[Device, ...]] = {}

    # ------------------------------------------------------------------ verbs

    def filter(self, pod: Pod, node_names: Sequence[str]) -> FilterResult:
        if not self._inventory.synced:
            return FilterResult(passed=[], failed={}, unresolvable={},
                                error=f"{NOT_SYNCED}; drax answers once the initial list of "
                                      "every watched kind is in")
        result = FilterResult(passed=[], failed={}, unresolvable={})
        judged = self._judge(pod, node_names)
        if isinstance(judged, _Verdict):
            if judged.feasible:
                result.passed.extend(node_names)
            else:
                result.unresolvable.update(dict.fromkeys(node_names, judged.reason or ""))
            return result
        answers, wording, request = judged
        passed, verdicts = answers.passed, answers.verdicts
        # One pass, dictionary reads only: at 5,000 candidates every extra walk
        # over the names costs a measurable share of the cycle.
        for name in node_names:
            if name in passed:
                result.passed.append(name)
                continue
            entry = verdicts.get(name)
            if entry is None:
                self._refresh(request, answers, name)
                if name in passed:
                    result.passed.append(name)
                    continue
                entry = verdicts[name]
            verdict = entry[1]
            reason, error = wording(verdict)
            if error is not None:
                result.unresolvable[name] = f"error: {error}"
                if result.error is None:
                    result.error = f"node {name}: {error}"
            elif verdict.unresolvable:
                result.unresolvable[name] = reason or "cannot allocate all claims"
            else:
                result.failed[name] = reason or "cannot allocate all claims"
        return result

    def prioritize(self, pod: Pod, node_names: Sequence[str]) -> list[tuple[str, int]]:
        """The nodes' scores; a node scoring 0 is left out, which kube-scheduler
        reads as 0 (extender-protocol.md §4.3), so the answer stays small."""
        judged = self._judge(pod, node_names)
        if isinstance(judged, _Verdict):
            return [(name, judged.priority) for name in node_names] if judged.priority else []
        answers, _, request = judged
        passed, verdicts = answers.passed, answers.verdicts
        scores = []
        for name in node_names:
            score = passed.get(name)
            if score is None and name not in verdicts:
                self._refresh(request, answers, name)
                score = passed.get(name)
            if score:
                scores.append((name, score))
        return scores

    def evaluate(self, pod: Pod, node_names: Sequence[str]) -> list[NodeEvaluation]:
        """Whether and how the pod's claims fit on each node (filter's code path)."""
        judged = self._judge(pod, node_names)
        if isinstance(judged, _Verdict):
            return [NodeEvaluation(node=name, feasible=judged.feasible, reason=judged.reason,
                                   unresolvable=judged.unresolvable) for name in node_names]
        answers, wording, request = judged
        pending = self._resolver.resolve(pod).pending
        out = []
        for name in node_names:
            if name not in answers.verdicts:
                self._refresh(request, answers, name)
            verdict = answers.verdicts[name][1]
            reason, error = wording(verdict)
            outcome = verdict.node_outcome() if verdict.feasible else verdict.outcome
            claims: tuple[ClaimAllocation, ...] = ()
            if verdict.feasible and outcome is not None:
                claims = _with_claim_keys(outcome, pending).claims
            out.append(NodeEvaluation(
                node=name, feasible=verdict.feasible, claims=claims,
                score=verdict.priority if verdict.feasible and outcome is not None else None,
                reason=reason, error=error, unresolvable=verdict.unresolvable))
        return out

    def _judge(self, pod: Pod, node_names: Sequence[str]
               ) -> _Verdict | tuple[_Answers, _Wording, _Request]:
        """One verdict for every node (the pod's claims cannot be had, or it has none),
        or the current answers for its claim shape plus how to word them for it, and
        the request to `_refresh` the nodes those answers do not hold yet (each verb
        does that in its own single pass over the names)."""
        self._remember(pod)
        self._last_call = time.monotonic()
        claims = self._resolver.resolve(pod)
        if claims.problem is not None:
            return _refused(claims.problem)
        if not claims.claims:
            return _NO_CLAIMS
        request = _request(claims)
        answers = self._current_answers(request)
        return answers, _wording(tuple(c.key for c in request.pending)), request

    async def bind(self, *, namespace: str, name: str, uid: str, node: str) -> str | None:
        """Allocate on `node` (see the module doc), assume it, and write it; None or
        the error text."""
        self._last_call = time.monotonic()
        pod = self._pod(namespace=namespace, name=name, uid=uid)
        if pod is None:
            return (f"pod {namespace}/{name} (uid {uid or '-'}) is unknown to drax: it was "
                    "not seen in filter or prioritize recently")
        if self._binder is None:
            return "bind is not served: drax runs without a binder"
        claims = self._resolver.resolve(pod)
        if claims.problem is not None:
            return claims.problem
        state = self._inventory.node_state(node)
        if claims.claims and state is None:
            return f"node {node} is unknown to drax"
        allocations: tuple[ClaimAllocation, ...] = ()
        if state is not None:
            elsewhere = _allocated_elsewhere(claims, state)
            if elsewhere is not None:
                return elsewhere
            outcome = (self._answered(claims, node, state)
                       or self._allocate(claims.pending, state, state.allocated))
            if outcome.error is not None:
                return f"cannot allocate on node {node}: {outcome.error}"
            if not outcome.feasible:
                return f"node {node} can no longer hold the pod's claims: {outcome.reason}"
            allocations = outcome.claims
        self._inventory.assume(pod=pod, allocations=allocations, ttl=self._assume_ttl)
        try:
            await self._binder.bind(pod=pod, node=node, allocations=allocations,
                                    reserve=claims.claims)
        except BindError as exc:
            self._inventory.forget_assumed(pod=pod)
            return str(exc)
        except BaseException:
            self._inventory.forget_assumed(pod=pod)
            raise
        if claims.pending:
            task = asyncio.get_running_loop().create_task(
                self._catch_up(_request(claims), bound_at=self._last_call))
            self._catching_up.add(task)
            task.add_done_callback(self._catching_up.discard)
        return None

    async def _catch_up(self, request: _Request, *, bound_at: float) -> None:
        """After a bind, once its answer is out: bring the answers of the shape
        just placed up to date. The next pod of a Deployment or Job usually has
        that shape, and the bound node is the one its filter would otherwise
        recompute while the scheduler waits. Skipped when the next request has
        already arrived: it does what its own shape needs, and a catch-up for
        another shape would only sit in front of it."""
        await asyncio.sleep(0)
        if self._last_call == bound_at:
            self._current_answers(request)

    def _answered(self, claims: PodClaims, node: str, state: NodeState
                  ) -> AllocationOutcome | None:
        """The allocation filter or prioritize found for this claim shape on `node`,
        if the node is still at the version it was found at."""
        answers = self._results.get(claims.shape)
        entry = answers.verdicts.get(node) if answers is not None else None
        if entry is None or entry[0] != state.view.version or not entry[1].feasible:
            return None
        outcome = entry[1].node_outcome()
        return None if outcome is None else _with_claim_keys(outcome, claims.pending)

    def note_request(self) -> None:
        """A request has arrived (the server calls this before reading its body):
        background work waits until the scheduler is quiet again."""
        self._last_call = time.monotonic()

    # ------------------------------------------------------------------ warming

    def warm(self, *, budget_seconds: float = 0.005) -> bool:
        """Do up to `budget_seconds` of work a filter would otherwise do on its first
        call: node snapshots and signatures, class selectors on every device, and the
        answer for every known claim and template shape on every node. True if work
        remains.

        Results only fill caches, so answers are the same with or without warming;
        it keeps the first filter after start-up or a DeviceClass change fast.
        """
        deadline = time.monotonic() + budget_seconds
        if self._warming is None:
            if self._warmed_at == self._inventory.sequence:
                return False
            since, self._warmed_at = self._warmed_at, self._inventory.sequence
            self._warming = self._warm_steps(since)
        for _ in self._warming:
            if time.monotonic() >= deadline:
                return True
        self._warming = None
        return self._warmed_at != self._inventory.sequence

    async def keep_warm(self, *, slice_seconds: float = 0.0005, quiet_seconds: float = 0.005,
                        idle_seconds: float = 0.5,
                        on_settled: Callable[[], None] | None = None) -> None:
        """Run `warm` in small slices while no verb is being asked, forever (a
        background task).

        Warming only moves work the requests would do, so it must never slow
        them: a slice runs only when no verb was called for `quiet_seconds`
        (the scheduler sends filter, prioritize and bind of a pod back to back,
        and every await inside a request would otherwise let a slice in: at
        5,000 nodes that added 4 ms per verb; `note_request` stamps a request
        as it arrives, before its body is read), and a request arriving during
        a slice waits at most `slice_seconds`.

        `on_settled` runs when a pass over every node has finished (start-up, new
        claim shapes, a change every node sees): the caches just built will live
        long, and `drax serve` freezes them out of the cyclic collector there.
        """
        while True:
            quiet = time.monotonic() - self._last_call
            if quiet < quiet_seconds:
                await asyncio.sleep(quiet_seconds - quiet)
                continue
            more = self.warm(budget_seconds=slice_seconds)
            if not more and self._full_pass_done:
                self._full_pass_done = False
                if on_settled is not None:
                    on_settled()
            await asyncio.sleep(0 if more else idle_seconds)

    def _warm_steps(self, since: int) -> Iterator[None]:
        """Nodes never answered for a known shape get their answer; a node that
        merely changed (a bind) is left to the next request of each shape, which
        recomputes it once however often it changed, instead of once per shape
        per change here. Only nodes stamped since the last pass (`since`) are
        visited, unless a new shape or something every node sees changed: a pass
        after a bind must not walk 5,000 nodes to find one. One step is at most
        one node's snapshot and selector matches, or one answer."""
        inv = self._inventory
        shapes = yield from self._known_shapes()
        kinds = request_kinds([c for request in shapes.values() for c in request.pending])
        changed = inv.changed_since(since)
        # Only a shape not warmed before needs every node; shapes whose last
        # pending claim was just bound need nothing (at 5,000 nodes such a pass
        # ran in slices for seconds, in the gaps of the next shape's requests).
        if not set(shapes) <= self._warmed_shapes:
            self._warmed_versions.clear()
            changed = None
        self._warmed_shapes = set(shapes)
        names = inv.node_names() if changed is None else sorted(changed)
        self._full_pass_done = False
        for scanned, name in enumerate(names):
            if scanned % _WARM_SCAN == _WARM_SCAN - 1:
                yield
            if self._warmed_versions.get(name) == inv.version(name):
                continue
            state = inv.node_state(name)
            if state is None:
                continue
            self._static.of(state)
            for request in shapes.values():
                answers = self._answers(request.claims.shape)
                if name not in answers.verdicts:
                    self._refresh(request, answers, name)
                    yield
            devices = flat_devices(state.view)
            # A bind changes the node, not its devices: their selector results
            # (cached per device object) are already in, unless classes or
            # shapes changed, which makes this a pass over every node.
            if changed is None or not _same_objects(self._warmed_devices.get(name), devices):
                self._warm_selectors(devices, kinds)
                self._warmed_devices[name] = devices
            self._warmed_versions[name] = state.view.version
            yield
        self._full_pass_done = changed is None

    def _warm_selectors(self, devices: Sequence[Device], kinds: Sequence[Any]) -> None:
        inv = self._inventory
        match_signature(devices, kinds, classes=inv.classes, class_matcher=inv.class_matcher,
                        selector_matches=inv.selectors.selector_matches)
        for device_class in list(inv.classes.values()):
            for device in devices:
                with contextlib.suppress(CelCompileError, CelEvalError):
                    inv.class_matcher(device_class, device)

    def _known_shapes(self) -> Generator[None, None, dict[Hashable, _Request]]:
        """One request per claim shape of the pending claims and the templates;
        a claim's shape is worked out once per claim spec. Yields between chunks
        (a cluster may hold tens of thousands of claims)."""
        inv = self._inventory
        templates = [ResourceClaim(namespace=t.namespace, name=t.name, spec=t.spec)
                     for t in inv.templates()]
        by_claim: dict[str, tuple[Any, _Request]] = {}
        shapes: dict[Hashable, _Request] = {}
        # a copy: binds change the claims between the steps of this generator
        for scanned, claim in enumerate(itertools.chain(list(inv.claims()), templates)):
            if scanned % _WARM_SCAN == _WARM_SCAN - 1:
                yield
            if claim.allocation is not None:
                continue
            hit = self._claim_shapes.get(claim.key)
            spec = claim.spec
            if hit is None or hit[0] is not spec:
                hit = (spec, _request(self._resolver.of_claims([claim])))
            by_claim[claim.key] = hit
            shapes.setdefault(hit[1].claims.shape, hit[1])
        self._claim_shapes = by_claim
        return shapes

    # ------------------------------------------------------------------ per node

    def _current_answers(self, request: _Request) -> _Answers:
        """The shape's answers with every node that changed since the last call
        refreshed: a cycle costs work for changed nodes only."""
        answers = self._answers(request.claims.shape)
        inv = self._inventory
        sequence = inv.sequence
        if answers.sequence == sequence:
            return answers
        changed = inv.changed_since(answers.sequence)
        if changed is None:
            names = list(answers.verdicts)
            for name, version in zip(names, inv.versions(names), strict=True):
                if answers.verdicts[name][0] != version:
                    self._refresh(request, answers, name)
        else:
            for name in changed:
                if name in answers.verdicts:
                    self._refresh(request, answers, name)
        answers.sequence = sequence
        return answers

    def _answers(self, shape: Hashable) -> _Answers:
        answers = self._results.get(shape)
        if answers is None:
            if len(self._results) >= _SHAPES_CACHED:
                self._results.clear()
            answers = self._results[shape] = _Answers()
        return answers

    def _refresh(self, request: _Request, answers: _Answers, name: str) -> None:
        version = self._inventory.version(name)
        verdict = self._verdict_for(request, name)
        answers.verdicts[name] = (version, verdict)
        if verdict.feasible:
            answers.passed[name] = verdict.priority
        else:
            answers.passed.pop(name, None)

    def _verdict_for(self, request: _Request, name: str) -> _Verdict:
        state = self._inventory.node_state(name)
        if state is None:
            return _refused(f"node {name} is unknown to drax: no Node object and no "
                            "ResourceSlice names it")
        elsewhere = _allocated_elsewhere(request.claims, state)
        if elsewhere is not None:
            return _refused(elsewhere)
        if not request.pending:
            return _NO_CLAIMS
        return self._shared_or_computed(request, state)

    def _shared_or_computed(self, request: _Request, state: NodeState) -> _Verdict:
        shape = request.claims.shape
        signature, hardware = self._signature(request, state)
        rep = request.by_signature.get(signature) or self._by_signature.get((shape, signature))
        if rep is None or not _still_current(self._inventory, rep[0]):
            verdict = self._compute(request.pending, state, empty_key=(shape, hardware))
            rep = self._by_signature[(shape, signature)] = (state, verdict)
            request.by_signature[signature] = rep
            return verdict
        request.by_signature[signature] = rep
        rep_state, rep_verdict = rep
        if rep_state.view is state.view:
            return rep_verdict
        assert rep_verdict.outcome is not None
        if rep_verdict.feasible:
            return _Verdict(feasible=True, outcome=rep_verdict.outcome,
                            priority=rep_verdict.priority, claim_keys=rep_verdict.claim_keys,
                            source=rep_state.view, target=state.view)
        return _from_outcome(map_outcome(rep_verdict.outcome, source=rep_state.view,
                                         target=state.view),
                             claim_keys=rep_verdict.claim_keys,
                             unresolvable=rep_verdict.unresolvable)

    def _signature(self, request: _Request, state: NodeState) -> tuple[Hashable, Hashable]:
        """(full signature, hardware signature), both including the selector matches."""
        static = self._static.of(state)
        matches = match_signature(flat_devices(state.view), request.kinds,
                                  classes=self._inventory.classes,
                                  class_matcher=self._inventory.class_matcher,
                                  selector_matches=self._inventory.selectors.selector_matches)
        return (static.full, matches), (static.hardware, matches)

    def _compute(self, claims: Sequence[ResourceClaim], state: NodeState, *,
                 empty_key: Hashable) -> _Verdict:
        keys = tuple(c.key for c in claims)
        outcome = self._allocate(claims, state, state.allocated)
        if outcome.feasible or outcome.error is not None:
            return _from_outcome(outcome, claim_keys=keys)
        # Evicting pods frees devices; if the claims do not fit even on an empty
        # node, the scheduler must not try preemption here. A search cut short by
        # the step budget proves nothing, so that node stays resolvable. The answer
        # depends on the hardware only, so nodes of one kind share it.
        unresolvable = self._unfit_when_empty.get(empty_key)
        if unresolvable is None:
            on_empty = self._allocate(claims, state, AllocatedState())
            settled = on_empty.error is None and on_empty.steps < self._step_budget
            unresolvable = not on_empty.feasible and settled
            self._unfit_when_empty[empty_key] = unresolvable
        return _from_outcome(outcome, claim_keys=keys, unresolvable=unresolvable)

    def _allocate(self, claims: Sequence[ResourceClaim], state: NodeState,
                  allocated: AllocatedState) -> AllocationOutcome:
        objective = _LazyObjective(lambda: make_objective(
            node_view=state.view, allocated=allocated, config=self._topology, mode=self._mode),
            first_fit=self._mode == "advisor")
        return allocate(claims, node_view=state.view, classes=self._inventory.classes,
                        allocated=allocated, features=self._features,
                        class_matcher=self._inventory.class_matcher,
                        selector_matches=self._inventory.selectors.selector_matches,
                        objective=objective, step_budget=self._step_budget)

    # ------------------------------------------------------------------ pods

    def _remember(self, pod: Pod) -> None:
        if pod.uid:
            self._pods[pod.uid] = pod

    def _pod(self, *, namespace: str, name: str, uid: str) -> Pod | None:
        pod = self._pods.get(uid) if uid else None
        if pod is not None and pod.namespace == namespace and pod.name == name:
            return pod
        pod = self._inventory.pod(f"{namespace}/{name}")
        if pod is not None and (not uid or not pod.uid or pod.uid == uid):
            return pod
        return None


class _LazyObjective:
    """The topology objective, built on first use: a node where nothing fits never
    asks for a score, so it never pays for its topology."""

    __slots__ = ("_build", "_built", "first_fit")

    def __init__(self, build: Callable[[], Objective], *, first_fit: bool) -> None:
        self._build = build
        self._built: Objective | None = None
        self.first_fit = first_fit

    def _objective(self) -> Objective:
        if self._built is None:
            self._built = self._build()
        return self._built

    def score(self, picks: Sequence[Device]) -> float:
        return self._objective().score(picks)

    def is_perfect(self, score: float) -> bool:
        return self._objective().is_perfect(score)

    def twin_key(self, device: Device) -> Hashable | None:
        twin = getattr(self._objective(), "twin_key", None)
        return None if twin is None else twin(device)


def _request(claims: PodClaims) -> _Request:
    pending = claims.pending
    return _Request(claims=claims, pending=pending, kinds=request_kinds(pending))


def _allocated_elsewhere(claims: PodClaims, state: NodeState) -> str | None:
    """Why an already-allocated claim rules the node out, if it does."""
    for claim in claims.allocated:
        selector = claim.allocation.node_selector if claim.allocation else None
        if selector is not None and not selector.matches(state.view.node):
            return (f"ResourceClaim {claim.key} is already allocated to devices that are "
                    f"not available on node {state.view.node.name}")
    return None


def _same_objects(a: Sequence[Any] | None, b: Sequence[Any]) -> bool:
    return a is not None and len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _still_current(inventory: Inventory, state: NodeState) -> bool:
    """A representative is only trusted while its own snapshot is current: the
    allocator reads classes and selector results besides the snapshot."""
    return inventory.version(state.view.node.name) == state.view.version


def _with_claim_keys(outcome: AllocationOutcome, claims: Sequence[ResourceClaim]
                     ) -> AllocationOutcome:
    """Re-key a (possibly shared) outcome to this pod's pending claims, in order."""
    keys = [c.key for c in claims]
    if [ca.claim_key for ca in outcome.claims] == keys[:len(outcome.claims)]:
        return outcome
    return AllocationOutcome(
        feasible=outcome.feasible, picks=outcome.picks, score=outcome.score,
        reason=outcome.reason, error=outcome.error, steps=outcome.steps,
        claims=tuple(ClaimAllocation(claim_key=k, allocation=ca.allocation)
                     for k, ca in zip(keys, outcome.claims, strict=False)))
