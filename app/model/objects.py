"""Typed, immutable views of the API objects drax reads (`resource.k8s.io/v1`,
core/v1 Nodes and Pods, policy/v1 PodDisruptionBudgets, PriorityClasses).

Sources hand the inventory raw JSON dicts; `app.model.parse` turns each into
one of these frozen classes (dataclasses, and a msgspec Struct for the most
numerous, `Device`) exactly once per object version, so the hot paths
(filter, prioritize) never walk nested dicts or re-validate. Field names
follow the API. Attribute and capacity names are stored fully qualified
(`qualify`: a bare `productName` is `<driver>/productName`, exactly how CEL
and `matchAttribute` resolve it), and quantities are exact `Quantity` values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from app.model.quantity import Quantity
from app.model.requests import NO_RESOURCES, PodUsage, Resources

ATTRIBUTE_KINDS: Final = ("int", "bool", "string", "version", "ints", "bools", "strings",
                          "versions")
LIST_ATTRIBUTE_KINDS: Final = frozenset(ATTRIBUTE_KINDS[4:])  # a list of one kind each
ALLOCATION_MODE_EXACT_COUNT: Final = "ExactCount"
ALLOCATION_MODE_ALL: Final = "All"
POD_TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})
PREEMPT_NEVER: Final = "Never"
PREEMPT_LOWER_PRIORITY: Final = "PreemptLowerPriority"
# The taint effects that keep a pod (or a claim) off a node (or a device);
# PreferNoSchedule only weighs on scoring.
SCHEDULING_EFFECTS: Final = frozenset({"NoSchedule", "NoExecute"})
# The condition a scheduler's preemption puts on each victim, and the words
# of its message before the preemptor: kube-scheduler's message ends with
# them ("<scheduler>: preempting to accommodate a higher priority pod"),
# drax's goes on with the preemptor's key and what the victim frees.
DISRUPTION_TARGET: Final = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER: Final = "PreemptionByScheduler"
PREEMPTING_FOR: Final = "preempting to accommodate a higher priority pod"
# What a pod tolerates to be placed on a node with spec.unschedulable (the
# scheduler's NodeUnschedulable plugin).
UNSCHEDULABLE_TAINT_KEY: Final = "node.kubernetes.io/unschedulable"


class InvalidObject(ValueError):
    """An API object that cannot be parsed; the message names the object and field."""


# --------------------------------------------------------------------------- selectors


@dataclass(slots=True, frozen=True)
class NodeSelectorRequirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, value: str | None) -> bool:
        op = self.operator
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        if op in ("Gt", "Lt"):
            if value is None or len(self.values) != 1:
                return False
            try:
                left, right = int(value), int(self.values[0])
            except ValueError:
                return False
            return left > right if op == "Gt" else left < right
        return False


@dataclass(slots=True, frozen=True)
class NodeSelectorTerm:
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()

    def matches(self, node: Node) -> bool:
        if not self.match_expressions and not self.match_fields:
            return False  # an empty term matches nothing, as in Kubernetes
        for req in self.match_expressions:
            if not req.matches(node.labels.get(req.key)):
                return False
        for req in self.match_fields:
            value = node.name if req.key == "metadata.name" else None
            if not req.matches(value):
                return False
        return True


@dataclass(slots=True, frozen=True, weakref_slot=True)
class NodeSelector:
    terms: tuple[NodeSelectorTerm, ...]

    def matches(self, node: Node) -> bool:
        return any(term.matches(node) for term in self.terms)

    def to_dict(self) -> dict[str, Any]:
        return {"nodeSelectorTerms": [_term_to_dict(t) for t in self.terms]}


def _term_to_dict(term: NodeSelectorTerm) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if term.match_expressions:
        out["matchExpressions"] = [_req_to_dict(r) for r in term.match_expressions]
    if term.match_fields:
        out["matchFields"] = [_req_to_dict(r) for r in term.match_fields]
    return out


def _req_to_dict(req: NodeSelectorRequirement) -> dict[str, Any]:
    out: dict[str, Any] = {"key": req.key, "operator": req.operator}
    if req.values:
        out["values"] = list(req.values)
    return out


# --------------------------------------------------------------------------- nodes, pods


@dataclass(slots=True, frozen=True)
class Node:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    uid: str = ""
    resource_version: str = ""
    # status.allocatable of extended resources (device plugins), rounded up as
    # the scheduler's scalar resources are; other resources are not kept.
    allocatable: Mapping[str, int] = field(default_factory=dict)
    # spec.taints and spec.unschedulable: which pods may be placed here at all.
    taints: tuple[DeviceTaint, ...] = ()
    unschedulable: bool = False
    # status.allocatable as kube-scheduler's NodeResourcesFit reads it (None:
    # the node reports none, and its room for pods is not judged).
    resources: Resources | None = None


@dataclass(slots=True, frozen=True)
class ContainerResources:
    """One container's resource requests as the scheduler reads them: limits
    fill in missing requests (API defaulting), `names` are all requested
    resource names sorted (upstream numbers a request by its place there),
    `extended` the integer requests of extended resources."""

    name: str
    init: bool = False
    sidecar: bool = False  # an init container with restartPolicy Always
    names: tuple[str, ...] = ()
    extended: Mapping[str, int] = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class ContainerExtendedResourceRequest:
    container_name: str
    resource_name: str
    request_name: str

    def to_dict(self) -> dict[str, str]:
        return {"containerName": self.container_name, "resourceName": self.resource_name,
                "requestName": self.request_name}


@dataclass(slots=True, frozen=True)
class ExtendedResourceClaimStatus:
    """pod.status.extendedResourceClaimStatus: the special claim and which
    container's resource each of its requests serves."""

    resource_claim_name: str
    request_mappings: tuple[ContainerExtendedResourceRequest, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"resourceClaimName": self.resource_claim_name,
                "requestMappings": [m.to_dict() for m in self.request_mappings]}


