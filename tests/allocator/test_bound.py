"""The bounded best-allocation search returns what the unbounded one returns.

Once an allocation is found, the search skips a branch whose picks cannot lead
to a higher score than the best so far, stops at a score the objective calls
perfect where every allocation has one shape, and looks first inside a PCIe
root or NUMA node that can hold the whole pod for a score to beat. Skipping
and stopping must change nothing but the work: over random nodes (PCIe roots
on NUMA nodes, GPUs, partitioned GPUs, NICs, devices without a topology, some
taken) and random pods (several claims, `matchAttribute`, `firstAvailable`),
the chosen devices, score, reason and error equal those of the same search
with the bound and the early stop taken away.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from app.allocator import AllocatedState, AllocationOutcome, NodeView, allocate
from app.allocator.search import Search
from app.allocator.types import KnownMatches
from app.cel import CelError
from app.features import FeatureGates
from app.inventory.selectors import SelectorCache
from app.model import Device, DeviceClass, Quantity, ResourceClaim, parse_object, parse_quantity
from app.topology import TopologyConfig, make_objective
from loadtest import generator
from tests.allocator.helpers import (
    PlainObjective,
    claim,
    cls,
    consumes,
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

ROOT = "resource.kubernetes.io/pcieRoot"
NUMA = "dra.net/numaNode"
GPU = "gpu.example.com"
NIC = "dra.net"
CLASSES = parse_classes([cls("gpu", f"device.driver == '{GPU}'"),
                         cls("nic", f"device.driver == '{NIC}'")])
FULL = f'device.attributes["{GPU}"].kind == "full"'


def _unbounded(objective: Any) -> PlainObjective:
    """The same objective without its bound and its early stop: the search
    skips no branch and stops at no score."""
    return PlainObjective(objective, "twin_key")


@st.composite
def nodes(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[str]]:
    """A node's slices (GPUs and NICs on PCIe roots over NUMA nodes) and the
    names of the devices other pods hold."""
    regular = draw(st.booleans())  # every device a unit with a topology: the bound applies
    numa_nodes = draw(st.integers(1, 2))
    roots = draw(st.integers(1, 4))
    gpus: list[dict[str, Any]] = []
    nics: list[dict[str, Any]] = []
    counters: dict[str, dict[str, str]] = {}
    for r in range(roots):
        numa = r * numa_nodes // roots
        for g in range(draw(st.integers(0, 3))):
            attrs: dict[str, Any] = {"kind": "full"}
            if regular or draw(st.integers(0, 19)):
                attrs[ROOT] = f"pci-{r}"
            name = f"gpu-{r}-{g}"
            # partitioned: the whole GPU and two halves
            if not regular and draw(st.integers(0, 7)) == 0:
                counters[name] = {"mem": "2"}
                gpus.append(dev(name, attrs, consumesCounters=consumes(name, mem="2")))
                gpus += [dev(f"{name}-half-{h}", {**attrs, "kind": "half"},
                             consumesCounters=consumes(name, mem="1")) for h in range(2)]
            else:
                gpus.append(dev(name, attrs))
        for n in range(draw(st.sampled_from((1, 1, 2, 0)))):
            nics.append(dev(f"nic-{r}-{n}", {ROOT: f"pci-{r}", NUMA: numa}))
    # counters live in a slice of their own, as the API requires
    slices = [sl("gpus", gpus, driver=GPU, pool="gpus", count=2 if counters else 1),
              sl("nics", nics, driver=NIC, pool="nics")]
    if counters:
        slices.append(sl("gpu-counters", driver=GPU, pool="gpus", count=2, counters=counters))
    names = [d["name"] for d in gpus + nics]
    taken = draw(st.lists(st.sampled_from(names), unique=True, max_size=len(names) // 2)
                 if names else st.just([]))
    return [s for s in slices if s["spec"].get("devices") or s["spec"].get("sharedCounters")
            ], taken


@st.composite
def pods(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for c in range(draw(st.integers(1, 2))):
        requests: list[dict[str, Any]] = []
        selectors = [FULL] if draw(st.booleans()) else []
        count = draw(st.integers(1, 4))
        if draw(st.integers(0, 4)) == 0:
            requests.append(first("gpu", sub("many", "gpu", count=count, selectors=selectors),
                                  sub("one", "gpu", count=1, selectors=selectors)))
        else:
            requests.append(req("gpu", "gpu", count=count, selectors=selectors))
        if draw(st.booleans()):
            requests.append(req("nic", "nic", count=draw(st.integers(1, 3))))
        constraints = [match(ROOT)] if draw(st.integers(0, 3)) == 0 else []
        out.append(claim(f"c{c}", *requests, constraints=constraints))
    return out


def known_matches(view: NodeView) -> KnownMatches:
    """Every device's selector results, as the extender hands them to a search."""
    cache = SelectorCache()
    devices = [d for pool in view.pools for d in pool.devices]

    def column(device_class: DeviceClass, selectors: tuple[str, ...]) -> tuple[bool | str, ...]:
        out: list[bool | str] = []
        for d in devices:
            try:
                out.append(cache.matches_shared(device_class, selectors, d))
            except CelError as exc:
                out.append(str(exc))
        return tuple(out)

    return column


