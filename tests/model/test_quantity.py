"""Kubernetes quantity parsing, arithmetic and canonical printing."""

from fractions import Fraction

import pytest

from app.model.quantity import Quantity, QuantityError, parse_quantity

CANONICAL = [
    ("81559Mi", "81559Mi"),
    ("1Gi", "1Gi"),
    ("1024Mi", "1Gi"),
    ("1.5Gi", "1536Mi"),
    ("1000m", "1"),
    ("0.5", "500m"),
    ("1.5", "1500m"),
    ("100M", "100M"),
    ("1e3", "1e3"),
    ("1k", "1k"),
    ("1000", "1k"),
    ("-2Ki", "-2Ki"),
    ("1n", "1n"),
    ("0.1n", "1n"),  # below nano precision rounds up
    ("0", "0"),
    ("512", "512"),  # binary values under 1Ki print as decimal
    ("+3", "3"),
    (".5", "500m"),
]


@pytest.mark.parametrize(("text", "expected"), CANONICAL)
def test_canonical_string(text: str, expected: str) -> None:
    assert str(parse_quantity(text)) == expected


VALUES = [
    ("1Ki", 1024),
    ("1Mi", 1024**2),
    ("40Gi", 40 * 1024**3),
    ("1m", Fraction(1, 1000)),
    ("2u", Fraction(2, 10**6)),
    ("1E", 10**18),
    ("1Ei", 2**60),
    ("5e-3", Fraction(5, 1000)),
    ("1.5k", 1500),
    # ParseQuantity (and the upstream oracle) read a number without digits as zero.
    (".", 0),
    ("-.", 0),
    (".5k", 500),
]


@pytest.mark.parametrize(("text", "value"), VALUES)
def test_exact_value(text: str, value: Fraction | int) -> None:
    assert parse_quantity(text).value == value


@pytest.mark.parametrize("text",
                         ["", "abc", "1K", "1 Gi", "1Gii", "--1", "1.2.3", "Gi", "1e", ".."])
def test_invalid(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_numeric_equality_and_order() -> None:
    assert parse_quantity("1Gi") == parse_quantity("1024Mi")
    assert parse_quantity("200M") == parse_quantity("0.2G")
    assert parse_quantity("40Gi") < parse_quantity("81559Mi")
    assert hash(parse_quantity("1Gi")) == hash(parse_quantity("1024Mi"))


def test_arithmetic_keeps_format_and_is_exact() -> None:
    total = parse_quantity("10Gi") + parse_quantity("512Mi")
    assert str(total) == "10752Mi"
    assert str(total - parse_quantity("10752Mi")) == "0"
    third = Quantity(Fraction(1, 10)) + Quantity(Fraction(2, 10))
    assert third.value == Fraction(3, 10)
