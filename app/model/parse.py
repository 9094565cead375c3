"""The parsing edge: raw API dicts into the typed objects of `app.model.objects`.

Parsing happens exactly once per object version. A malformed object raises
`InvalidObject` naming the object and the field; the caller keeps whatever it
already held. Values that repeat across objects go through
`app.model.interning`, so a cluster of identical nodes costs little more
memory than one.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from fractions import Fraction
from types import MappingProxyType
from typing import Any, Final, cast

from app.model.compact import FieldMap
from app.model.interning import (
    NO_LABELS,
    SCALARS,
    SHARED,
    SHARED_LABELS,
    UNSUPPORTED,
    qualified_layout,
    qualified_name,
    remember,
    shared_attribute,
    simple_values,
)
from app.model.objects import (
    ALLOCATION_MODE_EXACT_COUNT,
    ATTRIBUTE_KINDS,
    DISRUPTION_TARGET,
    LIST_ATTRIBUTE_KINDS,
    PREEMPT_LOWER_PRIORITY,
    PREEMPT_NEVER,
    PREEMPTING_FOR,
    PREEMPTION_BY_SCHEDULER,
    AllocationResult,
    AttributeValue,
    ContainerExtendedResourceRequest,
    ContainerResources,
    CounterSet,
    Device,
    DeviceCapacity,
    DeviceClass,
    DeviceConstraint,
    DeviceCounterConsumption,
    DeviceRequest,
    DeviceRequestAllocationResult,
    DeviceSubRequest,
    DeviceTaint,
    DeviceToleration,
    ExactDeviceRequest,
    ExtendedResourceClaimStatus,
    InvalidObject,
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PodDisruptionBudget,
    PodResourceClaim,
    PriorityClass,
    RequestPolicy,
    ResourceClaim,
    ResourceClaimConsumerReference,
    ResourceClaimSpec,
    ResourceClaimTemplate,
    ResourcePool,
    ResourceSlice,
    is_extended_resource_name,
)
from app.model.quantity import Quantity, QuantityError, parse_quantity
from app.model.requests import (
    ContainerRequests,
    PodLevel,
    PodUsage,
    Resources,
    pod_requests,
    resources_of,
)
from app.model.times import parse_time
from app.model.versions import READ_AS_V1, as_v1

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
    raw_allocatable = status.get("allocatable")
    listed = _resource_list(raw_allocatable, f"Node {name} status.allocatable")
    for resource, amount in listed.items():
        if is_extended_resource_name(resource):
            allocatable[resource] = math.ceil(amount)
    spec = _map(obj.get("spec"), f"Node {name} spec")
    return Node(name=name, labels={str(k): str(v) for k, v in labels.items()},
                uid=str(meta.get("uid") or ""),
                resource_version=str(meta.get("resourceVersion") or ""),
                allocatable=allocatable,
                taints=_shared("taints", spec.get("taints"), f"Node {name} spec.taints",
                               parse_taints),
                unschedulable=spec.get("unschedulable") is True,
                resources=None if raw_allocatable is None
                else resources_of(listed, with_pods=True))


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


def _pod_identity(obj: Mapping[str, Any]) -> tuple[Mapping[str, Any], str, str, str]:
    """A pod's metadata, namespace, name, and how errors name it."""
    meta = _meta(obj)
    name = _str(meta.get("name"), "Pod metadata.name", required=True)
    namespace = _str(meta.get("namespace"), f"Pod {name} metadata.namespace") or "default"
    return meta, namespace, name, f"Pod {namespace}/{name}"


def parse_pod(obj: Mapping[str, Any]) -> Pod:
    if not isinstance(obj, Mapping):
        raise InvalidObject("Pod: expected an object")
    meta, namespace, name, where = _pod_identity(obj)
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
               labels=shared_labels(meta.get("labels"), f"{where} metadata.labels"),
               unschedulable=_unschedulable(status, where),
               preempted_for=_preempted_for(status, where),
               nominated_node_name=sys.intern(_str(status.get("nominatedNodeName"),
                                                   f"{where} status.nominatedNodeName")),
               node_selector=_node_selector(spec, where),
               node_affinity=_required_node_affinity(spec, where),
               tolerations=_shared("tolerations", spec.get("tolerations"),
                                   f"{where} spec.tolerations", _tolerations),
               requests=parse_pod_requests(spec, status, where))


