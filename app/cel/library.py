"""The function overloads of the DRA CEL environment (Kubernetes StoredExpressions).

Every callable name maps to typed overloads, exactly as cel-go declares
them: the checker resolves a call against these signatures at compile time
(so `1 + 1.0` or `q.sign()` fail to compile as in Kubernetes), and the
compiled program calls the chosen implementation directly, or dispatches on
runtime types when an argument is `dyn`. Implementations raise `EvalError`
with cel-go's or the Kubernetes library's text.

Covered: standard operators, conversions and string functions; strings
extension v2 (without `format`); lists extension v3; sets; Kubernetes lists,
regex, quantity, semver, IP/CIDR; DRA `includes`; optional helpers. Not
covered (so they fail to compile with `undeclared reference`): timestamps and
durations, URLs, `format.*` validators, the strings `format` function.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any, Final

import re2

from app.cel import net
from app.cel.errors import EvalError
from app.cel.quantity import CelQuantity, QuantityError, cel_quantity, int_quantity
from app.cel.semver import Semver, SemverError, parse_semver, parse_semver_tolerant
from app.cel.types import (
    BOOL,
    BYTES,
    CIDR,
    DOUBLE,
    DYN,
    INT,
    IP,
    QUANTITY,
    SEMVER,
    STRING,
    UINT,
    UNBOUND,
    A,
    CelType,
    K,
    V,
    list_of,
    map_of,
    optional_of,
    type_of,
)
from app.cel.values import (
    INT_MAX,
    INT_MIN,
    OPTIONAL_NONE,
    UINT_MAX,
    Optional,
    UInt,
    check_int,
    check_uint,
    equals,
    kind_of,
    runtime_type,
)


@dataclass(frozen=True, slots=True)
class Overload:
    id: str
    params: tuple[CelType, ...]
    result: CelType
    impl: Callable[..., Any]
    member: bool = False
    # Extra runtime cost (beyond the one unit per call) as a function of the arguments.
    cost: Callable[..., int] | None = None


FUNCTIONS: dict[str, list[Overload]] = {}


def _def(name: str, overload_id: str, params: Sequence[CelType], result: CelType,
         impl: Callable[..., Any], *, member: bool = False,
         cost: Callable[..., int] | None = None) -> None:
    FUNCTIONS.setdefault(name, []).append(
        Overload(overload_id, tuple(params), result, impl, member, cost))


# ----------------------------------------------------------------------------- arithmetic

def _int_div(a: int, b: int) -> int:
    if b == 0:
        raise EvalError("division by zero")
    q = abs(a) // abs(b)
    return check_int(q if (a < 0) == (b < 0) else -q)


def _int_mod(a: int, b: int) -> int:
    if b == 0:
        raise EvalError("modulus by zero")
    if a == INT_MIN and b == -1:
        raise EvalError("integer overflow")
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def _uint_div(a: int, b: int) -> UInt:
    if b == 0:
        raise EvalError("division by zero")
    return UInt(a // b)


def _uint_mod(a: int, b: int) -> UInt:
    if b == 0:
        raise EvalError("modulus by zero")
    return UInt(a % b)


def _double_div(a: float, b: float) -> float:
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _double_mul(a: float, b: float) -> float:
    try:
        return a * b
    except OverflowError:
        return math.copysign(math.inf, a) * math.copysign(1.0, b)


for _op, _int_fn, _uint_fn, _dbl_fn in (
    ("_+_", lambda a, b: check_int(a + b), lambda a, b: check_uint(a + b), lambda a, b: a + b),
    ("_-_", lambda a, b: check_int(a - b), lambda a, b: check_uint(a - b), lambda a, b: a - b),
    ("_*_", lambda a, b: check_int(a * b), lambda a, b: check_uint(a * b), _double_mul),
    ("_/_", _int_div, _uint_div, _double_div),
):
    _def(_op, f"{_op}_int64", (INT, INT), INT, _int_fn)
    _def(_op, f"{_op}_uint64", (UINT, UINT), UINT, _uint_fn)
    _def(_op, f"{_op}_double", (DOUBLE, DOUBLE), DOUBLE, _dbl_fn)
_def("_%_", "modulo_int64", (INT, INT), INT, _int_mod)
_def("_%_", "modulo_uint64", (UINT, UINT), UINT, _uint_mod)
_def("_+_", "add_string", (STRING, STRING), STRING, lambda a, b: a + b)
_def("_+_", "add_bytes", (BYTES, BYTES), BYTES, lambda a, b: a + b)
_def("_+_", "add_list", (list_of(A), list_of(A)), list_of(A),
     lambda a, b: (*a, *b), cost=lambda a, b: (len(a) + len(b)) // 10)
_def("-_", "negate_int64", (INT,), INT, lambda a: check_int(-a))
_def("-_", "negate_double", (DOUBLE,), DOUBLE, lambda a: -a)


# ----------------------------------------------------------------------------- comparisons

def _cmp(a: Any, b: Any) -> int:
    if (isinstance(a, float) and math.isnan(a)) or (isinstance(b, float) and math.isnan(b)):
        raise EvalError("NaN values cannot be ordered")
    return (a > b) - (a < b)


_RELATIONS: Final[dict[str, Callable[[int], bool]]] = {
    "_<_": lambda c: c == -1, "_<=_": lambda c: c in (-1, 0),
    "_>_": lambda c: c == 1, "_>=_": lambda c: c in (0, 1),
}
for _op, _test in _RELATIONS.items():
    for _t in (BOOL, STRING, BYTES):
        _def(_op, f"{_op}_{_t}", (_t, _t), BOOL,
             lambda a, b, _test=_test: _test(_cmp(a, b)))
    for _l in (INT, UINT, DOUBLE):
        for _r in (INT, UINT, DOUBLE):
            _def(_op, f"{_op}_{_l}_{_r}", (_l, _r), BOOL,
                 lambda a, b, _test=_test: _test(_cmp(a, b)))


# ----------------------------------------------------------------------------- conversions

def _to_int(value: Any) -> int:
    t = type(value)
    if t is int:
        return value
    if t is UInt:
        return check_int(int(value))
    if t is float:
        if math.isnan(value) or math.isinf(value) or not (-(2.0**63) < value < 2.0**63):
            raise EvalError("integer overflow")
        return int(value)
    if t is str:
        return _parse_int(value, "int")
    raise EvalError(f"type conversion error from '{kind_of(value)}' to 'int'")


def _parse_int(text: str, target: str) -> int:
    body = text[1:] if text[:1] in "+-" else text
    if not body.isdigit() or not body.isascii() or (target == "uint" and text[:1] == "-"):
        raise EvalError(f"type conversion error from 'string' to '{target}'")
    value = int(text)
    if (target == "int" and not INT_MIN <= value <= INT_MAX) or (
            target == "uint" and value > UINT_MAX):
        raise EvalError(f"type conversion error from 'string' to '{target}'")
    return value


def _to_uint(value: Any) -> UInt:
    t = type(value)
    if t is UInt:
        return value
    if t is int:
        return check_uint(value)
    if t is float:
        if math.isnan(value) or not (0.0 <= value < 2.0**64):
            raise EvalError("unsigned integer overflow")
        return UInt(int(value))
    if t is str:
        return UInt(_parse_int(value, "uint"))
    raise EvalError(f"type conversion error from '{kind_of(value)}' to 'uint'")


def _to_double(value: Any) -> float:
    t = type(value)
    if t is float:
        return value
    if t in (int, UInt):
        return float(value)
    if t is str:
        # Python's float() also takes "1_000" and surrounding spaces; Go's ParseFloat does not.
        try:
            if "_" in value or value != value.strip():
                raise ValueError(value)
            return float(value)
        except ValueError:
            raise EvalError("type conversion error from 'string' to 'double'") from None
    raise EvalError(f"type conversion error from '{kind_of(value)}' to 'double'")


def format_double(value: float) -> str:
    """Go's `%g` with shortest precision, which cel-go uses for string(double)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    negative, digit_tuple, exp = Decimal(repr(value)).normalize().as_tuple()
    digits = "".join(str(d) for d in digit_tuple)
    exponent = int(exp) + len(digits) - 1
    sign = "-" if negative else ""
    if exponent < -4 or exponent >= 6:
        frac = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{frac}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if exponent < 0:
        return f"{sign}0.{'0' * (-exponent - 1)}{digits}"
    if len(digits) <= exponent + 1:
        return f"{sign}{digits}{'0' * (exponent + 1 - len(digits))}"
    return f"{sign}{digits[:exponent + 1]}.{digits[exponent + 1:]}"


