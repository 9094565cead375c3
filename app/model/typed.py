"""ResourceSlices decoded straight from JSON into the typed model.

A 100,000-node cluster publishes millions of devices, and walking each one's
raw dict tree in Python is most of drax's start-up and of a slice event's
cost. Here msgspec decodes a slice's JSON into compact structures in C,
checking every type on the way, and leaves a device's attributes, capacity
and counter consumptions (and the slice's counter sets) as text: the Python
left per device is a few lookups by text and one `Device` built in C, and
identical parts (the same device kind on every node) are built once and
shared. Devices of one kind follow each other in a slice, so what a device
repeats from the one before it (its whole attribute map when the text is the
same, as for the partitions of one GPU by one profile; its capacity and
consumption texts) is taken over without a lookup. Any other attribute text
is read as its members, a piece of text each, every piece read once; and a
device whose text is its namesake's on another node but for a few pieces (a
uuid, a MAC) reads only those, as does a device named apart from every
other (a name carrying its uuid) whose text is that of the device at its
place in the slice on another node (see "attribute texts" below). Everything
shared is immutable, so no device can change another's.

The result is exactly what `app.model.parse` makes of the same object, which
stays the one reference: anything this decoder does not take as written (a
value of an unexpected type, an older API version, a missing field) sends
the object to the reference parse on its plain decoded form, which accepts
what it accepts and names the object and the field in what it refuses.
`parse_object` here is the model's entry point: the reference parse for
every other kind.
"""

from __future__ import annotations

import codecs
import re
import sys
from collections.abc import Callable, Mapping
from operator import itemgetter
from typing import Annotated, Any, Final, NamedTuple, TypeVar, cast

import msgspec
import orjson

from app.bounded_cache import BoundedCache
from app.model.compact import FieldMap, shared_layout
from app.model.interning import (
    QUALIFIED,
    QUALIFIED_LAYOUTS,
    SHARED_MAX,
    UNSUPPORTED,
    qualified_layout,
)
from app.model.objects import (
    ATTRIBUTE_KINDS,
    LIST_ATTRIBUTE_KINDS,
    AttributeValue,
    CounterSet,
    Device,
    DeviceCapacity,
    DeviceCounterConsumption,
    RequestPolicy,
    ResourcePool,
    ResourceSlice,
)
from app.model.parse import parse_node_selector, parse_taints
from app.model.parse import parse_object as reference_parse
from app.model.quantity import Quantity, QuantityError, parse_quantity
from app.model.versions import READ_AS_V1

# An int64, as the API publishes. orjson reads an integer outside
# [-2**63, 2**64 - 1] as a float, which the reference parse refuses (or, in an
# attribute, leaves unsupported), while msgspec would read it as an int, so a
# slice holding one goes to the reference parse; so does one above int64
# (msgspec bounds stop at int64), which the reference reads as an int.
_INT64: Final = range(-2**63, 2**63)
_Int64 = Annotated[int, msgspec.Meta(ge=_INT64.start, le=_INT64.stop - 1)]


class _Attribute(msgspec.Struct, frozen=True, gc=False, omit_defaults=True):
    """One attribute value as published; frozen so it is its own cache key
    (field by field, so `{"int": 1}` and `{"bool": true}` never meet), and
    encoded as the API writes it (`_member`)."""

    int_: _Int64 | None = msgspec.field(default=None, name="int")
    bool_: bool | None = msgspec.field(default=None, name="bool")
    string: str | None = None
    version: str | None = None
    ints: tuple[_Int64, ...] | None = None
    bools: tuple[bool, ...] | None = None
    strings: tuple[str, ...] | None = None
    versions: tuple[str, ...] | None = None


class _Scalar(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True,
              omit_defaults=True):
    """`_Attribute` of the scalar kinds only, what nearly every device publishes:
    half the fields, so cheaper to decode, hash and compare. A list kind (or
    any other key) is an unknown field here, and the map is decoded again
    with `_Attribute`."""

    int_: _Int64 | None = msgspec.field(default=None, name="int")
    bool_: bool | None = msgspec.field(default=None, name="bool")
    string: str | None = None
    version: str | None = None


class _Range(msgspec.Struct, frozen=True, gc=False):
    min: str | None = None
    max: str | None = None
    step: str | None = None


class _RequestPolicy(msgspec.Struct, frozen=True, gc=False):
    default: str | None = None
    validValues: tuple[str, ...] | None = None
    validRange: _Range | None = None


class _Capacity(msgspec.Struct, frozen=True, gc=False):
    value: str
    requestPolicy: _RequestPolicy | None = None


class _Counter(msgspec.Struct, frozen=True, gc=False):
    value: str


class _Consumption(msgspec.Struct, gc=False):
    counterSet: str
    counters: dict[str, _Counter]


class _Device(msgspec.Struct, gc=False):
    """A device, its optional fields decoded straight to the model's values
    (an explicit null is a ValidationError, left to the reference parse)."""

    name: str
    attributes: dict[str, _Attribute] = {}
    capacity: dict[str, _Capacity] = {}
    consumesCounters: list[_Consumption] | None = None
    nodeName: str | None = None
    nodeSelector: Any = None
    allNodes: bool = False
    taints: Any = None
    bindsToNode: bool = False
    bindingConditions: tuple[str, ...] = ()
    bindingFailureConditions: tuple[str, ...] = ()
    allowMultipleAllocations: bool = False