def _objective(view: NodeView, allocated: AllocatedState, *, bounded: bool = True,
               config: TopologyConfig | None = None) -> Any:
    """drax's allocator-mode objective for the node, with or without its bound
    and early stop."""
    objective = make_objective(node_view=view, allocated=allocated,
                               config=config or TopologyConfig(), mode="allocator")
    return objective if bounded else _unbounded(objective)


def _search(claims: Sequence[ResourceClaim], view: NodeView, allocated: AllocatedState, *,
            objective: Any, classes: dict[str, DeviceClass] = CLASSES,
            step_budget: int = 10**7) -> AllocationOutcome:
    """The search as the extender runs it, every selector result known."""
    return allocate(claims, node_view=view, classes=classes, allocated=allocated,
                    features=FeatureGates(), objective=objective, step_budget=step_budget,
                    known_matches=known_matches(view))


def _same(a: AllocationOutcome, b: AllocationOutcome, *, results: bool = True) -> None:
    """Equal answers (`results`: the allocation results too; a shared device's
    result carries a share ID drawn at random)."""
    assert a.feasible == b.feasible
    assert [d.id for d in a.picks] == [d.id for d in b.picks]
    assert a.score == b.score
    assert (a.reason, a.error) == (b.reason, b.error)
    if results:
        assert [c.allocation for c in a.claims] == [c.allocation for c in b.claims]


# The unbounded search of an example may take this many steps (~35 us each).
# A few examples take far more, where the bound is off and both searches are
# exhaustive: a node of partitioned GPUs (three candidates a GPU, no twins)
# under a pod of 3 + 4 GPUs with no selector, or eight shared GPUs that the
# 3 + 2 + 3 GPU requests of two claims may each take again (431,609 steps,
# 20 s a search). Such examples are replaced by others (`assume`), so each
# test keeps its 400 examples.
EXAMPLE_STEPS = 20_000


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node=nodes(), raw_claims=pods(), spread=st.booleans())
def test_bounded_search_returns_what_the_unbounded_search_returns(
        node: tuple[list[dict[str, Any]], list[str]], raw_claims: list[dict[str, Any]],
        spread: bool) -> None:
    raw_slices, taken = node
    if not raw_slices:
        return
    view = node_view(raw_slices, node_obj())
    ids = {d.name: d.id for pool in view.pools for d in pool.devices}
    allocated = AllocatedState(devices=frozenset(ids[n] for n in taken))
    claims = [parse_object("ResourceClaim", c) for c in raw_claims]
    config = TopologyConfig(packing="spread" if spread else "binpack")
    unbounded = _search(claims, view, allocated, step_budget=EXAMPLE_STEPS,
                        objective=_objective(view, allocated, bounded=False, config=config))
    assume(unbounded.steps < EXAMPLE_STEPS)
    _same(_search(claims, view, allocated,
                  objective=_objective(view, allocated, config=config)), unbounded)


