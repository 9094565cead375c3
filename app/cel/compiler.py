"""Type-check a parsed CEL expression and turn it into nested Python closures.

One pass does both jobs: each AST node is checked against the DRA
environment (the `device` variable, the overloads in `library`) and yields
its static type plus a closure `fn(ctx) -> value`. Checking first is what
makes `undeclared reference`, `undefined field`, `1 + 1.0` and a non-bool
result compile errors, as in Kubernetes; closures make a typical selector
evaluate in a few microseconds (no tree walking, no per-call dispatch when
the types are known statically).

Semantics that closures must get right, and where:
- `&&` / `||` absorb errors and non-bool operands per cel-go (`_logical`);
- `all` / `exists` fold over those operators, so they absorb too;
- every comprehension step is charged to the per-evaluation cost budget
  (one unit plus the static size of the loop body), as are size-dependent
  library calls, and `CostExceeded` is never absorbed;
- conversions of literals and constant regexes are evaluated at compile
  time, so their failures are compile errors, as Kubernetes reports them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from app.cel import net
from app.cel import parser as ast
from app.cel.device import DeviceView, DomainMap
from app.cel.errors import CostExceeded, EvalError
from app.cel.library import (
    CONVERSIONS,
    FOLDABLE,
    FUNCTIONS,
    Overload,
    compile_regex,
    sort_values,
)
from app.cel.quantity import CelQuantity
from app.cel.semver import Semver
from app.cel.types import (
    BOOL,
    BYTES,
    DEVICE,
    DOUBLE,
    DYN,
    INT,
    NULL,
    QUANTITY,
    STRING,
    TYPE_IDENTS,
    UINT,
    UNBOUND,
    CelType,
    is_dynish,
    join,
    list_of,
    map_of,
    optional_of,
    substitute,
    type_of,
    unify,
)
from app.cel.values import (
    KEY_TYPES,
    OPTIONAL_NONE,
    Optional,
    StringKeyMap,
    UInt,
    equals,
    go_type_name,
    is_missing,
    map_lookup,
    not_equals,
)

COST_LIMIT: Final = 1_000_000
# Calls cel-go evaluates when the program is planned if every argument is a
# constant (a failure is `program instantiation failed`); `dyn` of a constant is
# one. `find`/`findAll` only compile their pattern then (`_check_constant_regex`).
_PLAN_TIME: Final = CONVERSIONS | {"dyn"}
# The receivers cel-go's sortBy macro expands on (comprehensions and `a[i]` are calls).
_SORT_BY_TARGETS: Final = (ast.ListLit, ast.Ident, ast.Call, ast.Select, ast.Index)
# Key types `sortBy` accepts (cel-go's comparable types that drax has, and dyn).
_SORTABLE: Final = frozenset({"int", "uint", "double", "bool", "string", "bytes", "dyn"})
_MISSING: Final = object()
_DEVICE_FIELDS: Final = {
    "driver": STRING,
    "attributes": map_of(STRING, map_of(STRING, DYN)),
    "capacity": map_of(STRING, map_of(STRING, QUANTITY)),
    "allowMultipleAllocations": BOOL,
}
_FAST_EQ_TYPES: Final = frozenset({"int", "uint", "bool", "string", "bytes", "double"})
# As in Kubernetes' environment: `existsOne` is only the two-variable macro
# (cel-go's two-variable comprehensions), `exists_one` takes one or two.
_ONE_VAR_MACROS: Final = frozenset({"all", "exists", "exists_one", "map", "filter",
                                    "sortBy", "optMap", "optFlatMap"})
_TWO_VAR_MACROS: Final = frozenset({"all", "exists", "exists_one", "existsOne",
                                    "transformList",
                                    "transformMap", "transformMapEntry"})


class Ctx:
    """Per-evaluation state: variables (device + comprehension variables) and cost used."""

    __slots__ = ("cost", "vars")

    def __init__(self, device: DeviceView | None) -> None:
        self.vars: dict[str, Any] = {"device": device}
        self.cost = 0


Fn = Callable[[Ctx], Any]


class CheckError(Exception):
    """A compile error at a source offset (`program` errors have no location)."""

    def __init__(self, message: str, pos: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


@dataclass(slots=True)
class Compiled:
    type: CelType
    fn: Fn
    cost: int = 1
    const: bool = False
    value: Any = None
    # For `m.?name`: (fn producing m, name), so `m.?name.orValue(d)` can skip the Optional.
    opt_source: tuple[Fn, str] | None = None
    # A constant for cel-go's planner too (a literal, a list of such, a conversion
    # of one); drax's folded `quantity('1')` or `ip('::1')` is const but not literal.
    literal: bool = False


def _constant(value: Any, t: CelType) -> Compiled:
    return Compiled(t, lambda c: value, 1, True, value, literal=True)


def _literal_type(value: Any) -> CelType:
    return {bool: BOOL, int: INT, UInt: UINT, float: DOUBLE, str: STRING, bytes: BYTES,
            type(None): NULL}[type(value)]


def charge(ctx: Ctx, amount: int) -> None:
    ctx.cost += amount
    if ctx.cost > COST_LIMIT:
        raise CostExceeded


class Compiler:
    def __init__(self) -> None:
        self.scopes: list[dict[str, CelType]] = []
        # ids of the scopes opened by `cel.bind`, whose variable is evaluated lazily.
        self.bind_scopes: set[int] = set()

    def compile(self, node: ast.Node) -> Compiled:
        method = getattr(self, f"_{type(node).__name__.lower()}")
        return method(node)

    # ------------------------------------------------------------------ leaves

    def _literal(self, node: ast.Literal) -> Compiled:
        return _constant(node.value, _literal_type(node.value))

    def _lookup_var(self, name: str) -> CelType | None:
        scope = self._scope_of(name)
        return None if scope is None else scope[name]

    def _scope_of(self, name: str) -> dict[str, CelType] | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope
        return None

    def _ident(self, node: ast.Ident) -> Compiled:
        name = node.name
        scope = self._scope_of(name)
        if scope is not None and id(scope) in self.bind_scopes:
            return Compiled(scope[name], lambda c: c.vars[name].get(c))
        if scope is not None:
            return Compiled(scope[name], lambda c: c.vars[name])
        if name == "device":
            return Compiled(DEVICE, lambda c: c.vars["device"])
        if name in TYPE_IDENTS:
            t = TYPE_IDENTS[name]
            return _constant(CelType(t.name), type_of(t))
        raise CheckError(f"undeclared reference to '{name}' (in container '')", node.pos)

    def _structlit(self, node: ast.StructLit) -> Compiled:
        raise CheckError(f"undeclared reference to '{node.type_name}' (in container '')",
                         node.pos)

    # ------------------------------------------------------------------ select / index

    def _select(self, node: ast.Select) -> Compiled:
        operand = self.compile(node.operand)
        return self._select_on(operand, node.field, node.optional, node.pos)

    def _select_on(self, operand: Compiled, name: str, optional: bool, pos: int) -> Compiled:
        t = operand.type
        op = operand.fn
        if t.name == "optional_type":
            inner = self._select_on(Compiled(t.params[0], lambda c: None), name, optional, pos)
            result_t = inner.type if inner.type.name == "optional_type" else optional_of(
                inner.type)
            return Compiled(result_t, _optional_chain(op, name, optional=optional),
                            operand.cost + 1)
        if t == DEVICE:
            field_t = _DEVICE_FIELDS.get(name)
            if field_t is None:
                raise CheckError(f"undefined field '{name}'", pos)
            if optional:
                return Compiled(optional_of(field_t),
                                lambda c: Optional(getattr(op(c), name)), operand.cost + 1)
            return Compiled(field_t, lambda c: getattr(op(c), name), operand.cost + 1)
        if t.name == "map":
            if t.params[0] not in (STRING, DYN):
                raise CheckError(f"type '{t}' does not support field selection", pos)
            value_t = t.params[1]
        elif t.name == "dyn":
            value_t = DYN
        else:
            raise CheckError(f"type '{t}' does not support field selection", pos)
        if optional:
            return Compiled(optional_of(value_t), _make_opt_select(op, name), operand.cost + 1,
                            opt_source=(op, name))
        return Compiled(value_t, _make_select(op, name), operand.cost + 1)

    def _index(self, node: ast.Index) -> Compiled:
        operand = self.compile(node.operand)
        index = self.compile(node.index)
        t = operand.type
        if t.name == "optional_type":
            elem_t = self._index_type(t.params[0], index.type, node.pos)
            _check_qualifier(index)
            op, ix = operand.fn, index.fn
            optional = node.optional

            def chained(c: Ctx) -> Any:
                o = op(c)
                if not o.present:
                    return OPTIONAL_NONE
                if optional:
                    return _opt_index(o.value, ix(c))
                return Optional(index_value(o.value, ix(c)))
            return Compiled(optional_of(elem_t), chained, operand.cost + index.cost + 1)
        elem_t = self._index_type(t, index.type, node.pos)
        _check_qualifier(index)
        op, ix = operand.fn, index.fn
        if node.optional:
            # cel-go types `d[?i]` on a dyn `d` as dyn (a select `d.?f` stays optional).
            opt_t = DYN if t.name == "dyn" else optional_of(elem_t)
            return Compiled(opt_t, lambda c: _opt_index(op(c), ix(c)),
                            operand.cost + index.cost + 1)
        if index.const and type(index.value) is str and t.name == "map":
            return Compiled(elem_t, _make_select(op, index.value), operand.cost + 1)
        return Compiled(elem_t, lambda c: index_value(op(c), ix(c)),
                        operand.cost + index.cost + 1)

    def _index_type(self, t: CelType, index_t: CelType, pos: int) -> CelType:
        if t.name == "list" and index_t.name in ("int", "uint", "dyn"):
            return t.params[0]
        if t.name == "map" and unify(t.params[0], index_t, {}):
            return t.params[1]
        if t.name == "dyn":
            return DYN
        raise CheckError(f"found no matching overload for '_[_]' applied to '({t}, {index_t})'",
                         pos)

    # ------------------------------------------------------------------ literals

    def _listlit(self, node: ast.ListLit) -> Compiled:
        elems = [self.compile(e) for e in node.elements]
        elem_types = []
        for i, e in enumerate(elems):
            if i in node.optional_indices:
                if e.type.name not in ("optional_type", "dyn"):
                    raise CheckError(f"expected type 'optional_type({e.type})' but found "
                                     f"'{e.type}'", node.elements[i].pos)
                elem_types.append(e.type.params[0] if e.type.params else DYN)
            else:
                elem_types.append(e.type)
        self._check_homogeneous(elem_types, node.elements)
        elem_t = join(elem_types) or DYN if elem_types else UNBOUND
        cost = 1 + sum(e.cost for e in elems)
        if not node.optional_indices and all(e.const for e in elems):
            return Compiled(list_of(elem_t), _const_fn(tuple(e.value for e in elems)), cost,
                            True, tuple(e.value for e in elems),
                            literal=all(e.literal for e in elems))
        fns = [e.fn for e in elems]
        if node.optional_indices:
            opt = node.optional_indices

            def build_optional(c: Ctx) -> tuple[Any, ...]:
                out = []
                for i, f in enumerate(fns):
                    v = f(c)
                    if i in opt:
                        if v.present:
                            out.append(v.value)
                    else:
                        out.append(v)
                return tuple(out)
            return Compiled(list_of(elem_t), build_optional, cost)
        return Compiled(list_of(elem_t), lambda c: tuple(f(c) for f in fns), cost)

    def _check_homogeneous(self, types: list[CelType], nodes: list[ast.Node]) -> None:
        """Kubernetes' homogeneous-aggregate-literal validator: every element has
        exactly the first one's type (`dyn` is a type of its own there)."""
        first: CelType | None = None
        for t, n in zip(types, nodes, strict=True):
            if first is None:
                first = t
            elif not _same_type(first, t):
                raise CheckError(f"expected type '{first}' but found '{t}'", n.pos)

    def _maplit(self, node: ast.MapLit) -> Compiled:
        keys = [self.compile(k) for k, _, _ in node.entries]
        values = [self.compile(v) for _, v, _ in node.entries]
        value_types = [v.type.params[0] if opt and v.type.params else v.type
                       for v, (_, _, opt) in zip(values, node.entries, strict=True)]
        self._check_homogeneous([k.type for k in keys], [k for k, _, _ in node.entries])
        self._check_homogeneous(value_types, [v for _, v, _ in node.entries])
        key_t = join([k.type for k in keys]) or DYN if keys else UNBOUND
        value_t = join(value_types) or DYN if values else UNBOUND
        pairs = [(k.fn, v.fn, opt) for k, v, (_, _, opt) in zip(keys, values, node.entries,
                                                                   strict=True)]

        def build(c: Ctx) -> dict[Any, Any]:
            out: dict[Any, Any] = {}
            for kf, vf, opt in pairs:
                key = kf(c)
                value = vf(c)
                if opt:
                    if not value.present:
                        continue
                    value = value.value
                out[key] = value  # a repeated key: the last entry wins, as in cel-go
            return out
        cost = 1 + sum(k.cost + v.cost for k, v in zip(keys, values, strict=True))
        if all(x.literal for x in (*keys, *values)) and not any(o for _, _, o in node.entries):
            try:
                value = build(Ctx(None))
            except TypeError:  # an unhashable key: the runtime error stays at runtime
                return Compiled(map_of(key_t, value_t), build, cost)
            return Compiled(map_of(key_t, value_t), _const_fn(value), cost, True, value,
                            literal=True)
        return Compiled(map_of(key_t, value_t), build, cost)

    # ------------------------------------------------------------------ calls

    def _call(self, node: ast.Call) -> Compiled:
        special = _SPECIAL.get(node.name)
        if special is not None:
            return special(self, node)
        if node.target is None and node.name == "has":
            return self._has(node)
        if node.target is not None:
            macro = self._macro(node)
            if macro is not None:
                return macro
            qualified = self._qualified_function(node)
            if qualified is not None:
                if qualified == "cel.bind":
                    return self._bind(node)
                args = [self.compile(a) for a in node.args]
                return self._resolve(qualified, args, member=False, node=node)
            args = [self.compile(node.target), *(self.compile(a) for a in node.args)]
            result = self._resolve(node.name, args, member=True, node=node)
            source = args[0].opt_source
            if node.name == "orValue" and source is not None and len(args) == 2:
                result.fn = _fast_or_value(source, args[1].fn, result.fn)
            elif node.name in ("or", "orValue") and len(args) == 2:
                result.fn = _short_circuit_optional(node.name, args[0].fn, args[1].fn,
                                                    result.fn)
            return result
        args = [self.compile(a) for a in node.args]
        return self._resolve(node.name, args, member=False, node=node)

    def _qualified_function(self, node: ast.Call) -> str | None:
        parts = [node.name]
        target = node.target
        while isinstance(target, ast.Select) and not target.optional:
            parts.append(target.field)
            target = target.operand
        if not isinstance(target, ast.Ident) or self._lookup_var(target.name) is not None:
            return None
        parts.append(target.name)
        name = ".".join(reversed(parts))
        if name in FUNCTIONS or name == "cel.bind":
            return name
        return None

    def _resolve(self, name: str, args: list[Compiled], *, member: bool,
                 node: ast.Call) -> Compiled:
        candidates = [o for o in FUNCTIONS.get(name, ())
                      if o.member == member and len(o.params) == len(args)]
        matched: list[tuple[Overload, CelType]] = []
        for o in candidates:
            bindings: dict[str, CelType] = {}
            if all(unify(p, a.type, bindings) for p, a in zip(o.params, args, strict=True)):
                matched.append((o, substitute(o.result, bindings)))
        if not matched:
            if name not in FUNCTIONS:
                raise CheckError(f"undeclared reference to '{name}' (in container '')",
                                 node.pos)
            arg_text = ", ".join(str(a.type) for a in (args[1:] if member else args))
            shown = f"{args[0].type}.({arg_text})" if member else f"({arg_text})"
            raise CheckError(f"found no matching overload for '{name}' applied to '{shown}'",
                             node.pos)
        if len(matched) > 1 and any(_has_unbound(a.type) for a in args):
            # cel-go binds a free type variable in the first overload that accepts it
            # (`[].sum()` is an int), so later overloads no longer match.
            matched = matched[:1]
        result_types = {t for _, t in matched}
        result_t = matched[0][1] if len(result_types) == 1 else DYN
        self._check_constant_regex(name, args, node)
        fn = _make_call([o for o, _ in matched], [a.fn for a in args], [a.type for a in args])
        cost = 1 + sum(a.cost for a in args)
        if name in _PLAN_TIME and args and all(a.literal for a in args):
            try:
                value = fn(Ctx(None))
            except EvalError as exc:
                raise CheckError(f"program instantiation failed: {exc}", None) from None
            return Compiled(result_t, _const_fn(value), cost, True, value, literal=True)
        if name in FOLDABLE and args and all(a.const for a in args):
            try:
                value = fn(Ctx(None))
            except EvalError:
                return Compiled(result_t, fn, cost)
            return Compiled(result_t, _const_fn(value), cost, True, value)
        return Compiled(result_t, fn, cost)

    def _check_constant_regex(self, name: str, args: list[Compiled], node: ast.Call) -> None:
        """A constant pattern is compiled now: `matches` is checked by a validator,
        `find`/`findAll` patterns are compiled when the program is built."""
        if (name not in ("matches", "find", "findAll") or len(args) < 2 or not args[1].const
                or type(args[1].value) is not str):
            return  # a constant of another type (through dyn) fails its overload at runtime
        try:
            compile_regex(args[1].value)
        except EvalError as exc:
            if name == "matches":
                raise CheckError("invalid matches argument", node.args[-1].pos) from None
            raise CheckError(f"program instantiation failed: {exc}", None) from None

    # ------------------------------------------------------------------ operators

    def _logic(self, node: ast.Call) -> Compiled:
        left, right = (self.compile(a) for a in node.args)
        for operand in (left, right):
            if operand.type.name not in ("bool", "dyn"):
                raise CheckError(f"found no matching overload for '{node.name}' applied to "
                                 f"'({left.type}, {right.type})'", node.pos)
        fn = _logical(left.fn, right.fn, absorbing=node.name == "_||_")
        return Compiled(BOOL, fn, 1 + left.cost + right.cost)

    def _not(self, node: ast.Call) -> Compiled:
        operand = self.compile(node.args[0])
        if operand.type.name not in ("bool", "dyn"):
            raise CheckError(f"found no matching overload for '!_' applied to "
                             f"'({operand.type})'", node.pos)
        op = operand.fn

        def negate(c: Ctx) -> bool:
            v = op(c)
            if v is True:
                return False
            if v is False:
                return True
            raise EvalError("no such overload")
        return Compiled(BOOL, negate, 1 + operand.cost)

    def _conditional(self, node: ast.Call) -> Compiled:
        cond, then, other = (self.compile(a) for a in node.args)
        result_t = join([then.type, other.type])
        if cond.type.name not in ("bool", "dyn") or result_t is None:
            raise CheckError(f"found no matching overload for '_?_:_' applied to "
                             f"'({cond.type}, {then.type}, {other.type})'", node.pos)
        cf, tf, of = cond.fn, then.fn, other.fn

        def choose(c: Ctx) -> Any:
            v = cf(c)
            if v is True:
                return tf(c)
            if v is False:
                return of(c)
            raise EvalError("no such overload")
        return Compiled(result_t, choose, 1 + cond.cost + max(then.cost, other.cost))

    def _equality(self, node: ast.Call) -> Compiled:
        left, right = (self.compile(a) for a in node.args)
        bindings: dict[str, CelType] = {}
        from app.cel.types import A
        if not (unify(A, left.type, bindings) and unify(A, right.type, bindings)):
            raise CheckError(f"found no matching overload for '{node.name}' applied to "
                             f"'({left.type}, {right.type})'", node.pos)
        lf, rf = left.fn, right.fn
        fast = (left.type == right.type and left.type.name in _FAST_EQ_TYPES)
        if node.name == "_==_":
            fn: Fn = (lambda c: lf(c) == rf(c)) if fast else (lambda c: equals(lf(c), rf(c)))
        else:
            fn = (lambda c: lf(c) != rf(c)) if fast else (lambda c: not_equals(lf(c), rf(c)))
        return Compiled(BOOL, fn, 1 + left.cost + right.cost)

    def _in(self, node: ast.Call) -> Compiled:
        elem, coll = (self.compile(a) for a in node.args)
        t = coll.type
        ok = (t.name == "dyn" or (t.name == "list" and unify(t.params[0], elem.type, {}))
              or (t.name == "map" and unify(t.params[0], elem.type, {})))
        if not ok:
            raise CheckError(f"found no matching overload for '@in' applied to "
                             f"'({elem.type}, {t})'", node.pos)
        if isinstance(node.args[1], ast.ListLit) and not node.args[1].elements:
            # cel-go's planner turns `x in []` into false without evaluating x;
            # only the written `[]` (`x in dyn([])` evaluates x).
            return _constant(False, BOOL)
        ef, cf = elem.fn, coll.fn
        literal_type = _homogeneous_literal_type(coll)
        if literal_type is not None:
            # A constant list of strings (or ints): hash lookup when the element has that
            # exact type, CEL's heterogeneous equality otherwise (dyn(1.0) in [1]).
            members = frozenset(coll.value)
            items = coll.value

            def in_literal(c: Ctx) -> bool:
                v = ef(c)
                if type(v) is literal_type:
                    return v in members
                return contains(items, v)
            return Compiled(BOOL, in_literal, 1 + elem.cost)
        return Compiled(BOOL, lambda c: contains(cf(c), ef(c)), 1 + elem.cost + coll.cost)

    # ------------------------------------------------------------------ macros

    def _has(self, node: ast.Call) -> Compiled:
        if len(node.args) != 1 or not isinstance(node.args[0], ast.Select) or \
                node.args[0].optional:
            pos = node.args[0].pos if node.args else node.pos
            raise CheckError("invalid argument to has() macro", pos)
        sel = node.args[0]
        operand = self.compile(sel.operand)
        self._select_on(operand, sel.field, False, sel.pos)  # type check only
        op, name = operand.fn, sel.field

        def test(c: Ctx) -> bool:
            obj = op(c)
            t = type(obj)
            if t is DomainMap or t is DeviceView:
                return True
            if isinstance(obj, dict):
                return name in obj
            raise EvalError("invalid type for field selection.")
        return Compiled(BOOL, test, operand.cost)

    def _var_name(self, node: ast.Node) -> str:
        if not isinstance(node, ast.Ident):
            raise CheckError("argument must be a simple name", node.pos)
        return node.name

    def _macro(self, node: ast.Call) -> Compiled | None:
        name, n = node.name, len(node.args)
        assert node.target is not None
        if name == "sortBy" and n == 2 and not isinstance(node.target, _SORT_BY_TARGETS):
            raise CheckError("sortBy can only be applied to a list, identifier, comprehension, "
                             "call or select expression", node.pos)
        if (name in _ONE_VAR_MACROS and n == 2) or (name == "map" and n == 3):
            if name in ("optMap", "optFlatMap"):
                return self._opt_map(node)
            return self._comprehension(node, one_var=True)
        if name in _TWO_VAR_MACROS and (n == 3 or (n == 4 and name.startswith("transform"))):
            return self._comprehension(node, one_var=False)
        return None

    def _bind(self, node: ast.Call) -> Compiled:
        if len(node.args) != 3:
            raise CheckError("found no matching overload for 'cel.bind'", node.pos)
        var = self._var_name(node.args[0])
        init = self.compile(node.args[1])
        scope = {var: init.type}
        self.scopes.append(scope)
        self.bind_scopes.add(id(scope))
        try:
            body = self.compile(node.args[2])
        finally:
            self.scopes.pop()
            self.bind_scopes.discard(id(scope))
        inf, bf = init.fn, body.fn

        def bound(c: Ctx) -> Any:
            saved = c.vars.get(var, _MISSING)
            c.vars[var] = _LazyVar(inf, dict(c.vars))
            try:
                return bf(c)
            finally:
                _restore(c, var, saved)
        return Compiled(body.type, bound, init.cost + body.cost)

    def _opt_map(self, node: ast.Call) -> Compiled:
        assert node.target is not None
        target = self.compile(node.target)
        if target.type.name not in ("optional_type", "dyn"):
            raise CheckError(f"found no matching overload for '{node.name}' applied to "
                             f"'{target.type}'", node.pos)
        var = self._var_name(node.args[0])
        inner_t = target.type.params[0] if target.type.params else DYN
        self.scopes.append({var: inner_t})
        try:
            body = self.compile(node.args[1])
        finally:
            self.scopes.pop()
        flat = node.name == "optFlatMap"
        if flat and body.type.name not in ("optional_type", "dyn"):
            raise CheckError(f"expected type 'optional_type' but found '{body.type}'",
                             node.args[1].pos)
        tf, bf = target.fn, body.fn

        def mapped(c: Ctx) -> Any:
            o = tf(c)
            if type(o) is not Optional:
                raise EvalError("no such overload")
            if not o.present:
                return OPTIONAL_NONE
            saved = c.vars.get(var, _MISSING)
            c.vars[var] = o.value
            try:
                v = bf(c)
            finally:
                _restore(c, var, saved)
            return v if flat else Optional(v)
        return Compiled(body.type if flat else optional_of(body.type), mapped,
                        target.cost + body.cost)

    def _comprehension(self, node: ast.Call, *, one_var: bool) -> Compiled:
        assert node.target is not None
        target = self.compile(node.target)
        t = target.type
        if t.name not in ("list", "map", "dyn"):
            raise CheckError(f"expression of type '{t}' cannot be range of a comprehension "
                             "(must be list, map, or dynamic)", node.target.pos)
        names = [self._var_name(a) for a in node.args[:1 if one_var else 2]]
        if t.name == "list":
            var_types = [t.params[0]] if one_var else [INT, t.params[0]]
        elif t.name == "map":
            var_types = [t.params[0]] if one_var else [t.params[0], t.params[1]]
        else:
            var_types = [DYN] if one_var else [DYN, DYN]
        self.scopes.append(dict(zip(names, var_types, strict=True)))
        try:
            bodies = [self.compile(a) for a in node.args[len(names):]]
        finally:
            self.scopes.pop()
        kind = "existsOne" if node.name == "exists_one" else node.name
        spec = _MacroSpec(kind=kind, names=names, one_var=one_var,
                          step=1 + sum(b.cost for b in bodies))
        if kind in ("all", "exists", "existsOne", "filter") or (
                kind in ("map", "transformList", "transformMap", "transformMapEntry")
                and len(bodies) == 2):
            pred = bodies[0]
            if pred.type.name not in ("bool", "dyn"):
                raise CheckError(f"expected type 'bool' but found '{pred.type}'",
                                 node.args[len(names)].pos)
        result_t = self._macro_type(kind, t, var_types, bodies, node)
        fn = _make_comprehension(spec, target.fn, [b.fn for b in bodies])
        return Compiled(result_t, fn, target.cost + 1)

    def _macro_type(self, kind: str, t: CelType, var_types: list[CelType],
                    bodies: list[Compiled], node: ast.Call) -> CelType:
        last = bodies[-1].type
        if kind in ("all", "exists", "existsOne"):
            return BOOL
        if kind == "sortBy" and last.name not in _SORTABLE:
            listed = t if t.name == "list" else list_of(var_types[0])
            raise CheckError(f"found no matching overload for '@sortByAssociatedKeys' applied "
                             f"to '{listed}.(list({last}))'", node.pos)
        if kind == "filter" and t.name == "list" and t.params[0] is UNBOUND and _is_ident(
                node.args[-1], self._var_name(node.args[0])):
            # The element's free type is unified with the condition's bool when the
            # variable is the predicate itself: `[].filter(x, x)` is a list(bool).
            return list_of(BOOL)
        if kind in ("filter", "sortBy"):
            return t if t.name == "list" else list_of(var_types[0])
        if kind in ("map", "transformList"):
            return list_of(last)
        if kind == "transformMap":
            return map_of(t.params[0] if t.name == "map" else INT if t.name == "list" else DYN,
                          last)
        if last.name not in ("map", "dyn"):
            raise CheckError(f"expected type 'map' but found '{last}'", node.args[-1].pos)
        return last if last.name == "map" else map_of(DYN, DYN)


