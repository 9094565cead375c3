"""Static CEL types for the checker, printed the way cel-go prints them.

A type is a name plus parameters (`list(int)`, `map(string, dyn)`); type
parameters of generic overloads (`A`, `K`, `V`) are flagged `is_param` and
bound during overload resolution. `dyn` is assignable both ways, which is
where runtime dispatch takes over from the checker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class CelType:
    name: str
    params: tuple[CelType, ...] = ()
    is_param: bool = False

    def __str__(self) -> str:
        if self.params:
            return f"{self.name}({', '.join(str(p) for p in self.params)})"
        return self.name


INT: Final = CelType("int")
UINT: Final = CelType("uint")
DOUBLE: Final = CelType("double")
BOOL: Final = CelType("bool")
STRING: Final = CelType("string")
BYTES: Final = CelType("bytes")
NULL: Final = CelType("null_type")
DYN: Final = CelType("dyn")
QUANTITY: Final = CelType("kubernetes.Quantity")
SEMVER: Final = CelType("kubernetes.Semver")
DEVICE: Final = CelType("kubernetes.DRADevice")
IP: Final = CelType("net.IP")
CIDR: Final = CelType("net.CIDR")
ERROR: Final = CelType("*error*")
# The element type of an empty literal and of `optional.none()`: a `dyn` that a
# later argument may still narrow, as cel-go's free type variable is, while a
# real `dyn` (`dyn(x)`, an attribute) stays dyn. Told apart by identity.
UNBOUND: Final = CelType("dyn")
A: Final = CelType("A", is_param=True)
K: Final = CelType("K", is_param=True)
V: Final = CelType("V", is_param=True)


def list_of(elem: CelType) -> CelType:
    return CelType("list", (elem,))


def map_of(key: CelType, value: CelType) -> CelType:
    return CelType("map", (key, value))


def optional_of(elem: CelType) -> CelType:
    return CelType("optional_type", (elem,))


def type_of(t: CelType) -> CelType:
    return CelType("type", (t,))


LIST_DYN: Final = list_of(DYN)
MAP_DYN: Final = map_of(DYN, DYN)
# Identifiers that name types (`type(x) == int`); the runtime value is the bare type.
TYPE_IDENTS: Final = {
    "int": INT, "uint": UINT, "double": DOUBLE, "bool": BOOL, "string": STRING,
    "bytes": BYTES, "null_type": NULL, "dyn": DYN, "list": LIST_DYN, "map": MAP_DYN,
    "type": CelType("type"),
}


def is_dynish(t: CelType) -> bool:
    """True when the runtime value may not match the static type (dyn somewhere inside)."""
    return t.name == "dyn" or t.is_param or any(is_dynish(p) for p in t.params)


# Types a null is assignable to in cel-go (opaque and optional types; not
# primitives, lists or maps).
_NULLABLE: Final = frozenset({"kubernetes.Quantity", "kubernetes.Semver", "net.IP", "net.CIDR",
                              "optional_type", "null_type"})


def unify(param: CelType, arg: CelType, bindings: dict[str, CelType]) -> bool:
    """Is `arg` assignable to `param`, binding type parameters as it goes?"""
    if param.is_param:
        bound = bindings.get(param.name)
        if bound is None:
            bindings[param.name] = arg
            return True
        if bound is UNBOUND:
            bindings[param.name] = arg
            return True
        if not unify(bound, arg, bindings):
            return False
        # cel-go widens a bound parameter to the more general of the two types:
        # optional.of('a').or(<optional dyn>) is an optional(dyn).
        bindings[param.name] = _more_general(bound, arg)
        return True
    if param.name == "dyn" or arg.name == "dyn":
        return True
    if (arg.name == "null_type" and param.name in _NULLABLE) or (
            param.name == "null_type" and arg.name in _NULLABLE):
        return True
    if param.name != arg.name or len(param.params) != len(arg.params):
        return False
    return all(unify(p, a, bindings) for p, a in zip(param.params, arg.params, strict=True))


def substitute(t: CelType, bindings: dict[str, CelType]) -> CelType:
    if t.is_param:
        bound = bindings.get(t.name)
        # An unbound parameter stays free (cel-go gives the result a fresh type variable).
        return substitute(bound, bindings) if bound is not None else UNBOUND
    if not t.params:
        return t
    return CelType(t.name, tuple(substitute(p, bindings) for p in t.params))


def join(types: list[CelType]) -> CelType | None:
    """The common type of list elements / conditional branches; None if they disagree."""
    result: CelType | None = None
    for t in types:
        if result is None:
            result = t
            continue
        if not unify(result, t, {}) and not unify(t, result, {}):
            return None
        result = _more_general(result, t)
    return result


def _more_general(a: CelType, b: CelType) -> CelType:
    """cel-go's join: a real dyn wins (`c ? dyn(x) : 'a'` is dyn), a free one yields."""
    if a is UNBOUND:
        return b
    if b is UNBOUND:
        return a
    if a.name == "dyn" or b.name == "dyn":
        return DYN
    if not a.params:
        return b if a.name == "null_type" else a
    if len(a.params) != len(b.params):  # optional(int) joined with null: the optional
        return a if b.name == "null_type" else b
    return CelType(a.name, tuple(_more_general(x, y)
                                 for x, y in zip(a.params, b.params, strict=True)))