def _partly_used_node() -> tuple[list[ResourceClaim], NodeView, dict[str, DeviceClass],
                                  AllocatedState]:
    """A 4 GPUs + 4 NICs pod on a generator node with one GPU taken."""
    inv_slices = [o for o in generator.generate_cluster(nodes=1, partitionable_fraction=0.0,
                                                         shared_fraction=0.0)
                  if o["kind"] == "ResourceSlice"]
    classes = parse_classes(generator.device_classes())
    node = node_obj(generator.node_name(0))
    view = node_view(inv_slices, node)
    gpu = next(d for pool in view.pools for d in pool.devices if d.driver == generator.GPU_DRIVER)
    allocated = AllocatedState(devices=frozenset([gpu.id]))
    spec = generator.SHAPES["4gpu-4nic"]
    pod = [parse_object("ResourceClaim", {"kind": "ResourceClaim",
                                          "metadata": {"name": "c", "namespace": "d"},
                                          "spec": spec})]
    return pod, view, classes, allocated


def test_bound_cuts_the_search_on_a_partly_used_node() -> None:
    """4 GPUs + 4 NICs on a node with one GPU taken: the only allocation on one
    NUMA node comes last in the search's order; found first inside that NUMA
    node, it rules out every branch that spans both before it is explored."""
    pod, view, classes, allocated = _partly_used_node()
    bounded_outcome, unbounded = (
        _search(pod, view, allocated, classes=classes,
                objective=_objective(view, allocated, bounded=bounded))
        for bounded in (True, False))
    _same(bounded_outcome, unbounded)
    assert bounded_outcome.steps * 10 < unbounded.steps


def test_the_block_probes_steps_count_against_the_budget(monkeypatch: Any) -> None:
    """Every device tried in a slot is a step of the budget, in the first fits
    inside a block too: the steps reported are every step taken, and a budget
    the probes use up ends the search as any spent budget does."""
    pod, view, classes, allocated = _partly_used_node()
    ticks = {"all": 0, "probing": 0}
    tick, probe = Search._tick, Search._probe_blocks

    def counting(self: Search) -> None:
        tick(self)
        ticks["all"] += 1

    def probing(self: Search) -> float:
        before = ticks["all"]
        try:
            return probe(self)
        finally:
            ticks["probing"] += ticks["all"] - before

    monkeypatch.setattr(Search, "_tick", counting)
    monkeypatch.setattr(Search, "_probe_blocks", probing)

    def search(step_budget: int) -> AllocationOutcome:
        return _search(pod, view, allocated, classes=classes, step_budget=step_budget,
                       objective=_objective(view, allocated))

    outcome = search(10**7)
    assert ticks["probing"] > 0
    assert outcome.steps == ticks["all"]
    ticks["all"] = 0
    short = search(outcome.steps - 1)
    assert short.steps == ticks["all"] == outcome.steps - 1


