"""Random DRA selector expressions and devices for the CEL differential run.

`expression(rng)` grows a typed tree: every node is produced for a wanted
static type (bool, int, quantity, list(string), ...) from the constructs that
yield that type in Kubernetes' StoredExpressions environment: literals, the
`device` variable, operators, macros, the quantity, semver, strings, lists,
sets, regex and IP/CIDR libraries, optionals and `cel.bind`. A small share of
nodes is deliberately wrong (an argument of another type, an undeclared name,
a member call on the wrong kind, a syntax slip, a `dyn` that hides a type
error until runtime), and a share of top-level expressions are nests near the
cost limit or arithmetic at the int64 edges, so all five outcomes (compile
error, runtime error, cost error, true, false) occur.

The tree (`Expr`) keeps its children, so the differential run can shrink a
mismatch to a minimal expression by replacing nodes with descendants or
literals of the same type. `device(rng)` draws a device whose attribute
names line up with the names expressions ask for, mostly with the type they
expect, sometimes with another type or missing.
Everything is a pure function of the `random.Random` passed in (a seed gives
the same expressions on every machine).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

INT_MAX: Final = 2**63 - 1
INT_MIN: Final = -(2**63)
UINT_MAX: Final = 2**64 - 1
# The share of top-level expressions that are comprehension nests near the cost
# limit. Each costs both engines about half a second, so at 3 % they take about
# two thirds of a run; a long run may draw fewer (`--costly`), CI keeps 3 %.
COSTLY_SHARE: Final = 0.03

DRIVERS: Final = ("dra.example.com", "gpu.example.com")
# `gpu` and `net` have no dot, so `device.attributes.gpu` is a valid selection.
DOMAINS: Final = ("dra.example.com", "gpu.example.com", "other.example.com", "gpu", "net")
# Attribute names by the type the expressions expect of them.
ATTRIBUTES: Final = {
    "int": ("index", "cores"),
    "bool": ("healthy", "rdma"),
    "string": ("model", "pcieRoot", "addr"),
    "version": ("driverVersion", "fw"),
    "ints": ("ids",),
    "bools": ("flags",),
    "strings": ("tags",),
    "versions": ("compat",),
}
CAPACITIES: Final = ("memory", "slots", "bw")

STRINGS: Final = (
    "", "a", "abc", "ABC", "a-b_c", "héllo", "  pad  ", "1.2.3", "1.2.3-rc.1+b5", "v1.0", "01.2.3",
    "1Gi", "100m", "1.5", "1e3", "-1", "0", "10.0.0.1", "::1", "fe80::1", "::ffff:1.2.3.4",
    "192.168.0.0/16", "10.0.0.1/8", "2001:db8::/32", "dra.example.com", "%d", "%s-%s", "true",
    "x.y.z", "ab,cd", "aaa", "pci0000:15", "\u00e9\u00e8", "tab\there", "127.0.0.1", "0.0.0.0",
)
QUANTITIES: Final = (
    "0", "1", "4", "1500m", "1.5", "80Gi", "1Gi", "1024Mi", "100M", "1e3", "2k", "1Ki", "5Ei",
    "9223372036854775807", "-3", "0.001", "1n", "100u", "12.34", "1E", "bad", "1.5Gi",
)
SEMVERS: Final = ("1.0.0", "1.2.3", "2.0.0-alpha", "1.2.3-rc.1+build.5", "0.0.1", "10.20.30",
                  "1.2", "v1.2.3", "01.2.3", "1.2.3.4", "bad")
IPS: Final = ("10.0.0.1", "192.168.1.255", "::1", "fe80::1", "127.0.0.1", "0.0.0.0", "::",
              "ff02::1", "224.0.0.1", "::ffff:1.2.3.4", "2001:db8::1", "1.2.3", "10.0.0.01",
              "169.254.1.1", "8.8.8.8")
CIDRS: Final = ("10.0.0.0/8", "192.168.0.0/16", "10.0.0.1/8", "2001:db8::/32", "::/0",
                "0.0.0.0/0", "fe80::/10", "10.0.0.0/33", "1.2.3.4/32", "::1/128", "bad/8")
REGEXES: Final = ("^a", "b+", "[0-9]+", "^[a-z]+$", "\\\\d", "(?i)abc", "a{2,3}", ".*", "(",
                  "x*?", "\\\\.", "[[:alpha:]]+", "\\\\pL", "\\\\s", "é", "^$", "a|b", "[")
INTS: Final = (0, 1, -1, 2, 3, 7, 10, 42, 100, 255, 1000, -5, INT_MAX, INT_MIN, INT_MAX - 1,
               4611686018427387904, 3037000500)

Scope = dict[str, str]


@dataclass(slots=True, frozen=True)
class Expr:
    """An expression node: `parts` interleaves text with the children."""

    type: str
    parts: tuple[str | Expr, ...]

    def render(self) -> str:
        out: list[str] = []
        self._render(out)
        return "".join(out)

    def _render(self, out: list[str]) -> None:
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
            else:
                part._render(out)

    def children(self) -> Iterator[Expr]:
        return (p for p in self.parts if isinstance(p, Expr))

    def descendants(self) -> Iterator[Expr]:
        for child in self.children():
            yield child
            yield from child.descendants()

    def size(self) -> int:
        return 1 + sum(c.size() for c in self.children())


def node(type_: str, *parts: str | Expr) -> Expr:
    return Expr(type_, parts)


def leaf(type_: str, text: str) -> Expr:
    return Expr(type_, (text,))


# ----------------------------------------------------------------------------- literals


def string_literal(rng: random.Random, value: str) -> str:
    quote = rng.choice(("'", '"'))
    escaped = []
    for ch in value:
        if ch == "\\":
            escaped.append("\\\\")
        elif ch == quote:
            escaped.append("\\" + ch)
        elif ch == "\t":
            escaped.append("\\t")
        elif ord(ch) > 127 and rng.random() < 0.5:
            escaped.append(f"\\u{ord(ch):04x}")
        else:
            escaped.append(ch)
    return quote + "".join(escaped) + quote


def int_literal(rng: random.Random) -> str:
    value = rng.choice(INTS)
    if value == INT_MIN:
        return "-9223372036854775808"
    if 0 <= value < 4096 and rng.random() < 0.1:
        return hex(value)
    return str(value)


_LITERALS: Final[dict[str, Callable[[random.Random], str]]] = {
    "bool": lambda r: r.choice(("true", "false")),
    "int": int_literal,
    "uint": lambda r: r.choice(("0u", "1u", "7u", "42u", "18446744073709551615u", "0x10u",
                                "9223372036854775808u")),
    "double": lambda r: r.choice(("0.0", "1.5", "-2.5", "1e10", "1e308", "-0.0", "3.0", "0.1",
                                  "1e-300", "2.5e3")),
    "string": lambda r: string_literal(r, r.choice(STRINGS)),
    "bytes": lambda r: r.choice(("b'abc'", "b''", "b'\\x00\\xff'", "b\"é\"", "b'a'")),
    "null": lambda r: "null",
}


# ----------------------------------------------------------------------------- grammar

ELEMENTS: Final = ("int", "string", "bool", "double", "uint")
LISTS: Final = tuple(f"list({e})" for e in ELEMENTS)
SCALARS: Final = ("bool", "int", "uint", "double", "string", "bytes")
TYPES: Final = (*SCALARS, *LISTS, "list(list(int))", "map(string,int)", "map(int,string)",
                "quantity", "semver", "ip", "cidr", "optional(int)", "optional(string)", "dyn",
                "null")


def elem_of(type_: str) -> str:
    return type_[5:-1] if type_.startswith("list(") else "dyn"


class Gen:
    """One expression's generator; `rng` is its only source of choice."""

    def __init__(self, rng: random.Random, *, mistakes: float = 0.03,
                 costly: float = COSTLY_SHARE) -> None:
        self.rng = rng
        self.mistakes = mistakes
        self.costly_share = costly
        self.vars = 0

    # -- entry points

    def top(self) -> Expr:
        roll = self.rng.random()
        if roll < self.costly_share:
            return self.costly()
        if 0.03 <= roll < 0.06:
            return self.overflow()
        if 0.06 <= roll < 0.12:
            return self.gen(self.rng.choice(TYPES), 3, {})
        depth = self.rng.choice((2, 3, 3, 4))
        return self.rng.choice(self._producers("bool"))(depth - 1, {})

    def gen(self, type_: str, depth: int, scope: Scope) -> Expr:
        if self.rng.random() < self.mistakes:
            return self.mistake(type_, depth, scope)
        if depth <= 0 or self.rng.random() < 0.2:
            return self.atom(type_, scope)
        producers = self._producers(type_)
        return self.rng.choice(producers)(depth - 1, scope)

    # -- leaves

    def atom(self, type_: str, scope: Scope) -> Expr:
        bound = [name for name, t in scope.items() if t == type_ or t == "dyn"]
        if bound and self.rng.random() < 0.5:
            return leaf(scope[name := self.rng.choice(bound)], name)
        if type_ in _LITERALS:
            return leaf(type_, _LITERALS[type_](self.rng))
        r = self.rng
        match type_:
            case "quantity":
                if r.random() < 0.5:
                    return node("quantity", "device.capacity[", self.domain(), "].",
                                r.choice(CAPACITIES))
                return node("quantity", "quantity(", self.lit_str(QUANTITIES), ")")
            case "semver":
                return node("semver", "semver(", self.lit_str(SEMVERS), ")")
            case "ip":
                return node("ip", "ip(", self.lit_str(IPS), ")")
            case "cidr":
                return node("cidr", "cidr(", self.lit_str(CIDRS), ")")
            case "dyn":
                return self.attribute(r.choice(tuple(ATTRIBUTES)))
            case "optional(int)" | "optional(string)":
                inner = type_[9:-1]
                return r.choice((node(type_, "optional.of(", self.atom(inner, scope), ")"),
                                 leaf(type_, "optional.none()")))
            case "map(string,int)":
                return node(type_, "{", self.lit_str(STRINGS), ": ", self.atom("int", scope), "}")
            case "map(int,string)":
                return node(type_, "{", self.atom("int", scope), ": ", self.atom("string", scope),
                            "}")
        elem = elem_of(type_)
        items: list[str | Expr] = []
        for i in range(r.randrange(4)):
            items += [", "] if i else []
            items.append(self.atom(elem, scope))
        return node(type_, "[", *items, "]")

    def lit_str(self, pool: tuple[str, ...]) -> Expr:
        return leaf("string", string_literal(self.rng, self.rng.choice(pool)))

    def domain(self) -> Expr:
        r = self.rng
        if r.random() < 0.15:
            return leaf("string", "device.driver")
        return leaf("string", string_literal(r, r.choice(DOMAINS)))

    def attribute(self, kind: str) -> Expr:
        """`device.attributes[...]` read of an attribute expected to be `kind` (a dyn)."""
        r = self.rng
        name = r.choice(ATTRIBUTES[kind])
        domain = self.domain()
        text = domain.render()
        roll = r.random()
        if roll < 0.1 and text.strip("'\"") in ("gpu", "net"):
            return leaf("dyn", f"device.attributes.{text.strip(chr(39) + chr(34))}.{name}")
        if roll < 0.2:
            return node("dyn", "device.attributes[", domain, "][", self.lit_str((name,)), "]")
        return node("dyn", "device.attributes[", domain, "].", name)

    # -- producers per type

    def _producers(self, type_: str) -> list[Callable[[int, Scope], Expr]]:
        table = {
            "bool": self.p_bool, "int": self.p_int, "uint": self.p_uint,
            "double": self.p_double, "string": self.p_string, "bytes": self.p_bytes,
            "quantity": self.p_quantity, "semver": self.p_semver, "ip": self.p_ip,
            "cidr": self.p_cidr, "dyn": self.p_dyn, "null": self.p_null,
        }
        if type_ in table:
            return table[type_]()
        if type_.startswith("list("):
            return self.p_list(type_)
        if type_.startswith("map("):
            return self.p_map(type_)
        return self.p_optional(type_)

    def g(self, type_: str, depth: int, scope: Scope) -> Expr:
        return self.gen(type_, depth, scope)

    def macro(self, result: str, depth: int, scope: Scope, *, kind: str,
              body: str | None = None) -> Expr:
        """`<list or map>.<kind>(x, <body>)` with a fresh variable in scope."""
        r = self.rng
        source_type = r.choice((*LISTS, "list(int)", "map(string,int)", "dyn"))
        source = self.g(source_type, depth, scope)
        var = self.fresh()
        var_type = "string" if source_type == "map(string,int)" else elem_of(source_type)
        inner = {**scope, var: var_type}
        body_type = body or r.choice(SCALARS)
        if kind == "map" and r.random() < 0.3:
            return node(f"list({body_type})" if body_type != "dyn" else "list(dyn)", source,
                        f".map({var}, ", self.g("bool", depth, inner), ", ",
                        self.g(body_type, depth, inner), ")")
        if kind == "map":
            return node(f"list({body_type})", source, f".map({var}, ",
                        self.g(body_type, depth, inner), ")")
        two = r.random() < 0.15 and kind in ("all", "exists", "existsOne")
        if two:
            index = self.fresh()
            inner2 = {**inner, index: "int" if source_type.startswith("list") else var_type}
            inner2[var] = elem_of(source_type) if source_type.startswith("list") else "int"
            return node(result, source, f".{kind}({index}, {var}, ",
                        self.g("bool", depth, inner2), ")")
        return node(result, source, f".{kind}({var}, ", self.g(body_type, depth, inner), ")")

    def fresh(self) -> str:
        self.vars += 1
        return f"x{self.vars}"

    def p_bool(self) -> list[Callable[[int, Scope], Expr]]:
        g, r = self.g, self.rng

        def compare(d: int, s: Scope) -> Expr:
            t = r.choice(("int", "int", "double", "string", "uint", "bool", "bytes", "list(int)",
                          "map(string,int)", "dyn", "null", "quantity", "semver"))
            ops = ("==", "!=") if t in ("bool", "list(int)", "map(string,int)", "null",
                                        "quantity", "semver") else \
                ("==", "!=", "<", "<=", ">", ">=")
            other = t if r.random() < 0.85 else r.choice(("int", "double", "uint", "dyn"))
            return node("bool", g(t, d, s), f" {r.choice(ops)} ", g(other, d, s))

        def member_in(d: int, s: Scope) -> Expr:
            t = r.choice(("list(int)", "list(string)", "map(string,int)", "dyn", "list(double)"))
            elem = "string" if t.startswith("map") else elem_of(t)
            if r.random() < 0.15:
                elem = r.choice(("int", "double", "uint", "string"))
            return node("bool", g(elem, d, s), " in ", g(t, d, s))

        def has_(d: int, s: Scope) -> Expr:
            kind = r.choice(tuple(ATTRIBUTES))
            name = r.choice(ATTRIBUTES[kind])
            choices = [node("bool", "has(device.attributes[", self.domain(), "].", name, ")"),
                       node("bool", self.lit_str((name, "x")), " in device.attributes[",
                            self.domain(), "]"),
                       leaf("bool", f"has(device.attributes.{r.choice(('gpu', 'net'))})"),
                       node("bool", "has(device.capacity[", self.domain(), "].",
                            r.choice(CAPACITIES), ")"),
                       node("bool", self.domain(), " in device.attributes"),
                       leaf("bool", "has(device.driver)")]
            return r.choice(choices)

        def string_pred(d: int, s: Scope) -> Expr:
            fn = r.choice(("startsWith", "endsWith", "contains", "matches"))
            arg = self.lit_str(REGEXES) if fn == "matches" and r.random() < 0.7 else \
                g("string", d, s)
            if fn == "matches" and r.random() < 0.3:
                return node("bool", "matches(", g("string", d, s), ", ", arg, ")")
            return node("bool", g("string", d, s), f".{fn}(", arg, ")")

        def library_pred(d: int, s: Scope) -> Expr:
            choices: list[Callable[[], Expr]] = [
                lambda: node("bool", "isQuantity(", self.str_from(QUANTITIES, d, s), ")"),
                lambda: node("bool", "isSemver(", self.str_from(SEMVERS, d, s),
                             r.choice(("", ", true", ", false")), ")"),
                lambda: node("bool", "isIP(", self.str_from(IPS, d, s), ")"),
                lambda: node("bool", "isCIDR(", self.str_from(CIDRS, d, s), ")"),
                lambda: node("bool", "ip.isCanonical(", self.str_from(IPS, d, s), ")"),
                lambda: node("bool", g("ip", d, s), "." + r.choice((
                    "isUnspecified", "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast",
                    "isGlobalUnicast")) + "()"),
                lambda: node("bool", g("cidr", d, s), ".containsIP(",
                             r.choice((g("ip", d, s), self.str_from(IPS, d, s))), ")"),
                lambda: node("bool", g("cidr", d, s), ".containsCIDR(",
                             r.choice((g("cidr", d, s), self.str_from(CIDRS, d, s))), ")"),
                lambda: node("bool", g("quantity", d, s), "." + r.choice((
                    "isLessThan", "isGreaterThan")) + "(", g("quantity", d, s), ")"),
                lambda: node("bool", g("quantity", d, s), ".isInteger()"),
                lambda: node("bool", g("semver", d, s), "." + r.choice((
                    "isLessThan", "isGreaterThan")) + "(", g("semver", d, s), ")"),
                lambda: node("bool", g(r.choice(LISTS), d, s), ".isSorted()"),
                lambda: node("bool", "sets." + r.choice(("contains", "equivalent", "intersects"))
                             + "(", g(t := r.choice(LISTS), d, s), ", ",
                             g(t if r.random() < 0.85 else r.choice(LISTS), d, s), ")"),
                lambda: node("bool", g(t := r.choice((*LISTS, "dyn")), d, s), ".includes(",
                             g(elem_of(t), d, s), ")"),
                lambda: node("bool", g(r.choice(("optional(int)", "optional(string)")), d, s),
                             ".hasValue()"),
                lambda: leaf("bool", "device.allowMultipleAllocations"),
            ]
            return r.choice(choices)()

        return [
            compare, compare, compare, member_in, has_, has_, string_pred, library_pred,
            library_pred, library_pred,
            lambda d, s: node("bool", "!", g("bool", d, s)),
            lambda d, s: node("bool", g("bool", d, s), r.choice((" && ", " || ")),
                              g("bool", d, s)),
            lambda d, s: node("bool", g("bool", d, s), r.choice((" && ", " || ")),
                              g("bool", d, s)),
            lambda d, s: node("bool", "(", g("bool", d, s), ")"),
            lambda d, s: self.ternary("bool", d, s),
            lambda d, s: self.macro("bool", d, s, kind=r.choice(
                ("all", "exists", "exists_one", "existsOne")), body="bool"),
            lambda d, s: self.bind("bool", d, s),
            lambda d, s: self.attribute("bool"),
            lambda d, s: node("bool", self.attribute(r.choice(("bool", "int", "string"))),
                              r.choice((" == ", " != ")), g(r.choice(("bool", "int", "string")),
                                                            d, s)),
            lambda d, s: node("bool", g("optional(string)", d, s), ".orValue(",
                              g("string", d, s), ") == ", g("string", d, s)),
            lambda d, s: node("bool", "device.attributes[", self.domain(), "].?",
                              r.choice(ATTRIBUTES["bool"]), ".orValue(", g("bool", d, s), ")"),
            lambda d, s: node("bool", "bool(", g(r.choice(("string", "bool", "dyn")), d, s), ")"),
        ]

    def str_from(self, pool: tuple[str, ...], depth: int, scope: Scope) -> Expr:
        return self.lit_str(pool) if self.rng.random() < 0.7 else self.g("string", depth, scope)

    def ternary(self, type_: str, depth: int, scope: Scope) -> Expr:
        other = type_ if self.rng.random() < 0.9 else self.rng.choice(TYPES)
        return node(type_, self.g("bool", depth, scope), " ? ", self.g(type_, depth, scope),
                    " : ", self.g(other, depth, scope))

    def bind(self, type_: str, depth: int, scope: Scope) -> Expr:
        var = self.fresh()
        bound = self.rng.choice(TYPES)
        value = self.g(bound, depth, scope)
        if self.rng.random() < 0.3:
            bound, value = "dyn", node("dyn", "device.attributes[", self.domain(), "]")
            kind = self.rng.choice(tuple(ATTRIBUTES))
            body = node(type_, var, ".", self.rng.choice(ATTRIBUTES[kind]))
            return node(type_, f"cel.bind({var}, ", value, ", ", body, ")")
        return node(type_, f"cel.bind({var}, ", value, ", ",
                    self.g(type_, depth, {**scope, var: bound}), ")")

    def arith(self, type_: str, ops: tuple[str, ...]) -> Callable[[int, Scope], Expr]:
        def make(d: int, s: Scope) -> Expr:
            return node(type_, self.g(type_, d, s), f" {self.rng.choice(ops)} ",
                        self.g(type_, d, s))
        return make

    def p_int(self) -> list[Callable[[int, Scope], Expr]]:
        g, r = self.g, self.rng
        return [
            self.arith("int", ("+", "-", "*", "/", "%")), self.arith("int", ("+", "-", "*")),
            lambda d, s: node("int", "-", g("int", d, s)),
            lambda d, s: node("int", "size(", g(r.choice(("string", "bytes", "list(int)",
                                                         "map(string,int)", "dyn")), d, s), ")"),
            lambda d, s: node("int", g(r.choice(("string", "list(string)")), d, s), ".size()"),
            lambda d, s: node("int", g("string", d, s), "." + r.choice(("indexOf",
                              "lastIndexOf")) + "(", g("string", d, s),
                              r.choice(("", ", 1", ", -1", ", 10")), ")"),
            lambda d, s: node("int", g(t := r.choice(LISTS), d, s), "." + r.choice((
                "indexOf", "lastIndexOf")) + "(", g(elem_of(t), d, s), ")"),
            lambda d, s: node("int", "int(", g(r.choice(("double", "uint", "string", "int",
                                                        "dyn")), d, s), ")"),
            lambda d, s: node("int", g("quantity", d, s), r.choice((".asInteger()", ".sign()"))),
            lambda d, s: node("int", g("quantity", d, s), ".compareTo(", g("quantity", d, s), ")"),
            lambda d, s: node("int", g("semver", d, s), r.choice((".major()", ".minor()",
                                                                  ".patch()"))),
            lambda d, s: node("int", g("semver", d, s), ".compareTo(", g("semver", d, s), ")"),
            lambda d, s: node("int", g("list(int)", d, s), r.choice((".sum()", ".min()",
                                                                     ".max()"))),
            lambda d, s: node("int", g("list(int)", d, s), "[", g("int", d, s), "]"),
            lambda d, s: node("int", g("map(string,int)", d, s), "[", g("string", d, s), "]"),
            lambda d, s: node("int", g("optional(int)", d, s), ".orValue(", g("int", d, s), ")"),
            lambda d, s: node("int", g(r.choice(("ip", "cidr")), d, s), ".family()"),
            lambda d, s: node("int", g("cidr", d, s), ".prefixLength()"),
            lambda d, s: self.ternary("int", d, s),
            lambda d, s: self.bind("int", d, s),
            lambda d, s: self.attribute("int"),
            lambda d, s: node("int", self.attribute("int"), f" {r.choice(('+', '*', '-'))} ",
                              g("int", d, s)),
        ]

    def p_uint(self) -> list[Callable[[int, Scope], Expr]]:
        g = self.g
        return [
            self.arith("uint", ("+", "-", "*", "/", "%")),
            lambda d, s: node("uint", "uint(", g(self.rng.choice(("int", "double", "string")),
                                                 d, s), ")"),
            lambda d, s: self.ternary("uint", d, s),
        ]

    def p_double(self) -> list[Callable[[int, Scope], Expr]]:
        g, r = self.g, self.rng
        return [
            self.arith("double", ("+", "-", "*", "/")),
            lambda d, s: node("double", "-", g("double", d, s)),
            lambda d, s: node("double", "double(", g(r.choice(("int", "uint", "string")), d, s),
                              ")"),
            lambda d, s: node("double", g("quantity", d, s), ".asApproximateFloat()"),
            lambda d, s: node("double", g("list(double)", d, s), r.choice((".sum()", ".max()"))),
            lambda d, s: self.ternary("double", d, s),
        ]

    def p_string(self) -> list[Callable[[int, Scope], Expr]]:
        g, r = self.g, self.rng
        return [
            lambda d, s: node("string", g("string", d, s), " + ", g("string", d, s)),
            lambda d, s: leaf("string", "device.driver"),
            lambda d, s: self.attribute("string"),
            lambda d, s: node("string", g("string", d, s), ".charAt(", g("int", d, s), ")"),
            lambda d, s: node("string", g("string", d, s), ".substring(", g("int", d, s),
                              r.choice(("", ", 3", ", 1")), ")"),
            lambda d, s: node("string", g("string", d, s), r.choice((
                ".lowerAscii()", ".upperAscii()", ".trim()"))),
            lambda d, s: node("string", g("string", d, s), ".replace(", g("string", d, s), ", ",
                              g("string", d, s), r.choice(("", ", 1", ", -1", ", 0")), ")"),
            lambda d, s: node("string", g("list(string)", d, s), ".join(",
                              r.choice(("", "', '", "'-'")), ")"),
            lambda d, s: node("string", "string(", g(r.choice((
                "int", "uint", "double", "bool", "bytes", "string", "ip", "cidr", "dyn")), d, s),
                ")"),
            lambda d, s: node("string", "strings.quote(", g("string", d, s), ")"),
            lambda d, s: node("string", self.lit_str(("%s", "%d", "%s-%d", "%.2f", "%x", "%o",
                                                      "%b", "%e", "%%", "%s %s", "%q")),
                              ".format([", g(r.choice(SCALARS), d, s), "])"),
            lambda d, s: node("string", g("string", d, s), ".find(", self.lit_str(REGEXES), ")"),
            lambda d, s: node("string", g("list(string)", d, s), "[", g("int", d, s), "]"),
            lambda d, s: node("string", g("map(int,string)", d, s), "[", g("int", d, s), "]"),
            lambda d, s: node("string", g("optional(string)", d, s), ".orValue(",
                              g("string", d, s), ")"),
            lambda d, s: node("string", g("string", d, s), ".reverse()"),
            lambda d, s: self.ternary("string", d, s),
            lambda d, s: self.bind("string", d, s),
        ]

    def p_bytes(self) -> list[Callable[[int, Scope], Expr]]:
        g = self.g
        return [
            lambda d, s: node("bytes", "bytes(", g("string", d, s), ")"),
            lambda d, s: node("bytes", g("bytes", d, s), " + ", g("bytes", d, s)),
        ]

    def p_quantity(self) -> list[Callable[[int, Scope], Expr]]:
        g, r = self.g, self.rng
        return [
            lambda d, s: node("quantity", "quantity(", self.str_from(QUANTITIES, d, s), ")"),
            lambda d, s: node("quantity", g("quantity", d, s), r.choice((".add(", ".sub(")),
                              g(r.choice(("quantity", "int")), d, s), ")"),
            lambda d, s: node("quantity", "device.capacity[", self.domain(), "].",
                              r.choice(CAPACITIES)),
            lambda d, s: node("quantity", "device.capacity[", self.domain(), "][",
                              self.lit_str(CAPACITIES), "]"),
            lambda d, s: self.ternary("quantity", d, s),
        ]

    def p_semver(self) -> list[Callable[[int, Scope], Expr]]:
        r = self.rng
        return [
            lambda d, s: node("semver", "semver(", self.str_from(SEMVERS, d, s),
                              r.choice(("", ", true", ", false")), ")"),
            lambda d, s: self.attribute("version"),
        ]

    def p_ip(self) -> list[Callable[[int, Scope], Expr]]:
        return [
            lambda d, s: node("ip", "ip(", self.str_from(IPS, d, s), ")"),
            lambda d, s: node("ip", self.g("cidr", d, s), ".ip()"),
        ]

    def p_cidr(self) -> list[Callable[[int, Scope], Expr]]:
        return [
            lambda d, s: node("cidr", "cidr(", self.str_from(CIDRS, d, s), ")"),
            lambda d, s: node("cidr", self.g("cidr", d, s), ".masked()"),
        ]

    def p_dyn(self) -> list[Callable[[int, Scope], Expr]]:
        r = self.rng
        return [
            lambda d, s: self.attribute(r.choice(tuple(ATTRIBUTES))),
            lambda d, s: node("dyn", "dyn(", self.g(r.choice(TYPES), d, s), ")"),
            lambda d, s: node("dyn", "device.attributes[", self.domain(), "]"),
            lambda d, s: node("dyn", "device.attributes[", self.domain(), "].?",
                              r.choice(ATTRIBUTES[r.choice(tuple(ATTRIBUTES))]), ".orValue(",
                              self.g(r.choice(SCALARS), d, s), ")"),
        ]

    def p_null(self) -> list[Callable[[int, Scope], Expr]]:
        return [lambda d, s: leaf("null", "null")]

    def p_list(self, type_: str) -> list[Callable[[int, Scope], Expr]]:
        g, r = self.g, self.rng
        elem = elem_of(type_)

        def literal(d: int, s: Scope) -> Expr:
            items: list[str | Expr] = []
            for i in range(r.randrange(5)):
                items += [", "] if i else []
                if r.random() < 0.05:
                    items.append(node(f"optional({elem})", "?", g(f"optional({elem})", d, s)))
                else:
                    items.append(g(elem if r.random() < 0.95 else r.choice(SCALARS), d, s))
            return node(type_, "[", *items, "]")

        producers: list[Callable[[int, Scope], Expr]] = [
            literal, literal,
            lambda d, s: node(type_, g(type_, d, s), " + ", g(type_, d, s)),
            lambda d, s: node(type_, g(type_, d, s), "." + r.choice((
                "sort()", "distinct()", "reverse()")) if elem != "list(int)" else ".reverse()"),
            lambda d, s: node(type_, g(type_, d, s), ".slice(", g("int", d, s), ", ",
                              g("int", d, s), ")"),
            lambda d, s: node(type_, g(f"list({type_})", d, s) if d > 0 and
                              type_ == "list(int)" else g("list(list(int))", d, s), ".flatten()")
            if type_ == "list(int)" else node(type_, "[", g(elem, d, s), "]"),
            lambda d, s: self.macro(type_, d, s, kind="filter", body="bool")
            if r.random() < 0.5 else self.macro(type_, d, s, kind="map", body=elem),
            lambda d, s: self.ternary(type_, d, s),
            lambda d, s: node(type_, g(type_, d, s), ".sortBy(x, ", self.atom(elem, {}), ")"),
        ]
        if elem == "int":
            producers += [
                lambda d, s: node(type_, "lists.range(", g("int", d, s), ")"),
                lambda d, s: self.attribute("ints"),
            ]
        if elem == "string":
            producers += [
                lambda d, s: node(type_, g("string", d, s), ".split(", g("string", d, s),
                                  r.choice(("", ", 2", ", -1", ", 0")), ")"),
                lambda d, s: node(type_, g("string", d, s), ".findAll(", self.lit_str(REGEXES),
                                  r.choice(("", ", 1", ", -1")), ")"),
                lambda d, s: self.attribute("strings"),
                lambda d, s: node(type_, g("map(string,int)", d, s), ".map(k, k)"),
            ]
        if elem == "bool":
            producers.append(lambda d, s: self.attribute("bools"))
        return producers

    def p_map(self, type_: str) -> list[Callable[[int, Scope], Expr]]:
        g, r = self.g, self.rng
        key, value = type_[4:-1].split(",")

        def literal(d: int, s: Scope) -> Expr:
            items: list[str | Expr] = []
            for i in range(r.randrange(4)):
                items += [", "] if i else []
                opt = "?" if r.random() < 0.05 else ""
                vt = f"optional({value})" if opt else value
                items += [opt, g(key, d, s), ": ", g(vt, d, s)]
            return node(type_, "{", *items, "}")

        return [literal, literal, lambda d, s: self.ternary(type_, d, s)]

    def p_optional(self, type_: str) -> list[Callable[[int, Scope], Expr]]:
        g, r = self.g, self.rng
        inner = type_[9:-1]
        kind = "int" if inner == "int" else "string"
        return [
            lambda d, s: node(type_, "optional.of(", g(inner, d, s), ")"),
            lambda d, s: node(type_, "optional.ofNonZeroValue(", g(inner, d, s), ")"),
            lambda d, s: leaf(type_, "optional.none()"),
            lambda d, s: node(type_, "device.attributes[", self.domain(), "].?",
                              r.choice(ATTRIBUTES[kind])),
            lambda d, s: node(type_, g(f"list({inner})", d, s), "[?", g("int", d, s), "]"),
            lambda d, s: node(type_, g(type_, d, s), ".or(", g(type_, d, s), ")"),
            lambda d, s: node(type_, g(type_, d, s), ".optMap(y, ", g(inner, d, {**s, "y": inner}),
                              ")"),
        ]

    # -- deliberate mistakes and edge constructs

    def mistake(self, type_: str, depth: int, scope: Scope) -> Expr:
        r = self.rng
        roll = r.randrange(9)
        if roll == 0:
            return leaf(type_, r.choice(("foo", "devices", "attributes", "x0", "Device",
                                         "device.attribute", "device.nope", "request")))
        if roll == 1:
            return self.gen(r.choice(TYPES), depth, scope)
        if roll == 2:
            return node(type_, "dyn(", self.gen(r.choice(TYPES), depth, scope), ")")
        if roll == 3:
            recv = self.gen(r.choice(TYPES), max(depth - 1, 0), scope)
            method = r.choice(("size()", "startsWith('a')", "isLessThan(quantity('1'))",
                               "major()", "contains('a')", "sum()", "isSorted()",
                               "asInteger()", "family()", "all(z, true)", "orValue(1)",
                               "exists(z, z)", "map(z, z)", "hasValue()", "compareTo(1)"))
            return node(type_, recv, "." + method)
        if roll == 4:
            return node(type_, "dyn(", self.attribute(r.choice(tuple(ATTRIBUTES))), ").", r.choice(
                ("size()", "startsWith('a')", "major()", "isLessThan(semver('1.0.0'))",
                 "lowerAscii()", "sum()", "exists(z, z > 1)")))
        if roll == 5:
            text = self.gen(type_, max(depth - 1, 0), scope).render()
            cut = r.randrange(len(text) + 1)
            slip = r.choice(("(", ")", "..", " +", "[", "?", "'", ".?", "}", "1 1", ""))
            return leaf(type_, text[:cut] + slip + text[cut:])
        if roll == 6:
            fn = r.choice(("size", "int", "quantity", "semver", "ip", "cidr", "isIP",
                           "lists.range", "sets.contains", "string", "has"))
            args = ", ".join(self.gen(r.choice(TYPES), 0, scope).render()
                             for _ in range(r.randrange(4)))
            return leaf(type_, f"{fn}({args})")
        if roll == 7:
            return self.overflow()
        return node(type_, "device.attributes[", self.domain(), "].",
                    r.choice(("missing", *ATTRIBUTES[r.choice(tuple(ATTRIBUTES))])))

    def overflow(self) -> Expr:
        """Arithmetic and conversions at the int64/uint64 edges."""
        r = self.rng
        big = r.choice(("9223372036854775807", "-9223372036854775808", "4611686018427387904",
                        "3037000500", "-1", "0"))
        other = r.choice(("1", "-1", "2", "0", "9223372036854775807", "3037000500"))
        edge = r.choice((
            f"{big} {r.choice(('+', '-', '*', '/', '%'))} {other}",
            f"18446744073709551615u {r.choice(('+', '*', '/', '%'))} "
            f"{r.choice(('1u', '0u', '2u'))}",
            f"0u - {r.choice(('1u', '0u'))}",
            f"int({r.choice(('1e19', '-1e19', '9.2e18', '1.5', '-9.3e18'))})",
            f"uint({r.choice(('-1', '1e20', '-0.5', '18446744073709551615.0'))})",
            f"int('{r.choice(('9223372036854775808', '-9223372036854775809', '12a', ' 1'))}')",
            "-(-9223372036854775807 - 1)",
            "quantity('9223372036854775807').add(1).asInteger()",
            "[9223372036854775807, 1].sum()",
            "lists.range(3).map(i, 4611686018427387904 * i).size()",
        ))
        return leaf("bool", f"({edge}){r.choice((' > 0', ' == 0', ' != 1', ' < 0'))}")

    def costly(self) -> Expr:
        """Nested comprehensions whose cost lands on both sides of the 10^6 limit."""
        r = self.rng
        depth = r.choice((2, 2, 3))
        last = f"i{depth - 1}"
        expr = r.choice(("true", f"{last} >= 0", f"i0 + {last} > -1",
                         f"string({last}).size() > 0", f"[i0, {last}].size() == 2"))
        for level in reversed(range(depth)):
            source = f"lists.range({r.choice((10, 30, 50, 100, 300, 500, 1000, 2000))})"
            if r.random() < 0.2:
                source += ".map(v, v)"
            macro = r.choice(("all", "exists", "exists_one", "filter", "map"))
            if macro in ("filter", "map"):
                expr = f"{source}.{macro}(i{level}, {expr}).size() >= 0"
            else:
                expr = f"{source}.{macro}(i{level}, {expr})"
        return leaf("bool", expr)


