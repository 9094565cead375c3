"""Node signatures: evaluate one node per distinct device state, not every node.

In a fresh cluster hundreds of nodes carry the same hardware; only names,
UUIDs and MAC addresses differ. For one claim shape, two nodes whose
signatures are equal get the same answer up to renaming devices, so the
allocator runs on one representative and its result is mapped onto the other
node's devices by position.

A signature lists, per pool in search order and per device in order,
everything the allocator or the objective can read:
- the pool's completeness, validity, counters (total and consumed) and how
  its slices and devices select nodes;
- per device: its attributes with string values replaced by their
  first-occurrence index on the node (so `uuid` and `pcieRoot` keep their
  equality pattern, which is all that `matchAttribute`, `distinctAttribute`
  and the topology grouping compare, while differing text does not split
  nodes), other attribute kinds verbatim, capacities and request policies,
  counter consumption, taints, binding conditions, and whether it is free,
  taken, or shared with how much consumed;
- per (class, selectors) of the claim shape: whether the device matches (the
  CEL result, or its error), so selectors that read raw values stay exact.

The per-node part that does not depend on the claim shape is cached per node
version; the selector matches per node and request kind (`MatchColumns`), for
as long as the node's slices stay the same.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Any, Final, Protocol

from app.allocator.types import AllocationOutcome, ClaimAllocation, KnownMatches, NodeView
from app.bounded_cache import BoundedCache
from app.cel import CelCompileError, CelEvalError, compile_selector
from app.inventory import NodeState
from app.model import (
    AllocationResult,
    Device,
    DeviceClass,
    DeviceRequestAllocationResult,
    Node,
    NodeSelector,
    RequestPolicy,
    ResourceClaim,
    ResourceSlice,
)
from app.model.compact import names_of
from app.model.objects import NodeSelectorRequirement, NodeSelectorTerm

_INTERNED_LIMIT: Final = 100_000
_SHARED_COLUMNS: Final = 4096
# Request selectors whose attribute reads are remembered: per-pod selectors
# (a uuid, a pod name) never repeat.
_SELECTOR_READS: Final = 4096

# (class name, request selectors) of one `exactly` request or subrequest
RequestKind = tuple[str, tuple[str, ...]]


def request_kinds(claims: Sequence[ResourceClaim]) -> tuple[RequestKind, ...]:
    """Distinct (class, selectors) pairs of the claims still to allocate."""
    seen: dict[RequestKind, None] = {}
    for claim in claims:
        if claim.allocation is not None:
            continue
        for request in claim.spec.requests:
            exacts = [request.exactly] if request.exactly else [
                s.request for s in request.first_available]
            for exact in exacts:
                if exact is not None:
                    seen[(exact.device_class_name, exact.selectors)] = None
    return tuple(seen)


def flat_devices(view: NodeView) -> tuple[Device, ...]:
    return tuple(d for pool in view.pools for d in pool.devices)


class HashedKey:
    """A large tuple used as a dict key, hashed once.

    Signatures are looked up on every cache miss and hold thousands of values
    (Fractions among them, which hash slowly); tuples do not keep their hash.
    """

    __slots__ = ("_hash", "value")

    def __init__(self, value: Hashable) -> None:
        self.value = value
        self._hash = hash(value)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        return (isinstance(other, HashedKey) and self._hash == other._hash
                and self.value == other.value)


@dataclass(slots=True, frozen=True)
class NodeSignature:
    """`hardware`: what the node has; `full`: that plus what is taken of it."""

    hardware: HashedKey
    full: HashedKey


class StaticSignatures:
    """The claim-independent part of node signatures, cached per node version.

    The hardware part is rebuilt only when the node's slices or the Node
    change; an allocation only rebuilds the usage part, a few tuples.
    """

    __slots__ = ("_hardware", "_interned", "_nodes", "_parts")

    def __init__(self) -> None:
        # Identical hardware yields equal tuples; sharing one copy keeps thousands of
        # nodes' signatures from costing thousands of copies.
        self._interned: BoundedCache[Hashable, Hashable] = BoundedCache(_INTERNED_LIMIT)
        # id of a capacity map / counter consumption -> (it, its signature part)
        self._parts: BoundedCache[int, tuple[Any, Hashable]] = BoundedCache(_INTERNED_LIMIT)
        self._nodes: dict[str, tuple[int, NodeSignature]] = {}
        # node -> (Node, its pools' slices, hardware signature built from them)
        self._hardware: dict[str, tuple[Node, tuple[tuple[ResourceSlice, ...], ...],
                                        HashedKey]] = {}

    def of(self, state: NodeState) -> NodeSignature:
        name, version = state.view.node.name, state.view.version
        hit = self._nodes.get(name)
        if hit is not None and hit[0] == version:
            return hit[1]
        hardware = self._hardware_of(state.view)
        signature = NodeSignature(hardware=hardware,
                                  full=HashedKey((hardware, self._intern(usage_signature(state)))))
        self._nodes[name] = (version, signature)
        return signature

    def _hardware_of(self, view: NodeView) -> HashedKey:
        """What the node has depends only on the Node and its pools' slices: an
        allocation changes the node's version but reuses this."""
        slices = tuple(pool.slices for pool in view.pools)
        hit = self._hardware.get(view.node.name)
        if (hit is not None and hit[0] == view.node and len(hit[1]) == len(slices)
                and all(a is b for a, b in zip(hit[1], slices, strict=True))):
            return hit[2]
        hardware = self._intern(HashedKey(self._build(view)))
        assert isinstance(hardware, HashedKey)
        self._hardware[view.node.name] = (view.node, slices, hardware)
        return hardware

    def _intern(self, value: Hashable) -> Hashable:
        return self._interned.intern(value)

    def _build(self, view: NodeView) -> Hashable:
        """Per pool its header, per device its layout and fixed parts, then the
        node's attribute columns. Built from parts shared between devices (the
        attribute name layout, capacity maps, counter consumptions are single
        objects across a cluster), so a device costs a few lookups and its
        attribute values one pass per column: building each device's key from
        scratch would be most of a first touch over thousands of cold nodes."""
        pools = []
        devices: list[Device] = []
        for pool in view.pools:
            devices.extend(pool.devices)
            pools.append((pool.driver, pool.complete, pool.invalid_reason,
                          pool.has_binding_conditions,
                          tuple(sorted((cs.name, _quantities(cs.counters))
                                       for cs in pool.counter_sets.values())),
                          tuple((sl.node_name is not None, sl.all_nodes, repr(sl.node_selector),
                                 sl.per_device_node_selection) for sl in pool.slices),
                          tuple(self._device(d) for d in pool.devices)))
        return tuple(pools), _attribute_columns(devices)

    def _device(self, d: Device) -> Hashable:
        """Everything of a device but its attribute values (`_attribute_columns`)."""
        return (
            names_of(d.attributes),
            self._part(d.capacity, _capacities),
            self._part(d.consumes_counters, _consumptions),
            tuple((t.key, t.value, t.effect) for t in d.taints) if d.taints else (),
            d.binds_to_node, d.binding_conditions, d.binding_failure_conditions,
            d.allow_multiple_allocations,
            d.node_name is not None, d.all_nodes,
            None if d.node_selector is None else repr(d.node_selector),
        )

    def _part(self, value: Any, key_of: Callable[[Any], Hashable]) -> Hashable:
        """`key_of(value)`, once per object: the parser shares capacity maps and
        counter consumptions between devices. Holds `value`, so its id stays its own."""
        hit = self._parts.get(id(value))
        if hit is None or hit[0] is not value:
            hit = self._parts.put(id(value), (value, HashedKey(key_of(value))))
        return hit[1]