class _Counting:
    """The objective, counting the allocations it scores."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.first_fit = inner.first_fit
        self.scored = 0

    def score(self, picks: Sequence[Device]) -> float:
        self.scored += 1
        return float(self._inner.score(picks))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _seven_free_gpus(*, shared: bool) -> tuple[list[ResourceClaim], NodeView,
                                                AllocatedState]:
    """A 3-GPU pod on 8 GPUs (`shared`: allowing multiple allocations) and 4 NICs
    over 4 roots on 2 NUMA nodes, one GPU taken."""
    extra = {"allowMultipleAllocations": True} if shared else {}
    gpus = [dev(f"gpu-{r}-{i}", {"kind": "full", ROOT: f"pci-{r}"}, **extra)
            for r in range(4) for i in range(2)]
    nics = [dev(f"nic-{r}", {ROOT: f"pci-{r}", NUMA: r // 2}) for r in range(4)]
    view = node_view([sl("gpus", gpus, driver=GPU, pool="gpus"),
                      sl("nics", nics, driver=NIC, pool="nics")], node_obj())
    taken = next(d.id for pool in view.pools for d in pool.devices if d.name == "gpu-0-0")
    allocated = AllocatedState(devices=frozenset([taken]))
    pod = [parse_object("ResourceClaim", claim("c", req("gpu", "gpu", count=3)))]
    return pod, view, allocated


def _scored(pod: list[ResourceClaim], view: NodeView, allocated: AllocatedState
            ) -> tuple[list[AllocationOutcome], list[int]]:
    """The bounded and the unbounded search's outcomes, and how many allocations
    each scored."""
    outcomes, scored = [], []
    for bounded in (True, False):
        counting = _Counting(_objective(view, allocated, bounded=bounded))
        outcomes.append(_search(pod, view, allocated, objective=counting))
        scored.append(counting.scored)
    return outcomes, scored


def test_allocations_alike_for_the_objective_are_scored_once() -> None:
    """Where the bound applies, a score depends only on where the picks are
    and their roles, so allocations alike are scored once, and branches the
    bound rules out are not scored at all: 3 GPUs of the 7 free on 4 roots
    (the unbounded search scores 13 allocations, the bounded one 2)."""
    outcomes, scored = _scored(*_seven_free_gpus(shared=False))
    _same(*outcomes)
    assert scored == [2, 13]


def test_a_slot_tries_only_the_devices_known_to_match() -> None:
    """With every selector result known and none an error, a slot skips the
    devices that do not match instead of trying each: a GPU among 60 NICs
    costs a step per GPU tried, and the answer is the one found trying all."""
    nics = [dev(f"nic-{i}", {ROOT: "pci-0", NUMA: 0}) for i in range(60)]
    gpus = [dev(f"gpu-{i}", {"kind": "full", ROOT: "pci-0"}) for i in range(2)]
    view = node_view([sl("a-nics", nics, driver=NIC, pool="a-nics"),
                      sl("gpus", gpus, driver=GPU, pool="gpus")], node_obj())
    pod = [parse_object("ResourceClaim", claim("c", req("gpu", "gpu", count=2)))]
    outcomes = [allocate(pod, node_view=view, classes=CLASSES, allocated=AllocatedState(),
                         features=FeatureGates(), known_matches=known)
                for known in (known_matches(view), None)]
    with_known, trying_all = outcomes
    _same(with_known, trying_all)
    assert with_known.steps == 2
    assert trying_all.steps > 60


def test_a_placement_is_scored_once_where_no_bound_applies() -> None:
    """Shared GPUs keep the bound off, but a score still depends only on where
    the picks are and their roles: 3 of the 7 free GPUs on 4 roots are 35
    allocations (twins not pruned here) in 13 placements."""
    pod, view, allocated = _seven_free_gpus(shared=True)
    outcomes, scored = [], []
    for keep in (("score_class",), ()):
        counting = _Counting(PlainObjective(_objective(view, allocated), *keep))
        outcomes.append(_search(pod, view, allocated, objective=counting))
        scored.append(counting.scored)
    _same(*outcomes, results=False)
    assert scored == [13, 35]


@st.composite
def shared_nodes(draw: st.DrawFn) -> tuple[NodeView, AllocatedState]:
    """Shared GPUs (some already holding shares of other pods, with memory
    taken), whole GPUs and NICs on PCIe roots over NUMA nodes."""
    gpus: list[dict[str, Any]] = []
    nics: list[dict[str, Any]] = []
    roots = draw(st.integers(1, 4))
    for r in range(roots):
        attrs = {ROOT: f"pci-{r}", NUMA: r // 2}
        for g in range(draw(st.integers(0, 3))):
            shared = draw(st.integers(0, 3)) > 0
            extra: dict[str, Any] = {"allowMultipleAllocations": True} if shared else {}
            gpus.append(dev(f"gpu-{r}-{g}", attrs, capacity={"memory": "8"} if shared else None,
                            **extra))
        nics.extend(dev(f"nic-{r}-{n}", attrs) for n in range(draw(st.integers(0, 2))))
    slices = [sl("gpus", gpus, driver=GPU, pool="gpus")]
    if nics:
        slices.append(sl("nics", nics, driver=NIC, pool="nics"))
    view = node_view(slices, node_obj())
    multi: set[str] = set()
    consumed: dict[str, dict[str, Quantity]] = {}
    taken: set[str] = set()
    for device in (d for pool in view.pools for d in pool.devices):
        use = draw(st.integers(0, 3))
        if device.allow_multiple_allocations and use:
            multi.add(device.id)
            consumed[device.id] = {"memory": parse_quantity(str(use * 2))}
        elif not device.allow_multiple_allocations and use == 3:
            taken.add(device.id)
    return view, AllocatedState(devices=frozenset(taken), multi_allocated=frozenset(multi),
                                consumed_capacity=consumed)


@st.composite
def shared_pods(draw: st.DrawFn) -> list[ResourceClaim]:
    """One or two claims of GPU requests (some asking memory of a shared GPU,
    two requests of one claim may share a device) and NICs."""
    claims = []
    for c in range(draw(st.integers(1, 2))):
        requests = []
        for r in range(draw(st.integers(1, 2))):
            memory = draw(st.sampled_from([None, "2", "4"]))
            requests.append(req(f"gpu{r}", "gpu", count=draw(st.integers(1, 3)),
                                capacity={"memory": memory} if memory else None))
        if draw(st.booleans()):
            requests.append(req("nic", "nic", count=draw(st.integers(1, 2))))
        constraints = [match(ROOT)] if draw(st.integers(0, 3)) == 0 else []
        claims.append(parse_object("ResourceClaim",
                                   claim(f"c{c}", *requests, constraints=constraints)))
    return claims


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node=shared_nodes(), claims=shared_pods(), spread=st.booleans())
def test_bounded_search_on_shared_devices_returns_what_the_unbounded_search_returns(
        node: tuple[NodeView, AllocatedState], claims: list[ResourceClaim],
        spread: bool) -> None:
    """Shared devices (some holding other pods' shares) are candidates the
    bound counts as room in their groups; the answer stays the unbounded
    search's, also where two requests of a claim may share a device (the bound
    is then off)."""
    view, allocated = node
    config = TopologyConfig(packing="spread" if spread else "binpack")
    unbounded = _search(claims, view, allocated, classes=CLASSES, step_budget=EXAMPLE_STEPS,
                        objective=PlainObjective(_objective(view, allocated, config=config),
                                                 "twin_key", "score_class"))
    assume(unbounded.steps < EXAMPLE_STEPS)
    bounded = _search(claims, view, allocated, classes=CLASSES,
                      objective=_objective(view, allocated, config=config))
    _same(bounded, unbounded, results=False)


def test_bound_cuts_the_search_on_a_node_of_shared_gpus_with_a_share_taken() -> None:
    """4 GPUs + 4 NICs on a generator node of shared GPUs, one GPU holding
    another pod's share: that GPU is room the allocation may take again, and
    the bound rules out the branches spanning both NUMA nodes."""
    inv_slices = [o for o in generator.generate_cluster(nodes=1, partitionable_fraction=0.0,
                                                         shared_fraction=1.0)
                  if o["kind"] == "ResourceSlice"]
    classes = parse_classes(generator.device_classes())
    view = node_view(inv_slices, node_obj(generator.node_name(0)))
    gpu = next(d for pool in view.pools for d in pool.devices if d.driver == generator.GPU_DRIVER)
    allocated = AllocatedState(multi_allocated=frozenset([gpu.id]), consumed_capacity={
        gpu.id: {"memory": parse_quantity("10Gi")}})
    pod = [parse_object("ResourceClaim", {"kind": "ResourceClaim",
                                          "metadata": {"name": "c", "namespace": "d"},
                                          "spec": generator.SHAPES["4gpu-4nic"]})]
    bounded = _search(pod, view, allocated, objective=_objective(view, allocated),
                      classes=classes)
    unbounded = _search(pod, view, allocated, classes=classes, objective=PlainObjective(
        _objective(view, allocated), "twin_key", "score_class"))
    _same(bounded, unbounded, results=False)
    assert bounded.steps * 5 < unbounded.steps


def test_a_slot_stops_when_too_few_known_matches_are_left() -> None:
    """8 GPUs of a generator node's 8 (partitionable: 88 devices): there is one
    allocation. Once it is found, no slot tries a device that leaves too few
    of the request's known matches for its later slots, so the search does
    not enumerate the 255 other subsets that cannot complete."""
    inv_slices = [o for o in generator.generate_cluster(nodes=1, partitionable_fraction=1.0,
                                                         shared_fraction=0.0)
                  if o["kind"] == "ResourceSlice"]
    classes = parse_classes(generator.device_classes())
    view = node_view(inv_slices, node_obj(generator.node_name(0)))
    allocated = AllocatedState()
    pod = [parse_object("ResourceClaim", {"kind": "ResourceClaim",
                                          "metadata": {"name": "c", "namespace": "d"},
                                          "spec": generator.SHAPES["8gpu"]})]
    outcome = _search(pod, view, allocated, objective=_objective(view, allocated),
                      classes=classes)
    assert outcome.feasible and len(outcome.picks) == 8
    assert outcome.steps == 8


def _shared_gpus(*used: str) -> tuple[NodeView, AllocatedState]:
    """One NUMA node: pci-1 holds a-g2 (shared) and b-g3 (taken), pci-0 holds
    c-g1 and d-g0 (shared); `used` of the shared ones hold other pods' shares."""
    shared = {"allowMultipleAllocations": True}
    view = node_view([sl("gpus", [
        dev("a-g2", {"kind": "full", ROOT: "pci-1", NUMA: 0}, **shared),
        dev("b-g3", {"kind": "full", ROOT: "pci-1", NUMA: 0}),
        dev("c-g1", {"kind": "full", ROOT: "pci-0", NUMA: 0}, **shared),
        dev("d-g0", {"kind": "full", ROOT: "pci-0", NUMA: 0}, **shared)],
        driver=GPU, pool="gpus")], node_obj())
    ids = {d.name: d.id for pool in view.pools for d in pool.devices}
    return view, AllocatedState(devices=frozenset([ids["b-g3"]]),
                                multi_allocated=frozenset(ids[n] for n in used))