@dataclass(slots=True, frozen=True)
class PodResourceClaim:
    name: str
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


@dataclass(slots=True, frozen=True)
class Pod:
    """Only what an extender needs from a Pod: identity and its claim references."""

    namespace: str
    name: str
    uid: str = ""
    resource_claims: tuple[PodResourceClaim, ...] = ()
    # pod claim name -> generated ResourceClaim name (None: no claim needed)
    claim_statuses: Mapping[str, str | None] = field(default_factory=dict)
    scheduler_name: str = ""
    node_name: str = ""
    containers: tuple[ContainerResources, ...] = ()  # init containers first
    extended_resource_claim_status: ExtendedResourceClaimStatus | None = None
    # What preemption reads. `priority` is spec.priority (None: not resolved by
    # admission, see `app.inventory.occupants.priority_of`); `deleting`: a
    # deletionTimestamp is set; `start_time`: status.startTime in epoch seconds.
    priority: int | None = None
    priority_class_name: str = ""
    preemption_policy: str = ""
    phase: str = ""
    deleting: bool = False
    start_time: float | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    # PodScheduled=False with reason Unschedulable: a scheduler tried and found
    # no node (the preemption driver's candidates).
    unschedulable: bool = False
    # status.nominatedNodeName: the node a scheduler's preemption chose for it.
    nominated_node_name: str = ""
    # The uid of the pod whose preemption made this one a victim, as drax's
    # DisruptionTarget condition names it (empty: none names one): a pod
    # deleted and created again under its name is another pod.
    preempted_for: str = ""
    # spec.nodeSelector and the required node affinity: the nodes a preemption
    # for this pod may free devices on.
    node_selector: Mapping[str, str] = field(default_factory=dict)
    node_affinity: NodeSelector | None = None
    # spec.tolerations: with the above, whether a node may take the pod at all.
    tolerations: tuple[DeviceToleration, ...] = ()
    # What it takes of its node's cpu, memory and the like (`app.model.requests`).
    requests: Resources = NO_RESOURCES

    def may_run_on(self, node: Node) -> bool:
        """The pod's nodeSelector and required node affinity accept `node`."""
        if any(node.labels.get(k) != v for k, v in self.node_selector.items()):
            return False
        return self.node_affinity is None or self.node_affinity.matches(node)

    def refusal_on(self, node: Node) -> str | None:
        """Why `node` can never take this pod, whatever runs there (None: it
        may): kube-scheduler's NodeAffinity, NodeUnschedulable and
        TaintToleration filters, which no preemption can change."""
        if not self.may_run_on(node):
            return "node does not match the pod's nodeSelector or required node affinity"
        if node.unschedulable and untolerated_taint(_UNSCHEDULABLE, self.tolerations) is not None:
            return "node is unschedulable (cordoned) and the pod does not tolerate it"
        taint = untolerated_taint(node.taints, self.tolerations)
        if taint is not None:
            return f"node has taint {{{taint}}} the pod does not tolerate"
        return None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        """Succeeded or Failed: its claims' reservations are about to be dropped."""
        return self.phase in POD_TERMINAL_PHASES