class _Pool(msgspec.Struct, gc=False):
    name: str
    generation: _Int64 | None = None
    resourceSliceCount: _Int64 | None = None


class _CounterSet(msgspec.Struct, gc=False):
    name: str
    counters: dict[str, _Counter]


class _Spec(msgspec.Struct, gc=False):
    driver: str
    pool: _Pool
    devices: list[_Device] | None = None
    sharedCounters: list[_CounterSet] | None = None
    nodeName: str | None = None
    nodeSelector: Any = None
    allNodes: bool | None = None
    perDeviceNodeSelection: bool | None = None


class _Meta(msgspec.Struct, gc=False):
    name: str
    uid: str | None = None
    resourceVersion: str | None = None


class _Slice(msgspec.Struct, gc=False):
    metadata: _Meta
    spec: _Spec
    apiVersion: str | None = None
    kind: Any = None  # read as written: only `decode_listed_slice` looks at it


# From JSON bytes, a device's attributes, capacity and counter consumptions
# stay undecoded: a device's attribute map is decoded only where its text
# differs from the device's before it (the partitions of one GPU by one
# profile publish the same map, and then share one), and a capacity or a
# consumption is looked up by its text and decoded only the first time (the
# same few repeat on every node), which spares building a dozen structs per
# partitionable device. `msgspec.convert` (from dicts) has no text to keep, so
# dicts go through the fully typed `_Slice`.
class _RawDevice(_Device, gc=False):
    attributes: msgspec.Raw = msgspec.Raw()  # type: ignore[assignment]
    capacity: msgspec.Raw = msgspec.Raw()  # type: ignore[assignment]
    consumesCounters: msgspec.Raw = msgspec.Raw()  # type: ignore[assignment]


class _RawSpec(_Spec, gc=False):
    devices: list[_RawDevice] | None = None  # type: ignore[assignment]
    sharedCounters: msgspec.Raw = msgspec.Raw()  # type: ignore[assignment]


class _RawSlice(_Slice, gc=False):
    spec: _RawSpec


_DECODER: Final = msgspec.json.Decoder(_RawSlice)
_SCALAR_ATTRIBUTES: Final = msgspec.json.Decoder(dict[str, _Scalar])
_ATTRIBUTES_JSON: Final = msgspec.json.Decoder(dict[str, _Attribute])
_CAPACITY: Final = msgspec.json.Decoder(dict[str, _Capacity])
_CONSUMPTIONS_JSON: Final = msgspec.json.Decoder(list[_Consumption] | None)
_COUNTER_SETS_JSON: Final = msgspec.json.Decoder(list[_CounterSet] | None)


class NotTyped(Exception):
    """What the typed decoder leaves to `parse_object` (never leaves this module)."""


def decode_resource_slice(data: bytes | memoryview | msgspec.Raw) -> ResourceSlice:
    """The ResourceSlice in the JSON `data`; raises InvalidObject (naming the
    slice) like the reference parse for anything malformed, and
    `orjson.JSONDecodeError` for what is not JSON.

    Text of `data` the model does not hold (metadata other than the name,
    fields it does not know) is skipped, and not checked to be UTF-8: the API
    server writes only UTF-8, and the file loader checks a file's text before
    it hands its slices here. Every text the model holds is checked."""
    try:
        return _from_typed(_DECODER.decode(data))
    except (msgspec.DecodeError, NotTyped):  # DecodeError: ValidationError too
        return cast(ResourceSlice,
                    reference_parse("ResourceSlice", orjson.loads(memoryview(data))))


def decode_listed_slice(data: bytes | memoryview | msgspec.Raw,
                        item_kind: str | None) -> ResourceSlice | None:
    """The ResourceSlice of a `List`'s item `data` (of a `<item_kind>List`)
    when it is one and the typed decoder takes it as written; None for any
    other kind, and for a slice the reference parse must read (which names
    what it refuses): the caller reads those items as before."""
    try:
        s = _DECODER.decode(data)
        if (s.kind or item_kind) != "ResourceSlice":
            return None
        return _from_typed(s)
    except (msgspec.DecodeError, NotTyped):
        return None


def parse_object(kind: str, obj: Any) -> Any:
    """`app.model.parse.parse_object`, with ResourceSlices by the typed path."""
    if kind == "ResourceSlice":
        return convert_resource_slice(obj)
    return reference_parse(kind, obj)


def convert_resource_slice(obj: Any) -> ResourceSlice:
    """The ResourceSlice of an already decoded object (files, YAML, a test's
    dict) by the typed path: msgspec converts the dict tree in C."""
    try:
        typed = msgspec.convert(obj, _Slice)
    except msgspec.ValidationError:
        return cast(ResourceSlice, reference_parse("ResourceSlice", obj))
    try:
        return _from_typed(typed)
    except NotTyped:
        return cast(ResourceSlice, reference_parse("ResourceSlice", obj))