def parse_pod_usage(obj: Mapping[str, Any]) -> PodUsage:
    """What a pod without claims takes of its node (`PodUsage`): read only
    once it has a node, or a nominated node it is not leaving (kube-scheduler
    counts a nominated pod of no lower priority on its node)."""
    meta, namespace, name, where = _pod_identity(obj)
    spec = _map(obj.get("spec"), f"{where} spec")
    status = _map(obj.get("status"), f"{where} status")
    node = _str(spec.get("nodeName"), f"{where} spec.nodeName")
    deleting = bool(meta.get("deletionTimestamp"))
    nominated = "" if node or deleting else _str(
        status.get("nominatedNodeName"), f"{where} status.nominatedNodeName")
    if not node and not nominated:
        return PodUsage(namespace=namespace, name=name)
    priority = spec.get("priority")
    return PodUsage(namespace=sys.intern(namespace), name=name, uid=str(meta.get("uid") or ""),
                    node_name=sys.intern(node), deleting=deleting,
                    requests=parse_pod_requests(spec, status, where),
                    priority=None if priority is None
                    else _small_int(_int(priority, f"{where} spec.priority")),
                    priority_class_name=sys.intern(
                        _str(spec.get("priorityClassName"), f"{where} spec.priorityClassName")),
                    start_time=_timestamp(status.get("startTime"), f"{where} status.startTime"),
                    labels=shared_labels(meta.get("labels"), f"{where} metadata.labels"),
                    nominated_node_name=sys.intern(nominated),
                    scheduler_name=sys.intern(
                        _str(spec.get("schedulerName"), f"{where} spec.schedulerName")))


_PRIORITIES: dict[int, int] = {}


def _small_int(value: int) -> int:
    """One int object per priority value (a cluster has a handful)."""
    if len(_PRIORITIES) > 4096:
        return value
    return _PRIORITIES.setdefault(value, value)


def _resource_list(raw: Any, what: str) -> dict[str, Fraction]:
    return {str(k): _quantity(v, f"{what}[{k}]").value for k, v in _map(raw, what).items()}


def _status_list(raw: Mapping[str, Any], name: str, what: str) -> dict[str, Fraction] | None:
    value = raw.get(name)
    return None if value is None else _resource_list(value, f"{what}.{name}")


def _requested(owner: Mapping[str, Any], what: str) -> dict[str, Fraction]:
    """A container's or a pod's `resources`: its requests, a limit standing in
    for a request it lacks (as the API server defaults it)."""
    resources = _map(owner.get("resources"), f"{what}.resources")
    requested = _resource_list(resources.get("limits"), f"{what}.resources.limits")
    requested.update(_resource_list(resources.get("requests"), f"{what}.resources.requests"))
    return requested


def parse_pod_requests(spec: Mapping[str, Any], status: Mapping[str, Any],
                       where: str) -> Resources:
    """The pod's requests as kube-scheduler counts them (`app.model.requests`)."""
    statuses: dict[str, Mapping[str, Any]] = {}
    for field_name in ("containerStatuses", "initContainerStatuses"):
        for i, raw in enumerate(_list(status.get(field_name), f"{where} status.{field_name}")):
            entry = _map(raw, f"{where} status.{field_name}[{i}]")
            statuses.setdefault(str(entry.get("name") or ""), entry)
    containers = []
    for field_name, init in (("initContainers", True), ("containers", False)):
        for i, raw in enumerate(_list(spec.get(field_name), f"{where} spec.{field_name}")):
            what = f"{where} spec.{field_name}[{i}]"
            c = _map(raw, what)
            requests = _requested(c, what)
            seen = statuses.get(str(c.get("name") or ""), {})
            actual = _map(seen.get("resources"), f"{where} status of {what}")
            containers.append(ContainerRequests(
                spec=requests, init=init, sidecar=init and c.get("restartPolicy") == "Always",
                allocated=_status_list(seen, "allocatedResources", f"{where} status of {what}"),
                actuated=_status_list(actual, "requests", f"{where} status of {what}")))
    pod_requested = _requested(spec, f"{where} spec")
    status_resources = status.get("resources")
    infeasible = any(
        isinstance(c, Mapping) and c.get("type") == "PodResizePending"
        and c.get("reason") == "Infeasible"
        for c in _list(status.get("conditions"), f"{where} status.conditions"))
    return pod_requests(containers, PodLevel(
        requests=pod_requested,
        overhead=_resource_list(spec.get("overhead"), f"{where} spec.overhead"),
        status_resources=status_resources is not None,
        actuated=_status_list(_map(status_resources, f"{where} status.resources"), "requests",
                              f"{where} status.resources"),
        allocated=_status_list(status, "allocatedResources", f"{where} status"),
        resize_infeasible=infeasible))


def _shared(kind: str, raw: Any, what: str, parse: Callable[[Any, str], tuple[Any, ...]]
            ) -> tuple[Any, ...]:
    """Node taints and pod tolerations, one tuple per distinct list: admission
    gives nearly every pod the same not-ready/unreachable tolerations."""
    if raw is None or raw == []:
        return ()
    key: tuple[Any, ...] | None
    try:  # the type is part of the key because `True == 1`
        key = (kind, tuple(tuple(sorted((k, v, type(v)) for k, v in m.items())) for m in raw))
        hit = SHARED.get(key)
    except (AttributeError, TypeError):  # not a list of flat maps: parse says why
        key, hit = None, None
    if hit is not None:
        return cast(tuple[Any, ...], hit)
    parsed = parse(raw, what)
    remember(key, parsed)
    return parsed