def _capacities(capacity: Mapping[str, Any]) -> Hashable:
    # the text too: CEL builds a quantity from it (`app.cel.footprint`)
    return tuple(sorted((name, c.value.value, c.value.text, _policy(c.request_policy))
                        for name, c in capacity.items()))


def _consumptions(consumes: Sequence[Any]) -> Hashable:
    return tuple((u.counter_set, _quantities(u.counters)) for u in consumes)


def usage_signature(state: NodeState) -> Hashable:
    """Per device in order: taken, shared, capacity consumed; per pool: counters used
    (the usage part of `NodeSignature.full`)."""
    allocated = state.allocated
    usage: list[Hashable] = []
    for pool in state.view.pools:
        for d in pool.devices:
            device_id = d.id
            consumed = allocated.consumed_capacity.get(device_id)
            usage.append((device_id in allocated.devices, device_id in allocated.multi_allocated,
                          _quantities(consumed) if consumed else ()))
        usage.append(_quantities(allocated.consumed_counters.get(pool.key, {})))
    return tuple(usage)


def _quantities(values: Mapping[Any, Any]) -> Hashable:
    return tuple(sorted((name, q.value) for name, q in values.items()))


def _policy(policy: RequestPolicy | None) -> Hashable:
    if policy is None:
        return None
    return (policy.default and policy.default.value,
            tuple(v.value for v in policy.valid_values),
            policy.valid_range_min and policy.valid_range_min.value,
            policy.valid_range_max and policy.valid_range_max.value,
            policy.valid_range_step and policy.valid_range_step.value)


