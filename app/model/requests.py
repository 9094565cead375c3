"""Pod requests and node allocatable as kube-scheduler's NodeResourcesFit counts them.

A pod's requests are component-helpers' `PodRequests` with kube-scheduler
1.37's defaults (in-place resize and pod-level resources on): per resource,
the containers add up; an init container needs its own amount plus the
restartable init containers (sidecars) started before it, and the pod the
largest of those and the sum; sidecars add to the sum. For a running pod,
what its status says it was given or runs with (a resize not yet applied or
already applied) counts when it is larger. Pod-level `spec.resources`
replaces the containers' cpu, memory and hugepages, and `spec.overhead` is
added last. The result is rounded up as the scheduler's `Resource` rounds it
(cpu in millicores, the rest in units). A node's allocatable is read the
same way. `Resources` values repeat across the pods of one workload, so they
are shared (`shared_resources`): a node's index of pods holds one object per
distinct vector.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final

from app.bounded_cache import BoundedCache

CPU: Final = "cpu"
MEMORY: Final = "memory"
EPHEMERAL_STORAGE: Final = "ephemeral-storage"
PODS: Final = "pods"
_HUGEPAGES: Final = "hugepages-"
_ATTACHABLE: Final = "attachable-volumes-"
_NATIVE_PREFIX: Final = "kubernetes.io/"

ResourceList = Mapping[str, Fraction]


@dataclass(slots=True, frozen=True)
class Resources:
    """kube-scheduler's `Resource`: cpu in millicores, memory and
    ephemeral-storage in bytes, `pods` (a node's allowed pod count), and the
    scalar resources (extended, hugepages, attachable volumes) sorted by name."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    pods: int = 0
    scalars: tuple[tuple[str, int], ...] = ()

    def __add__(self, other: Resources) -> Resources:
        return self._combine(other, 1)

    def __sub__(self, other: Resources) -> Resources:
        return self._combine(other, -1)

    def _combine(self, other: Resources, sign: int) -> Resources:
        if other is NO_RESOURCES:
            return self
        scalars = self.scalars
        if other.scalars:
            merged = dict(scalars)
            for name, amount in other.scalars:
                merged[name] = merged.get(name, 0) + sign * amount
            scalars = tuple(sorted((k, v) for k, v in merged.items() if v))
        return Resources(milli_cpu=self.milli_cpu + sign * other.milli_cpu,
                         memory=self.memory + sign * other.memory,
                         ephemeral_storage=self.ephemeral_storage + sign * other.ephemeral_storage,
                         pods=self.pods + sign * other.pods, scalars=scalars)

    def scalar(self, name: str) -> int:
        for key, amount in self.scalars:
            if key == name:
                return amount
        return 0


NO_RESOURCES: Final = Resources()
_SHARED: BoundedCache[Resources, Resources] = BoundedCache(1 << 14)


def shared_resources(value: Resources) -> Resources:
    """One object per distinct vector (pods of one workload request alike)."""
    if value == NO_RESOURCES:
        return NO_RESOURCES
    hit = _SHARED.get(value)
    return hit if hit is not None else _SHARED.put(value, value)


def is_scalar_resource(name: str) -> bool:
    """kube-scheduler's IsScalarResourceName: extended resources (a domain
    outside kubernetes.io), hugepages, attachable volumes, and names in the
    kubernetes.io/ domain."""
    if name.startswith((_HUGEPAGES, _ATTACHABLE)) or _NATIVE_PREFIX in name:
        return True
    return "/" in name and not name.startswith("requests.")


def resources_of(values: ResourceList, *, with_pods: bool = False) -> Resources:
    """A resource list as the scheduler's `Resource.Add` reads it, rounded up."""
    milli_cpu = memory = storage = pods = 0
    scalars = []
    for name, value in values.items():
        if name == CPU:
            milli_cpu = math.ceil(value * 1000)
        elif name == MEMORY:
            memory = math.ceil(value)
        elif name == EPHEMERAL_STORAGE:
            storage = math.ceil(value)
        elif name == PODS:
            pods = math.ceil(value) if with_pods else 0
        elif is_scalar_resource(name):
            amount = math.ceil(value)
            if amount:
                scalars.append((name, amount))
    return shared_resources(Resources(milli_cpu=milli_cpu, memory=memory,
                                      ephemeral_storage=storage, pods=pods,
                                      scalars=tuple(sorted(scalars))))


# --------------------------------------------------------------------------- PodRequests


@dataclass(slots=True, frozen=True)
class ContainerRequests:
    """One container's requests: `spec` from its resources (limits fill in
    missing requests, as API defaulting does), `allocated` and `actuated` from
    its status (`allocatedResources`, `resources.requests`; None: not set)."""

    spec: ResourceList
    init: bool = False
    sidecar: bool = False  # an init container with restartPolicy Always
    allocated: ResourceList | None = None
    actuated: ResourceList | None = None


@dataclass(slots=True, frozen=True)
class PodLevel:
    """What the pod (not its containers) says: `spec.resources.requests`,
    `spec.overhead`, and from its status `resources` (set at all, and its
    requests), `allocatedResources`, and whether a resize is infeasible."""

    requests: ResourceList = field(default_factory=dict)
    overhead: ResourceList = field(default_factory=dict)
    status_resources: bool = False
    actuated: ResourceList | None = None
    allocated: ResourceList | None = None
    resize_infeasible: bool = False


def _add(into: dict[str, Fraction], values: ResourceList) -> None:
    for name, value in values.items():
        held = into.get(name)
        into[name] = value if held is None else held + value


def _max(into: dict[str, Fraction], values: ResourceList) -> None:
    for name, value in values.items():
        if name not in into or value > into[name]:
            into[name] = value


def _spec(c: ContainerRequests, infeasible: bool) -> ResourceList:
    return c.spec


def _allocated(c: ContainerRequests, infeasible: bool) -> ResourceList:
    if c.allocated is not None:
        return c.allocated
    return {} if infeasible else c.spec


def _actuated(c: ContainerRequests, infeasible: bool) -> ResourceList:
    if c.actuated is not None:
        return c.actuated
    return _allocated(c, infeasible)


def aggregate(containers: Sequence[ContainerRequests], *, pick: str = "spec",
              resize_infeasible: bool = False) -> dict[str, Fraction]:
    """The containers' requests combined (sidecar rule in the module doc);
    `pick`: which of a container's lists counts (spec, allocated, actuated)."""
    read = {"spec": _spec, "allocated": _allocated, "actuated": _actuated}[pick]
    result: dict[str, Fraction] = {}
    for c in containers:
        if not c.init:
            _add(result, read(c, resize_infeasible))
    restartable: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for c in containers:
        if not c.init:
            continue
        values = read(c, resize_infeasible)
        if c.sidecar:
            _add(result, values)
            _add(restartable, values)
            during = dict(restartable)
        else:
            during = dict(values)
            _add(during, restartable)
        _max(init_peak, during)
    _max(result, init_peak)
    return result


def _supported_pod_level(name: str) -> bool:
    return name in (CPU, MEMORY) or name.startswith(_HUGEPAGES)


def pod_requests(containers: Sequence[ContainerRequests], pod: PodLevel | None = None
                 ) -> Resources:
    """PodRequests (see the module doc) as a shared `Resources`."""
    pod = pod or PodLevel()
    infeasible = pod.resize_infeasible
    spec = aggregate(containers)
    if pod.allocated is not None and pod.status_resources and pod.actuated is not None:
        allocated: ResourceList = pod.allocated
        actuated: ResourceList = pod.actuated
    elif not infeasible and all(c.allocated is None and c.actuated is None
                                for c in containers):
        allocated = actuated = spec  # what a pod not yet running, or not resized, says
    else:
        allocated = aggregate(containers, pick="allocated", resize_infeasible=infeasible)
        actuated = aggregate(containers, pick="actuated", resize_infeasible=infeasible)
    reqs: dict[str, Fraction] = {} if infeasible else dict(spec)
    _max(reqs, actuated)
    _max(reqs, allocated)
    if any(_supported_pod_level(name) for name in pod.requests):
        effective: dict[str, Fraction] = dict(pod.requests)
        if pod.status_resources:
            effective = {} if infeasible else effective
            _max(effective, pod.actuated or {})
            _max(effective, pod.allocated or {})
        for name, value in effective.items():
            if _supported_pod_level(name):
                reqs[name] = value
    _add(reqs, pod.overhead)
    return resources_of(reqs)


@dataclass(slots=True, frozen=True)
class PodUsage:
    """A live pod with no claims as the inventory keeps it: what it takes of
    its node, and what preemption reads to choose it as a victim for room
    (priority, start time, labels for PDBs) or to count it where it is
    nominated (by its scheduler: `scheduler_name`, spec.schedulerName); never
    the pod itself. A pod with neither a node nor a nominated node takes
    nothing and keeps only its name."""

    namespace: str
    name: str
    uid: str = ""
    node_name: str = ""
    requests: Resources = NO_RESOURCES
    deleting: bool = False
    priority: int | None = None
    priority_class_name: str = ""
    start_time: float | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    nominated_node_name: str = ""
    scheduler_name: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"
