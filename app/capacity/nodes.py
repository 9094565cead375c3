"""How many more pods of one shape fit on each node of an inventory.

A `PodShape` is the device claims one more pod would bring, plus, for a Pod,
its extended resources served by DRA: on each node those add the special
claim the scheduler would build there, and on a node whose device plugin
advertises the resource the count is at most its allocatable over the pod's
request (not exact: drax does not track what running pods hold of
device-plugin resources). Each node's number is `count_fits`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from app.capacity.fits import FitCount, count_fits
from app.extender.extended import ExtendedNeeds, extended_claim, served_by_dra
from app.features import FeatureGates
from app.inventory import Inventory
from app.model import Node, Pod, ResourceClaim


@dataclass(slots=True, frozen=True)
class PodShape:
    claims: tuple[ResourceClaim, ...]
    pod: Pod | None = None
    extended: ExtendedNeeds | None = None


def count_nodes(inventory: Inventory, shape: PodShape, *, nodes: Sequence[str],
             features: FeatureGates) -> dict[str, FitCount]:
    """`count_fits` of `shape` on each of `nodes` (all known to `inventory`)."""
    out = {}
    for name in nodes:
        state = inventory.node_state(name)
        assert state is not None
        claims = list(shape.claims)
        plugin: FitCount | None = None
        if shape.extended is not None and shape.pod is not None:
            served = served_by_dra(shape.extended, state.view.node)
            if isinstance(served, str):
                out[name] = FitCount(count=0)
                continue
            if served:
                claims.append(extended_claim(shape.pod, shape.extended, served).claim)
            plugin = device_plugin_fits(shape.pod, shape.extended, state.view.node,
                                         served=served)
        fit = count_fits(claims, state.view, classes=inventory.classes,
                         allocated=state.allocated, features=features,
                         class_matcher=inventory.class_matcher,
                         selector_matches=inventory.selectors.selector_matches)
        if plugin is not None and plugin.count <= fit.count:
            fit = plugin
        out[name] = fit
    return out


def device_plugin_fits(pod: Pod, needs: ExtendedNeeds, node: Node, *,
                        served: Sequence[str]) -> FitCount | None:
    """Pods by the node's allocatable of the resources its device plugin serves."""
    counts = []
    for resource in needs.requested:
        if resource in served or not node.allocatable.get(resource):
            continue
        wanted = pod_request(pod, resource)
        if wanted:
            counts.append(node.allocatable[resource] // wanted)
    return FitCount(count=min(counts), exact=False) if counts else None


def pod_request(pod: Pod, resource: str) -> int:
    """The pod's request as the resource fit counts it: long-lived containers add
    up, an init container needs its own amount plus the sidecars started before it."""
    running = 0
    peak = 0
    for c in pod.containers:
        amount = c.extended.get(resource, 0)
        if c.init and not c.sidecar:
            peak = max(peak, running + amount)
        else:
            running += amount
    return max(running, peak)


def fresh_claim(claim: ResourceClaim) -> ResourceClaim:
    """`claim` as one more pod would bring it: not allocated, reserved or created."""
    return replace(claim, allocation=None, reserved_for=(), uid="")