_TEXT_KINDS: Final = ("string", "strings")


def _attribute_columns(devices: Sequence[Device]) -> Hashable:
    """Per attribute name (sorted), its values over the devices that have it, in
    device order (which devices have it is in their layouts): strings relabelled
    by first occurrence, exactly and case-folded (CEL compares exactly, topology
    groups PCIe roots case-insensitively), other kinds verbatim. A column of one
    shared value object (most of them: "Nvidia", numaNode 0) is summarised.
    Devices are grouped by layout and their values transposed in bulk."""
    groups: dict[int, tuple[tuple[str, ...], list[Sequence[Any]]]] = {}
    for d in devices:
        attributes = d.attributes
        names = names_of(attributes)
        group = groups.get(id(names))
        if group is None:
            group = groups[id(names)] = (names, [])
        group[1].append(tuple(attributes.values()))
    columns: dict[str, list[Any]] = {}
    for names, rows in groups.values():
        for name, values in zip(names, zip(*rows, strict=True), strict=True):
            column = columns.get(name)
            if column is None:
                columns[name] = list(values)
            else:
                column.extend(values)
    out: list[Hashable] = []
    for name in sorted(columns):
        column = columns[name]
        if len(set(map(id, column))) == 1:
            out.append((name, _constant(column[0])))
        else:
            out.append((name, *_relabelled(column)))
    return tuple(out)


def _constant(value: Any) -> Hashable:
    if value.kind == "string":
        return ("string",)
    if value.kind == "strings":
        return ("strings", _relabel(value.value), _relabel(_fold(value.value)))
    return (value.kind, value.value)


_kind, _value = attrgetter("kind"), attrgetter("value")


def _relabelled(column: Sequence[Any]) -> tuple[Hashable, ...]:
    kinds = set(map(_kind, column))
    if kinds == {"string"}:
        values = list(map(_value, column))
        return "string", _relabel(values), _relabel(list(map(str.lower, values)))
    exact: dict[Any, int] = {}
    folded: dict[Any, int] = {}
    a: list[Hashable] = []
    b: list[Hashable] = []
    for v in column:
        kind = v.kind
        if kind == "string":
            a.append(exact.setdefault(v.value, len(exact)))
            b.append(folded.setdefault(str(v.value).lower(), len(folded)))
        elif kind == "strings":
            # List attributes compare by element (set semantics), so label elements.
            a.append(("strings", tuple(exact.setdefault(x, len(exact)) for x in v.value)))
            b.append(tuple(folded.setdefault(str(x).lower(), len(folded)) for x in v.value))
        else:
            a.append((kind, v.value))
            b.append(None)
    return "mixed", tuple(a), tuple(b)