# --------------------------------------------------------------------------- disruption, priority


@dataclass(slots=True, frozen=True)
class LabelSelectorRequirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        return value is None  # DoesNotExist


@dataclass(slots=True, frozen=True)
class LabelSelector:
    """A metav1.LabelSelector. `empty` (no labels, no expressions) matches every
    set of labels in the API, but kube-scheduler's PDB check skips a PDB whose
    selector is empty or absent; `PodDisruptionBudget.selects` follows it."""

    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        return (all(labels.get(k) == v for k, v in self.match_labels.items())
                and all(r.matches(labels) for r in self.match_expressions))


@dataclass(slots=True, frozen=True)
class PodDisruptionBudget:
    """policy/v1 PodDisruptionBudget, what preemption ranks by: who it covers and
    how many more of them may be disrupted now (`status.disruptionsAllowed`;
    `disrupted_pods` are already counted in it)."""

    namespace: str
    name: str
    selector: LabelSelector | None = None
    disruptions_allowed: int = 0
    disrupted_pods: frozenset[str] = frozenset()
    resource_version: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def selects(self, pod: Pod | PodUsage) -> bool:
        """Counts `pod` the way kube-scheduler's preemption does: same namespace,
        a non-empty selector matching its labels, not already disrupted."""
        return (pod.namespace == self.namespace and self.selector is not None
                and not self.selector.empty and self.selector.matches(pod.labels)
                and pod.name not in self.disrupted_pods)


@dataclass(slots=True, frozen=True)
class PriorityClass:
    name: str
    value: int
    preemption_policy: str = PREEMPT_LOWER_PRIORITY
    global_default: bool = False
    resource_version: str = ""


# --------------------------------------------------------------------------- devices


class AttributeValue(msgspec.Struct, frozen=True, gc=False):
    """A typed attribute value. `kind` is one of ATTRIBUTE_KINDS, or "" for an
    attribute without a supported value (which fails every CEL expression on
    its device, as upstream). Versions are kept as the published string; list
    kinds hold tuples. A msgspec Struct, as `Device` is: values unique to one
    device (a uuid, a MAC) are built per device, in C, untracked by the
    collector and 16 bytes smaller than a slots dataclass."""

    kind: str
    value: Any


@dataclass(slots=True, frozen=True)
class RequestPolicy:
    default: Quantity | None = None
    valid_values: tuple[Quantity, ...] = ()
    valid_range_min: Quantity | None = None
    valid_range_max: Quantity | None = None
    valid_range_step: Quantity | None = None


@dataclass(slots=True, frozen=True)
class DeviceCapacity:
    value: Quantity
    request_policy: RequestPolicy | None = None


@dataclass(slots=True, frozen=True)
class CounterSet:
    name: str
    counters: Mapping[str, Quantity]


@dataclass(slots=True, frozen=True)
class DeviceCounterConsumption:
    counter_set: str
    counters: Mapping[str, Quantity]


