"""Extended resources served by DRA (KEP-5004): `nvidia.com/gpu: 2` as a claim.

A DeviceClass takes over an extended resource named in `spec.extendedResourceName`
(the newest class wins a shared name, then the first by name) and always the
implicit `deviceclass.resource.kubernetes.io/<class>`. A pod requesting a taken
over resource gets, per node, one special ResourceClaim whose requests ask for
that many devices of the class, allocated together with its own claims.

The per-node rule is upstream's: for each extended resource the pod requests,
a node whose `status.allocatable` has it non-zero serves it by device plugin
(left to the in-tree resource fit); a mapped resource the node has at zero or
not at all is served by DRA; an unmapped one the node lacks rules it out. A
pod whose resources all come from device plugins on a node needs no special
claim there.

The requests follow upstream's naming and init-container rules: each
long-lived container (regular or sidecar) gets its own request
`container-<index>-request-<i>` (`index` over init containers then containers,
`i` the resource's place among the container's sorted request names); a
short-lived init container first reuses the requests of long-lived containers
listed after it, and of what it still needs only the largest such request is
kept, all short-lived containers mapping to it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from app.model import DeviceClass, Pod, ResourceClaim
from app.model.objects import (
    DEVICE_CLASS_RESOURCE_PREFIX,
    ContainerExtendedResourceRequest,
    DeviceRequest,
    ExactDeviceRequest,
    Node,
    ResourceClaimSpec,
)

EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
# The in-memory name upstream gives the special claim until it is created: not
# a valid object name, so it cannot clash with a real claim.
SPECIAL_CLAIM_NAME = "<extended-resources>"


@dataclass(slots=True, frozen=True)
class ExtendedNeeds:
    """What a pod asks of extended resources, when at least one is DRA-mapped.

    `requested`: every extended resource the pod requests (non-zero), sorted;
    `classes`: the mapped ones, resource name -> class name."""

    requested: tuple[str, ...]
    classes: tuple[tuple[str, str], ...]
    # what the special claim is built from, so that equal needs build equal claims
    containers: tuple[Hashable, ...] = ()

    def class_of(self, resource: str) -> str | None:
        return dict(self.classes).get(resource)


@dataclass(slots=True, frozen=True)
class ExtendedClaim:
    """The special claim for one node, and which container each request serves."""

    claim: ResourceClaim
    mappings: tuple[ContainerExtendedResourceRequest, ...]
    served: tuple[str, ...]  # the resources DRA serves on this node


def resource_classes(classes: Mapping[str, DeviceClass]) -> dict[str, DeviceClass]:
    """Extended resource name -> the class that serves it."""
    out: dict[str, DeviceClass] = {}
    for device_class in classes.values():
        out[DEVICE_CLASS_RESOURCE_PREFIX + device_class.name] = device_class
    explicit: dict[str, list[DeviceClass]] = {}
    for device_class in sorted(classes.values(), key=lambda c: c.name):
        if device_class.extended_resource_name:
            explicit.setdefault(device_class.extended_resource_name, []).append(device_class)
    for name, group in explicit.items():
        # the newest wins, then the first by name (max keeps the first maximum);
        # RFC 3339 timestamps in UTC compare as strings
        out[name] = max(group, key=lambda c: c.creation_timestamp)
    return out


def needs_of(pod: Pod, classes: Mapping[str, DeviceClass]) -> ExtendedNeeds | None:
    requested = sorted({r for c in pod.containers for r, n in c.extended.items() if n})
    if not requested:
        return None
    by_resource = resource_classes(classes)
    mapped = tuple((r, by_resource[r].name) for r in requested if r in by_resource)
    if not mapped:
        return None
    return ExtendedNeeds(requested=tuple(requested), classes=mapped, containers=tuple(
        (c.init, c.sidecar, c.names, tuple(sorted(c.extended.items())))
        for c in pod.containers))


def served_by_dra(needs: ExtendedNeeds, node: Node) -> tuple[str, ...] | str:
    """The resources DRA must serve on `node`, or why the node cannot hold the pod."""
    served = []
    for resource in needs.requested:
        allocatable = node.allocatable.get(resource)
        if needs.class_of(resource) is not None and not allocatable:
            served.append(resource)
        elif allocatable is None:
            return (f"{resource}: requested, but node {node.name} does not advertise it and "
                    "no DeviceClass serves it")
    return tuple(served)


def extended_claim(pod: Pod, needs: ExtendedNeeds, served: Sequence[str]) -> ExtendedClaim:
    requests: list[DeviceRequest] = []
    mappings: list[ContainerExtendedResourceRequest] = []
    for resource in sorted(served):
        class_name = needs.class_of(resource)
        assert class_name is not None
        reqs, maps = _resource_requests(pod, resource, class_name)
        requests += reqs
        mappings += maps
    requests.sort(key=lambda r: r.name)
    claim = ResourceClaim(
        namespace=pod.namespace, name=SPECIAL_CLAIM_NAME,
        spec=ResourceClaimSpec(requests=tuple(requests)), owner_pod_uid=pod.uid or None,
        annotations={EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"})
    return ExtendedClaim(claim=claim, mappings=tuple(mappings), served=tuple(served))


def _resource_requests(pod: Pod, resource: str, class_name: str
                       ) -> tuple[list[DeviceRequest], list[ContainerExtendedResourceRequest]]:
    containers = pod.containers
    long_lived = [i for i, c in enumerate(containers) if not c.init or c.sidecar]
    short_lived = [i for i, c in enumerate(containers) if c.init and not c.sidecar]
    long_requests: list[DeviceRequest | None] = [None] * len(containers)
    long_maps: list[ContainerExtendedResourceRequest] = []
    for i in long_lived:
        request, maps = _container_request(pod, i, resource, class_name, reusable=())
        long_requests[i] = request
        long_maps += maps
    largest: DeviceRequest | None = None
    short_names: set[str] = set()
    short_maps: list[ContainerExtendedResourceRequest] = []
    for i in short_lived:
        request, maps = _container_request(pod, i, resource, class_name,
                                           reusable=long_requests[i:])
        if request is not None:
            short_names.add(request.name)
            if largest is None or _count(largest) < _count(request):
                largest = request
        short_maps += maps
    if largest is not None and len(short_names) > 1:
        short_names.discard(largest.name)
        short_maps = [ContainerExtendedResourceRequest(m.container_name, m.resource_name,
                                                       largest.name)
                      if m.request_name in short_names else m for m in short_maps]
    requests = ([largest] if largest is not None else []) + [
        r for r in long_requests if r is not None]
    return requests, long_maps + short_maps


def _count(request: DeviceRequest) -> int:
    assert request.exactly is not None
    return request.exactly.count


def _container_request(pod: Pod, index: int, resource: str, class_name: str, *,
                       reusable: Sequence[DeviceRequest | None]
                       ) -> tuple[DeviceRequest | None, list[ContainerExtendedResourceRequest]]:
    """The container's own request for what `reusable` requests do not cover."""
    container = pod.containers[index]
    wanted = container.extended.get(resource, 0)
    if not wanted:
        return None, []
    maps = []
    covered = 0
    for request in reusable:
        if request is None:
            continue
        covered += _count(request)
        maps.append(ContainerExtendedResourceRequest(container.name, resource, request.name))
        if covered >= wanted:
            return None, maps
    name = f"container-{index}-request-{container.names.index(resource)}"
    maps.append(ContainerExtendedResourceRequest(container.name, resource, name))
    return DeviceRequest(name=name, exactly=ExactDeviceRequest(
        device_class_name=class_name, count=wanted - covered)), maps


def requested_devices(extended: ExtendedClaim, resource: str) -> int:
    """Devices the special claim asks for on behalf of `resource`."""
    names = {m.request_name for m in extended.mappings if m.resource_name == resource}
    return sum(_count(r) for r in extended.claim.spec.requests if r.name in names)


def find_extended_claim(pod: Pod, claims: Iterable[ResourceClaim]) -> ResourceClaim | None:
    """The special claim an earlier bind created for this pod, if any."""
    for claim in claims:
        if (claim.annotations.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) == "true"
                and pod.uid and claim.owner_pod_uid == pod.uid):
            return claim
    return None
