"""Runtime CEL values as plain Python objects, and CEL equality.

Values stay native for speed: int, float, bool, str, bytes, None, tuple/list,
dict. Only what Python cannot tell apart gets a class: `UInt` (so `1u` and
`1` dispatch differently), `Optional`, and the Kubernetes types (in their own
modules). `bool` is a subclass of `int` in Python but not in CEL, so every
type test here uses `type(x) is ...`, never `isinstance`.

Equality follows cel-go: numbers compare across int/uint/double, unrelated
built-in types compare unequal, list and map equality skip element
comparisons that error, and a Kubernetes value on the left decides for
itself (a Semver compared with a string is an error, not `false`).
"""

from __future__ import annotations

import math
from typing import Any, Final

from app.cel.errors import EvalError
from app.cel.semver import Semver
from app.cel.types import (
    BOOL,
    BYTES,
    DOUBLE,
    INT,
    NULL,
    STRING,
    UINT,
    CelType,
)

INT_MIN: Final = -(1 << 63)
INT_MAX: Final = (1 << 63) - 1
UINT_MAX: Final = (1 << 64) - 1


class UInt(int):
    """A CEL `uint`; arithmetic on it goes through the library, never Python operators."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}u"


class Optional:
    """A CEL `optional_type` value."""

    __slots__ = ("present", "value")

    def __init__(self, value: Any = None, *, present: bool = True) -> None:
        self.value = value
        self.present = present

    def __repr__(self) -> str:
        return f"optional.of({self.value!r})" if self.present else "optional.none()"


OPTIONAL_NONE: Final = Optional(present=False)

_NUMERIC_TYPES: Final = (int, UInt, float)
_PRIMITIVE_KINDS: Final[dict[type, str]] = {
    bool: "bool", int: "int", UInt: "uint", float: "double", str: "string", bytes: "bytes",
    type(None): "null_type", list: "list", tuple: "list", dict: "map", Optional: "optional_type",
    CelType: "type",
}
_RUNTIME_TYPES: Final[dict[str, CelType]] = {
    "bool": BOOL, "int": INT, "uint": UINT, "double": DOUBLE, "string": STRING, "bytes": BYTES,
    "null_type": NULL, "list": CelType("list"), "map": CelType("map"),
    "optional_type": CelType("optional_type"), "type": CelType("type"),
}


def kind_of(value: Any) -> str:
    """The CEL type name of a runtime value (`int`, `list`, `kubernetes.Quantity`, ...)."""
    kind = _PRIMITIVE_KINDS.get(type(value))
    if kind is not None:
        return kind
    cel_kind = getattr(value, "CEL_KIND", None)
    if cel_kind is not None:
        return str(cel_kind)
    if isinstance(value, dict):
        return "map"
    return type(value).__name__


def go_type_name(value: Any) -> str:
    """The Go type name cel-go prints in `expected iterable type` errors."""
    return {"bool": "types.Bool", "int": "types.Int", "uint": "types.Uint",
            "double": "types.Double", "string": "types.String", "bytes": "types.Bytes",
            "null_type": "types.Null", "kubernetes.Quantity": "cel.Quantity",
            "kubernetes.Semver": "cel.Semver", "optional_type": "*types.Optional",
            "type": "*types.Type"}.get(kind_of(value), kind_of(value))


def runtime_type(value: Any) -> CelType:
    kind = kind_of(value)
    return _RUNTIME_TYPES.get(kind) or CelType(kind)


def equals(left: Any, right: Any) -> bool:
    """CEL `==`; raises EvalError where cel-go returns an error value."""
    tl, tr = type(left), type(right)
    if tl is tr and tl in (str, int, bool, bytes):
        return bool(left == right)
    result = _equal(left, right)
    if result is None:
        raise EvalError("no such overload")
    return result


def not_equals(left: Any, right: Any) -> bool:
    """CEL `!=`: cel-go answers true whenever `==` is not true, an error included."""
    return _equal(left, right) is not True


def _equal(left: Any, right: Any) -> bool | None:
    """True/False, or None for an error value (which list/map equality skips)."""
    if left is None or right is None:
        return left is right
    tl, tr = type(left), type(right)
    custom = getattr(left, "cel_equals", None)
    if custom is not None:
        return custom(right)
    if tl in _NUMERIC_TYPES and tr in _NUMERIC_TYPES:
        if tl is float or tr is float:
            return not math.isnan(left) and not math.isnan(right) and float(left) == float(right)
        return int(left) == int(right)
    if tl is bool or tr is bool:
        return tl is tr and left == right
    if tl in (list, tuple):
        if tr not in (list, tuple) or len(left) != len(right):
            return False
        return all(_equal(a, b) is not False for a, b in zip(left, right, strict=True))
    if isinstance(left, dict):
        return _map_equal(left, right)
    if tl is Optional:
        if tr is not Optional:
            return False
        if not left.present or not right.present:
            return left.present == right.present
        return _equal(left.value, right.value)
    if tl is CelType:
        return tr is CelType and left.name == right.name
    if getattr(right, "cel_equals", None) is not None:
        return False
    return tl is tr and bool(left == right)


def _map_equal(left: dict[Any, Any], right: Any) -> bool:
    if not isinstance(right, dict) or len(left) != len(right):
        return False
    for key, value in left.items():
        other = map_lookup(right, key)
        if other is _MISSING:
            return False
        if _equal(value, other) is False:
            return False
    return True


_MISSING: Final = object()
# The Python types of CEL map keys (and cel-go's qualifiers: doubles too).
KEY_TYPES: Final = frozenset({str, int, UInt, bool, float})
# cel-go keys its map literals by Go value, and these values hold slices, so
# hashing one to look it up panics (a runtime error, once the map is not empty).
_UNHASHABLE_IN_GO: Final = frozenset({bytes, Semver})


class StringKeyMap(dict[str, Any]):
    """A map the scheduler builds natively with string keys (a device's attributes
    or capacities of one domain): a key of any other type is simply not there."""

    __slots__ = ()


def map_lookup(mapping: dict[Any, Any], key: Any) -> Any:
    """Map index with CEL key semantics: numeric keys match across int/uint/double."""
    tk = type(key)
    if tk not in KEY_TYPES:
        if tk in _UNHASHABLE_IN_GO and mapping and type(mapping) is dict:
            raise EvalError(f"hash of unhashable type {go_type_name(key)}")
        return _MISSING
    if tk is float:
        if not key.is_integer():
            return _MISSING
        key = int(key)
        tk = int
    if tk is bool:
        for k, v in mapping.items():
            if type(k) is bool and k == key:
                return v
        return _MISSING
    value = mapping.get(key, _MISSING)
    if value is not _MISSING and tk in (int, UInt) and type(_key_of(mapping, key)) is bool:
        return _MISSING
    return value


def _key_of(mapping: dict[Any, Any], key: Any) -> Any:
    for k in mapping:
        if k == key:
            return k
    return key


def is_missing(value: Any) -> bool:
    return value is _MISSING


def check_int(value: int) -> int:
    if value < INT_MIN or value > INT_MAX:
        raise EvalError("integer overflow")
    return value


def check_uint(value: int) -> UInt:
    if value < 0 or value > UINT_MAX:
        raise EvalError("unsigned integer overflow")
    return UInt(value)