def _from_typed(s: _Slice) -> ResourceSlice:
    if s.apiVersion is not None and s.apiVersion not in READ_AS_V1:
        raise NotTyped
    spec = s.spec
    name = s.metadata.name
    driver = spec.driver
    pool_name = spec.pool.name
    count = spec.pool.resourceSliceCount
    if not name or not driver or not pool_name or (count is not None and count <= 0):
        raise NotTyped
    node_name = spec.nodeName or None
    all_nodes = bool(spec.allNodes)
    per_device = bool(spec.perDeviceNodeSelection)
    if sum((node_name is not None, spec.nodeSelector is not None, all_nodes,
            per_device)) != 1:
        raise NotTyped
    driver = sys.intern(driver)
    devices = _devices(spec.devices, driver, pool_name, name) if spec.devices else ()
    counter_sets = spec.sharedCounters
    shared = (_counter_sets(counter_sets or []) if type(counter_sets) is not msgspec.Raw
              else _counter_sets_text(counter_sets) if len(counter_sets) else ())
    return ResourceSlice(
        name=name, driver=driver,
        pool=ResourcePool(name=pool_name, generation=spec.pool.generation or 0,
                          resource_slice_count=1 if count is None else count),
        devices=devices, shared_counters=shared, node_name=node_name,
        node_selector=None if spec.nodeSelector is None else _node_selector(spec.nodeSelector),
        all_nodes=all_nodes, per_device_node_selection=per_device,
        uid=s.metadata.uid or "", resource_version=s.metadata.resourceVersion or "")


def _node_selector(raw: Any) -> Any:
    # parse's own reading (and wording): a malformed selector raises there
    try:
        return parse_node_selector(raw, "")
    except ValueError:
        raise NotTyped from None


# --------------------------------------------------------------------------- devices

K = TypeVar("K")
V = TypeVar("V")
# The text a cache keeps, on average per entry, before it starts over: the
# API bounds a value to 64 bytes, so the count of entries bounds what a cache
# of the API's texts holds, but a file's values are of any length.
_TEXT_PER_ENTRY: Final = 64


class _TextCache(BoundedCache[K, V]):
    """A `BoundedCache` that also starts over when the text of what it keeps
    (the `size` given with each entry put, the length of the text it was read
    from) would pass `text_limit` bytes."""

    __slots__ = ("text", "text_limit")

    def __init__(self, limit: int, text_limit: int | None = None) -> None:
        super().__init__(limit)
        self.text_limit = limit * _TEXT_PER_ENTRY if text_limit is None else text_limit
        self.text = 0

    def put(self, key: K, value: V, size: int = 0) -> V:
        if len(self) >= self.limit or self.text + size > self.text_limit:
            self.clear()
        self.text += size
        self[key] = value
        return value

    def clear(self) -> None:
        super().clear()
        self.text = 0


class _AttributeCache(_TextCache[_Attribute | _Scalar, AttributeValue]):
    """Decoded attribute -> its shared AttributeValue. A miss is filled by
    `__missing__`, so a device's values are looked up by `map` in C, hits and
    misses alike."""

    __slots__ = ()

    def __missing__(self, a: _Attribute | _Scalar) -> AttributeValue:
        # A miss is mostly a value unique to its device (a uuid, a MAC), one
        # per device at start-up: a plain string is built without `_attribute`.
        if (type(a) is _Scalar and a.string is not None and a.int_ is None
                and a.bool_ is None and a.version is None):
            return self.put(a, AttributeValue("string", a.string), len(a.string))
        if (type(a) is _Attribute and a.ints is None and a.bools is None
                and a.strings is None and a.versions is None):
            # a scalar of a map that holds a list: the value a map of scalars shares
            return self.put(a, self[_Scalar(a.int_, a.bool_, a.string, a.version)],
                            len(a.string or a.version or ""))
        return self.put(a, _attribute(a), len(_ENCODE(a)))


_ATTRIBUTES: Final = _AttributeCache(SHARED_MAX)
_attribute_of: Final = _ATTRIBUTES.__getitem__
# (driver, decoded capacity items) -> shared capacity map
_CAPACITIES: BoundedCache[tuple[str, tuple[tuple[str, _Capacity], ...]],
                          Mapping[str, DeviceCapacity]] = BoundedCache(SHARED_MAX)
# decoded consumptions -> the shared tuple
_CONSUMPTIONS: BoundedCache[tuple[Any, ...], tuple[DeviceCounterConsumption, ...]] = (
    BoundedCache(SHARED_MAX))


# Device names, each kept once: a name repeats on every node of its kind.
# Bounded rather than interned for good, as names that carry a uuid or a
# serial never repeat and would otherwise each keep an entry while it lives.
_NAMES: BoundedCache[str, str] = BoundedCache(1 << 12)