def _is_ident(node: ast.Node, name: str) -> bool:
    return isinstance(node, ast.Ident) and node.name == name


def _has_unbound(t: CelType) -> bool:
    return t is UNBOUND or any(_has_unbound(p) for p in t.params)


def _same_type(a: CelType, b: CelType) -> bool:
    """Exact type equality, where an empty literal's free element type takes any type."""
    if a is UNBOUND or b is UNBOUND:
        return True
    return (a.name == b.name and len(a.params) == len(b.params)
            and all(_same_type(x, y) for x, y in zip(a.params, b.params, strict=True)))


def _homogeneous_literal_type(coll: Compiled) -> type | None:
    if not coll.const or type(coll.value) is not tuple or not coll.value:
        return None
    first = type(coll.value[0])
    if first not in (str, int) or any(type(v) is not first for v in coll.value):
        return None
    return first


_SPECIAL: Final[dict[str, Callable[[Compiler, ast.Call], Compiled]]] = {
    "_&&_": Compiler._logic, "_||_": Compiler._logic, "!_": Compiler._not,
    "_?_:_": Compiler._conditional, "_==_": Compiler._equality, "_!=_": Compiler._equality,
    "@in": Compiler._in,
}


def _const_fn(value: Any) -> Fn:
    return lambda c: value