def test_the_search_goes_on_past_new_units_for_a_shared_gpu_another_pod_uses() -> None:
    """Two new GPUs on two roots are the best that new units reach, but taking
    d-g0 again beside c-g1 keeps the pod on one root."""
    view, allocated = _shared_gpus("d-g0")
    pod = [parse_object("ResourceClaim", claim("c", req("gpu", "gpu", count=2)))]
    found = _search(pod, view, allocated, objective=_objective(view, allocated))
    assert [d.name for d in found.picks] == ["c-g1", "d-g0"]
    _same(found, _search(pod, view, allocated, objective=_objective(view, allocated,
                                                                    bounded=False)),
          results=False)


def test_the_search_goes_on_past_new_units_for_a_shared_gpu_two_requests_take() -> None:
    """One GPU per request on two roots is all distinct units reach; one
    request taking c-g1 again beside the other's keeps the pod on one root."""
    view, allocated = _shared_gpus()
    pod = [parse_object("ResourceClaim", claim("c", req("one", "gpu", count=1),
                                               req("two", "gpu", count=2)))]
    found = _search(pod, view, allocated, objective=_objective(view, allocated))
    assert {d.name for d in found.picks} <= {"c-g1", "d-g0"}
    _same(found, _search(pod, view, allocated, objective=_objective(view, allocated,
                                                                    bounded=False)),
          results=False)