def expression(rng: random.Random, *, mistakes: float = 0.03,
               costly: float = COSTLY_SHARE) -> Expr:
    return Gen(rng, mistakes=mistakes, costly=costly).top()


# ----------------------------------------------------------------------------- devices

_VERSIONS: Final = ("1.0.0", "1.2.3", "2.0.0-alpha", "1.2.3-rc.1+build.5", "0.0.1", "10.20.30")


def _value(rng: random.Random, kind: str) -> Any:
    match kind:
        case "int":
            return rng.choice((0, 1, 2, 3, 7, 42, -5, 1000, INT_MAX, INT_MIN))
        case "bool":
            return rng.random() < 0.5
        case "string":
            return rng.choice(STRINGS)
        case "version":
            return rng.choice(_VERSIONS)
    # The API requires list attributes to be non-empty (an empty one is not a
    # valid ResourceSlice, and drax's model treats it as unsupported).
    elem = kind[:-1]
    return [_value(rng, elem) for _ in range(rng.randrange(1, 4))]


def device(rng: random.Random) -> dict[str, Any]:
    """A device in the oracle's `cel` request shape (qualified names, quantity strings)."""
    driver = rng.choice(DRIVERS)
    attributes: dict[str, Any] = {}
    for kind, names in ATTRIBUTES.items():
        for name in names:
            for domain in DOMAINS:
                if rng.random() > (0.6 if domain == driver else 0.15):
                    continue
                actual = kind if rng.random() < 0.9 else rng.choice(tuple(ATTRIBUTES))
                qualified = name if domain == driver and rng.random() < 0.7 else \
                    f"{domain}/{name}"
                attributes[qualified] = {actual: _value(rng, actual)}
    capacity: dict[str, str] = {}
    for name in CAPACITIES:
        for domain in DOMAINS:
            if rng.random() < (0.6 if domain == driver else 0.1):
                qualified = name if domain == driver and rng.random() < 0.7 else \
                    f"{domain}/{name}"
                capacity[qualified] = rng.choice(("0", "1", "4", "1500m", "80Gi", "1Gi", "2k",
                                                  "100M", "1.5Gi", "12345"))
    return {"driver": driver, "attributes": attributes, "capacity": capacity,
            "allowMultipleAllocations": rng.random() < 0.3}