def _devices(raw: list[_Device], driver: str, pool: str,
             slice_name: str) -> tuple[Device, ...]:
    """The slice's devices. What a device repeats from the one before it (its
    attribute map, its capacity and consumption texts, as devices of one kind
    follow each other in a slice) is taken from that device's without a lookup."""
    out = []
    attributes_raw: Any = None
    attribute_map: Mapping[str, AttributeValue] = {}
    capacity_raw: Any = None
    capacity: Mapping[str, DeviceCapacity] = {}
    consumes_raw: Any = None
    consumes: tuple[DeviceCounterConsumption, ...] = ()
    # the names kept start over when the slice's would not fit; a slice of
    # more devices than are kept only takes the names already kept
    names: Callable[[str, str], str] = _NAMES.get
    if len(raw) <= _NAMES.limit:
        if len(_NAMES) + len(raw) > _NAMES.limit:
            _NAMES.clear()
        names = _NAMES.setdefault
    for place, d in enumerate(raw):
        name = d.name
        if not name:
            raise NotTyped
        name = names(name, name)
        a = d.attributes
        if type(a) is not msgspec.Raw:
            attribute_map = _attribute_map(a, driver)
        elif a != attributes_raw:  # compares the texts
            attributes_raw = a
            attribute_map = _attribute_text(bytes(a), driver, name, place)
        c = d.capacity
        if type(c) is not msgspec.Raw:
            capacity = _capacity(c, driver)
        elif c != capacity_raw:
            capacity_raw, capacity = c, _capacity_text(c, driver)
        u = d.consumesCounters
        if type(u) is not msgspec.Raw:
            consumes = () if u is None else _consumptions(u)
        elif u != consumes_raw:
            consumes_raw, consumes = u, _consumptions_text(u)
        # positional, in Device's field order (checked at import below)
        out.append(Device(
            driver, pool, name, slice_name, attribute_map, capacity, consumes,
            d.nodeName or None,
            None if d.nodeSelector is None else _node_selector(d.nodeSelector),
            d.allNodes, () if d.taints is None else _taints(d.taints), d.bindsToNode,
            d.bindingConditions, d.bindingFailureConditions, d.allowMultipleAllocations))
    return tuple(out)


def _decoded_attributes(raw: msgspec.Raw) -> Mapping[str, _Attribute | _Scalar]:
    """A device's attribute map from its text."""
    if not len(raw):
        return {}
    decoded = _decode_map(raw)
    if decoded is None:
        raise NotTyped
    return decoded


def _decode_map(text: bytes | msgspec.Raw) -> Mapping[str, _Attribute | _Scalar] | None:
    """An attribute map's JSON text decoded with the scalar kinds first (nearly
    every map), with every kind when it holds a list; None when it is JSON
    but no attribute map (a DecodeError when it is not JSON)."""
    try:
        return _SCALAR_ATTRIBUTES.decode(text)
    except msgspec.ValidationError:
        _check_utf8(text)  # what the decoder skips (an unknown kind) it does not check
        try:
            return _ATTRIBUTES_JSON.decode(text)
        except msgspec.ValidationError:
            return None


def _check_utf8(text: bytes | msgspec.Raw) -> None:
    """Raises msgspec.DecodeError, as for any text that is not JSON, when
    `text` is not UTF-8: msgspec checks the strings it decodes, not those it
    skips (an unknown field, its name and its value)."""
    try:
        codecs.utf_8_decode(text, "strict", True)
    except UnicodeDecodeError:
        raise msgspec.DecodeError("invalid UTF-8") from None


def _attribute_map(decoded: Mapping[str, _Attribute | _Scalar],
                   driver: str) -> FieldMap[AttributeValue]:
    names = tuple(decoded)
    layout = _LAYOUTS.get((driver, names)) or _attribute_layout(driver, names)
    return _field_map(layout, tuple(map(_attribute_of, decoded.values())))


# a map of a kept layout, built with no lookup (devices' maps, one each); its
# values typed loosely, as a piece's value is known by its name, not its type
_field_map: Final[Callable[[dict[str, int], tuple[Any, ...]], FieldMap[AttributeValue]]] = (
    FieldMap.on_layout)


# --------------------------------------------------------------------------- attribute texts
#
# A device's attribute map as the API writes it is `{"` P0 `},"` P1 ... `},"` Pn
# `}}`: each piece P is one member, `"name":{"kind":value}`, less its opening
# quote and its closing brace. A piece that reads as exactly one member and is
# that member's own text (`_member`) is read once and kept (`_RECENT`); a map
# split into such pieces is their members in order, which is what decoding the
# whole map makes of it. So a map is read piece by piece from the cache, and a
# device whose map is, byte for byte, its namesake's on another node but for a
# few pieces (a uuid, a MAC) reads only those: the first namesake's text is
# kept, the second one's that differs from it becomes a template
# (`_Template`), the bytes around the pieces that vary are compared whole, and
# the varying pieces are looked up. A device whose name is new (a name that
# carries a uuid or a serial is never seen again) is read by the template of
# its place in the slice instead, as the device at that place on another node
# is its namesake in all but name. A text that does not split so (spaces,
# escapes, a piece that is not one member) is decoded whole.

_NOT_A_MEMBER: Final = (None, None)
_ENCODE: Final = msgspec.json.encode
# A piece of one scalar, its name and value written without escapes (so
# without quotes or control characters, which a JSON string holds only escaped)
_SCALAR_MEMBER: Final = re.compile(
    rb'([^"\\\x00-\x1f]*)":\{"(?:(string|version)":"([^"\\\x00-\x1f]*)"'
    rb'|int":(-?(?:0|[1-9][0-9]{0,18}))|bool":(true|false))')