def test_the_search_goes_on_past_a_gpu_without_a_root_for_two_halves_of_it() -> None:
    """A GPU without a PCIe root beside a rooted one is one placed unit, perfect
    for that shape; the two halves of the root-less GPU hold no placed unit and
    score higher, so partitions and root-less GPUs keep the search going."""
    gpus: list[dict[str, Any]] = []
    counters: dict[str, dict[str, str]] = {}
    for name, root in (("gpu-0-0", None), ("gpu-0-1", "pci-0"), ("gpu-1-0", "pci-1")):
        attrs = {"kind": "full", **({ROOT: root} if root else {})}
        counters[name] = {"mem": "2"}
        gpus.append(dev(name, attrs, consumesCounters=consumes(name, mem="2")))
        gpus += [dev(f"{name}-half-{h}", {**attrs, "kind": "half"},
                     consumesCounters=consumes(name, mem="1")) for h in range(2)]
    nics = [dev("nic-0-0", {ROOT: "pci-0", NUMA: 0}), dev("nic-1-0", {ROOT: "pci-1", NUMA: 0})]
    view = node_view([sl("gpus", gpus, driver=GPU, pool="gpus", count=2),
                      sl("nics", nics, driver=NIC, pool="nics"),
                      sl("gpu-counters", driver=GPU, pool="gpus", count=2, counters=counters)],
                     node_obj())
    allocated = AllocatedState()
    pod = [parse_object("ResourceClaim", claim("c0", req("gpu", "gpu", count=2)))]
    found = _search(pod, view, allocated, objective=_objective(view, allocated))
    assert [d.name for d in found.picks] == ["gpu-0-0-half-0", "gpu-0-0-half-1"]
    _same(found, _search(pod, view, allocated,
                         objective=_objective(view, allocated, bounded=False)))


