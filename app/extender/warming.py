"""Warming: the work a first filter would do, done between requests.

After start-up, a DeviceClass change or a new claim shape, the first filter
would pay for node snapshots, signatures, the selector matches of its request
kinds on every device and an answer per node. `Warmer` does that work in small slices while the
scheduler is quiet and stores it where the verbs look (`AnswerBook`, the
inventory's selector caches), so it changes no answer, only when it is paid.
It is a generator driven by a time budget so that a slice can stop anywhere
and a request never waits for more than one slice.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Generator, Hashable, Iterator
from typing import Any, Final

from app.extender.answers import AnswerBook, CallState, request_of
from app.extender.claims import ClaimResolver
from app.extender.signature import request_kinds
from app.inventory import Inventory
from app.model import ResourceClaim
from app.timeslice import Progress

_WARM_SCAN: Final = 512  # node versions compared per warming step


class Warmer:
    """Fills `book` for every known claim shape in slices (see module doc); also
    the clock of the last request, which both warming and bind's catch-up read."""

    def __init__(self, inventory: Inventory, *, book: AnswerBook,
                 resolver: ClaimResolver) -> None:
        self._inventory = inventory
        self._book = book
        self._resolver = resolver
        self._warming: Iterator[None] | None = None
        self._warmed_at = -1
        # what the last warming pass covered: shapes, and each node's version then
        self._warmed_shapes: set[Hashable] = set()
        self._warmed_versions: dict[str, int] = {}
        # claim key -> (its spec, the request for its shape), reused across passes
        self._claim_shapes: dict[str, tuple[Any, CallState]] = {}
        self._full_pass_done = False  # the last warming pass visited every node
        self.last_call = -float("inf")  # when a request last arrived (monotonic)

    def note_request(self) -> float:
        """A request has arrived (the server calls this before reading its body):
        background work waits until the scheduler is quiet again. Returns the stamp."""
        self.last_call = time.monotonic()
        return self.last_call


    def warm(self, *, budget_seconds: float = 0.005) -> bool:
        """Do up to `budget_seconds` of work a filter would otherwise do on its first
        call: node snapshots and signatures with their selector matches, and the
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
                        on_settled: Callable[[], None] | None = None,
                        on_progress: Callable[[], None] | None = None,
                        progress_seconds: float = 1.0) -> None:
        """Run `warm` in small slices while no verb is being asked, forever (a
        background task).

        Warming only moves work the requests would do, so it must never slow
        them: a slice runs only when no verb was called for `quiet_seconds`
        (the scheduler sends filter, prioritize and bind of a pod back to back,
        and every await inside a request would otherwise let a slice in, adding
        a slice to every verb; `note_request` stamps a request as it arrives,
        before its body is read), and a request arriving during a slice waits at
        most `slice_seconds`.

        `on_settled` runs when a pass over every node has finished (start-up, new
        claim shapes, a change every node sees): the caches just built will live
        long, and `drax serve` freezes them out of the cyclic collector there.
        `on_progress` runs after every `progress_seconds` of warming work, for a
        pass that does not end soon (a very large cluster's takes long), so that
        no full collection meanwhile walks all the pass has built so far.
        """
        progress = Progress(on_progress, every_seconds=progress_seconds)
        while True:
            if not self._inventory.synced:
                # a list still coming in would stamp what a pass warmed
                await asyncio.sleep(idle_seconds)
                continue
            quiet = time.monotonic() - self.last_call
            if quiet < quiet_seconds:
                await asyncio.sleep(quiet_seconds - quiet)
                continue
            started = time.monotonic()
            more = self.warm(budget_seconds=slice_seconds)
            if more:
                progress.worked(time.monotonic() - started)
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
        # pending claim was just bound need nothing (on a large cluster such a
        # pass runs in slices for seconds, in the gaps of the next shape's requests).
        if not set(shapes) <= self._warmed_shapes:
            self._warmed_versions.clear()
            changed = None
        self._warmed_shapes = set(shapes)
        names = inv.node_names() if changed is None else sorted(changed)
        self._full_pass_done = False
        stats = self._book.stats
        for scanned, name in enumerate(names):
            stats.warming_backlog = len(names) - scanned
            if scanned % _WARM_SCAN == _WARM_SCAN - 1:
                yield
            if self._warmed_versions.get(name) == inv.version(name):
                continue
            state = inv.node_state(name)
            if state is None:
                continue
            hardware = self._book.static.of(state).hardware
            for request in shapes.values():
                answers = self._book.of_shape(request.claims.shape)
                if name not in answers.verdicts:
                    self._book.refresh(request, answers, name)
                    yield
            # A bind changes the node, not its devices: their match columns are
            # kept, so this is a few lookups unless its slices changed.
            self._book.matches.signature(state.view, kinds, classes=inv.classes,
                                         matcher=inv.selectors.matches_shared,
                                         hardware=hardware)
            self._warmed_versions[name] = state.view.version
            yield
        stats.warming_backlog = 0
        self._full_pass_done = changed is None

    def _known_shapes(self) -> Generator[None, None, dict[Hashable, CallState]]:
        """One request per claim shape of the pending claims and the templates;
        a claim's shape is worked out once per claim spec. Yields between chunks
        (a cluster may hold tens of thousands of claims)."""
        inv = self._inventory
        templates = [ResourceClaim(namespace=t.namespace, name=t.name, spec=t.spec)
                     for t in inv.templates()]
        by_claim: dict[str, tuple[Any, CallState]] = {}
        shapes: dict[Hashable, CallState] = {}
        # a copy: binds change the claims between the steps of this generator
        for scanned, claim in enumerate(itertools.chain(list(inv.claims()), templates)):
            if scanned % _WARM_SCAN == _WARM_SCAN - 1:
                yield
            if claim.allocation is not None:
                continue
            hit = self._claim_shapes.get(claim.key)
            spec = claim.spec
            if hit is None or hit[0] is not spec:
                hit = (spec, request_of(self._resolver.of_claims([claim])))
            by_claim[claim.key] = hit
            shapes.setdefault(hit[1].claims.shape, hit[1])
        self._claim_shapes = by_claim
        return shapes