def _fold(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, tuple):
        return tuple(str(v).lower() for v in value)
    return str(value).lower()


def _relabel(column: Sequence[Any]) -> Hashable:
    """Each value replaced by the index of its first occurrence."""
    index = {v: i for i, v in enumerate(dict.fromkeys(column))}
    return tuple(map(index.__getitem__, column))


MatchResult = bool | str  # whether a device matches a request kind, or the CEL error


class Matcher(Protocol):
    """Whether `device` matches the class and then `selectors` (raises the CEL
    errors); `class_holds`: the class's selectors are known to hold on it."""

    def __call__(self, device_class: DeviceClass, selectors: tuple[str, ...], device: Device,
                 *, class_holds: bool = False) -> bool: ...


class MatchColumns:
    """Per node and request kind, whether each of its devices matches (the CEL
    result, or its error): the part of a signature that depends on the claim
    shape, kept per node because the shapes of a cluster share their kinds (a
    GPU class, a NIC class, ...), and a node's devices change far less often
    than its allocations. Columns of identical nodes are equal and stored once.

    A kind's column on a node is also shared with every node of the same
    hardware signature whose devices hold the same values of the attributes
    its selectors read, and the same class column: the first touch of a new
    claim shape then evaluates its selectors once per kind of hardware, not
    once per device of every candidate node.
    """

    __slots__ = ("_interned", "_nodes", "_reads", "_shared")

    def __init__(self) -> None:
        # node -> [the Node, its pools' slices, kind -> (the class read, column),
        # the last view found to hold both]
        self._nodes: dict[str, list[Any]] = {}
        self._interned: BoundedCache[tuple[MatchResult, ...], tuple[MatchResult, ...]] = (
            BoundedCache(_INTERNED_LIMIT))
        # (request selectors, class column, hardware signature, values read) -> column
        self._shared: BoundedCache[HashedKey, tuple[MatchResult, ...]] = BoundedCache(
            _SHARED_COLUMNS)
        # request selectors -> the attribute names they read; None: not known statically
        self._reads: BoundedCache[tuple[str, ...], tuple[str, ...] | None] = BoundedCache(
            _SELECTOR_READS)

    def signature(self, view: NodeView, kinds: Sequence[RequestKind], *,
                  classes: Mapping[str, DeviceClass], matcher: Matcher,
                  hardware: Hashable | None = None) -> Hashable:
        """Per kind, per device of `view` in order: does it match. `hardware`:
        the node's hardware signature (`StaticSignatures`), to share columns
        between nodes."""
        columns = self._columns(view)
        if columns is None:
            columns = {}
            self._nodes[view.node.name] = [view.node, tuple(p.slices for p in view.pools),
                                           columns, view]
        out: list[tuple[MatchResult, ...] | None] = []
        devices: tuple[Device, ...] | None = None  # flattened once, when a column is made
        for kind in kinds:
            device_class = classes.get(kind[0])
            if device_class is None:
                out.append(None)
                continue
            known = columns.get(kind)
            if known is not None and known[0] is device_class:
                out.append(known[1])
                continue
            if devices is None:
                devices = flat_devices(view)
            out.append(self._column(columns, kind, device_class, devices, matcher, hardware))
        return HashedKey(tuple(out))

    def _column(self, columns: dict[RequestKind, tuple[DeviceClass, tuple[MatchResult, ...]]],
                kind: RequestKind, device_class: DeviceClass, devices: tuple[Device, ...],
                matcher: Matcher, hardware: Hashable | None = None) -> tuple[MatchResult, ...]:
        """A kind with selectors of its own starts from its class's column and
        asks the selectors only of the devices the class accepts: every new
        claim shape is a new kind, and its first touch or warming would read
        the class's selectors on every device again (asking them of every
        device costs about half the verbs' CPU of a 20,000-node first touch)."""
        class_name, selectors = kind
        if not selectors:
            column = tuple(_matches(d, device_class, (), matcher) for d in devices)
        else:
            base = columns.get((class_name, ()))
            held = (base[1] if base is not None and base[0] is device_class
                    else self._column(columns, (class_name, ()), device_class, devices,
                                      matcher))
            key = self._shared_key(selectors, held, devices, hardware)
            shared = None if key is None else self._shared.get(key)
            if shared is not None:
                column = shared
            else:
                column = tuple(
                    _matches(d, device_class, selectors, matcher, class_holds=True)
                    if accepted is True else accepted
                    for d, accepted in zip(devices, held, strict=True))
                # a CEL error names its device: such a column is this node's only
                if key is not None and str not in set(map(type, column)):
                    self._shared.put(key, column)
        column = self._interned.intern(column)
        columns[kind] = (device_class, column)
        return column

    def _shared_key(self, selectors: tuple[str, ...], held: tuple[MatchResult, ...],
                    devices: tuple[Device, ...], hardware: Hashable | None) -> HashedKey | None:
        """What a column of `selectors` depends on, when nodes can share it: the
        devices the class accepts (`held`, without CEL errors, which name their
        devices), and everything the selectors can read of each device. Driver,
        allowMultipleAllocations, capacities and the attribute values whose
        conversion can fail are in the hardware signature, and so are the
        other non-string attributes; the attributes read are added as they are
        (strings are only relabelled there)."""
        if hardware is None or str in set(map(type, held)):
            return None
        if selectors in self._reads:
            names = self._reads[selectors]
        else:
            names = self._reads.put(selectors, _attributes_read(selectors))
        if names is None:
            return None
        values = tuple(tuple(d.attributes.get(name) for d in devices)
                       for name in names) if names else ()
        return HashedKey((selectors, held, hardware, values))

    def known(self, view: NodeView) -> KnownMatches | None:
        """The columns held for `view`'s node, as the allocator reads them (a
        search then reads a device's selector results by position instead of
        asking the selector cache per device); None when none are held."""
        columns = self._columns(view)
        if not columns:
            return None

        def column(device_class: DeviceClass, selectors: tuple[str, ...]
                   ) -> tuple[MatchResult, ...] | None:
            known = columns.get((device_class.name, selectors))
            return known[1] if known is not None and known[0] is device_class else None

        return column

    def _columns(self, view: NodeView
                 ) -> dict[RequestKind, tuple[DeviceClass, tuple[MatchResult, ...]]] | None:
        """The node's columns while its Node (whose labels decide which devices
        of a slice it can use) is equal and its pools' slices are the objects they
        were computed from (the inventory makes a new Node for a node known only
        from its slices at every version)."""
        hit = self._nodes.get(view.node.name)
        if hit is None:
            return None
        if hit[3] is not view:  # a view is immutable: one seen to hold them still does
            if hit[0] != view.node or not _same_slices(
                    hit[1], tuple(pool.slices for pool in view.pools)):
                return None
            hit[3] = view
        columns: dict[RequestKind, tuple[DeviceClass, tuple[MatchResult, ...]]] = hit[2]
        return columns