@dataclass(slots=True, frozen=True)
class DeviceTaint:
    """A resource.k8s.io DeviceTaint; a core/v1 node Taint has the same fields
    and meaning, and is kept as one too."""

    key: str
    effect: str
    value: str = ""
    time_added: str | None = None

    def __str__(self) -> str:
        """`key=value:effect` (`key:effect` without a value), as kubectl writes it."""
        value = f"={self.value}" if self.value else ""
        return f"{self.key}{value}:{self.effect}"


class Device(msgspec.Struct, frozen=True, gc=False):
    """One device of a ResourceSlice. `attributes` and `capacity` are keyed by
    fully qualified name (`<domain>/<id>`).

    A msgspec Struct rather than a dataclass: a large cluster holds millions,
    and a Struct is built in C from positional arguments (a slots dataclass
    sets each field through `object.__setattr__`) and, holding no reference
    back to anything that holds it, is left out of the cyclic collector
    (`gc=False`), 16 bytes smaller and never traversed by a collection."""

    driver: str
    pool: str
    name: str
    slice_name: str
    attributes: Mapping[str, AttributeValue] = msgspec.field(default_factory=dict)
    capacity: Mapping[str, DeviceCapacity] = msgspec.field(default_factory=dict)
    consumes_counters: tuple[DeviceCounterConsumption, ...] = ()
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    taints: tuple[DeviceTaint, ...] = ()
    binds_to_node: bool = False
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    allow_multiple_allocations: bool = False
    # `<driver>/<pool>/<device>`, the device's identity across the cluster,
    # always derived from the fields above (whatever is passed, and again by
    # `msgspec.structs.replace`). Built once here because the allocator and
    # the inventory key everything by it.
    id: str = ""

    def __post_init__(self) -> None:
        msgspec.structs.force_setattr(self, "id", f"{self.driver}/{self.pool}/{self.name}")

    def attribute(self, qualified_name: str) -> AttributeValue | None:
        return self.attributes.get(qualified_name)


@dataclass(slots=True, frozen=True)
class ResourcePool:
    name: str
    generation: int
    resource_slice_count: int


@dataclass(slots=True, frozen=True)
class ResourceSlice:
    name: str
    driver: str
    pool: ResourcePool
    devices: tuple[Device, ...] = ()
    shared_counters: tuple[CounterSet, ...] = ()
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    per_device_node_selection: bool = False
    uid: str = ""
    resource_version: str = ""


# --------------------------------------------------------------------------- classes, claims


@dataclass(slots=True, frozen=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()
    config: tuple[Mapping[str, Any], ...] = ()
    extended_resource_name: str | None = None
    generation: int = 0
    resource_version: str = ""
    creation_timestamp: str = ""  # RFC 3339; the newest class wins a shared extended name


@dataclass(slots=True, frozen=True)
class DeviceToleration:
    """A resource.k8s.io DeviceToleration; a core/v1 pod Toleration has the
    same fields and matching rule, and is kept as one too."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: DeviceTaint) -> bool:
        """An empty effect matches every effect, an empty key with Exists every
        taint; an operator other than Equal and Exists tolerates nothing."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.operator in ("Equal", "") and self.value == taint.value

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"operator": self.operator}
        if self.key:
            out["key"] = self.key
        if self.value:
            out["value"] = self.value
        if self.effect:
            out["effect"] = self.effect
        if self.toleration_seconds is not None:
            out["tolerationSeconds"] = self.toleration_seconds
        return out


def untolerated_taint(taints: tuple[DeviceTaint, ...],
                      tolerations: tuple[DeviceToleration, ...]) -> DeviceTaint | None:
    """The first NoSchedule or NoExecute taint no toleration tolerates."""
    for taint in taints:
        if taint.effect in SCHEDULING_EFFECTS and not any(
                t.tolerates(taint) for t in tolerations):
            return taint
    return None


_UNSCHEDULABLE: Final = (DeviceTaint(key=UNSCHEDULABLE_TAINT_KEY, effect="NoSchedule"),)


@dataclass(slots=True, frozen=True)
class ExactDeviceRequest:
    """The fields shared by `exactly` and each `firstAvailable` subrequest."""

    device_class_name: str
    selectors: tuple[str, ...] = ()
    allocation_mode: str = ALLOCATION_MODE_EXACT_COUNT
    count: int = 1
    admin_access: bool = False
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity_requests: Mapping[str, Quantity] = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class DeviceSubRequest:
    name: str
    request: ExactDeviceRequest