_STRING_KINDS: Final = {b"string": "string", b"version": "version"}


def _member(piece: bytes) -> tuple[str, AttributeValue] | tuple[None, None]:
    """(name, value) of a piece that is exactly one member's text."""
    m = _SCALAR_MEMBER.fullmatch(piece)
    if m is not None:  # nearly every piece, read without a decoder
        name, kind, string, number, truth = m.groups()
        try:
            if kind is not None:
                return (sys.intern(name.decode()),
                        AttributeValue(_STRING_KINDS[kind], string.decode()))
            if truth is not None:
                return sys.intern(name.decode()), AttributeValue("bool", truth == b"true")
            if int(number) in _INT64:
                return sys.intern(name.decode()), AttributeValue("int", int(number))
        except UnicodeDecodeError:
            pass  # not UTF-8: the decoder refuses it
    try:
        decoded = _decode_map(b'{"' + piece + b"}}")
    except msgspec.DecodeError:
        return _NOT_A_MEMBER
    if decoded is None or len(decoded) != 1:
        return _NOT_A_MEMBER
    ((name, a),) = decoded.items()
    if _ENCODE(name)[1:] + b":" + _ENCODE(a)[:-1] != piece:
        return _NOT_A_MEMBER  # not as the API writes it: perhaps not one member
    return sys.intern(name), _ATTRIBUTES[a]


class _RecentPieces(_TextCache[bytes, "tuple[str, AttributeValue] | tuple[None, None]"]):
    """Piece text -> (name, value), or `_NOT_A_MEMBER`, for every piece read;
    filled by `__missing__`. Unique pieces (a uuid) pass through, so it starts
    over now and then."""

    __slots__ = ()

    def __missing__(self, piece: bytes) -> tuple[str, AttributeValue] | tuple[None, None]:
        return self.put(piece, _member(piece), len(piece))


_RECENT: Final = _RecentPieces(SHARED_MAX)
# The pieces namesakes share (a template's fixed ones), looked up before
# `_RECENT`: it holds only repeated pieces, so it rarely fills, and every
# device that reads "brand: Nvidia" from a template or a piece keeps the one
# value object (node signatures summarise a column of one shared object).
_SHARED: _TextCache[bytes, tuple[str, AttributeValue]] = _TextCache(1 << 16)


class _Template:
    """An attribute text and the pieces of it that vary between namesakes
    (`varying_at`, never empty). `fixed` cuts a text of its length (its key
    holds it) into the bytes around the varying pieces, compared whole with
    `around`; `varying` cuts out those pieces, whose names must be
    `varying_names`; `order` puts the other pieces' values (`shared`) and the
    varying ones' back in the map's order. With one varying piece (a uuid, a
    MAC: the usual case) the text around it is `head` and `tail`, and the
    values around its value `head_values` and `tail_values`."""

    __slots__ = ("around", "cut", "fixed", "head", "head_values", "layout", "names", "order",
                 "pieces", "shared", "tail", "tail_values", "varying", "varying_at",
                 "varying_name", "varying_names")

    def __init__(self, text: bytes, pieces: tuple[bytes, ...], names: tuple[str, ...],
                 values: tuple[AttributeValue, ...], layout: dict[str, int],
                 varying_at: tuple[int, ...]) -> None:
        self.pieces, self.names, self.varying_at = pieces, names, varying_at
        self.layout = layout
        starts = [2]
        for p in pieces[:-1]:
            starts.append(starts[-1] + len(p) + 3)
        cuts = [slice(starts[i], starts[i] + len(pieces[i])) for i in varying_at]
        gaps, at = [], 0
        for cut in cuts:
            gaps.append(slice(at, cut.start))
            at = cut.stop
        gaps.append(slice(at, len(text)))
        self.fixed: Callable[[bytes], object] = itemgetter(*gaps)
        self.around: object = self.fixed(text)
        self.varying: Callable[[bytes], tuple[bytes, ...]] = (
            itemgetter(*cuts) if len(cuts) > 1 else lambda text: ())
        self.varying_names = tuple(names[i] for i in varying_at)
        kept = [i for i in range(len(names)) if i not in varying_at]
        for i in kept:  # now known to be shared between namesakes
            if pieces[i] not in _SHARED:
                _SHARED.put(pieces[i], (names[i], values[i]), len(pieces[i]))
        self.shared = tuple(values[i] for i in kept)
        placed = kept + list(varying_at)  # the map's positions of `shared + varying values`
        self.order: Callable[[tuple[AttributeValue, ...]], tuple[AttributeValue, ...]] = (
            itemgetter(*map(placed.index, range(len(names)))) if len(names) > 1
            else lambda values: values)
        self.cut = cuts[0] if len(cuts) == 1 else None
        self.varying_name = self.varying_names[0] if self.cut is not None else None
        (i,) = varying_at if self.cut is not None else (0,)
        self.head, self.tail = text[:starts[i]], text[starts[i] + len(pieces[i]):]
        self.head_values, self.tail_values = values[:i], values[i + 1:]


