"""The `app.cel` contract around the expression tables: caching, device views,
conversion errors, cost limit, error shapes, semver and quantity representation."""

from __future__ import annotations

import itertools

import pytest

from app.cel import (
    CelCompileError,
    CelError,
    CelEvalError,
    CompiledSelector,
    compile_selector,
)
from app.cel.device import device_view
from app.cel.quantity import cel_quantity
from app.cel.semver import SemverError, parse_semver, parse_semver_tolerant
from app.model import AttributeValue, Device, qualify
from tests.cel.celcases import STANDARD_DEVICE, Compile, Runtime, check, make_device

# ----------------------------------------------------------------------------- contract


def test_error_classes() -> None:
    assert issubclass(CelCompileError, CelError) and issubclass(CelEvalError, CelError)


def test_compile_is_cached_per_expression() -> None:
    first = compile_selector("device.driver == 'cache-test'")
    assert isinstance(first, CompiledSelector)
    assert compile_selector("device.driver == 'cache-test'") is first


def test_compile_error_is_cached_and_raised_every_time() -> None:
    for _ in range(2):
        with pytest.raises(CelCompileError, match="undeclared reference to 'nope'"):
            compile_selector("nope")


def test_compile_error_shape_with_caret() -> None:
    with pytest.raises(CelCompileError) as info:
        compile_selector('device.driver == "x" &&\n  device.attributes["a"].b.frob()')
    assert str(info.value) == (
        "compilation failed: ERROR: <input>:2:32: undeclared reference to 'frob' "
        "(in container '')\n"
        ' |   device.attributes["a"].b.frob()\n'
        " | " + "." * 31 + "^")


def test_runtime_error_names_expression_and_device() -> None:
    selector = compile_selector('device.attributes["dra.example.com"].missing')
    with pytest.raises(CelEvalError) as info:
        selector.matches(STANDARD_DEVICE)
    message = str(info.value)
    assert "device.attributes[\"dra.example.com\"].missing" in message
    assert "dra.example.com/pool-0/dev-0" in message
    assert "CEL runtime error: no such key: missing. consider using CEL optional chaining " \
           "(.? followed by orValue()) or guarding the check with has() for optional fields" \
           in message
    assert info.value.detail.startswith("no such key: missing")  # type: ignore[attr-defined]


def test_expression_length_limit() -> None:
    with pytest.raises(CelCompileError, match="maximum length"):
        compile_selector("true && " * 2000 + "true")


def test_deep_nesting_is_a_compile_error_not_a_crash() -> None:
    with pytest.raises(CelCompileError):
        compile_selector("(" * 400 + "true" + ")" * 400)


# ----------------------------------------------------------------------------- device view


def test_view_is_built_once_per_device_object() -> None:
    device = make_device({"a": {"int": 1}})
    assert device_view(device) is device_view(device)
    newer = make_device({"a": {"int": 2}})
    assert device_view(newer) is not device_view(device)
    assert compile_selector('device.attributes["dra.example.com"].a == 2').matches(newer)


def test_name_mapping_with_empty_driver() -> None:
    device = Device(driver="", pool="p", name="d", slice_name="s",
                    attributes={qualify("name", ""): AttributeValue("bool", True)})
    check('device.driver == "" && device.attributes[""].name', True, device)


def test_driver_name_is_not_an_attribute() -> None:
    check('has(device.attributes["dra.example.com"].driver)', False,
          make_device({"a": {"int": 1}}))


def test_unset_attribute_value_fails_every_expression() -> None:
    device = make_device({"empty": {}})
    check("true", Runtime("attribute empty: unsupported attribute value"), device)
    check("false", Runtime("attribute empty: unsupported attribute value"), device)


def test_invalid_version_fails_every_expression() -> None:
    device = make_device({"v": {"version": "1.0"}})
    check("true", Runtime("attribute v: parse semantic version: No Major.Minor.Patch elements "
                          "found"), device)


def test_allow_multiple_allocations() -> None:
    check("device.allowMultipleAllocations", True, make_device(allow_multiple=True))
    check("device.allowMultipleAllocations == false", True, make_device())


def test_device_without_attributes() -> None:
    device = make_device()
    check("device.attributes.size() == 0 && device.capacity.size() == 0", True, device)
    check('device.attributes["dra.example.com"].x', Runtime("no such key: x"), device)


# ----------------------------------------------------------------------------- cost limit

NESTED_TEN = ("[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(y, "
              "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z2, "
              "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z3, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z4, "
              "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z5, int('1'.find('[0-9]*')) < 100)))))))")