@dataclass(slots=True, frozen=True)
class DeviceRequest:
    name: str
    exactly: ExactDeviceRequest | None = None
    first_available: tuple[DeviceSubRequest, ...] = ()


@dataclass(slots=True, frozen=True)
class DeviceConstraint:
    requests: tuple[str, ...] = ()
    match_attribute: str | None = None
    distinct_attribute: str | None = None


@dataclass(slots=True, frozen=True, weakref_slot=True)
class ResourceClaimSpec:
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()
    config: tuple[Mapping[str, Any], ...] = ()


@dataclass(slots=True, frozen=True)
class DeviceRequestAllocationResult:
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False
    tolerations: tuple[DeviceToleration, ...] = ()
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    share_id: str | None = None
    consumed_capacity: Mapping[str, Quantity] = field(default_factory=dict)

    @property
    def device_id(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"request": self.request, "driver": self.driver,
                               "pool": self.pool, "device": self.device}
        if self.admin_access:
            out["adminAccess"] = True
        if self.tolerations:
            out["tolerations"] = [t.to_dict() for t in self.tolerations]
        if self.binding_conditions:
            out["bindingConditions"] = list(self.binding_conditions)
        if self.binding_failure_conditions:
            out["bindingFailureConditions"] = list(self.binding_failure_conditions)
        if self.share_id is not None:
            out["shareID"] = self.share_id
        if self.consumed_capacity:
            out["consumedCapacity"] = {k: str(v) for k, v in self.consumed_capacity.items()}
        return out


@dataclass(slots=True, frozen=True)
class AllocationResult:
    results: tuple[DeviceRequestAllocationResult, ...] = ()
    config: tuple[Mapping[str, Any], ...] = ()
    node_selector: NodeSelector | None = None
    allocation_timestamp: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"devices": {"results": [r.to_dict() for r in self.results]}}
        if self.config:
            out["devices"]["config"] = [dict(c) for c in self.config]
        if self.node_selector is not None:
            out["nodeSelector"] = self.node_selector.to_dict()
        if self.allocation_timestamp:
            out["allocationTimestamp"] = self.allocation_timestamp
        return out


@dataclass(slots=True, frozen=True)
class ResourceClaimConsumerReference:
    resource: str
    name: str
    uid: str
    api_group: str = ""


@dataclass(slots=True, frozen=True)
class ResourceClaim:
    namespace: str
    name: str
    spec: ResourceClaimSpec
    uid: str = ""
    resource_version: str = ""
    allocation: AllocationResult | None = None
    reserved_for: tuple[ResourceClaimConsumerReference, ...] = ()
    deleting: bool = False
    owner_pod_uid: str | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(slots=True, frozen=True)
class ResourceClaimTemplate:
    namespace: str
    name: str
    spec: ResourceClaimSpec
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    resource_version: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def qualify(name: str, driver: str) -> str:
    """The fully qualified form of an attribute or capacity name of `driver`."""
    return name if "/" in name else f"{driver}/{name}"


# A qualified name (DNS-1123 subdomain prefix / name of at most 63 characters),
# as `requests.<name>` must be one for an extended resource name to be valid.
_QUALIFIED_NAME: Final = re.compile(
    r"^(?:[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
DEVICE_CLASS_RESOURCE_PREFIX: Final = "deviceclass.resource.kubernetes.io/"


def is_extended_resource_name(name: str) -> bool:
    """Upstream's test for a resource DRA may serve: an extended resource (has a
    domain outside kubernetes.io, not `requests.`), or a device class's implicit
    name `deviceclass.resource.kubernetes.io/<class>`."""
    if name.startswith(DEVICE_CLASS_RESOURCE_PREFIX):
        return True
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    prefix, _, _ = f"requests.{name}".partition("/")
    return len(prefix) <= 253 and bool(_QUALIFIED_NAME.match(f"requests.{name}"))