def _restore(ctx: Ctx, name: str, saved: Any) -> None:
    if saved is _MISSING:
        ctx.vars.pop(name, None)
    else:
        ctx.vars[name] = saved


# ---------------------------------------------------------------------- runtime helpers

def _make_select(op: Fn, name: str) -> Fn:
    def select(c: Ctx) -> Any:
        obj = op(c)
        try:
            return obj[name]
        except KeyError:
            raise EvalError(f"no such key: {name}") from None
        except (TypeError, IndexError):
            raise EvalError("no such overload") from None
    return select


def _make_opt_select(op: Fn, name: str) -> Fn:
    def select(c: Ctx) -> Any:
        obj = op(c)
        if type(obj) is DomainMap:
            return Optional(obj[name])
        if isinstance(obj, dict):
            value = obj.get(name, _MISSING)
            return OPTIONAL_NONE if value is _MISSING else Optional(value)
        raise EvalError("no such overload")
    return select


def _fast_or_value(source: tuple[Fn, str], default: Fn, generic: Fn) -> Fn:
    """`m.?name.orValue(d)` on a plain map without building an Optional; the default
    is evaluated only when the key is missing (cel-go short-circuits `orValue`)."""
    op, name = source

    def or_value(c: Ctx) -> Any:
        obj = op(c)
        if type(obj) is not dict and type(obj) is not StringKeyMap:
            return generic(c)
        value = obj.get(name, _MISSING)
        return default(c) if value is _MISSING else value
    return or_value