def _attributes_read(selectors: Sequence[str]) -> tuple[str, ...] | None:
    """The qualified attribute names `selectors` read, or None when what they
    read is not known statically (or reads a whole domain, or does not compile)."""
    names: dict[str, None] = {}
    for expression in selectors:
        try:
            reads = compile_selector(expression).reads
        except CelCompileError:
            return None
        if reads is None or any(r.whole_domain for r in reads):
            return None
        names.update((r.name, None) for r in reads if r.table == "attributes")
    return tuple(names)


def _same_slices(a: tuple[tuple[ResourceSlice, ...], ...],
                 b: tuple[tuple[ResourceSlice, ...], ...]) -> bool:
    return len(a) == len(b) and all(
        len(x) == len(y) and all(s is t for s, t in zip(x, y, strict=True))
        for x, y in zip(a, b, strict=True))


def _matches(device: Device, device_class: DeviceClass, selectors: tuple[str, ...],
             matcher: Matcher, *, class_holds: bool = False) -> MatchResult:
    try:
        return matcher(device_class, selectors, device, class_holds=class_holds)
    except (CelCompileError, CelEvalError) as exc:
        return f"{type(exc).__name__}: {exc}"


# --------------------------------------------------------------------------- mapping


@dataclass(slots=True, frozen=True)
class _Renaming:
    devices: dict[str, Device]  # representative device id -> target device
    names: dict[str, str]  # representative name -> target name (node, pools, devices)
    source_node: str
    target_node: str


