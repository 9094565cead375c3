"""Turn a found solution into `status.allocation` values, as upstream assembles them.

Kept apart from the search because it runs once per answer, not per step, and
because its rules (config order, node selector merging) are about what
Kubernetes would write, not about finding devices.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from app.allocator.search import AllocationError, Pick, Request, Search
from app.model import (
    AllocationResult,
    DeviceRequestAllocationResult,
    NodeSelector,
    Quantity,
    ResourceClaim,
)
from app.model.objects import NodeSelectorRequirement, NodeSelectorTerm

CONFIG_FROM_CLASS = "FromClass"
CONFIG_FROM_CLAIM = "FromClaim"


def claim_allocation(search: Search, claim_index: int, picks: Sequence[Pick],
                     chosen: Mapping[tuple[int, int], int], *,
                     new_share_id: Callable[[], str]) -> AllocationResult:
    claim = search.claims[claim_index]
    selected = _selected_requests(search, claim_index, chosen)
    return AllocationResult(
        results=tuple(_result(search, pick, new_share_id) for pick in picks),
        config=_config(claim, selected),
        node_selector=_node_selector(search, picks))


def _selected_requests(search: Search, claim_index: int,
                       chosen: Mapping[tuple[int, int], int]) -> list[Request]:
    return [subs[chosen.get((claim_index, ri), 0)]
            for ri, subs in enumerate(search.requests[claim_index])]


def _result(search: Search, pick: Pick, new_share_id: Callable[[], str]
            ) -> DeviceRequestAllocationResult:
    device = search.devices[pick.device]
    request = pick.request
    binding = search.features.device_binding_conditions
    return DeviceRequestAllocationResult(
        request=request.name, driver=device.driver, pool=device.pool, device=device.name,
        admin_access=request.admin,
        tolerations=request.spec.tolerations,
        binding_conditions=device.binding_conditions if binding else (),
        binding_failure_conditions=device.binding_failure_conditions if binding else (),
        share_id=new_share_id() if pick.consumed is not None else None,
        consumed_capacity=_published_names(pick.consumed or {}, device.driver))


def _published_names(consumed: Mapping[str, Quantity], driver: str) -> dict[str, Quantity]:
    """Capacity names as drivers publish them: bare for the driver's own domain."""
    prefix = f"{driver}/"
    return {name.removeprefix(prefix): amount for name, amount in consumed.items()}


def _config(claim: ResourceClaim, selected: Sequence[Request]
            ) -> tuple[Mapping[str, Any], ...]:
    out: list[dict[str, Any]] = []
    class_entries: dict[str, list[dict[str, Any]]] = {}
    for request in selected:
        cls = request.device_class
        entries = class_entries.get(cls.name)
        if entries is not None:
            for entry in entries:
                entry["requests"].append(request.name)
            continue
        entries = [{"source": CONFIG_FROM_CLASS, "requests": [request.name], **config}
                   for config in cls.config]
        class_entries[cls.name] = entries
        out.extend(entries)
    for config in claim.spec.config:
        names = list(config.get("requests") or [])
        if names and not any(r.base in names or r.name in names for r in selected):
            continue
        entry = {k: v for k, v in config.items() if k != "requests"}
        out.append({"source": CONFIG_FROM_CLAIM, "requests": names, **entry})
    for entry in out:
        names = entry["requests"]
        if names and all(r.base in names or r.name in names for r in selected):
            names.clear()
    for entry in out:
        if not entry["requests"]:
            del entry["requests"]
    return tuple(out)


def _node_selector(search: Search, picks: Sequence[Pick]) -> NodeSelector | None:
    node_name = search.node_view.node.name
    fields: list[NodeSelectorRequirement] = []
    expressions: list[NodeSelectorRequirement] = []
    for pick in picks:
        device = search.devices[pick.device]
        slice_ = search.slice_of(pick.device)
        if slice_ is not None and slice_.per_device_node_selection:
            local, selector = device.node_name, device.node_selector
        elif slice_ is not None:
            local, selector = slice_.node_name, slice_.node_selector
        else:
            local, selector = device.node_name, device.node_selector
        if local or device.binds_to_node:
            return NodeSelector((NodeSelectorTerm(match_fields=(
                NodeSelectorRequirement("metadata.name", "In", (node_name,)),)),))
        if selector is None or not selector.terms:
            continue
        if len(selector.terms) > 1:
            raise AllocationError(f"create NodeSelector: unsupported ResourceSlice.NodeSelector "
                                  f"with {len(selector.terms)} terms")
        _merge(selector.terms[0].match_fields, fields)
        _merge(selector.terms[0].match_expressions, expressions)
    if not fields and not expressions:
        return None
    return NodeSelector((NodeSelectorTerm(match_expressions=tuple(expressions),
                                          match_fields=tuple(fields)),))


def _merge(new: Sequence[NodeSelectorRequirement], into: list[NodeSelectorRequirement]) -> None:
    for requirement in new:
        if not any(r.key == requirement.key and r.operator == requirement.operator
                   and set(r.values) == set(requirement.values) for r in into):
            into.append(requirement)
