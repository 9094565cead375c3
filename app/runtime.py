"""Assemble a running drax from settings: inventory, its source, extender, app.

Three sources, chosen in this order: `inventory` paths (file mode), a
kubeconfig or the in-cluster service account (kube mode), else the bundled
sample cluster (file mode over `app/sample/`). File mode loads everything
before the server starts, so the service is ready on its first request; the
answers for the known claim shapes are warmed before ready for at most
`WARM_BEFORE_READY_SECONDS` and the rest in the background, between requests
(on a very large cluster warming every shape on every node takes longer than
loading); kube mode starts its watches in the app's lifespan (they need the
running loop) and `/readyz` turns ready once every watched kind has been listed.
With a leader-election Lease configured, every replica watches and serves, and
what drax writes on its own (releasing half-written binds, preemption, the
requeue of rejected pods) runs only while `Runtime.leadership` says this
replica's kube-scheduler holds the Lease.

It sits above the server and below the CLI: it wires sources, inventory,
extender, binder, observers and the HTTP apps into one process.

Tests build the same `Runtime` that `drax serve` runs, so they exercise the
exact wiring the scheduler talks to.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from fastapi import FastAPI
from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.registry import Collector

from app import garbage_collector
from app.allocator.types import ClaimAllocation
from app.binder import BindMetrics, ClaimCopies, KubeBinder
from app.binder.repair import RepairMetrics, keep_releasing
from app.binder.requeue import RequeueMetrics, Requeuer
from app.capacity import CapacityShape, parse_capacity
from app.config import ConfigError, Settings
from app.extender import BindCause, Binder, BindError, Extender
from app.extender.binder import MemoryBinder
from app.extender.extended import ExtendedClaim
from app.extender.pending import DEFAULT_BIND_WAIT_SECONDS
from app.inventory import KINDS, Inventory, NodePool
from app.model import InvalidObject, Pod, ResourceClaim, decode_resource_slice
from app.observability.inventory import InventoryObserver
from app.observability.placement import PlacementMetrics, PlacementRecorder
from app.observability.search import SearchMetrics
from app.preemption import Actor, Catchup, CatchupMetrics, Driver, PreemptionMetrics, VictimSearch
from app.server.app import Lifespan, create_app
from app.server.metrics import ServerMetrics
from app.server.probes import create_probe_app
from app.sources.files import ParsedSlice, RawSlice, Sourced, iter_sourced
from app.sources.kube import (
    WATCHED_KINDS,
    InventorySizes,
    KubeSource,
    WatchMetrics,
    api_client,
    in_cluster,
)
from app.sources.kube.lease import Leadership
from app.topology import TopologyConfig

log = logging.getLogger(__name__)

SAMPLE_DIR: Final = Path(__file__).resolve().parent / "sample"


@dataclass(slots=True, frozen=True)
class LoadReport:
    applied: int
    invalid: int
    unknown_kinds: dict[str, int]


@dataclass(slots=True)
class Runtime:
    settings: Settings
    source: str  # "files", "sample" or "kube", for /version and the start-up log
    inventory: Inventory
    app: FastAPI
    probes: FastAPI  # health, readiness, metrics alone, for `metrics_port`
    # The runtime's own registry: every metric of this runtime, served at /metrics.
    metrics: ServerMetrics
    # Whether this replica's kube-scheduler holds the leader-election Lease
    # (always, without one); kube mode follows the Lease in the lifespan.
    leadership: Leadership


def load_files(inventory: Inventory, paths: Iterable[str | Path]) -> LoadReport:
    """Feed every object in `paths` to `inventory`, then mark every kind synced.

    A file that cannot be read raises `SourceError`; an object the inventory
    rejects is logged with its name and skipped, so one bad object does not
    hide the rest of the cluster.
    """
    applied = invalid = 0
    unknown: Counter[str] = Counter()
    pool = inventory.pool
    # With a node pool, a slice read before the Node it depends on waits for
    # the end of the files: only then is every Node's pool known.
    later: list[Sourced] = []

    def apply(path: Path, obj: dict[str, Any]) -> None:
        nonlocal applied, invalid
        kind = obj["kind"]
        try:
            if type(obj) is ParsedSlice:  # no node pool: every slice is kept
                inventory.apply_parsed(kind, "ADDED", obj.slice)
            elif type(obj) is RawSlice:
                # decoded straight into the model, and only if the pool keeps it
                if inventory.admits(kind, obj):
                    inventory.apply_parsed(kind, "ADDED", decode_resource_slice(obj.raw))
            else:
                inventory.apply(kind, "ADDED", obj)
        except InvalidObject as exc:
            invalid += 1
            log.warning("%s: skipping invalid %s %s: %s", path, kind, _name_of(obj), exc)
        else:
            applied += 1

    # Everything parsed here stays alive: the cyclic collector would rescan the
    # growing inventory again and again for nothing.
    with garbage_collector.paused():
        for path, obj in iter_sourced(paths, raw_slices=True, parsed_slices=pool is None):
            kind = obj["kind"]
            if kind not in KINDS:
                unknown[kind] += 1
            elif pool is not None and kind == "ResourceSlice" and _waits_for_nodes(pool, obj):
                later.append(Sourced(path, obj))
            else:
                apply(path, obj)
        for path, obj in later:
            apply(path, obj)
    for kind, count in sorted(unknown.items()):
        log.warning("skipping %d object(s) of kind %s: drax does not use that kind", count, kind)
    for kind in KINDS:
        inventory.mark_synced(kind)
    return LoadReport(applied=applied, invalid=invalid, unknown_kinds=dict(unknown))


def _waits_for_nodes(pool: NodePool, obj: Mapping[str, Any]) -> bool:
    """A raw slice whose fate depends on Nodes not read yet: node-local on a
    node not seen, or selecting nodes device by device."""
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return False
    node_name = spec.get("nodeName")
    if isinstance(node_name, str) and node_name:
        return not pool.knows(node_name)
    return bool(spec.get("perDeviceNodeSelection"))


def warn_if_empty(inventory: Inventory, paths: Iterable[str | Path]) -> None:
    """A file inventory without nodes or devices serves, but every pod that
    needs a device fails filter: say so once at start, since readiness cannot."""
    counts = inventory.counts()
    where = ", ".join(map(str, paths))
    if counts.nodes == 0:
        log.warning("%s: no Nodes or node-local ResourceSlices loaded; drax is ready but "
                    "every pod that needs devices will fail filter", where)
    elif counts.devices == 0:
        log.warning("%s: %d nodes but no devices (no ResourceSlices loaded); drax is ready "
                    "but every pod that needs devices will fail filter", where, counts.nodes)


# Longest file-mode start-up warms before ready: a cluster of a few thousand
# nodes is fully warmed within it (its first pods pay nothing), a
# 100,000-node one is ready once loaded plus this and warms the rest between
# requests.
WARM_BEFORE_READY_SECONDS: Final = 15.0


def warm_first(extender: Extender, *, budget_seconds: float) -> bool:
    """Warm for at most `budget_seconds` before serving; True if work remains
    (then `keep_warm` carries on in the background). The collector is paused
    for the reason `load_files` gives."""
    started = time.monotonic()
    deadline = started + budget_seconds
    more = True
    with garbage_collector.paused():
        while more and (left := deadline - time.monotonic()) > 0:
            more = extender.warm(budget_seconds=min(1.0, left))
    log.info("answers for known claim shapes computed for %.1f s before ready%s",
             time.monotonic() - started, "; the rest in the background" if more else "")
    return more


def warm_fully(extender: Extender) -> None:
    """Answer every known claim shape on every node at once (benchmarks that
    time warmed verbs); `drax serve` warms first for a bounded time
    (`warm_first`). The collector is paused for the reason `load_files` gives."""
    started = time.monotonic()
    with garbage_collector.paused():
        while extender.warm(budget_seconds=1.0):
            pass
    log.info("answers for known claim shapes computed in %.1f s", time.monotonic() - started)


def _name_of(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return "<no metadata>"
    name, namespace = meta.get("name") or "<unnamed>", meta.get("namespace")
    return f"{namespace}/{name}" if namespace else str(name)


def node_pool(settings: Settings) -> NodePool | None:
    return NodePool(settings.node_selector) if settings.node_selector else None


def choose_source(settings: Settings) -> str:
    if settings.inventory:
        return "files"
    if settings.kubeconfig or in_cluster():
        return "kube"
    return "sample"


def topology_config(settings: Settings) -> TopologyConfig:
    try:
        return TopologyConfig.from_dict(settings.topology)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


class DeferredBinder:
    """Forwards to the API-server binder once the lifespan has connected it.

    The extender is built before the event loop runs, but the kubernetes
    client can only be created on the loop; until then bind says so.
    """

    def __init__(self) -> None:
        self.target: Binder | None = None

    async def bind(self, *, pod: Pod, node: str, allocations: Sequence[ClaimAllocation],
                   reserve: Sequence[ResourceClaim],
                   extended: ExtendedClaim | None = None) -> str | None:
        if self.target is None:
            raise BindError("drax is not connected to the API server yet", BindCause.NOT_SERVED)
        return await self.target.bind(pod=pod, node=node, allocations=allocations,
                                      reserve=reserve, extended=extended)


def capacity_shapes(settings: Settings) -> tuple[CapacityShape, ...]:
    try:
        return parse_capacity(settings.capacity)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def build_runtime(settings: Settings, *, registry: CollectorRegistry | None = None) -> Runtime:
    """Everything `drax serve` runs; file sources are fully loaded on return.

    Every metric of the runtime goes on `registry` (a new one when not given),
    which its apps serve at `/metrics`. Raises ConfigError for unusable
    settings and SourceError for unreadable files.
    """
    server_metrics = ServerMetrics(registry)
    registry = server_metrics.registry
    source = choose_source(settings)
    topology = topology_config(settings)
    shapes = capacity_shapes(settings)
    if settings.kubeconfig and not Path(settings.kubeconfig).is_file():
        # Caught here, not when the lifespan connects, so the error is one line.
        raise ConfigError(f"kubeconfig: {settings.kubeconfig}: no such file")
    lifespan = None
    placements = PlacementMetrics()
    leadership = Leadership(lease=settings.lease if source == "kube" else None,
                            identity=settings.leader_election_identity)
    catchup = None
    if source == "kube":
        inventory = Inventory(expected_kinds=[w.kind for w in WATCHED_KINDS],
                              pool=node_pool(settings))
        binder = DeferredBinder() if settings.mode == "allocator" else None
        # Only here does a kube-scheduler bind from its own goroutine (file mode
        # has no API server, so no scheduler in front of it).
        extender = Extender(inventory, features=settings.features, mode=settings.mode,
                            topology_config=topology, bind_wait=DEFAULT_BIND_WAIT_SECONDS,
                            verb_deadline=settings.verb_deadline,
                            binder=None if binder is None else PlacementRecorder(
                                binder, inventory=inventory, config=topology,
                                metrics=placements))
        if settings.preemption:
            catchup = Catchup(inventory, metrics=CatchupMetrics(registry))
        lifespan = _kube_lifespan(settings, inventory, binder, registry, leadership, extender,
                                  catchup)
    else:
        inventory = Inventory(pool=node_pool(settings))
        paths = settings.inventory if source == "files" else (SAMPLE_DIR,)
        report = load_files(inventory, paths)
        log.info("loaded %d objects from %s (%d invalid, skipped)", report.applied,
                 ", ".join(map(str, paths)), report.invalid)
        warn_if_empty(inventory, paths)
        if inventory.pool is not None:
            log.info("node pool %s: %d nodes", inventory.pool.describe(),
                     len(inventory.pool.members))
        extender = Extender(inventory, features=settings.features, mode=settings.mode,
                            topology_config=topology, file_mode=True,
                            verb_deadline=settings.verb_deadline,
                            binder=PlacementRecorder(MemoryBinder(inventory),
                                                     inventory=inventory, config=topology,
                                                     metrics=placements))
        warm_first(extender, budget_seconds=WARM_BEFORE_READY_SECONDS)
    observer = InventoryObserver(inventory, config=topology, features=settings.features,
                                 shapes=shapes, equivalence=extender.equivalence)
    extra: list[Collector] = [observer, SearchMetrics(extender.stats), placements]
    if source != "kube":
        extra.append(InventorySizes(inventory))  # kube mode registers its own
    for collector in extra:
        registry.register(collector)
    lifespan = _observing(observer, extender, lifespan)
    app = create_app(verbs=extender, ready=lambda: inventory.synced,
                     max_body_bytes=settings.max_body_bytes, url_prefix=settings.url_prefix,
                     body_read_timeout=settings.body_read_timeout,
                     mode=settings.mode, info={"source": source},
                     lifespan=_warming(extender, lifespan), on_request=extender.note_request,
                     metrics=server_metrics,
                     before_filter=None if catchup is None else catchup.before_filter,
                     schedulers=settings.scheduler_name)
    probes = create_probe_app(ready=lambda: inventory.synced, metrics=server_metrics,
                              mode=settings.mode, info={"source": source})
    return Runtime(settings=settings, source=source, inventory=inventory, app=app,
                   probes=probes, metrics=server_metrics, leadership=leadership)


def _observing(observer: InventoryObserver, extender: Extender,
               inner: Lifespan | None) -> Lifespan:
    """`inner` plus the background inventory walk behind the inventory and
    capacity metrics; it waits for the scheduler to be quiet, like warming."""
    return _with_task(inner, lambda: observer.run(
        quiet=lambda: time.monotonic() - extender.last_request > 0.005,
        on_progress=garbage_collector.freeze))


def _warming(extender: Extender, inner: Lifespan | None) -> Lifespan:
    """`inner` plus `Extender.keep_warm` in the background, so the first request
    of a claim shape (after start-up or a change) finds its answers computed.
    What a pass builds is frozen after each stretch of work: a full collection
    over the answers and selector caches would be a pause inside some request."""
    freeze = garbage_collector.freeze
    return _with_task(inner, lambda: extender.keep_warm(on_settled=freeze, on_progress=freeze))


def _with_task(inner: Lifespan | None,
               start: Callable[[], Coroutine[Any, Any, None]]) -> Lifespan:
    """`inner` plus the task `start()` running for as long as the app does."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            if inner is not None:
                await stack.enter_async_context(inner(app))
            task = asyncio.get_running_loop().create_task(start())
            try:
                yield
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    return lifespan


