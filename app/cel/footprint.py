"""What a selector can read of a device, so results can be shared between devices.

A DRA selector sees a device only through `device.driver`,
`device.allowMultipleAllocations`, `device.attributes[domain].id` and
`device.capacity[domain].id`. When every use of `device` in an expression is
one of those accesses with constant names, the expression's result is a
function of those few values: two devices that agree on them get the same
answer. Identical nodes publish thousands of devices that differ only in
identity attributes (uuid, PCI address) that class and request selectors
rarely read, so keying results by this projection turns one evaluation per
device into one per distinct projection.

Anything else (`device` passed to a macro or bound to a variable, a domain
iterated, a computed key) makes the footprint unknown (None), and callers
evaluate per device. Reading a whole domain (`"x" in device.attributes["d"]`)
keys by every attribute of that domain. A device whose attributes cannot be
converted fails every expression, whichever it reads, so the values that
conversion can reject are part of every key.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Final, TypeVar

from app.cel import parser as ast
from app.model import Device, Quantity

_V = TypeVar("_V")

_TABLES: Final = ("attributes", "capacity")
_SCALARS: Final = ("driver", "allowMultipleAllocations")
# attribute kinds whose conversion to a CEL value can fail (see app.cel.device)
_CONVERTED: Final = frozenset({"", "version", "versions"})


@dataclass(slots=True, frozen=True)
class Read:
    """One constant-name access: `name` is qualified (`domain/id`), or the bare
    domain when `whole_domain` (the expression reads the domain's map itself)."""

    table: str
    name: str
    whole_domain: bool = False


def footprint(tree: ast.Node) -> tuple[Read, ...] | None:
    """Every device value `tree` can read, or None when that is not known statically."""
    reads: dict[Read, None] = {}
    if not _collect(tree, (), reads):
        return None
    return tuple(reads)


def _children(node: ast.Node) -> list[ast.Node]:
    if isinstance(node, ast.Select):
        return [node.operand]
    if isinstance(node, ast.Index):
        return [node.operand, node.index]
    if isinstance(node, ast.Call):
        return [*node.args, *([node.target] if node.target is not None else [])]
    if isinstance(node, ast.ListLit):
        return list(node.elements)
    if isinstance(node, ast.MapLit):
        return [n for key, value, _ in node.entries for n in (key, value)]
    return []


def _collect(node: ast.Node, parents: tuple[ast.Node, ...], reads: dict[Read, None]) -> bool:
    if isinstance(node, ast.Ident) and node.name == "device":
        read = _access(node, parents[::-1])
        if read is None:
            return False
        if read.table:
            reads[read] = None
        return True
    inner = (*parents, node)
    return all(_collect(child, inner, reads) for child in _children(node))


_SCALAR: Final = Read(table="", name="")


def _access(device: ast.Node, up: Sequence[ast.Node]) -> Read | None:
    """The access that a `device` identifier starts (`up`: its parents, innermost first)."""
    field = _constant_key(up[0], operand=device) if up else None
    if field in _SCALARS and isinstance(up[0], ast.Select):
        return _SCALAR
    if field not in _TABLES or not isinstance(up[0], ast.Select) or len(up) < 2:
        return None
    domain = _constant_key(up[1], operand=up[0])
    if domain is None:
        return None
    ident = _constant_key(up[2], operand=up[1]) if len(up) >= 3 else None
    if ident is None:
        return Read(table=field, name=domain, whole_domain=True)
    return Read(table=field, name=f"{domain}/{ident}")


def _constant_key(node: ast.Node, *, operand: ast.Node) -> str | None:
    """`x.name` or `x["name"]` (optional forms too) applied to `operand`, else None."""
    if isinstance(node, ast.Select) and node.operand is operand:
        return node.field
    if (isinstance(node, ast.Index) and node.operand is operand
            and isinstance(node.index, ast.Literal) and isinstance(node.index.value, str)):
        return node.index.value
    return None


def projection(reads: tuple[Read, ...], device: Device) -> Hashable:
    """The values of `device` that an expression with footprint `reads` can see."""
    attributes, capacity = device.attributes, device.capacity
    values: list[Hashable] = [device.driver, device.allow_multiple_allocations]
    for read in reads:
        if read.table == "attributes":
            if read.whole_domain:
                values.append(_domain(attributes, read.name))
            else:
                values.append(attributes.get(read.name))
        elif read.whole_domain:
            values.append(tuple((name, _text(c.value))
                                for name, c in _domain(capacity, read.name)))
        else:
            cap = capacity.get(read.name)
            values.append(None if cap is None else _text(cap.value))
    values.append(tuple(v for v in attributes.values() if v.kind in _CONVERTED))
    return tuple(values)


def _domain(table: Mapping[str, _V], domain: str) -> tuple[tuple[str, _V], ...]:
    prefix = f"{domain}/"
    return tuple(sorted(((name, value) for name, value in table.items()
                         if name.startswith(prefix)), key=itemgetter(0)))


def _text(quantity: Quantity) -> str:
    """The text CEL's quantity is built from (see `app.cel.quantity.from_model`)."""
    return quantity.text if quantity.text is not None else str(quantity)