def test_the_search_goes_on_past_gpus_on_roots_without_a_numa_node() -> None:
    """GPUs on PCIe roots no device places on a NUMA node: the search does not
    stop at the first allocation (0.2147), and finds two on pci-0 beside
    gpu-1-0 (0.2156)."""
    gpus = [dev(n, {"kind": "full", ROOT: r}) for n, r in (
        ("gpu-0-0", "pci-0"), ("gpu-0-1", "pci-0"), ("gpu-1-0", "pci-1"),
        ("gpu-3-0", "pci-3"), ("gpu-3-1", "pci-3"))]
    view = node_view([sl("gpus", gpus, driver=GPU, pool="gpus"),
                      sl("nics", [dev("nic-2-0", {ROOT: "pci-2", NUMA: 0})], driver=NIC,
                         pool="nics")], node_obj())
    allocated = AllocatedState()
    pod = [parse_object("ResourceClaim", claim(
        f"c{c}", first("gpu", sub("many", "gpu", count=count), sub("one", "gpu", count=1)),
        constraints=[match(ROOT)])) for c, count in ((0, 1), (1, 2))]
    config = TopologyConfig(packing="spread")
    found = _search(pod, view, allocated, objective=_objective(view, allocated, config=config))
    assert [d.name for d in found.picks] == ["gpu-1-0", "gpu-0-0", "gpu-0-1"]
    _same(found, _search(pod, view, allocated, objective=_objective(
        view, allocated, bounded=False, config=config)))