def _short_circuit_optional(name: str, target: Fn, alternative: Fn, generic: Fn) -> Fn:
    """`o.or(p)` / `o.orValue(v)`: cel-go evaluates the argument only when `o` is
    empty (a receiver that is not an optional goes to the overloads' error)."""
    unwrap = name == "orValue"

    def short_circuit(c: Ctx) -> Any:
        o = target(c)
        if type(o) is not Optional:
            return generic(c)
        if o.present:
            return o.value if unwrap else o
        return alternative(c)
    return short_circuit


class _LazyVar:
    """A `cel.bind` variable: cel-go evaluates the value on first use, in the
    variables of the bind (an unused value's error does not surface)."""

    __slots__ = ("fn", "scope", "value")

    def __init__(self, fn: Fn, scope: dict[str, Any]) -> None:
        self.fn = fn
        self.scope = scope
        self.value: Any = _MISSING

    def get(self, c: Ctx) -> Any:
        if self.value is _MISSING:
            current, c.vars = c.vars, self.scope
            try:
                self.value = self.fn(c)
            finally:
                c.vars = current
        return self.value


def _optional_chain(op: Fn, name: str, *, optional: bool) -> Fn:
    plain = _make_select(lambda c: c, name)
    opt = _make_opt_select(lambda c: c, name)

    def chain(c: Ctx) -> Any:
        o = op(c)
        if type(o) is not Optional:
            raise EvalError("no such overload")
        if not o.present:
            return OPTIONAL_NONE
        if optional:
            return opt(o.value)
        return Optional(plain(o.value))
    return chain