def _to_string(value: Any) -> str:
    t = type(value)
    if t is str:
        return value
    if t is bool:
        return "true" if value else "false"
    if t in (int, UInt):
        return str(int(value))
    if t is float:
        return format_double(value)
    if t is net.IP or t is net.CIDR:
        return str(value)
    if t is bytes:
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise EvalError("invalid UTF-8 in bytes, cannot convert to string") from None
    raise EvalError(f"type conversion error from '{kind_of(value)}' to 'string'")


_BOOL_STRINGS: Final = {"1": True, "t": True, "T": True, "TRUE": True, "true": True,
                        "True": True, "0": False, "f": False, "F": False, "FALSE": False,
                        "false": False, "False": False}


def _to_bool(value: Any) -> bool:
    if type(value) is bool:
        return value
    if type(value) is str and value in _BOOL_STRINGS:
        return _BOOL_STRINGS[value]
    raise EvalError(f"type conversion error from '{kind_of(value)}' to 'bool'")


for _src in (INT, UINT, DOUBLE, STRING):
    _def("int", f"{_src}_to_int", (_src,), INT, _to_int)
    _def("uint", f"{_src}_to_uint", (_src,), UINT, _to_uint)
    _def("double", f"{_src}_to_double", (_src,), DOUBLE, _to_double)