# A text seen once for its name, and its map. A namesake with the same text
# takes the map; one that differs makes the template. Many names never come
# round again (device names carrying a uuid or a serial), so a first sighting
# keeps only what it has already built, and only when its place (below) could
# not read it: a name that never repeats is read by its place from the second
# node on and keeps nothing.
_Seen = tuple[bytes, FieldMap[AttributeValue]]
# a name whose namesakes differ in more than the template can explain: its
# texts are read by their place, or piece by piece
_RETIRED: Final[_Seen] = (b"", FieldMap({}))
_Name = tuple[str, str, int]  # (driver, device name, text length)
# a name's first text, or the template of its namesakes' texts
# (whole texts: a device's, some hundred bytes, kept up to 4 MiB)
_TEMPLATES: _TextCache[_Name, _Template | _Seen] = _TextCache(1 << 12, 1 << 22)
# A device whose name reads nothing (a name not seen before, or retired) is
# read by its place in the slice: a driver publishes a node's devices in the
# same order on every node, so the device at a place is, whatever its name,
# mostly the namesake of the one at that place on another node, and a device
# named by its uuid or serial reads only its varying pieces from the second
# node on. Nodes of other hardware put other kinds at a place, some with
# texts of the same length (another GPU model), so a place keeps a template
# per kind (its first text as read, until a second one of its kind comes),
# up to `_KINDS_AT_A_PLACE`.
# (driver, place in the slice, text length) -> the kinds of text seen there
_KINDS_AT_A_PLACE: Final = 4
# (counted as full: up to 4 MiB of texts)
_PLACES: _TextCache[tuple[str, int, int], list[_Template | _Read]] = _TextCache(1 << 10,
                                                                                1 << 22)


def _attribute_text(text: bytes, driver: str, device: str,
                    place: int) -> Mapping[str, AttributeValue]:
    """A device's attribute map from its text: the varying pieces of the
    template of its namesakes, or of a kind seen at its place in the slice,
    when the rest is the template's; else piece by piece."""
    key = (driver, device, len(text))
    t = _TEMPLATES.get(key)
    if t is not None:
        hit = _by_template(t, text)
        if hit is not None:
            return hit
        if t is not _RETIRED:
            return _namesake(key, t, text, driver)
    at = (driver, place, len(text))
    kinds = _PLACES.get(at)
    if kinds is not None:
        hit = _by_template(kinds[0], text)
        if hit is not None:
            return hit
        for i in range(1, len(kinds)):
            hit = _by_template(kinds[i], text)
            if hit is not None:
                kinds.insert(0, kinds.pop(i))  # most recently read first
                return hit
    attribute_map, read = _learned(text, driver)
    if read is not None:
        _learn_place(at, kinds, read)
        if t is None:
            _TEMPLATES.put(key, (text, read.attribute_map), len(text))
    return attribute_map


def _namesake(key: _Name, seen: _Template | _Seen, text: bytes,
              driver: str) -> Mapping[str, AttributeValue]:
    """The map of a text its namesakes' template does not explain, read piece
    by piece; the template widened by the pieces that differ from it, or the
    name retired."""
    attribute_map, read = _learned(text, driver)
    if read is not None:
        _TEMPLATES.put(key, _widened(seen, read) or _RETIRED, len(text))
    return attribute_map


def _by_template(t: _Template | _Seen | _Read, text: bytes) -> FieldMap[AttributeValue] | None:
    """The map of `text` read by its template (or the same text seen before),
    or None when the text is not of it."""
    if isinstance(t, _Template):
        cut = t.cut
        if cut is not None:
            if text.startswith(t.head) and text.endswith(t.tail):
                piece = text[cut]
                name, value = _SHARED.get(piece) or _RECENT[piece]
                if name == t.varying_name:
                    return _field_map(t.layout, (*t.head_values, value, *t.tail_values))
        elif t.fixed(text) == t.around:
            names, values = zip(*[_SHARED.get(p) or _RECENT[p] for p in t.varying(text)],
                                strict=True)
            if names == t.varying_names:
                return _field_map(t.layout, t.order(t.shared + values))
    elif text == t[0]:
        return t[1]
    return None


class _Read(NamedTuple):
    """A text read piece by piece, what a template is made of; a `_Seen` in
    its first two fields, kept so at a place, where another text compares
    with it piece by piece without reading it again."""

    text: bytes
    attribute_map: FieldMap[AttributeValue]
    pieces: tuple[bytes, ...]
    names: tuple[str, ...]
    values: tuple[AttributeValue, ...]
    layout: dict[str, int]


def _learned(text: bytes, driver: str) -> tuple[Mapping[str, AttributeValue], _Read | None]:
    """The map read piece by piece, and the read a template learns from; or
    decoded whole, with nothing to learn from: a text written with spaces or
    across lines (a file from `kubectl -o json`) does not split into members."""
    if (text[:2] != b'{"' or text[-2:] != b"}}" or b"\n" in text or b'": ' in text
            or b'{ "' in text):
        return _attribute_map(_decoded_attributes(msgspec.Raw(text)), driver), None
    pieces = tuple(text[2:-2].split(b'},"'))
    names, values = zip(*[_SHARED.get(p) or _RECENT[p] for p in pieces], strict=True)
    if None in names:
        return _attribute_map(_decoded_attributes(msgspec.Raw(text)), driver), None
    layout = _LAYOUTS.get((driver, names)) or _attribute_layout(driver, names)
    attribute_map = _field_map(layout, values)
    return attribute_map, _Read(text, attribute_map, pieces, names, values, layout)