def _node_selector(spec: Mapping[str, Any], where: str) -> Mapping[str, str]:
    raw = _map(spec.get("nodeSelector"), f"{where} spec.nodeSelector")
    # Most pods have none: one shared empty map, not one per pod.
    return {str(k): str(v) for k, v in raw.items()} if raw else _NO_SELECTOR


_NO_SELECTOR: Final[Mapping[str, str]] = MappingProxyType({})


def _required_node_affinity(spec: Mapping[str, Any], where: str) -> NodeSelector | None:
    affinity = _map(spec.get("affinity"), f"{where} spec.affinity")
    node = _map(affinity.get("nodeAffinity"), f"{where} spec.affinity.nodeAffinity")
    return parse_node_selector(node.get("requiredDuringSchedulingIgnoredDuringExecution"),
                               f"{where} requiredDuringSchedulingIgnoredDuringExecution")


def _unschedulable(status: Mapping[str, Any], where: str) -> bool:
    """PodScheduled=False with reason Unschedulable."""
    for i, raw in enumerate(_list(status.get("conditions"), f"{where} status.conditions")):
        c = _map(raw, f"{where} status.conditions[{i}]")
        if c.get("type") == "PodScheduled":
            return c.get("status") == "False" and c.get("reason") == "Unschedulable"
    return False


def _preempted_for(status: Mapping[str, Any], where: str) -> str:
    """The preemptor's uid in a DisruptionTarget condition of reason
    PreemptionByScheduler worded as drax words it ("<scheduler>: preempting to
    accommodate a higher priority pod <namespace>/<name> (uid <uid>; ...)");
    empty without one, or when the message names no pod uid (kube-scheduler's
    own names none: its Event names the preemptor by uid)."""
    for i, raw in enumerate(_list(status.get("conditions"), f"{where} status.conditions")):
        c = _map(raw, f"{where} status.conditions[{i}]")
        if c.get("type") != DISRUPTION_TARGET:
            continue
        message = c.get("message")
        if (c.get("status") != "True" or c.get("reason") != PREEMPTION_BY_SCHEDULER
                or not isinstance(message, str)):
            return ""
        _, found, rest = message.partition(f" {PREEMPTING_FOR} ")
        key, _, rest = rest.partition(" (uid ")
        if not found or key.count("/") != 1 or " " in key:
            return ""
        uid = rest.split(";", 1)[0].split(")", 1)[0]
        return uid if uid and " " not in uid else ""
    return ""


def shared_labels(raw: Any, what: str) -> Mapping[str, str]:
    """metadata.labels as a map shared between objects with the same labels."""
    labels = _map(raw, what)
    if not labels:
        return NO_LABELS
    items = tuple(sorted((sys.intern(str(k)), sys.intern(str(v))) for k, v in labels.items()))
    hit = SHARED_LABELS.get(items)
    if hit is None:
        hit = SHARED_LABELS.put(items, dict(items))
    return hit


def _timestamp(value: Any, what: str) -> float | None:
    """An RFC 3339 time (as the API server writes them) in epoch seconds."""
    if value is None or value == "":
        return None
    text = _str(value, what)
    try:
        return parse_time(text)
    except ValueError:
        raise InvalidObject(f"{what}: {text!r} is not an RFC 3339 time") from None


def _attribute(raw: Any, where: str, name: Any) -> AttributeValue:
    # Nearly every attribute is one scalar (`{"string": "gpu"}`): look it up by
    # (kind, type, value) before validating. The type is part of the key because
    # `True == 1`, and `{"int": true}` must stay unsupported. The error context
    # is formatted only off this path: once per attribute of millions of devices
    # it is a large share of the parse.
    if type(raw) is dict and len(raw) == 1:
        ((kind, value),) = raw.items()
        if type(value) in (str, int, bool):
            hit = SCALARS.get((kind, value, type(value)))
            if hit is not None:
                return hit
            parsed = _parse_attribute(raw, f"{where}.attributes[{name}]")
            return SCALARS.put((kind, value, type(value)), parsed)
    return _parse_attribute(raw, f"{where}.attributes[{name}]")


def _parse_attribute(raw: Any, what: str) -> AttributeValue:
    r = _map(raw, what)
    present = [k for k in ATTRIBUTE_KINDS if k in r and r[k] is not None]
    if len(present) != 1:
        return UNSUPPORTED
    kind = present[0]
    value = r[kind]
    if kind in LIST_ATTRIBUTE_KINDS:
        if not isinstance(value, list | tuple) or not value:
            return UNSUPPORTED
        value = tuple(value)
    elif not _scalar_fits(kind, value):
        return UNSUPPORTED
    return shared_attribute(AttributeValue(kind, value))