for _src in (INT, UINT, DOUBLE, STRING, BOOL, BYTES, IP, CIDR):
    _def("string", f"{_src}_to_string", (_src,), STRING, _to_string)
_def("bytes", "string_to_bytes", (STRING,), BYTES, lambda s: s.encode("utf-8"))
_def("bytes", "bytes_to_bytes", (BYTES,), BYTES, lambda b: b)
_def("bool", "string_to_bool", (STRING,), BOOL, _to_bool)
_def("bool", "bool_to_bool", (BOOL,), BOOL, _to_bool)
_def("dyn", "to_dyn", (A,), DYN, lambda v: v)
_def("type", "type", (A,), type_of(A), runtime_type)

CONVERSIONS: Final = frozenset({"int", "uint", "double", "string", "bytes", "bool"})
# Pure constructors folded when their literal argument is valid; an invalid literal stays a
# runtime error, because that is when Kubernetes reports it.
FOLDABLE: Final = frozenset({"quantity", "isQuantity", "semver", "isSemver", "ip", "isIP",
                             "cidr", "isCIDR"})


# ----------------------------------------------------------------------------- size, strings

def _size(value: Any) -> int:
    return len(value)


for _t in (STRING, BYTES, list_of(A), map_of(K, V)):
    _def("size", f"size_{_t.name}", (_t,), INT, _size)
    _def("size", f"{_t.name}_size", (_t,), INT, _size, member=True)


# Constructs whose meaning differs between RE2 and Python's `re` (even with re.ASCII):
# `$` (Python also matches before a final newline), `\s` (Python adds \v), Unicode and
# POSIX classes, `\Q..\E`, flag groups (RE2 folds case over Unicode), `{,n}`.
_RE2_ONLY: Final = ("$", "\\s", "\\S", "\\p", "\\P", "\\Q", "\\z", "\\C", "[:", "(?", "{,",
                    "\\x{")


@lru_cache(maxsize=1024)
def compile_regex(pattern: str) -> Any:
    """An RE2-semantics matcher for `pattern`; raises EvalError if RE2 rejects it.

    RE2 decides what is valid. Matching then uses Python's `re` (about 20x faster
    than the google-re2 binding) when the pattern has none of the constructs whose
    semantics differ, and RE2 itself otherwise.
    """
    try:
        compiled = re2.compile(pattern)
    except re2.error as exc:
        raise EvalError(f"error parsing regexp: {exc}") from None
    if any(token in pattern for token in _RE2_ONLY):
        return compiled
    try:
        return re.compile(pattern, re.ASCII)
    except re.error:
        return compiled


def _matches(text: str, pattern: str) -> bool:
    return compile_regex(pattern).search(text) is not None


_def("matches", "matches", (STRING, STRING), BOOL, _matches)
_def("matches", "matches_string", (STRING, STRING), BOOL, _matches, member=True)
_def("contains", "contains_string", (STRING, STRING), BOOL, lambda s, x: x in s, member=True)
_def("startsWith", "starts_with_string", (STRING, STRING), BOOL, str.startswith, member=True)
_def("endsWith", "ends_with_string", (STRING, STRING), BOOL, str.endswith, member=True)