def _learn_place(at: tuple[str, int, int], kinds: list[_Template | _Read] | None,
                 read: _Read) -> None:
    """The first text seen at a place kept as it is. Then the kind the text
    varies from least becomes its template, unless only a template would
    widen and the place has room for another kind: the text is kept as the
    start of one, so the GPUs of two slices (or two models) at one place
    keep a narrow template each rather than share a wide one.

    A place's kinds are kept most recently read first (a template made, or a
    text it read), and a text kept as it is comes last: on a full place, a
    text that is no kind's takes the last one's room, so a run of one-offs
    takes turns in that room and a kind that reads texts again keeps its
    own, while one seen no more gives way to the kinds that come."""
    if kinds is None:
        _PLACES.put(at, [read], _KINDS_AT_A_PLACE * len(read.text))
        return
    best: tuple[int, tuple[int, ...]] | None = None
    for i, kind in enumerate(kinds):
        varying = _varying(kind, read)
        if varying is not None and (best is None or len(varying) < len(best[1])):
            best = (i, varying)
    if best is None or (len(kinds) < _KINDS_AT_A_PLACE
                        and isinstance(kinds[best[0]], _Template)):
        if len(kinds) < _KINDS_AT_A_PLACE:
            kinds.append(read)
        else:
            kinds[-1] = read
    else:
        del kinds[best[0]]
        kinds.insert(0, _Template(read.text, read.pieces, read.names, read.values,
                                  read.layout, best[1]))


def _widened(seen: _Template | _Seen, read: _Read) -> _Template | None:
    """The template of `seen`'s texts and `read`'s (see `_varying`)."""
    varying = _varying(seen, read)
    return None if varying is None else _Template(
        read.text, read.pieces, read.names, read.values, read.layout, varying)


def _varying(seen: _Template | _Seen | _Read, read: _Read) -> tuple[int, ...] | None:
    """The pieces a template of `seen`'s texts and `read`'s varies in, when
    they have the same attributes in the same order, `read` varies from
    `seen` and the template would vary in no more than half of them."""
    seen_pieces: tuple[bytes, ...]
    seen_names: tuple[str | None, ...]
    if isinstance(seen, _Template):
        seen_pieces, seen_names, varying_at = seen.pieces, seen.names, seen.varying_at
    elif isinstance(seen, _Read):
        seen_pieces, seen_names, varying_at = seen.pieces, seen.names, ()
    else:  # read again, once per name that comes round
        seen_pieces = tuple(seen[0][2:-2].split(b'},"'))
        seen_names = tuple([(_SHARED.get(p) or _RECENT[p])[0] for p in seen_pieces])
        varying_at = ()
    if seen_names != read.names:
        return None
    varying = set(varying_at)
    varying.update(i for i, (p, q) in enumerate(zip(read.pieces, seen_pieces, strict=True))
                   if p != q)
    if len(varying) > len(varying_at) and 2 * len(varying) <= len(read.names):
        return tuple(sorted(varying))
    return None


_DEVICE_FIELDS: Final = (
    "driver", "pool", "name", "slice_name", "attributes", "capacity", "consumes_counters",
    "node_name", "node_selector", "all_nodes", "taints", "binds_to_node",
    "binding_conditions", "binding_failure_conditions", "allow_multiple_allocations", "id")
if Device.__struct_fields__ != _DEVICE_FIELDS:
    raise ImportError("app.model.typed builds Device from positional arguments: update "
                      "_DEVICE_FIELDS and _devices with Device's fields")


# (driver, attribute names as published) -> the shared FieldMap layout of
# their qualified names; a device's attribute map is built from it directly
_LAYOUTS: BoundedCache[tuple[str, tuple[str, ...]], dict[str, int]] = BoundedCache(SHARED_MAX)


def _attribute_layout(driver: str, names: tuple[str, ...]) -> dict[str, int]:
    qualified = qualified_layout(driver, names)
    if qualified is None:
        raise NotTyped  # two names qualify alike: parse keeps the last
    return _LAYOUTS.put((driver, names), shared_layout(qualified))


def _attribute(a: _Attribute | _Scalar) -> AttributeValue:
    values = msgspec.structs.astuple(a)
    if values.count(None) != len(values) - 1:  # none, or more than one
        return UNSUPPORTED
    kind, value = ("string", a.string) if a.string is not None else next(
        (k, v) for k, v in zip(_KINDS, values, strict=False) if v is not None)
    if kind in LIST_ATTRIBUTE_KINDS and not value:
        return UNSUPPORTED
    return AttributeValue(kind, value)  # shared by _ATTRIBUTES, keyed by what it was read from


# _Attribute's fields in order, by their API names
_KINDS: Final = tuple(f.encode_name for f in msgspec.structs.fields(_Attribute))
assert _KINDS == ATTRIBUTE_KINDS, "an _Attribute field per attribute kind, in the API's order"
assert tuple(f.encode_name for f in msgspec.structs.fields(_Scalar)) == _KINDS[:4]


