"""Property tests: Go int64/uint64 arithmetic and semver/quantity ordering, against
oracles written independently of the engine (exact Fractions, Go's definitions)."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from app.cel import CelCompileError, CelEvalError, compile_selector
from app.cel.quantity import cel_quantity
from app.cel.semver import parse_semver
from tests.cel.celcases import STANDARD_DEVICE

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
SMALLISH = st.one_of(INT64, st.integers(min_value=-5, max_value=5))
UINT64 = st.integers(min_value=0, max_value=2**64 - 1)


def go_int(op: str, a: int, b: int) -> int | str:
    """Go semantics with CEL's checks: exact result, truncating division, errors."""
    if op in "/%" and b == 0:
        return "division by zero" if op == "/" else "modulus by zero"
    if op == "+":
        exact = a + b
    elif op == "-":
        exact = a - b
    elif op == "*":
        exact = a * b
    elif op == "/":
        exact = math.trunc(Fraction(a, b))
    else:
        exact = a - b * math.trunc(Fraction(a, b))
        if a == -(2**63) and b == -1:
            return "integer overflow"
    if not -(2**63) <= exact <= 2**63 - 1:
        return "integer overflow"
    return exact


def evaluate(expression: str) -> bool | str:
    try:
        return compile_selector(expression).matches(STANDARD_DEVICE)
    except CelEvalError as exc:
        return str(exc)


@settings(max_examples=300, deadline=None)
@given(a=SMALLISH, b=SMALLISH, op=st.sampled_from("+-*/%"))
def test_int64_arithmetic_matches_go(a: int, b: int, op: str) -> None:
    expected = go_int(op, a, b)
    if isinstance(expected, str):
        outcome = evaluate(f"(({a}) {op} ({b})) == 0")
        assert isinstance(outcome, str) and outcome.endswith(expected), outcome
    else:
        assert evaluate(f"(({a}) {op} ({b})) == ({expected})") is True


@settings(max_examples=200, deadline=None)
@given(a=UINT64, b=UINT64, op=st.sampled_from("+-*/%"))
def test_uint64_arithmetic(a: int, b: int, op: str) -> None:
    if op in "/%" and b == 0:
        expected: int | str = "division by zero" if op == "/" else "modulus by zero"
    else:
        exact = {"+": a + b, "-": a - b, "*": a * b, "/": a // max(b, 1), "%": a % max(b, 1)}[op]
        expected = exact if 0 <= exact < 2**64 else "unsigned integer overflow"
    if isinstance(expected, str):
        outcome = evaluate(f"({a}u {op} {b}u) == 0u")
        assert isinstance(outcome, str) and outcome.endswith(expected), outcome
    else:
        assert evaluate(f"({a}u {op} {b}u) == {expected}u") is True


IDENT = st.one_of(st.integers(min_value=0, max_value=30).map(str),
                  st.text(alphabet="abz-", min_size=1, max_size=3).filter(
                      lambda s: not s.isdigit()))
VERSION = st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3),
                    st.lists(IDENT, max_size=3))


def semver_key(v: tuple[int, int, int, list[str]]) -> tuple[object, ...]:
    """semver 2.0 precedence: a release sorts after all its pre-releases."""
    major, minor, patch, pre = v
    pre_key = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre)
    return (major, minor, patch, 1 if not pre else 0, pre_key)


def semver_text(v: tuple[int, int, int, list[str]]) -> str:
    major, minor, patch, pre = v
    return f"{major}.{minor}.{patch}" + ("-" + ".".join(pre) if pre else "")


@settings(max_examples=300, deadline=None)
@given(a=VERSION, b=VERSION)
def test_semver_order_matches_semver_2(a: tuple[int, int, int, list[str]],
                                       b: tuple[int, int, int, list[str]]) -> None:
    ka, kb = semver_key(a), semver_key(b)
    expected = (ka > kb) - (ka < kb)
    assert parse_semver(semver_text(a)).compare(parse_semver(semver_text(b))) == expected
    result = evaluate(f'semver("{semver_text(a)}").compareTo(semver("{semver_text(b)}")) '
                      f"== {expected}")
    assert result is True


SUFFIX = st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "e3", "e-3"])


@settings(max_examples=300, deadline=None)
@given(a=st.integers(0, 10**6), sa=SUFFIX, b=st.integers(0, 10**6), sb=SUFFIX)
def test_quantity_compare_is_numeric(a: int, sa: str, b: int, sb: str) -> None:
    qa, qb = cel_quantity(f"{a}{sa}"), cel_quantity(f"{b}{sb}")
    va, vb = qa.quantity.value, qb.quantity.value
    expected = (va > vb) - (va < vb)
    assert evaluate(f'quantity("{a}{sa}").compareTo(quantity("{b}{sb}")) == {expected}') is True
    assert evaluate(f'(quantity("{a}{sa}") == quantity("{b}{sb}")) == {str(va == vb).lower()}')


ATOMS = ["1", "2u", "1.5", '"s"', "b'x'", "true", "null", "[]", "{}", "[1, 2]", '{"a": 1}',
         "device", "device.attributes", 'device.attributes["dra.example.com"]',
         'device.attributes["dra.example.com"].ints',
         'device.attributes["dra.example.com"].version',
         'device.capacity["dra.example.com"].memory', 'quantity("1Gi")', 'semver("1.0.0")',
         "dyn(1)", 'dyn("a")', "optional.of(1)", 'ip("1.2.3.4")', "lists.range(3)", "int"]
OPERATORS = ["+", "-", "*", "/", "%", "==", "!=", "<", ">=", "&&", "||", " in "]
MEMBERS = [".size()", ".all(x, x)", ".exists(x, true)", ".map(x, x)", ".orValue(1)", ".?a",
           ".a", '["a"]', "[0]", "[?0]", '.isGreaterThan(quantity("1"))',
           '.compareTo(semver("1.0.0"))', '.startsWith("a")', '.matches("a")', ".includes(1)",
           ".sum()", ".min()", ".sort()", ".lowerAscii()", ".all(k, v, true)", ".asInteger()",
           ".value()"]

EXPRESSIONS = st.recursive(
    st.sampled_from(ATOMS),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(OPERATORS), inner).map(lambda t: f"({t[0]}{t[1]}{t[2]})"),
        st.tuples(inner, st.sampled_from(MEMBERS)).map(lambda t: t[0] + t[1]),
        inner.map(lambda e: f"!{e}"),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})"),
    ),
    max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(expression=EXPRESSIONS)
def test_any_expression_gives_an_answer_or_a_cel_error(expression: str) -> None:
    try:
        selector = compile_selector(expression)
    except CelCompileError as exc:
        assert str(exc)
        return
    try:
        assert selector.matches(STANDARD_DEVICE) in (True, False)
    except CelEvalError as exc:
        assert "no such overload: " not in str(exc), str(exc)  # no Python-level leak