def _check_qualifier(index: Compiled) -> None:
    """cel-go turns a constant index into a qualifier when it plans the program,
    and has qualifiers only for the map key types (and double)."""
    if index.const and type(index.value) not in KEY_TYPES:
        raise CheckError("program instantiation failed: invalid qualifier type: "
                         f"{go_type_name(index.value)}", None)


def index_value(obj: Any, key: Any) -> Any:
    t = type(obj)
    if t is tuple or t is list:
        tk = type(key)
        if tk is int or tk is UInt or (tk is float and key.is_integer()):
            i = int(key)
        else:
            raise EvalError("no such overload")
        if i < 0 or i >= len(obj):
            raise EvalError(f"index out of bounds: {i}")
        return obj[i]
    if t is DomainMap:
        if type(key) is str:
            return obj[key]
        raise EvalError(f"no such key: {_key_text(key)}")
    if isinstance(obj, dict):
        value = map_lookup(obj, key)
        if is_missing(value):
            raise EvalError(f"no such key: {_key_text(key)}")
        return value
    raise EvalError("no such overload")


def _opt_index(obj: Any, key: Any) -> Optional:
    if type(obj) is DomainMap and type(key) is str:
        return Optional(obj[key])
    try:
        return Optional(index_value(obj, key))
    except EvalError as exc:
        if str(exc).startswith(("no such key", "index out of bounds")):
            return OPTIONAL_NONE
        raise