COST_CASES = [
    # upstream "expensive": 10^7 innermost iterations
    (NESTED_TEN, Runtime("operation cancelled: actual cost limit exceeded")),
    ("lists.range(1000).all(x, lists.range(1000).all(y, x + y >= 0))",
     Runtime("actual cost limit exceeded")),
    ("lists.range(10000000).size() > 0", Runtime("actual cost limit exceeded")),
    # the cost error is not absorbed by || or exists
    ("true || lists.range(1000).all(x, lists.range(1000).all(y, true))", True),
    ("lists.range(1000).all(x, lists.range(1000).all(y, true)) || true",
     Runtime("actual cost limit exceeded")),
    # ordinary and moderately nested expressions are never stopped
    ("lists.range(30).all(x, lists.range(30).all(y, x + y >= 0))", True),
    ("lists.range(100).map(x, lists.range(10).map(y, x * y)).size() == 100", True),
    ('device.attributes["dra.example.com"].ints.all(x, x > 0)', True),
]


@pytest.mark.parametrize(("expression", "expected"), COST_CASES)
def test_cost(expression: str, expected: object) -> None:
    check(expression, expected)


# ----------------------------------------------------------------------------- semver

@pytest.mark.parametrize(("text", "normalize", "expected"), [
    ("1.2.3", False, (1, 2, 3, ())),
    ("1.2.3-alpha.1+build.5", False, (1, 2, 3, ("alpha", 1))),
    ("0.0.0", False, (0, 0, 0, ())),
    ("v1.2.3", True, (1, 2, 3, ())),
    ("1.2", True, (1, 2, 0, ())),
    ("01.002.03", True, (1, 2, 3, ())),
    ("1.2.3-x-y-z.-", False, (1, 2, 3, ("x-y-z", "-"))),
    ("1.2.3-", False, SemverError("Prerelease is empty")),
    ("1.2.3+", False, SemverError("Build meta data is empty")),
    ("1.2.3-01", False, SemverError("Numeric PreRelease version must not contain leading "
                                    "zeroes \"01\"")),
    ("1.2.3-a_b", False, SemverError("Invalid character(s) found in prerelease \"a_b\"")),
    ("1.2.x", False, SemverError("Invalid character(s) found in patch number \"x\"")),
    ("1.02.3", False, SemverError("Minor number must not contain leading zeroes \"02\"")),
    ("", False, SemverError("Version string empty")),
])
def test_semver_parsing(text: str, normalize: bool, expected: object) -> None:
    parse = parse_semver_tolerant if normalize else parse_semver
    if isinstance(expected, SemverError):
        with pytest.raises(SemverError) as info:
            parse(text)
        assert str(info.value) == str(expected)
        return
    v = parse(text)
    assert (v.major, v.minor, v.patch, v.pre) == expected


def test_semver_precedence_chain() -> None:
    chain = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta",
             "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "2.0.0"]
    versions = [parse_semver(v) for v in chain]
    for lower, higher in itertools.pairwise(versions):
        assert lower.compare(higher) == -1 and higher.compare(lower) == 1


# ----------------------------------------------------------------------------- quantity

@pytest.mark.parametrize(("text", "as_int"), [
    ("1", 1), ("1k", 1000), ("1Ki", 1024), ("81559Mi", 81559 * 2**20), ("1e3", 1000),
    ("0", 0), ("-5", -5), ("007", 7), ("1Ti", 2**40),
    ("1000m", None), ("1.5", None), ("1.0", None), ("1.5Gi", None), ("1Pi", None),
    ("100Ti", None), ("9223372036854775807", None), ("1n", None),
])
def test_quantity_integer_representation(text: str, as_int: int | None) -> None:
    assert cel_quantity(text).as_int64() == as_int


def test_capacity_representation_follows_the_published_text() -> None:
    device = make_device(capacity={"milli": "1000m", "frac": "1.5Gi", "whole": "1536Mi"})
    cap = 'device.capacity["dra.example.com"]'
    check(f"{cap}.milli == quantity('1') && !{cap}.milli.isInteger()", True, device)
    check(f"{cap}.frac == {cap}.whole && !{cap}.frac.isInteger() && {cap}.whole.isInteger()",
          True, device)


def test_add_does_not_mutate_receiver() -> None:
    check('cel.bind(q, quantity("1.5Gi"), q.add(quantity("1Gi")).compareTo(q) == 1 && '
          'q.compareTo(quantity("1.5Gi")) == 0)', True)


def test_misc_compile_errors() -> None:
    check('quantity("1").foo()', Compile("undeclared reference to 'foo'"))