def _char_at(s: str, i: int) -> str:
    if i < 0 or i > len(s):
        raise EvalError(f"index out of range: {i}")
    return s[i:i + 1]


def _offset_answer(s: str, sub: str, offset: int) -> int | None:
    """cel-go's offsets: negative is an error; past the end finds nothing (an
    empty substring is found at the offset, clamped to the end); None: search."""
    if offset < 0:
        raise EvalError(f"index out of range: {offset}")
    if sub == "":
        return min(offset, len(s))
    if offset >= len(s):
        return -1
    return None


def _index_of(s: str, sub: str, offset: int = 0) -> int:
    answer = _offset_answer(s, sub, offset)
    return s.find(sub, offset) if answer is None else answer


def _last_index_of(s: str, sub: str, offset: int | None = None) -> int:
    if offset is None:
        return s.rfind(sub)
    answer = _offset_answer(s, sub, offset)
    return s.rfind(sub, 0, offset + len(sub)) if answer is None else answer


def _substring(s: str, start: int, end: int | None = None) -> str:
    if end is None:
        if start < 0 or start > len(s):
            raise EvalError(f"index out of range: {start}")
        return s[start:]
    if start > end:
        raise EvalError(f"invalid substring range. start: {start}, end: {end}")
    if start < 0 or start > len(s):
        raise EvalError(f"index out of range: {start}")
    if end < 0 or end > len(s):
        raise EvalError(f"index out of range: {end}")
    return s[start:end]


_ASCII_LOWER: Final = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}
_ASCII_UPPER: Final = {c: c - 32 for c in range(ord("a"), ord("z") + 1)}


def _ascii_lower(s: str) -> str:
    return s.lower() if s.isascii() else s.translate(_ASCII_LOWER)


def _ascii_upper(s: str) -> str:
    return s.upper() if s.isascii() else s.translate(_ASCII_UPPER)


def _replace(s: str, old: str, new: str, n: int = -1) -> str:
    if n < 0:
        return s.replace(old, new)
    return s.replace(old, new, n)


def _split(s: str, sep: str, n: int = -1) -> tuple[str, ...]:
    if n == 0:
        return ()
    if sep == "":
        chars = list(s)
        if 0 < n < len(chars):
            chars = [*chars[:n - 1], "".join(chars[n - 1:])]
        return tuple(chars)
    if n < 0:
        return tuple(s.split(sep))
    return tuple(s.split(sep, n - 1))


_UNICODE_SPACE: Final = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005" \
                        "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def _join(items: Sequence[Any], sep: str = "") -> str:
    for item in items:
        if type(item) is not str:
            raise EvalError("no such overload")
    return sep.join(items)


def _quote(s: str) -> str:
    out = ['"']
    for ch in s:
        out.append({"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
                    "\t": "\\t", "\v": "\\v", "\\": "\\\\", '"': '\\"'}.get(ch, ch))
    out.append('"')
    return "".join(out)


_def("charAt", "string_char_at_int", (STRING, INT), STRING, _char_at, member=True)
_def("indexOf", "string_index_of_string", (STRING, STRING), INT, _index_of, member=True)
_def("indexOf", "string_index_of_string_int", (STRING, STRING, INT), INT, _index_of,
     member=True)
_def("lastIndexOf", "string_last_index_of_string", (STRING, STRING), INT, _last_index_of,
     member=True)
_def("lastIndexOf", "string_last_index_of_string_int", (STRING, STRING, INT), INT,
     _last_index_of, member=True)
_def("lowerAscii", "string_lower_ascii", (STRING,), STRING, _ascii_lower, member=True)
_def("upperAscii", "string_upper_ascii", (STRING,), STRING, _ascii_upper, member=True)
_def("replace", "string_replace_string_string", (STRING, STRING, STRING), STRING, _replace,
     member=True)
_def("replace", "string_replace_string_string_int", (STRING, STRING, STRING, INT), STRING,
     _replace, member=True)
_def("split", "string_split_string", (STRING, STRING), list_of(STRING), _split, member=True)
_def("split", "string_split_string_int", (STRING, STRING, INT), list_of(STRING), _split,
     member=True)
_def("substring", "string_substring_int", (STRING, INT), STRING, _substring, member=True)
_def("substring", "string_substring_int_int", (STRING, INT, INT), STRING, _substring,
     member=True)