def _kube_lifespan(settings: Settings, inventory: Inventory, binder: DeferredBinder | None,
                   registry: CollectorRegistry, leadership: Leadership,
                   extender: Extender, catchup: Catchup | None) -> Lifespan:
    watch_metrics = WatchMetrics(registry, kinds=[w.kind for w in WATCHED_KINDS])
    leader_gauge = Gauge("drax_leader", "1 while this replica's kube-scheduler holds the "
                         "leader-election Lease (always 1 without one), else 0.",
                         registry=registry)
    leader_gauge.set_function(lambda: float(leadership.leading))
    registry.register(InventorySizes(inventory))
    bind_metrics = BindMetrics(registry) if binder is not None else None
    repair_metrics = RepairMetrics(registry) if binder is not None else None
    requeue_metrics = RequeueMetrics(registry, extender.waiting)
    preemption_metrics = PreemptionMetrics(registry) if settings.preemption else None
    if preemption_metrics is not None:
        preemption_metrics.observe(inventory)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        api = await api_client(kubeconfig=settings.kubeconfig or None)
        requeuer = Requeuer(api, waiting=extender.waiting, leadership=leadership,
                            metrics=requeue_metrics)
        copies = ClaimCopies() if binder is not None else None
        driver = None if preemption_metrics is None else Driver(
            inventory, search=VictimSearch.of(extender, schedulers=settings.scheduler_name),
            actor=Actor(api, inventory, hold_seconds=settings.preemption_hold_seconds),
            metrics=preemption_metrics, leadership=leadership,
            hold_seconds=settings.preemption_hold_seconds)

        def on_change(kind: str, event_type: str, obj: Mapping[str, Any] | None) -> None:
            requeuer.on_change(kind, event_type, obj)
            if copies is not None:
                copies.on_change(kind, event_type, obj)
            if driver is not None:
                driver.on_change(kind, event_type, obj)

        watches = KubeSource(api, inventory, metrics=watch_metrics, pool=inventory.pool,
                             on_change=on_change)
        loop = asyncio.get_running_loop()
        tasks = [loop.create_task(leadership.run(api), name="leadership"),
                 loop.create_task(requeuer.run(), name="requeue-rejected")]
        if binder is not None and bind_metrics is not None and repair_metrics is not None:
            binder.target = KubeBinder(
                api, metrics=bind_metrics,
                allocation_timestamp=settings.features.device_binding_conditions,
                copies=copies)
            tasks.append(loop.create_task(
                keep_releasing(api, metrics=repair_metrics, leadership=leadership),
                name="release-half-written"))
        if driver is not None:
            tasks.append(loop.create_task(driver.run(), name="preemption"))
        if catchup is not None:
            catchup.api = api
        # A standby that takes over must not wait out a backoff grown while following.
        unsubscribe = leadership.subscribe(lambda leading: watches.nudge() if leading else None)
        watches.start()
        try:
            yield
        finally:
            unsubscribe()
            if catchup is not None:
                catchup.api = None
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await watches.stop()
            await api.close()

    return lifespan