def _key_text(key: Any) -> str:
    if type(key) is bool:
        return "true" if key else "false"
    return str(key)


def contains(coll: Any, elem: Any) -> bool:
    t = type(coll)
    if t is tuple or t is list:
        te = type(elem)
        if te is str:
            return any(type(x) is str and x == elem for x in coll)
        for item in coll:
            try:
                if equals(elem, item):
                    return True
            except EvalError:
                continue
        return False
    if isinstance(coll, dict):
        return not is_missing(map_lookup(coll, elem))
    raise EvalError("no such overload")


def _logical(left: Fn, right: Fn, *, absorbing: bool) -> Fn:
    """`&&` (absorbing False) and `||` (absorbing True) with CEL's commutative
    error absorption: an operand equal to `absorbing` decides the result even
    when the other one fails; a non-bool operand counts as a failure."""
    identity = not absorbing

    def fn(c: Ctx) -> bool:
        err: EvalError | None = None
        for operand in (left, right):
            try:
                value = operand(c)
            except EvalError as exc:
                err = err or exc
                continue
            if value is absorbing:
                return absorbing
            if value is not identity and err is None:
                err = EvalError("no such overload")
        if err is not None:
            raise err
        return identity
    return fn


_PY_TYPES: Final[dict[str, tuple[type, ...]]] = {
    "int": (int,), "uint": (UInt,), "double": (float,), "bool": (bool,), "string": (str,),
    "bytes": (bytes,), "null_type": (type(None),), "list": (tuple, list),
    "map": (dict, DomainMap, StringKeyMap), "optional_type": (Optional,), "type": (CelType,),
    "kubernetes.Quantity": (CelQuantity,), "kubernetes.Semver": (Semver,),
    "net.IP": (net.IP,), "net.CIDR": (net.CIDR,),
}