def _renaming(source: NodeView, target: NodeView) -> _Renaming:
    src, dst = flat_devices(source), flat_devices(target)
    names = {source.node.name: target.node.name}
    for a, b in zip(source.pools, target.pools, strict=True):
        names[a.name] = b.name
    for a2, b2 in zip(src, dst, strict=True):
        names[a2.name] = b2.name
    return _Renaming(devices={a.id: b for a, b in zip(src, dst, strict=True)},
                     names={k: v for k, v in names.items() if k != v},
                     source_node=source.node.name, target_node=target.node.name)


def map_outcome(outcome: AllocationOutcome, *, source: NodeView, target: NodeView
                ) -> AllocationOutcome:
    """The representative's outcome re-expressed for `target` (same signature)."""
    if source.node.name == target.node.name and source.version == target.version:
        return outcome
    r = _renaming(source, target)
    return replace(
        outcome,
        claims=tuple(ClaimAllocation(claim_key=ca.claim_key,
                                     allocation=_map_allocation(ca.allocation, r))
                     for ca in outcome.claims),
        picks=tuple(r.devices[d.id] for d in outcome.picks),
        reason=_rename_text(outcome.reason, r), error=_rename_text(outcome.error, r))


def _map_allocation(allocation: AllocationResult, r: _Renaming) -> AllocationResult:
    return replace(allocation,
                   results=tuple(_map_result(x, r) for x in allocation.results),
                   node_selector=_map_selector(allocation.node_selector, r))


def _map_result(result: DeviceRequestAllocationResult, r: _Renaming
                ) -> DeviceRequestAllocationResult:
    device = r.devices.get(result.device_id)
    if device is None:
        return result
    return replace(result, driver=device.driver, pool=device.pool, device=device.name)


def _map_selector(selector: NodeSelector | None, r: _Renaming) -> NodeSelector | None:
    if selector is None:
        return None
    return NodeSelector(tuple(
        NodeSelectorTerm(
            match_expressions=term.match_expressions,
            match_fields=tuple(
                NodeSelectorRequirement(
                    key=req.key, operator=req.operator,
                    values=tuple(r.target_node if v == r.source_node else v
                                 for v in req.values))
                if req.key == "metadata.name" else req
                for req in term.match_fields))
        for term in selector.terms))


def _rename_text(text: str | None, r: _Renaming) -> str | None:
    return rename_words(text, r.names)


def rename_words(text: str | None, names: Mapping[str, str]) -> str | None:
    """`text` with every whole-word occurrence of a key of `names` replaced."""
    if not text or not names:
        return text
    ordered = sorted((n for n in names if n in text), key=len, reverse=True)
    if not ordered:
        return text
    pattern = re.compile(r"(?<![\w.-])(" + "|".join(map(re.escape, ordered)) + r")(?![\w.-])")
    return pattern.sub(lambda m: names[m.group(1)], text)
