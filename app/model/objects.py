"""Typed, immutable views of the DRA API objects, parsed once at the edge.

Sources hand the inventory raw JSON dicts (from YAML files or the API server);
everything behind the inventory works on these dataclasses. Parsing happens
exactly once per object version, so the hot paths (filter, prioritize) never
walk nested dicts or re-validate. Field names follow `resource.k8s.io/v1`.

Two normalisations happen here because every consumer needs them:
- attribute and capacity names are stored fully qualified: a bare name such as
  `productName` becomes `<driver>/productName`, exactly how CEL and
  `matchAttribute` resolve it;
- quantities are parsed into exact `Quantity` values.

A malformed object raises `InvalidObject` naming the object and the field;
the caller keeps whatever it already held.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, cast

from app.model.compact import FieldMap
from app.model.quantity import Quantity, QuantityError, parse_quantity

ATTRIBUTE_KINDS: Final = ("int", "bool", "string", "version", "ints", "bools", "strings",
                          "versions")
ALLOCATION_MODE_EXACT_COUNT: Final = "ExactCount"
ALLOCATION_MODE_ALL: Final = "All"
POD_TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})
PREEMPT_NEVER: Final = "Never"
PREEMPT_LOWER_PRIORITY: Final = "PreemptLowerPriority"


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
    # admission, see `app.preemption.priority_of`); `deleting`: a
    # deletionTimestamp is set; `start_time`: status.startTime in epoch seconds.
    priority: int | None = None
    priority_class_name: str = ""
    preemption_policy: str = ""
    phase: str = ""
    deleting: bool = False
    start_time: float | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

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

    def selects(self, pod: Pod) -> bool:
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


@dataclass(slots=True, frozen=True)
class AttributeValue:
    """A typed attribute value. `kind` is one of ATTRIBUTE_KINDS, or "" for an
    attribute without a supported value (which fails every CEL expression on
    its device, as upstream). Versions are kept as the published string; list
    kinds hold tuples."""

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
    key: str
    effect: str
    value: str = ""
    time_added: str | None = None


@dataclass(slots=True, frozen=True)
class Device:
    """One device of a ResourceSlice. `attributes` and `capacity` are keyed by
    fully qualified name (`<domain>/<id>`)."""

    driver: str
    pool: str
    name: str
    slice_name: str
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    capacity: Mapping[str, DeviceCapacity] = field(default_factory=dict)
    consumes_counters: tuple[DeviceCounterConsumption, ...] = ()
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    taints: tuple[DeviceTaint, ...] = ()
    binds_to_node: bool = False
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    allow_multiple_allocations: bool = False
    # `<driver>/<pool>/<device>`, the device's identity across the cluster. Built
    # once here because the allocator and the inventory key everything by it.
    id: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", f"{self.driver}/{self.pool}/{self.name}")

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
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: DeviceTaint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value

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


# --------------------------------------------------------------------------- parsing


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _where(kind: str, obj: Mapping[str, Any]) -> str:
    meta = _meta(obj)
    ns = meta.get("namespace")
    name = meta.get("name", "<unnamed>")
    return f"{kind} {ns}/{name}" if ns else f"{kind} {name}"


def _map(value: Any, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidObject(f"{what}: expected an object, got {type(value).__name__}")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidObject(f"{what}: expected a list, got {type(value).__name__}")
    return value


def _str(value: Any, what: str, *, required: bool = False) -> str:
    if value is None or value == "":
        if required:
            raise InvalidObject(f"{what}: required")
        return ""
    if not isinstance(value, str):
        raise InvalidObject(f"{what}: expected a string, got {type(value).__name__}")
    return value


def _int(value: Any, what: str, *, default: int = 0) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidObject(f"{what}: expected an integer, got {value!r}")
    return value


def _quantity(value: Any, what: str) -> Quantity:
    if isinstance(value, bool):
        raise InvalidObject(f"{what}: expected a quantity, got {value!r}")
    if isinstance(value, int | float):
        value = str(value)
    if not isinstance(value, str):
        raise InvalidObject(f"{what}: expected a quantity string, got {value!r}")
    try:
        return parse_quantity(value)
    except QuantityError as exc:
        raise InvalidObject(f"{what}: {exc}") from None


def qualify(name: str, driver: str) -> str:
    """The fully qualified form of an attribute or capacity name of `driver`."""
    return name if "/" in name else f"{driver}/{name}"


def parse_node_selector(value: Any, what: str) -> NodeSelector | None:
    if value is None:
        return None
    raw = _map(value, what)
    terms = []
    for i, term in enumerate(_list(raw.get("nodeSelectorTerms"), f"{what}.nodeSelectorTerms")):
        t = _map(term, f"{what}.nodeSelectorTerms[{i}]")
        terms.append(NodeSelectorTerm(
            match_expressions=_requirements(t.get("matchExpressions"), f"{what}.matchExpressions"),
            match_fields=_requirements(t.get("matchFields"), f"{what}.matchFields"),
        ))
    return NodeSelector(tuple(terms))


def _requirements(value: Any, what: str) -> tuple[NodeSelectorRequirement, ...]:
    out = []
    for i, req in enumerate(_list(value, what)):
        r = _map(req, f"{what}[{i}]")
        out.append(NodeSelectorRequirement(
            key=_str(r.get("key"), f"{what}[{i}].key", required=True),
            operator=_str(r.get("operator"), f"{what}[{i}].operator", required=True),
            values=tuple(str(v) for v in _list(r.get("values"), f"{what}[{i}].values")),
        ))
    return tuple(out)


def parse_node(obj: Mapping[str, Any]) -> Node:
    meta = _meta(obj)
    name = _str(meta.get("name"), "Node metadata.name", required=True)
    labels = _map(meta.get("labels"), f"Node {name} metadata.labels")
    status = _map(obj.get("status"), f"Node {name} status")
    allocatable = {}
    for resource, value in _map(status.get("allocatable"),
                                f"Node {name} status.allocatable").items():
        if is_extended_resource_name(str(resource)):
            amount = _quantity(value, f"Node {name} status.allocatable[{resource}]").value
            allocatable[str(resource)] = math.ceil(amount)
    return Node(name=name, labels={str(k): str(v) for k, v in labels.items()},
                uid=str(meta.get("uid") or ""),
                resource_version=str(meta.get("resourceVersion") or ""),
                allocatable=allocatable)


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


def _containers(spec: Mapping[str, Any], where: str) -> tuple[ContainerResources, ...]:
    out = []
    for field_name, init in (("initContainers", True), ("containers", False)):
        for i, raw in enumerate(_list(spec.get(field_name), f"{where} spec.{field_name}")):
            what = f"{where} spec.{field_name}[{i}]"
            c = _map(raw, what)
            resources = _map(c.get("resources"), f"{what}.resources")
            requests = dict(_map(resources.get("limits"), f"{what}.resources.limits"))
            requests.update(_map(resources.get("requests"), f"{what}.resources.requests"))
            extended = {}
            for resource, value in requests.items():
                if not is_extended_resource_name(str(resource)):
                    continue
                amount = _quantity(value, f"{what}.resources.requests[{resource}]").value
                if amount.denominator == 1 and amount > 0:
                    extended[str(resource)] = int(amount)
            out.append(ContainerResources(
                name=_str(c.get("name"), f"{what}.name"), init=init,
                sidecar=init and c.get("restartPolicy") == "Always",
                names=tuple(sorted(str(k) for k in requests)), extended=extended))
    return tuple(out)


def _extended_claim_status(raw: Any, where: str) -> ExtendedResourceClaimStatus | None:
    if raw is None:
        return None
    m = _map(raw, f"{where} status.extendedResourceClaimStatus")
    mappings = []
    for i, entry in enumerate(_list(m.get("requestMappings"), f"{where} requestMappings")):
        e = _map(entry, f"{where} requestMappings[{i}]")
        mappings.append(ContainerExtendedResourceRequest(
            container_name=_str(e.get("containerName"), f"{where} requestMappings[{i}]"),
            resource_name=_str(e.get("resourceName"), f"{where} requestMappings[{i}]"),
            request_name=_str(e.get("requestName"), f"{where} requestMappings[{i}]")))
    return ExtendedResourceClaimStatus(
        resource_claim_name=_str(m.get("resourceClaimName"),
                                 f"{where} extendedResourceClaimStatus.resourceClaimName"),
        request_mappings=tuple(mappings))


def parse_pod(obj: Mapping[str, Any]) -> Pod:
    if not isinstance(obj, Mapping):
        raise InvalidObject("Pod: expected an object")
    meta = _meta(obj)
    name = _str(meta.get("name"), "Pod metadata.name", required=True)
    namespace = _str(meta.get("namespace"), f"Pod {name} metadata.namespace") or "default"
    where = f"Pod {namespace}/{name}"
    spec = _map(obj.get("spec"), f"{where} spec")
    status = _map(obj.get("status"), f"{where} status")
    claims = []
    for i, entry in enumerate(_list(spec.get("resourceClaims"), f"{where} spec.resourceClaims")):
        e = _map(entry, f"{where} spec.resourceClaims[{i}]")
        claims.append(PodResourceClaim(
            name=_str(e.get("name"), f"{where} spec.resourceClaims[{i}].name", required=True),
            resource_claim_name=_str(e.get("resourceClaimName"), f"{where} resourceClaimName")
            or None,
            resource_claim_template_name=_str(e.get("resourceClaimTemplateName"),
                                              f"{where} resourceClaimTemplateName") or None,
        ))
    statuses: dict[str, str | None] = {}
    for i, entry in enumerate(_list(status.get("resourceClaimStatuses"),
                                    f"{where} status.resourceClaimStatuses")):
        e = _map(entry, f"{where} status.resourceClaimStatuses[{i}]")
        statuses[_str(e.get("name"), f"{where} resourceClaimStatuses[{i}].name", required=True)] = (
            _str(e.get("resourceClaimName"), f"{where} resourceClaimStatuses[{i}]") or None)
    priority = spec.get("priority")
    policy = _str(spec.get("preemptionPolicy"), f"{where} spec.preemptionPolicy")
    if policy and policy not in (PREEMPT_NEVER, PREEMPT_LOWER_PRIORITY):
        raise InvalidObject(f"{where} spec.preemptionPolicy: {policy!r} is not one of "
                            f"{PREEMPT_LOWER_PRIORITY}, {PREEMPT_NEVER}")
    return Pod(namespace=sys.intern(namespace), name=name, uid=str(meta.get("uid") or ""),
               resource_claims=tuple(claims), claim_statuses=statuses,
               scheduler_name=sys.intern(str(spec.get("schedulerName") or "")),
               node_name=sys.intern(str(spec.get("nodeName") or "")),
               containers=_containers(spec, where),
               extended_resource_claim_status=_extended_claim_status(
                   status.get("extendedResourceClaimStatus"), where),
               priority=None if priority is None
               else _int(priority, f"{where} spec.priority"),
               priority_class_name=sys.intern(
                   _str(spec.get("priorityClassName"), f"{where} spec.priorityClassName")),
               preemption_policy=sys.intern(policy),
               phase=sys.intern(_str(status.get("phase"), f"{where} status.phase")),
               deleting=bool(meta.get("deletionTimestamp")),
               start_time=_timestamp(status.get("startTime"), f"{where} status.startTime"),
               labels=shared_labels(meta.get("labels"), f"{where} metadata.labels"))


# Pods of one Deployment or Job carry identical labels: one shared map per
# distinct label set keeps 10,000 pods from holding 10,000 equal dicts.
_SHARED_LABELS: dict[tuple[tuple[str, str], ...], Mapping[str, str]] = {}
_SHARED_LABELS_MAX: Final = 1 << 14
_NO_LABELS: Final[Mapping[str, str]] = {}


def shared_labels(raw: Any, what: str) -> Mapping[str, str]:
    """metadata.labels as a map shared between objects with the same labels."""
    labels = _map(raw, what)
    if not labels:
        return _NO_LABELS
    items = tuple(sorted((sys.intern(str(k)), sys.intern(str(v))) for k, v in labels.items()))
    hit = _SHARED_LABELS.get(items)
    if hit is None:
        if len(_SHARED_LABELS) >= _SHARED_LABELS_MAX:
            _SHARED_LABELS.clear()
        hit = _SHARED_LABELS[items] = dict(items)
    return hit


def _timestamp(value: Any, what: str) -> float | None:
    """An RFC 3339 time (as the API server writes them) in epoch seconds."""
    if value is None or value == "":
        return None
    text = _str(value, what)
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise InvalidObject(f"{what}: {text!r} is not an RFC 3339 time") from None


# Identical attribute values (type "gpu", architecture "Hopper", numaNode 0, ...)
# repeat on every device of a cluster: one shared object per value keeps the
# parsed model small. Bounded, because unique values (uuids, MACs) never repeat;
# a full cache starts over (`_keep`) rather than stop learning, or values
# that repeat only nearby (a MIG device's parentUUID, once per partition of its
# GPU) would miss from then on: at 100,000 nodes that took every MIG device off
# the fast path once the first ~20,000 nodes had filled the cache.
_SHARED_ATTRIBUTES: dict[AttributeValue, AttributeValue] = {}
_SHARED_ATTRIBUTES_MAX: Final = 1 << 18
_UNSUPPORTED: Final = AttributeValue("", None)
_SCALARS: dict[tuple[str, Any, type], AttributeValue] = {}


def _attribute(raw: Any, where: str, name: Any) -> AttributeValue:
    # Nearly every attribute is one scalar (`{"string": "gpu"}`): look it up by
    # (kind, type, value) before validating. The type is part of the key because
    # `True == 1`, and `{"int": true}` must stay unsupported. The error context
    # is formatted only off this path: once per attribute of millions of devices
    # it was a tenth of the parse.
    if type(raw) is dict and len(raw) == 1:
        ((kind, value),) = raw.items()
        if type(value) in (str, int, bool):
            hit = _SCALARS.get((kind, value, type(value)))
            if hit is not None:
                return hit
            parsed = _parse_attribute(raw, f"{where}.attributes[{name}]")
            _keep(_SCALARS, (kind, value, type(value)), parsed)
            return parsed
    return _parse_attribute(raw, f"{where}.attributes[{name}]")


def _keep(cache: dict[Any, Any], key: Any, value: Any) -> None:
    if len(cache) >= _SHARED_ATTRIBUTES_MAX:
        cache.clear()
    cache[key] = value


def _parse_attribute(raw: Any, what: str) -> AttributeValue:
    r = _map(raw, what)
    present = [k for k in ATTRIBUTE_KINDS if k in r and r[k] is not None]
    if len(present) != 1:
        return _UNSUPPORTED
    kind = present[0]
    value = r[kind]
    if kind in ("ints", "bools", "strings", "versions"):
        if not isinstance(value, list) or not value:
            return _UNSUPPORTED
        value = tuple(value)
    elif not _scalar_fits(kind, value):
        return _UNSUPPORTED
    return _shared_attribute(AttributeValue(kind, value))


def _scalar_fits(kind: str, value: Any) -> bool:
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    return isinstance(value, str)  # string, version


def _shared_attribute(attribute: AttributeValue) -> AttributeValue:
    try:
        shared = _SHARED_ATTRIBUTES.get(attribute)
    except TypeError:  # a list attribute holding unhashable JSON values
        return attribute
    if shared is not None:
        return shared
    _keep(_SHARED_ATTRIBUTES, attribute, attribute)
    return attribute


# Capacity maps and counter consumptions repeat across the devices of a cluster
# just like attribute values. They are shared by their raw form (value strings
# included), not by equality: Quantity equality is numeric, and `1Gi` must not
# become `1024Mi` (CEL's isInteger reads the text).
_SHARED: dict[tuple[Any, ...], Any] = {}


def _simple_values(raw: Mapping[str, Any]) -> tuple[tuple[str, str], ...] | None:
    """`((name, value string), ...)` when every entry is just `{"value": "<str>"}`."""
    out = []
    for name, entry in raw.items():
        if type(entry) is not dict or len(entry) != 1 or type(entry.get("value")) is not str:
            return None
        out.append((name, entry["value"]))
    return tuple(out)


def _remember(key: tuple[Any, ...] | None, value: Any) -> None:
    if key is not None:
        _keep(_SHARED, key, value)


def _capacity_map(raw: Any, *, driver: str, where: str) -> Mapping[str, DeviceCapacity]:
    m = raw if type(raw) is dict else _map(raw, f"{where}.capacity")
    simple = _simple_values(m)
    key = None if simple is None else ("capacity", driver, simple)
    if key is not None and (hit := _SHARED.get(key)) is not None:
        return cast(Mapping[str, DeviceCapacity], hit)
    out: dict[str, DeviceCapacity] = {}
    for k, v in m.items():
        c = _map(v, f"{where}.capacity[{k}]")
        out[_key(k, driver)] = DeviceCapacity(
            value=_quantity(c.get("value"), f"{where}.capacity[{k}].value"),
            request_policy=_request_policy(c.get("requestPolicy"),
                                           f"{where}.capacity[{k}].requestPolicy"))
    shared = FieldMap(out)
    _remember(key, shared)
    return shared


def _consumptions(raw: Any, *, where: str) -> tuple[DeviceCounterConsumption, ...]:
    entries = _list(raw, f"{where}.consumesCounters")
    parts: list[Any] = ["consumes"]
    for cc in entries:
        simple = (_simple_values(cc["counters"]) if type(cc) is dict and len(cc) == 2
                  and type(cc.get("counterSet")) is str and type(cc.get("counters")) is dict
                  else None)
        if simple is None:
            break
        parts.append((cc["counterSet"], simple))
    key = tuple(parts) if len(parts) == len(entries) + 1 else None
    if key is not None and (hit := _SHARED.get(key)) is not None:
        return cast(tuple[DeviceCounterConsumption, ...], hit)
    consumes = []
    for i, cc in enumerate(entries):
        m = _map(cc, f"{where}.consumesCounters[{i}]")
        consumes.append(DeviceCounterConsumption(
            counter_set=_str(m.get("counterSet"), f"{where}.consumesCounters[{i}].counterSet",
                             required=True),
            counters=FieldMap(_counters(m.get("counters"),
                                        f"{where}.consumesCounters[{i}].counters"))))
    out = tuple(consumes)
    _remember(key, out)
    return out


def _request_policy(raw: Any, what: str) -> RequestPolicy | None:
    if raw is None:
        return None
    r = _map(raw, what)
    rng = _map(r.get("validRange"), f"{what}.validRange")
    return RequestPolicy(
        default=_quantity(r["default"], f"{what}.default") if r.get("default") is not None
        else None,
        valid_values=tuple(_quantity(v, f"{what}.validValues")
                           for v in _list(r.get("validValues"), f"{what}.validValues")),
        valid_range_min=_quantity(rng["min"], f"{what}.validRange.min")
        if rng.get("min") is not None else None,
        valid_range_max=_quantity(rng["max"], f"{what}.validRange.max")
        if rng.get("max") is not None else None,
        valid_range_step=_quantity(rng["step"], f"{what}.validRange.step")
        if rng.get("step") is not None else None,
    )


def _taints(raw: Any, what: str) -> tuple[DeviceTaint, ...]:
    out = []
    for i, t in enumerate(_list(raw, what)):
        m = _map(t, f"{what}[{i}]")
        out.append(DeviceTaint(key=_str(m.get("key"), f"{what}[{i}].key", required=True),
                               value=_str(m.get("value"), f"{what}[{i}].value"),
                               effect=_str(m.get("effect"), f"{what}[{i}].effect"),
                               time_added=m.get("timeAdded")))
    return tuple(out)


def _counters(raw: Any, what: str) -> dict[str, Quantity]:
    return {str(name): _quantity(_map(c, f"{what}.{name}").get("value"), f"{what}.{name}.value")
            for name, c in _map(raw, what).items()}


_QUALIFIED: dict[tuple[Any, str], str] = {}


def _key(name: Any, driver: str) -> str:
    """A qualified attribute/capacity name, interned: every device repeats the same
    few names, and one shared string per name instead of one per device saves
    about a quarter of the parsed model's memory. Looked up by (name, driver)
    first, since qualifying and interning each name of each device cost more."""
    hit = _QUALIFIED.get((name, driver))
    if hit is None:
        hit = sys.intern(qualify(str(name), driver))
        if len(_QUALIFIED) < _SHARED_ATTRIBUTES_MAX:
            _QUALIFIED[(name, driver)] = hit
    return hit


# (driver, raw attribute names in order) -> their qualified names, or None when
# two of them qualify to the same name (then the general path keeps the last)
_QUALIFIED_LAYOUTS: dict[tuple[str, tuple[Any, ...]], tuple[str, ...] | None] = {}


def _qualified_layout(driver: str, names: tuple[Any, ...]) -> tuple[str, ...] | None:
    key = (driver, names)
    if key in _QUALIFIED_LAYOUTS:
        return _QUALIFIED_LAYOUTS[key]
    qualified = tuple(_key(k, driver) for k in names)
    hit = qualified if len(set(qualified)) == len(qualified) else None
    _keep(_QUALIFIED_LAYOUTS, key, hit)
    return hit


def _attributes(raw: Any, *, driver: str, where: str) -> Mapping[str, AttributeValue]:
    """A device's attributes. Devices of one kind repeat one name layout and,
    mostly, shared scalar values: both are looked up without a call per
    attribute (they were half of the parse of 3.4 million devices)."""
    if type(raw) is dict:
        names = _qualified_layout(driver, tuple(raw))
        if names is not None:
            try:
                # the `(pair,)` target takes only entries of exactly one (kind, value)
                values = tuple([_SCALARS[(*pair, type(pair[1]))]
                                for (pair,) in map(dict.items, raw.values())])
            except (KeyError, TypeError, ValueError):  # a new, list or malformed value
                values = tuple([_attribute(entry, where, name) for name, entry in raw.items()])
            return FieldMap.from_layout(names, values)
    return FieldMap({_key(k, driver): _attribute(v, where, k)
                     for k, v in _map(raw, f"{where}.attributes").items()})


def _device(raw: Any, *, driver: str, pool: str, slice_name: str, where: str,
            index: int) -> Device:
    """One device; `where` and `index` name it in errors (formatted once per device)."""
    d = raw if type(raw) is dict else _map(raw, f"{where} spec.devices[{index}]")
    name = d.get("name")
    if type(name) is not str or not name:
        name = _str(name, f"{where} spec.devices[{index}].name", required=True)
    name = sys.intern(name)
    where = f"{where} spec.devices[{index}] ({name})"
    get = d.get
    # Absent optional fields skip their parser (and its error context): most
    # devices carry only attributes and capacity.
    conditions, failures = get("bindingConditions"), get("bindingFailureConditions")
    return Device(
        driver=driver, pool=pool, name=name, slice_name=slice_name,
        attributes=_attributes(get("attributes"), driver=driver, where=where),
        capacity=_capacity_map(get("capacity"), driver=driver, where=where),
        consumes_counters=() if get("consumesCounters") is None
        else _consumptions(get("consumesCounters"), where=where),
        node_name=None if get("nodeName") is None
        else _str(get("nodeName"), f"{where}.nodeName") or None,
        node_selector=None if get("nodeSelector") is None
        else parse_node_selector(get("nodeSelector"), f"{where}.nodeSelector"),
        all_nodes=bool(get("allNodes")),
        taints=() if get("taints") is None else _taints(get("taints"), f"{where}.taints"),
        binds_to_node=bool(get("bindsToNode")),
        binding_conditions=() if conditions is None else tuple(
            str(x) for x in _list(conditions, f"{where}.bindingConditions")),
        binding_failure_conditions=() if failures is None else tuple(
            str(x) for x in _list(failures, f"{where}.bindingFailureConditions")),
        allow_multiple_allocations=bool(get("allowMultipleAllocations")),
    )


def parse_resource_slice(obj: Mapping[str, Any]) -> ResourceSlice:
    where = _where("ResourceSlice", obj)
    meta = _meta(obj)
    name = _str(meta.get("name"), f"{where} metadata.name", required=True)
    spec = _map(obj.get("spec"), f"{where} spec")
    driver = _str(spec.get("driver"), f"{where} spec.driver", required=True)
    pool_raw = _map(spec.get("pool"), f"{where} spec.pool")
    pool = ResourcePool(
        name=_str(pool_raw.get("name"), f"{where} spec.pool.name", required=True),
        generation=_int(pool_raw.get("generation"), f"{where} spec.pool.generation"),
        resource_slice_count=_int(pool_raw.get("resourceSliceCount"),
                                  f"{where} spec.pool.resourceSliceCount", default=1),
    )
    if pool.resource_slice_count <= 0:
        raise InvalidObject(f"{where} spec.pool.resourceSliceCount: must be greater than zero")
    devices = tuple(_device(d, driver=driver, pool=pool.name, slice_name=name, where=where,
                            index=i)
                    for i, d in enumerate(_list(spec.get("devices"), f"{where} spec.devices")))
    shared = []
    for i, cs in enumerate(_list(spec.get("sharedCounters"), f"{where} spec.sharedCounters")):
        m = _map(cs, f"{where} spec.sharedCounters[{i}]")
        shared.append(CounterSet(
            name=_str(m.get("name"), f"{where} spec.sharedCounters[{i}].name", required=True),
            counters=_counters(m.get("counters"), f"{where} spec.sharedCounters[{i}].counters")))
    node_name = _str(spec.get("nodeName"), f"{where} spec.nodeName") or None
    node_selector = parse_node_selector(spec.get("nodeSelector"), f"{where} spec.nodeSelector")
    all_nodes = bool(spec.get("allNodes"))
    per_device = bool(spec.get("perDeviceNodeSelection"))
    if sum((node_name is not None, node_selector is not None, all_nodes, per_device)) != 1:
        raise InvalidObject(f"{where} spec: exactly one of nodeName, nodeSelector, allNodes, "
                            "perDeviceNodeSelection must be set")
    return ResourceSlice(
        name=name, driver=driver, pool=pool, devices=devices, shared_counters=tuple(shared),
        node_name=node_name, node_selector=node_selector, all_nodes=all_nodes,
        per_device_node_selection=per_device, uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""))


def _selectors(raw: Any, what: str) -> tuple[str, ...]:
    out = []
    for i, s in enumerate(_list(raw, what)):
        cel = _map(_map(s, f"{what}[{i}]").get("cel"), f"{what}[{i}].cel")
        out.append(_str(cel.get("expression"), f"{what}[{i}].cel.expression", required=True))
    return tuple(out)


def parse_device_class(obj: Mapping[str, Any]) -> DeviceClass:
    where = _where("DeviceClass", obj)
    meta = _meta(obj)
    spec = _map(obj.get("spec"), f"{where} spec")
    return DeviceClass(
        name=_str(meta.get("name"), f"{where} metadata.name", required=True),
        selectors=_selectors(spec.get("selectors"), f"{where} spec.selectors"),
        config=tuple(_map(c, f"{where} spec.config")
                     for c in _list(spec.get("config"), f"{where} spec.config")),
        extended_resource_name=spec.get("extendedResourceName") or None,
        generation=_int(meta.get("generation"), f"{where} metadata.generation"),
        resource_version=str(meta.get("resourceVersion") or ""),
        creation_timestamp=str(meta.get("creationTimestamp") or ""))


def _tolerations(raw: Any, what: str) -> tuple[DeviceToleration, ...]:
    out = []
    for i, t in enumerate(_list(raw, what)):
        m = _map(t, f"{what}[{i}]")
        seconds = m.get("tolerationSeconds")
        out.append(DeviceToleration(
            key=_str(m.get("key"), f"{what}[{i}].key"),
            operator=_str(m.get("operator"), f"{what}[{i}].operator") or "Equal",
            value=_str(m.get("value"), f"{what}[{i}].value"),
            effect=_str(m.get("effect"), f"{what}[{i}].effect"),
            toleration_seconds=_int(seconds, f"{what}[{i}].tolerationSeconds")
            if seconds is not None else None))
    return tuple(out)


def _exact(raw: Any, what: str, *, subrequest: bool = False) -> ExactDeviceRequest:
    """`exactly` or one `firstAvailable` entry; a DeviceSubRequest has no
    `adminAccess` field in resource.k8s.io/v1, so there it is ignored like any
    unknown field (the allocator never sees it upstream)."""
    m = _map(raw, what)
    mode = _str(m.get("allocationMode"), f"{what}.allocationMode") or ALLOCATION_MODE_EXACT_COUNT
    count_default = 1 if mode == ALLOCATION_MODE_EXACT_COUNT else 0
    capacity = _map(m.get("capacity"), f"{what}.capacity")
    return ExactDeviceRequest(
        device_class_name=_str(m.get("deviceClassName"), f"{what}.deviceClassName"),
        selectors=_selectors(m.get("selectors"), f"{what}.selectors"),
        allocation_mode=mode,
        count=_int(m.get("count"), f"{what}.count", default=count_default),
        admin_access=not subrequest and bool(m.get("adminAccess")),
        tolerations=_tolerations(m.get("tolerations"), f"{what}.tolerations"),
        capacity_requests={str(k): _quantity(v, f"{what}.capacity.requests[{k}]")
                           for k, v in _map(capacity.get("requests"),
                                            f"{what}.capacity.requests").items()},
    )


def parse_claim_spec(raw: Any, where: str) -> ResourceClaimSpec:
    spec = _map(raw, f"{where} spec")
    devices = _map(spec.get("devices"), f"{where} spec.devices")
    requests = []
    for i, r in enumerate(_list(devices.get("requests"), f"{where} spec.devices.requests")):
        what = f"{where} spec.devices.requests[{i}]"
        m = _map(r, what)
        name = _str(m.get("name"), f"{what}.name", required=True)
        exactly = _exact(m["exactly"], f"{what}.exactly") if m.get("exactly") is not None else None
        subs = tuple(
            DeviceSubRequest(
                name=_str(_map(s, f"{what}.firstAvailable[{j}]").get("name"),
                          f"{what}.firstAvailable[{j}].name", required=True),
                request=_exact(s, f"{what}.firstAvailable[{j}]", subrequest=True))
            for j, s in enumerate(_list(m.get("firstAvailable"), f"{what}.firstAvailable")))
        if (exactly is None) == (not subs):
            raise InvalidObject(f"{what}: exactly one of exactly, firstAvailable must be set")
        requests.append(DeviceRequest(name=name, exactly=exactly, first_available=subs))
    constraints = []
    for i, c in enumerate(_list(devices.get("constraints"), f"{where} spec.devices.constraints")):
        what = f"{where} spec.devices.constraints[{i}]"
        m = _map(c, what)
        constraints.append(DeviceConstraint(
            requests=tuple(str(x) for x in _list(m.get("requests"), f"{what}.requests")),
            match_attribute=_str(m.get("matchAttribute"), f"{what}.matchAttribute") or None,
            distinct_attribute=_str(m.get("distinctAttribute"), f"{what}.distinctAttribute")
            or None))
    config = tuple(_map(c, f"{where} spec.devices.config")
                   for c in _list(devices.get("config"), f"{where} spec.devices.config"))
    return ResourceClaimSpec(requests=tuple(requests), constraints=tuple(constraints),
                             config=config)


def parse_allocation(raw: Any, where: str) -> AllocationResult | None:
    if raw is None:
        return None
    a = _map(raw, f"{where} status.allocation")
    devices = _map(a.get("devices"), f"{where} status.allocation.devices")
    results = []
    for i, r in enumerate(_list(devices.get("results"), f"{where} allocation.devices.results")):
        what = f"{where} status.allocation.devices.results[{i}]"
        m = _map(r, what)
        results.append(DeviceRequestAllocationResult(
            request=_str(m.get("request"), f"{what}.request", required=True),
            driver=_str(m.get("driver"), f"{what}.driver", required=True),
            pool=_str(m.get("pool"), f"{what}.pool", required=True),
            device=_str(m.get("device"), f"{what}.device", required=True),
            admin_access=bool(m.get("adminAccess")),
            tolerations=_tolerations(m.get("tolerations"), f"{what}.tolerations"),
            binding_conditions=tuple(str(x) for x in _list(m.get("bindingConditions"), what)),
            binding_failure_conditions=tuple(
                str(x) for x in _list(m.get("bindingFailureConditions"), what)),
            share_id=m.get("shareID") or None,
            consumed_capacity={str(k): _quantity(v, f"{what}.consumedCapacity[{k}]")
                               for k, v in _map(m.get("consumedCapacity"), what).items()},
        ))
    return AllocationResult(
        results=tuple(results),
        config=tuple(_map(c, where) for c in _list(devices.get("config"), where)),
        node_selector=parse_node_selector(a.get("nodeSelector"),
                                          f"{where} status.allocation.nodeSelector"),
        allocation_timestamp=a.get("allocationTimestamp"))


def parse_resource_claim(obj: Mapping[str, Any]) -> ResourceClaim:
    where = _where("ResourceClaim", obj)
    meta = _meta(obj)
    status = _map(obj.get("status"), f"{where} status")
    owner_pod_uid = None
    for ref in _list(meta.get("ownerReferences"), f"{where} metadata.ownerReferences"):
        r = _map(ref, f"{where} metadata.ownerReferences")
        if r.get("kind") == "Pod" and r.get("controller"):
            owner_pod_uid = str(r.get("uid") or "")
    reserved = []
    for i, ref in enumerate(_list(status.get("reservedFor"), f"{where} status.reservedFor")):
        r = _map(ref, f"{where} status.reservedFor[{i}]")
        reserved.append(ResourceClaimConsumerReference(
            resource=str(r.get("resource") or ""), name=str(r.get("name") or ""),
            uid=str(r.get("uid") or ""), api_group=str(r.get("apiGroup") or "")))
    annotations = _map(meta.get("annotations"), f"{where} metadata.annotations")
    return ResourceClaim(
        namespace=_str(meta.get("namespace"), f"{where} metadata.namespace") or "default",
        name=_str(meta.get("name"), f"{where} metadata.name", required=True),
        spec=parse_claim_spec(obj.get("spec"), where),
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        allocation=parse_allocation(status.get("allocation"), where),
        reserved_for=tuple(reserved),
        deleting=bool(meta.get("deletionTimestamp")),
        owner_pod_uid=owner_pod_uid,
        annotations={str(k): str(v) for k, v in annotations.items()})


def parse_resource_claim_template(obj: Mapping[str, Any]) -> ResourceClaimTemplate:
    where = _where("ResourceClaimTemplate", obj)
    meta = _meta(obj)
    spec = _map(obj.get("spec"), f"{where} spec")
    tmeta = _map(spec.get("metadata"), f"{where} spec.metadata")
    return ResourceClaimTemplate(
        namespace=_str(meta.get("namespace"), f"{where} metadata.namespace") or "default",
        name=_str(meta.get("name"), f"{where} metadata.name", required=True),
        spec=parse_claim_spec(spec.get("spec"), where),
        labels={str(k): str(v) for k, v in _map(tmeta.get("labels"), where).items()},
        annotations={str(k): str(v) for k, v in _map(tmeta.get("annotations"), where).items()},
        resource_version=str(meta.get("resourceVersion") or ""))


def parse_label_selector(raw: Any, what: str) -> LabelSelector | None:
    if raw is None:
        return None
    m = _map(raw, what)
    labels = {str(k): str(v) for k, v in _map(m.get("matchLabels"), f"{what}.matchLabels").items()}
    requirements = []
    for i, r in enumerate(_list(m.get("matchExpressions"), f"{what}.matchExpressions")):
        where = f"{what}.matchExpressions[{i}]"
        e = _map(r, where)
        operator = _str(e.get("operator"), f"{where}.operator", required=True)
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise InvalidObject(f"{where}.operator: {operator!r} is not one of In, NotIn, "
                                "Exists, DoesNotExist")
        requirements.append(LabelSelectorRequirement(
            key=_str(e.get("key"), f"{where}.key", required=True), operator=operator,
            values=tuple(str(v) for v in _list(e.get("values"), f"{where}.values"))))
    return LabelSelector(match_labels=labels, match_expressions=tuple(requirements))


def parse_pod_disruption_budget(obj: Mapping[str, Any]) -> PodDisruptionBudget:
    where = _where("PodDisruptionBudget", obj)
    meta = _meta(obj)
    spec = _map(obj.get("spec"), f"{where} spec")
    status = _map(obj.get("status"), f"{where} status")
    return PodDisruptionBudget(
        namespace=sys.intern(_str(meta.get("namespace"), f"{where} metadata.namespace")
                             or "default"),
        name=_str(meta.get("name"), f"{where} metadata.name", required=True),
        selector=parse_label_selector(spec.get("selector"), f"{where} spec.selector"),
        disruptions_allowed=_int(status.get("disruptionsAllowed"),
                                 f"{where} status.disruptionsAllowed"),
        disrupted_pods=frozenset(str(k) for k in _map(status.get("disruptedPods"),
                                                      f"{where} status.disruptedPods")),
        resource_version=str(meta.get("resourceVersion") or ""))


def parse_priority_class(obj: Mapping[str, Any]) -> PriorityClass:
    where = _where("PriorityClass", obj)
    meta = _meta(obj)
    if "value" not in obj:
        raise InvalidObject(f"{where} value: required")
    policy = _str(obj.get("preemptionPolicy"), f"{where} preemptionPolicy") \
        or PREEMPT_LOWER_PRIORITY
    if policy not in (PREEMPT_NEVER, PREEMPT_LOWER_PRIORITY):
        raise InvalidObject(f"{where} preemptionPolicy: {policy!r} is not one of "
                            f"{PREEMPT_LOWER_PRIORITY}, {PREEMPT_NEVER}")
    return PriorityClass(
        name=_str(meta.get("name"), f"{where} metadata.name", required=True),
        value=_int(obj.get("value"), f"{where} value"), preemption_policy=policy,
        global_default=bool(obj.get("globalDefault")),
        resource_version=str(meta.get("resourceVersion") or ""))


PARSERS: Final = {
    "Node": parse_node,
    "Pod": parse_pod,
    "ResourceSlice": parse_resource_slice,
    "DeviceClass": parse_device_class,
    "ResourceClaim": parse_resource_claim,
    "ResourceClaimTemplate": parse_resource_claim_template,
    "PodDisruptionBudget": parse_pod_disruption_budget,
    "PriorityClass": parse_priority_class,
}


def parse_object(kind: str, obj: Any) -> Any:
    """Parse a raw object of a known kind; raises InvalidObject for anything malformed."""
    parser = PARSERS.get(kind)
    if parser is None:
        raise InvalidObject(f"unsupported kind {kind!r}")
    if not isinstance(obj, Mapping):
        raise InvalidObject(f"{kind}: expected an object, got {type(obj).__name__}")
    return parser(obj)