def _scalar_fits(kind: str, value: Any) -> bool:
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    return isinstance(value, str)  # string, version


def _capacity_map(raw: Any, *, driver: str, where: str) -> Mapping[str, DeviceCapacity]:
    m = raw if type(raw) is dict else _map(raw, f"{where}.capacity")
    simple = simple_values(m)
    key = None if simple is None else ("capacity", driver, simple)
    if key is not None and (hit := SHARED.get(key)) is not None:
        return cast(Mapping[str, DeviceCapacity], hit)
    out: dict[str, DeviceCapacity] = {}
    for k, v in m.items():
        c = _map(v, f"{where}.capacity[{k}]")
        out[qualified_name(k, driver)] = DeviceCapacity(
            value=_quantity(c.get("value"), f"{where}.capacity[{k}].value"),
            request_policy=_request_policy(c.get("requestPolicy"),
                                           f"{where}.capacity[{k}].requestPolicy"))
    shared = FieldMap(out)
    remember(key, shared)
    return shared


def _consumptions(raw: Any, *, where: str) -> tuple[DeviceCounterConsumption, ...]:
    entries = _list(raw, f"{where}.consumesCounters")
    parts: list[Any] = ["consumes"]
    for cc in entries:
        simple = (simple_values(cc["counters"]) if type(cc) is dict and len(cc) == 2
                  and type(cc.get("counterSet")) is str and type(cc.get("counters")) is dict
                  else None)
        if simple is None:
            break
        parts.append((cc["counterSet"], simple))
    key = tuple(parts) if len(parts) == len(entries) + 1 else None
    if key is not None and (hit := SHARED.get(key)) is not None:
        return cast(tuple[DeviceCounterConsumption, ...], hit)
    consumes = []
    for i, cc in enumerate(entries):
        m = _map(cc, f"{where}.consumesCounters[{i}]")
        consumes.append(DeviceCounterConsumption(
            counter_set=_str(m.get("counterSet"), f"{where}.consumesCounters[{i}].counterSet",
                             required=True),
            counters=_counters(m.get("counters"), f"{where}.consumesCounters[{i}].counters")))
    out = tuple(consumes)
    remember(key, out)
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


def parse_taints(raw: Any, what: str) -> tuple[DeviceTaint, ...]:
    """A Node's or a device's taints, in order; `what` names the list in errors."""
    out = []
    for i, t in enumerate(_list(raw, what)):
        m = _map(t, f"{what}[{i}]")
        out.append(DeviceTaint(key=sys.intern(_str(m.get("key"), f"{what}[{i}].key",
                                                   required=True)),
                               value=_str(m.get("value"), f"{what}[{i}].value"),
                               effect=sys.intern(_str(m.get("effect"), f"{what}[{i}].effect")),
                               time_added=m.get("timeAdded")))
    return tuple(out)


def _counters(raw: Any, what: str) -> FieldMap[Quantity]:
    # immutable, as every part the model shares is (a consumption between devices,
    # a counter set between the slices of one node kind)
    return FieldMap({str(name): _quantity(_map(c, f"{what}.{name}").get("value"),
                                          f"{what}.{name}.value")
                     for name, c in _map(raw, what).items()})


def _attributes(raw: Any, *, driver: str, where: str) -> Mapping[str, AttributeValue]:
    """A device's attributes. Devices of one kind repeat one name layout and,
    mostly, shared scalar values: both are looked up without a call per
    attribute, the largest part of parsing a large cluster's devices otherwise."""
    if type(raw) is dict:
        names = qualified_layout(driver, tuple(raw))
        if names is not None:
            try:
                # the `(pair,)` target takes only entries of exactly one (kind, value)
                values = tuple([SCALARS[(*pair, type(pair[1]))]
                                for (pair,) in map(dict.items, raw.values())])
            except (KeyError, TypeError, ValueError):  # a new, list or malformed value
                values = tuple([_attribute(entry, where, name) for name, entry in raw.items()])
            return FieldMap.from_layout(names, values)
    return FieldMap({qualified_name(k, driver): _attribute(v, where, k)
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
        taints=() if get("taints") is None else parse_taints(get("taints"), f"{where}.taints"),
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
            key=sys.intern(_str(m.get("key"), f"{what}[{i}].key")),
            operator=sys.intern(_str(m.get("operator"), f"{what}[{i}].operator") or "Equal"),
            value=_str(m.get("value"), f"{what}[{i}].value"),
            effect=sys.intern(_str(m.get("effect"), f"{what}[{i}].effect")),
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
    version = obj.get("apiVersion")
    if version is not None and version not in READ_AS_V1:
        obj = as_v1(kind, obj, _where(kind, obj))
    return parser(obj)