_def("trim", "string_trim", (STRING,), STRING, lambda s: s.strip(_UNICODE_SPACE), member=True)
_def("join", "list_join", (list_of(STRING),), STRING, _join, member=True,
     cost=lambda items, sep="": len(items) // 10)
_def("join", "list_join_string", (list_of(STRING), STRING), STRING, _join, member=True,
     cost=lambda items, sep="": len(items) // 10)
_def("strings.quote", "strings_quote", (STRING,), STRING, _quote)


# ----------------------------------------------------------------------------- lists

def _slice(items: Sequence[Any], start: int, end: int) -> tuple[Any, ...]:
    if start < 0 or end < 0:
        raise EvalError(f"cannot slice({start}, {end}), negative indexes not supported")
    if start > end:
        raise EvalError(f"cannot slice({start}, {end}), start index must be less than or "
                        "equal to end index")
    if end > len(items):
        raise EvalError(f"cannot slice({start}, {end}), list is length {len(items)}")
    return tuple(items[start:end])


def _flatten(items: Sequence[Any], depth: int = 1) -> tuple[Any, ...]:
    if depth < 0:
        raise EvalError("level must be non-negative")
    out: list[Any] = []
    for item in items:
        if type(item) in (list, tuple) and depth > 0:
            out.extend(_flatten(item, depth - 1))
        else:
            out.append(item)
    return tuple(out)


def _distinct(items: Sequence[Any]) -> tuple[Any, ...]:
    out: list[Any] = []
    for item in items:
        if not any(_safe_equal(item, seen) for seen in out):
            out.append(item)
    return tuple(out)


def _safe_equal(a: Any, b: Any) -> bool:
    try:
        return equals(a, b)
    except EvalError:
        return False


def _sort_key(value: Any) -> Any:
    t = type(value)
    if t in (int, UInt, float, str, bool, bytes):
        return value
    if isinstance(value, CelQuantity):
        return value.quantity.value
    raise EvalError("no such overload")


def sort_values(items: Sequence[Any], keys: Sequence[Any] | None = None) -> tuple[Any, ...]:
    """CEL `sort()` order of `items`, or of `items` by `keys` (the `sortBy` macro);
    the sort is stable and the keys must all have one type."""
    keys = items if keys is None else keys
    if not keys:
        return ()
    if len({kind_of(k) for k in keys}) > 1:
        raise EvalError("list elements must have the same type")
    key_fn = _SemverKey if isinstance(keys[0], Semver) else _sort_key
    order = sorted(range(len(keys)), key=lambda i: key_fn(keys[i]))
    return tuple(items[i] for i in order)


class _SemverKey:
    __slots__ = ("v",)

    def __init__(self, v: Semver) -> None:
        self.v = v

    def __lt__(self, other: _SemverKey) -> bool:
        return self.v.compare(other.v) < 0


def _range(n: int) -> tuple[int, ...]:
    if n < 0:
        raise EvalError(f"lists.range: size must be non-negative, got {n}")
    return tuple(range(n))


# Kubernetes' isSorted walks the list and needs each element to be a cel-go
# Comparer (a semver or quantity is not one); a pair that cannot be compared
# is not a descent.
_NONE: Final = object()
_COMPARERS: Final = frozenset({"int", "uint", "double", "bool", "string", "bytes"})


def _is_sorted(items: Sequence[Any]) -> bool:
    previous: Any = _NONE
    for item in items:
        if kind_of(item) not in _COMPARERS:
            raise EvalError("no such overload")
        if previous is not _NONE:
            try:
                if _compare_values(previous, item) == 1:
                    return False
            except EvalError:
                pass
        previous = item
    return True


def _compare_values(a: Any, b: Any) -> int:
    if isinstance(a, Semver) and isinstance(b, Semver):
        return a.compare(b)
    if isinstance(a, CelQuantity) and isinstance(b, CelQuantity):
        return a.compare(b)
    if kind_of(a) != kind_of(b) and not (kind_of(a) in ("int", "uint", "double")
                                         and kind_of(b) in ("int", "uint", "double")):
        raise EvalError("no such overload")
    return _cmp(a, b)


def _sum(items: Sequence[Any]) -> Any:
    if not items:
        return 0
    total = items[0]
    for item in items[1:]:
        total = _add_values(total, item)
    return total


def _add_values(a: Any, b: Any) -> Any:
    ta = type(a)
    if ta is not type(b):
        raise EvalError("no such overload")
    if ta is int:
        return check_int(a + b)
    if ta is UInt:
        return check_uint(a + b)
    if ta is float:
        return a + b
    if isinstance(a, CelQuantity):
        return a.add(b)
    raise EvalError("no such overload")


def _extreme(items: Sequence[Any], *, want: int, name: str) -> Any:
    if not items:
        raise EvalError(f"{name} called on empty list")
    best = items[0]
    for item in items[1:]:
        if _compare_values(item, best) == want:
            best = item
    return best


def _list_index_of(items: Sequence[Any], value: Any) -> int:
    for i, item in enumerate(items):
        if _safe_equal(value, item):
            return i
    return -1


def _list_last_index_of(items: Sequence[Any], value: Any) -> int:
    for i in range(len(items) - 1, -1, -1):
        if _safe_equal(value, items[i]):
            return i
    return -1


LA = list_of(A)
_def("slice", "list_slice", (LA, INT, INT), LA, _slice, member=True)
# As cel-go's ext.Lists: `flatten()` wants a list of lists; with a depth, any list.
_def("flatten", "list_flatten", (list_of(LA),), LA, _flatten, member=True,
     cost=lambda items, depth=1: len(items))
_def("flatten", "list_flatten_int", (list_of(DYN), INT), list_of(DYN), _flatten, member=True,
     cost=lambda items, depth=1: len(items))
_def("distinct", "list_distinct", (LA,), LA, _distinct, member=True,
     cost=lambda items: len(items) * len(items) // 10)
_def("reverse", "list_reverse", (LA,), LA, lambda items: tuple(reversed(items)), member=True)
# cel-go's ext.Lists sorts only these element types (its comparableTypes, in its order).
for _t in (INT, UINT, DOUBLE, BOOL, STRING, BYTES):
    _def("sort", f"list_{_t.name}_sort", (list_of(_t),), list_of(_t), sort_values, member=True,
         cost=lambda items: len(items))
_def("lists.range", "lists_range", (INT,), list_of(INT), _range, cost=lambda n: max(n, 0))
for _t in (INT, UINT, DOUBLE, BOOL, STRING, BYTES):
    _def("isSorted", f"list_{_t.name}_is_sorted_bool", (list_of(_t),), BOOL, _is_sorted,
         member=True)
for _t in (INT, UINT, DOUBLE, QUANTITY):
    _def("sum", f"list_{_t.name}_sum", (list_of(_t),), _t, _sum, member=True)
for _t in (INT, UINT, DOUBLE, BOOL, STRING, BYTES, QUANTITY, SEMVER):
    _def("min", f"list_{_t.name}_min", (list_of(_t),), _t,
         lambda items: _extreme(items, want=-1, name="min"), member=True)
    _def("max", f"list_{_t.name}_max", (list_of(_t),), _t,
         lambda items: _extreme(items, want=1, name="max"), member=True)
_def("indexOf", "list_a_index_of_int", (LA, A), INT, _list_index_of, member=True)
_def("lastIndexOf", "list_a_last_index_of_int", (LA, A), INT, _list_last_index_of, member=True)


def _sets_contains(items: Sequence[Any], sub: Sequence[Any]) -> bool:
    return all(any(_safe_equal(x, y) for y in items) for x in sub)


def _sets_intersects(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return any(any(_safe_equal(x, y) for y in a) for x in b)


_def("sets.contains", "list_sets_contains_list", (LA, LA), BOOL, _sets_contains,
     cost=lambda a, b: len(a) * len(b) // 10)
_def("sets.equivalent", "list_sets_equivalent_list", (LA, LA), BOOL,
     lambda a, b: _sets_contains(a, b) and _sets_contains(b, a),
     cost=lambda a, b: len(a) * len(b) // 5)
_def("sets.intersects", "list_sets_intersects_list", (LA, LA), BOOL, _sets_intersects,
     cost=lambda a, b: len(a) * len(b) // 10)


# ----------------------------------------------------------------------------- regex

def _find(text: str, pattern: str) -> str:
    match = compile_regex(pattern).search(text)
    return match.group(0) if match else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> tuple[str, ...]:
    if limit == 0:
        return ()
    found: list[str] = []
    previous_end = -1
    for match in compile_regex(pattern).finditer(text):
        start, end = match.span()
        if start == end == previous_end:
            continue  # Go's FindAll ignores an empty match abutting the one before
        previous_end = end
        found.append(match.group(0))
        if 0 < limit <= len(found):
            break
    return tuple(found)


_def("find", "string_find_string", (STRING, STRING), STRING, _find, member=True)
_def("findAll", "string_find_all_string", (STRING, STRING), list_of(STRING), _find_all,
     member=True)
_def("findAll", "string_find_all_string_int", (STRING, STRING, INT), list_of(STRING),
     _find_all, member=True)


# ----------------------------------------------------------------------------- quantity

def _quantity(text: str) -> CelQuantity:
    try:
        return cel_quantity(text)
    except QuantityError as exc:
        raise EvalError(str(exc)) from None


def _is_quantity(text: str) -> bool:
    try:
        cel_quantity(text)
    except QuantityError:
        return False
    return True


def _as_integer(q: CelQuantity) -> int:
    value = q.as_int64()
    if value is None:
        raise EvalError("cannot convert value to integer")
    return value


_def("quantity", "string_to_quantity", (STRING,), QUANTITY, _quantity)
_def("isQuantity", "is_quantity_string", (STRING,), BOOL, _is_quantity)
_def("sign", "quantity_sign", (QUANTITY,), INT,
     lambda q: (q.quantity.value > 0) - (q.quantity.value < 0))
_def("isGreaterThan", "quantity_is_greater_than", (QUANTITY, QUANTITY), BOOL,
     lambda a, b: a.compare(b) == 1, member=True)
_def("isLessThan", "quantity_is_less_than", (QUANTITY, QUANTITY), BOOL,
     lambda a, b: a.compare(b) == -1, member=True)
_def("compareTo", "quantity_compare_to", (QUANTITY, QUANTITY), INT,
     lambda a, b: a.compare(b), member=True)
_def("add", "quantity_add", (QUANTITY, QUANTITY), QUANTITY, lambda a, b: a.add(b), member=True)
_def("add", "quantity_add_int", (QUANTITY, INT), QUANTITY,
     lambda a, i: a.add(int_quantity(i)), member=True)
_def("sub", "quantity_sub", (QUANTITY, QUANTITY), QUANTITY,
     lambda a, b: a.add(b, sign=-1), member=True)
_def("sub", "quantity_sub_int", (QUANTITY, INT), QUANTITY,
     lambda a, i: a.add(int_quantity(i), sign=-1), member=True)
_def("isInteger", "quantity_is_integer", (QUANTITY,), BOOL,
     lambda q: q.as_int64() is not None, member=True)
_def("asInteger", "quantity_get_int", (QUANTITY,), INT, _as_integer, member=True)
_def("asApproximateFloat", "quantity_get_float", (QUANTITY,), DOUBLE,
     lambda q: float(q.quantity.value), member=True)


# ----------------------------------------------------------------------------- semver

def _semver(text: str, normalize: bool = False) -> Semver:
    try:
        return parse_semver_tolerant(text) if normalize else parse_semver(text)
    except SemverError as exc:
        raise EvalError(str(exc)) from None


def _is_semver(text: str, normalize: bool = False) -> bool:
    try:
        _semver(text, normalize)
    except EvalError:
        return False
    return True


_def("semver", "string_to_semver", (STRING,), SEMVER, _semver)
_def("semver", "string_bool_to_semver_normalize", (STRING, BOOL), SEMVER, _semver)
_def("isSemver", "is_semver_string", (STRING,), BOOL, _is_semver)
_def("isSemver", "is_semver_string_normalize", (STRING, BOOL), BOOL, _is_semver)
_def("major", "semver_major", (SEMVER,), INT, lambda v: v.major, member=True)
_def("minor", "semver_minor", (SEMVER,), INT, lambda v: v.minor, member=True)
_def("patch", "semver_patch", (SEMVER,), INT, lambda v: v.patch, member=True)
_def("isGreaterThan", "semver_is_greater_than", (SEMVER, SEMVER), BOOL,
     lambda a, b: a.compare(b) == 1, member=True)
_def("isLessThan", "semver_is_less_than", (SEMVER, SEMVER), BOOL,
     lambda a, b: a.compare(b) == -1, member=True)
_def("compareTo", "semver_compare_to", (SEMVER, SEMVER), INT,
     lambda a, b: a.compare(b), member=True)


# ----------------------------------------------------------------------------- IP / CIDR

def _net(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except net.NetError as exc:
            raise EvalError(str(exc)) from None
    return convert


def _net_test(parse: Callable[[str], Any]) -> Callable[[str], bool]:
    def test(text: str) -> bool:
        try:
            parse(text)
        except net.NetError:
            return False
        return True
    return test


_ip = _net(net.parse_ip)
_cidr = _net(net.parse_cidr)
_def("ip", "string_to_ip", (STRING,), IP, _ip)
_def("isIP", "is_ip", (STRING,), BOOL, _net_test(net.parse_ip))
_def("ip.isCanonical", "ip_is_canonical", (STRING,), BOOL, _net(net.is_canonical_ip))
_def("family", "ip_family", (IP,), INT, lambda ip: ip.family, member=True)
_def("isUnspecified", "ip_is_unspecified", (IP,), BOOL, net.IP.is_unspecified, member=True)
_def("isLoopback", "ip_is_loopback", (IP,), BOOL, net.IP.is_loopback, member=True)
_def("isLinkLocalMulticast", "ip_is_link_local_multicast", (IP,), BOOL,
     net.IP.is_link_local_multicast, member=True)
_def("isLinkLocalUnicast", "ip_is_link_local_unicast", (IP,), BOOL,
     net.IP.is_link_local_unicast, member=True)
_def("isGlobalUnicast", "ip_is_global_unicast", (IP,), BOOL, net.IP.is_global_unicast,
     member=True)
_def("cidr", "string_to_cidr", (STRING,), CIDR, _cidr)
_def("isCIDR", "is_cidr", (STRING,), BOOL, _net_test(net.parse_cidr))
_def("containsIP", "cidr_contains_ip_ip", (CIDR, IP), BOOL, net.CIDR.contains_ip, member=True)
_def("containsIP", "cidr_contains_ip_string", (CIDR, STRING), BOOL,
     lambda c, s: c.contains_ip(_ip(s)), member=True)
_def("containsCIDR", "cidr_contains_cidr", (CIDR, CIDR), BOOL, net.CIDR.contains_cidr,
     member=True)
_def("containsCIDR", "cidr_contains_cidr_string", (CIDR, STRING), BOOL,
     lambda c, s: c.contains_cidr(_cidr(s)), member=True)
_def("ip", "cidr_ip", (CIDR,), IP, lambda c: net.IP(c.address), member=True)
_def("masked", "cidr_masked", (CIDR,), CIDR, net.CIDR.masked, member=True)
_def("prefixLength", "cidr_prefix_length", (CIDR,), INT, lambda c: c.prefix_length,
     member=True)


# ----------------------------------------------------------------------------- DRA includes

def _includes(target: Any, value: Any) -> bool:
    """Kubernetes 1.37's `includes`: any element of a list equals the value, and
    anything else (a map too) is compared as a whole; no list length limit."""
    if type(target) in (list, tuple):
        return any(_safe_equal(item, value) for item in target)
    return _safe_equal(target, value)


_def("includes", "dyn_includes_dyn", (DYN, DYN), BOOL, _includes, member=True)


# ----------------------------------------------------------------------------- optionals

def _optional_value(opt: Optional) -> Any:
    if not opt.present:
        raise EvalError("optional.none() dereference")
    return opt.value


def _of_non_zero(value: Any) -> Optional:
    if value is None or value is False or (type(value) in (int, UInt, float) and value == 0) \
            or (type(value) in (str, bytes, list, tuple, dict) and len(value) == 0):
        return OPTIONAL_NONE
    return Optional(value)


OA = optional_of(A)
_def("optional.of", "optional_of", (A,), OA, Optional)
_def("optional.ofNonZeroValue", "optional_of_non_zero_value", (A,), OA, _of_non_zero)
_def("optional.none", "optional_none", (), optional_of(UNBOUND), lambda: OPTIONAL_NONE)
_def("value", "optional_value", (OA,), A, _optional_value, member=True)
_def("hasValue", "optional_has_value", (OA,), BOOL, lambda o: o.present, member=True)
_def("orValue", "optional_or_value", (OA, A), A,
     lambda o, v: o.value if o.present else v, member=True)
_def("or", "optional_or_optional", (OA, OA), OA, lambda a, b: a if a.present else b,
     member=True)


__all__ = ["CONVERSIONS", "FOLDABLE", "FUNCTIONS", "Overload", "compile_regex", "sort_values"]