def _runtime_checks(params: tuple[CelType, ...],
                    static: list[CelType]) -> tuple[tuple[int, tuple[type, ...]], ...]:
    """(argument index, accepted Python types) for each argument the checker could not
    pin down (static type dyn somewhere) whose parameter is concrete."""
    return tuple((i, _PY_TYPES[p.name]) for i, (p, s) in enumerate(zip(params, static,
                                                                         strict=True))
                 if (is_dynish(s) or s.name == "null_type") and not p.is_param
                 and p.name not in ("dyn", "null_type"))


def _make_call(overloads: list[Overload], args: list[Fn], static: list[CelType]) -> Fn:
    if len(overloads) == 1:
        overload = overloads[0]
        checks = _runtime_checks(overload.params, static)
        if not checks and overload.cost is None:
            return _direct_call(overload.impl, args)
        return _checked_call(overload, args, checks)
    candidates = [(o, _runtime_checks(o.params, static)) for o in overloads]

    def dispatch(c: Ctx) -> Any:
        values = [a(c) for a in args]
        for o, checks in candidates:
            if all(type(values[i]) in types for i, types in checks):
                if o.cost is not None:
                    charge(c, o.cost(*values))
                return o.impl(*values)
        raise EvalError("no such overload")
    return dispatch


def _direct_call(impl: Callable[..., Any], args: list[Fn]) -> Fn:
    if len(args) == 0:
        return lambda c: impl()
    if len(args) == 1:
        a0 = args[0]
        return lambda c: impl(a0(c))
    if len(args) == 2:
        a0, a1 = args
        return lambda c: impl(a0(c), a1(c))
    return lambda c: impl(*[a(c) for a in args])


def _checked_call(overload: Overload, args: list[Fn],
                  checks: tuple[tuple[int, tuple[type, ...]], ...]) -> Fn:
    impl, cost = overload.impl, overload.cost
    if len(args) == 1 and cost is None:
        a0 = args[0]
        types0 = checks[0][1]

        def call1(c: Ctx) -> Any:
            x = a0(c)
            if type(x) not in types0:
                raise EvalError("no such overload")
            return impl(x)
        return call1

    def call(c: Ctx) -> Any:
        values = [a(c) for a in args]
        for i, types in checks:
            if type(values[i]) not in types:
                raise EvalError("no such overload")
        if cost is not None:
            charge(c, cost(*values))
        return impl(*values)
    return call