def _quantity(text: str | None) -> Quantity | None:
    if text is None:
        return None
    try:
        return parse_quantity(text)
    except QuantityError:
        raise NotTyped from None


def _capacity(capacity: dict[str, _Capacity], driver: str) -> Mapping[str, DeviceCapacity]:
    key = (driver, tuple(capacity.items()))
    hit = _CAPACITIES.get(key)
    if hit is not None:
        return hit
    layout = qualified_layout(driver, tuple(capacity))
    if layout is None:
        raise NotTyped
    values = tuple([DeviceCapacity(value=cast(Quantity, _quantity(c.value)),
                                   request_policy=_request_policy(c.requestPolicy))
                    for c in capacity.values()])
    return _CAPACITIES.put(key, FieldMap.from_layout(layout, values))


# (driver, capacity JSON) -> shared capacity map; consumptions JSON -> shared tuple
_CAPACITY_TEXTS: _TextCache[tuple[str, bytes], Mapping[str, DeviceCapacity]] = (
    _TextCache(SHARED_MAX))
_CONSUMPTION_TEXTS: _TextCache[bytes, tuple[DeviceCounterConsumption, ...]] = (
    _TextCache(SHARED_MAX))


def _capacity_text(raw: msgspec.Raw, driver: str) -> Mapping[str, DeviceCapacity]:
    key = (driver, bytes(raw))
    hit = _CAPACITY_TEXTS.get(key)
    if hit is None:
        _check_utf8(raw)
        hit = _CAPACITY_TEXTS.put(key, _capacity(_CAPACITY.decode(raw) if len(raw) else {},
                                                 driver), len(raw))
    return hit


def _consumptions_text(raw: msgspec.Raw) -> tuple[DeviceCounterConsumption, ...]:
    if not len(raw):
        return ()
    key = bytes(raw)
    hit = _CONSUMPTION_TEXTS.get(key)
    if hit is None:
        _check_utf8(raw)
        consumes = _CONSUMPTIONS_JSON.decode(raw)
        hit = _CONSUMPTION_TEXTS.put(key, () if consumes is None else _consumptions(consumes),
                                     len(key))
    return hit


def _counter_sets(sets: list[_CounterSet]) -> tuple[CounterSet, ...]:
    if any(not c.name for c in sets):
        raise NotTyped
    return tuple([CounterSet(name=c.name, counters=_counter_map(c.counters)) for c in sets])


# sharedCounters JSON -> the shared tuple (a partitionable node's counter sets
# are its GPUs', the same on every node of its kind)
_COUNTER_SET_TEXTS: _TextCache[bytes, tuple[CounterSet, ...]] = _TextCache(SHARED_MAX)


def _counter_sets_text(raw: msgspec.Raw) -> tuple[CounterSet, ...]:
    key = bytes(raw)
    hit = _COUNTER_SET_TEXTS.get(key)
    if hit is None:
        _check_utf8(raw)
        try:
            sets = _COUNTER_SETS_JSON.decode(raw)
        except msgspec.ValidationError:
            raise NotTyped from None
        hit = _COUNTER_SET_TEXTS.put(key, _counter_sets(sets or []), len(key))
    return hit


def _request_policy(p: _RequestPolicy | None) -> RequestPolicy | None:
    if p is None:
        return None
    r = p.validRange or _Range()
    return RequestPolicy(
        default=_quantity(p.default),
        valid_values=tuple([cast(Quantity, _quantity(v)) for v in p.validValues or ()]),
        valid_range_min=_quantity(r.min), valid_range_max=_quantity(r.max),
        valid_range_step=_quantity(r.step))


def _counter_map(counters: dict[str, _Counter]) -> FieldMap[Quantity]:
    # immutable: counter sets and consumptions are shared between slices
    return FieldMap({name: cast(Quantity, _quantity(c.value)) for name, c in counters.items()})


def _consumptions(consumes: list[_Consumption]) -> tuple[DeviceCounterConsumption, ...]:
    key = tuple([(c.counterSet, tuple(c.counters.items())) for c in consumes])
    hit = _CONSUMPTIONS.get(key)
    if hit is not None:
        return hit
    if any(not c.counterSet for c in consumes):
        raise NotTyped
    out = tuple([DeviceCounterConsumption(counter_set=c.counterSet,
                                          counters=_counter_map(c.counters))
                 for c in consumes])
    return _CONSUMPTIONS.put(key, out)


def forget_shared() -> None:
    """Empty what the decoder shares between slices, as a process starts with
    it (a benchmark's cold read); what was built keeps its parts."""
    for cache in (_NAMES, _ATTRIBUTES, _SHARED, _RECENT, _TEMPLATES, _PLACES, _CONSUMPTIONS,
                  _CAPACITIES, _CAPACITY_TEXTS, _CONSUMPTION_TEXTS, _COUNTER_SET_TEXTS,
                  _LAYOUTS, QUALIFIED_LAYOUTS, QUALIFIED):
        cache.clear()


def _taints(raw: Any) -> Any:
    try:
        return parse_taints(raw, "")
    except ValueError:
        raise NotTyped from None