@dataclass(slots=True, frozen=True)
class _MacroSpec:
    kind: str
    names: list[str]
    one_var: bool
    step: int


def _iteration(coll: Any, *, one_var: bool) -> Any:
    t = type(coll)
    if t is tuple or t is list:
        return coll if one_var else enumerate(coll)
    if isinstance(coll, dict):
        return list(coll) if one_var else list(coll.items())
    raise EvalError(f"got '{go_type_name(coll)}', expected iterable type")


def _make_comprehension(spec: _MacroSpec, target: Fn, bodies: list[Fn]) -> Fn:
    kind, names, step = spec.kind, spec.names, spec.step
    one_var = spec.one_var
    run = _RUNNERS[kind]
    # sortBy maps a map's keys, but the sort it expands to takes only a list.
    lists_only = kind == "sortBy"

    def fn(c: Ctx) -> Any:
        value = target(c)
        if lists_only and isinstance(value, dict):
            raise EvalError("no such overload: @sortByAssociatedKeys")
        items = _iteration(value, one_var=one_var)
        saved = [c.vars.get(n, _MISSING) for n in names]
        try:
            return run(c, items, names, bodies, step, one_var)
        finally:
            for n, s in zip(names, saved, strict=True):
                _restore(c, n, s)
    return fn


def _bind_vars(c: Ctx, names: list[str], item: Any, one_var: bool, step: int) -> None:
    c.cost += step
    if c.cost > COST_LIMIT:
        raise CostExceeded
    if one_var:
        c.vars[names[0]] = item
    else:
        c.vars[names[0]], c.vars[names[1]] = item


def _run_all(c: Ctx, items: Any, names: list[str], bodies: list[Fn], step: int,
             one_var: bool) -> bool:
    return _fold(c, items, names, bodies[0], step, one_var, decisive=False)


def _run_exists(c: Ctx, items: Any, names: list[str], bodies: list[Fn], step: int,
                one_var: bool) -> bool:
    return _fold(c, items, names, bodies[0], step, one_var, decisive=True)


def _fold(c: Ctx, items: Any, names: list[str], pred: Fn, step: int, one_var: bool, *,
          decisive: bool) -> bool:
    err: EvalError | None = None
    for item in items:
        _bind_vars(c, names, item, one_var, step)
        try:
            v = pred(c)
        except EvalError as exc:
            err = err or exc
            continue
        if v is decisive:
            return decisive
        if v is not (not decisive) and err is None:
            err = EvalError("no such overload")
    if err is not None:
        raise err
    return not decisive


def _bool_result(v: Any) -> bool:
    if v is True or v is False:
        return v
    raise EvalError("no such overload")


def _run_exists_one(c: Ctx, items: Any, names: list[str], bodies: list[Fn], step: int,
                    one_var: bool) -> bool:
    count = 0
    for item in items:
        _bind_vars(c, names, item, one_var, step)
        if _bool_result(bodies[0](c)):
            count += 1
    return count == 1


def _run_filter(c: Ctx, items: Any, names: list[str], bodies: list[Fn], step: int,
                one_var: bool) -> tuple[Any, ...]:
    out = []
    for item in items:
        _bind_vars(c, names, item, one_var, step)
        if _bool_result(bodies[0](c)):
            out.append(item)
    return tuple(out)


def _run_map(c: Ctx, items: Any, names: list[str], bodies: list[Fn], step: int,
             one_var: bool) -> tuple[Any, ...]:
    out = []
    pred = bodies[0] if len(bodies) == 2 else None
    transform = bodies[-1]
    for item in items:
        _bind_vars(c, names, item, one_var, step)
        if pred is not None and not _bool_result(pred(c)):
            continue
        out.append(transform(c))
    return tuple(out)


def _run_transform_map(c: Ctx, items: Any, names: list[str], bodies: list[Fn], step: int,
                       one_var: bool) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    pred = bodies[0] if len(bodies) == 2 else None
    for item in items:
        _bind_vars(c, names, item, one_var, step)
        if pred is not None and not _bool_result(pred(c)):
            continue
        out[item[0]] = bodies[-1](c)
    return out


def _run_transform_map_entry(c: Ctx, items: Any, names: list[str], bodies: list[Fn],
                             step: int, one_var: bool) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    pred = bodies[0] if len(bodies) == 2 else None
    for item in items:
        _bind_vars(c, names, item, one_var, step)
        if pred is not None and not _bool_result(pred(c)):
            continue
        entry = bodies[-1](c)
        if not isinstance(entry, dict):
            raise EvalError("no such overload")
        for k, v in entry.items():
            if not is_missing(map_lookup(out, k)):
                raise EvalError(f"insert failed: key {_key_text(k)} already exists")
            out[k] = v
    return out


def _run_sort_by(c: Ctx, items: Any, names: list[str], bodies: list[Fn], step: int,
                 one_var: bool) -> tuple[Any, ...]:
    values, keys = [], []
    for item in items:
        _bind_vars(c, names, item, one_var, step)
        values.append(item)
        keys.append(bodies[0](c))
    return sort_values(values, keys)


_RUNNERS: Final[dict[str, Callable[..., Any]]] = {
    "all": _run_all, "exists": _run_exists, "existsOne": _run_exists_one,
    "filter": _run_filter, "map": _run_map, "transformList": _run_map,
    "transformMap": _run_transform_map, "transformMapEntry": _run_transform_map_entry,
    "sortBy": _run_sort_by,
}
