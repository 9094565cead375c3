"""Exact Kubernetes resource quantities (`resource.Quantity`).

Device capacities, shared counters and capacity requests are quantities. The
allocator adds and compares them (counter budgets, consumable capacity), so
they must be exact: the value is held as a `Fraction`, never a float. The
parsing grammar, the round-up to nano precision and the canonical string form
follow apimachinery's `resource.Quantity`, so that what drax writes into an
allocation (`consumedCapacity`) reads the way Kubernetes would print it.

Parsed quantities are interned through a small cache: slices repeat the same
strings ("81559Mi", "1") thousands of times.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache, total_ordering
from typing import Final

BINARY_SI: Final = "BinarySI"
DECIMAL_SI: Final = "DecimalSI"
DECIMAL_EXPONENT: Final = "DecimalExponent"

QUANTITY_PATTERN: Final = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_QUANTITY_RE: Final = re.compile(QUANTITY_PATTERN)
# ParseQuantity's number: a sign, digits, a point, digits, any of them empty
# (so "+", "." and "-." are zero).
_NUMBER_RE: Final = re.compile(r"^[+-]?[0-9]*(?:\.[0-9]*)?$")

_BINARY_SUFFIXES: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SUFFIXES: Final = {
    "n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18,
}
_DECIMAL_BY_EXPONENT: Final = {v: k for k, v in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXPONENT: Final = {v: k for k, v in _BINARY_SUFFIXES.items()}
_NANO: Final = Fraction(1, 10**9)


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


@total_ordering
class Quantity:
    """An exact quantity with the format it was written in.

    Equality and ordering are numeric (`1Gi == 1024Mi`), as in Kubernetes'
    `Cmp`; `format` only affects how the value is printed. `text` is the
    string a parsed quantity was written as (None for computed values): CEL's
    `isInteger` depends on apimachinery's internal form, which follows the text
    (`1000m` is not an integer, `1` is).
    """

    __slots__ = ("format", "text", "value")

    def __init__(self, value: Fraction | int, fmt: str = DECIMAL_SI, *,
                 text: str | None = None) -> None:
        self.value = Fraction(value)
        self.format = fmt
        self.text = text

    @staticmethod
    def parse(text: str) -> Quantity:
        return _parse_cached(text)

    @staticmethod
    def from_int(value: int) -> Quantity:
        return Quantity(value, DECIMAL_SI)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self.value == other.value
        return NotImplemented

    def __lt__(self, other: Quantity) -> bool:
        return self.value < other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self.value + other.value, self.format)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity(self.value - other.value, self.format)

    def __neg__(self) -> Quantity:
        return Quantity(-self.value, self.format)

    def is_zero(self) -> bool:
        return self.value == 0

    def __repr__(self) -> str:
        return f"Quantity({self})"

    def __str__(self) -> str:
        return canonical_string(self.value, self.format)


ZERO: Final = Quantity(0)


def parse_quantity(text: str) -> Quantity:
    """Parse a quantity string; raises `QuantityError` with Kubernetes' wording."""
    return _parse_cached(text)


@lru_cache(maxsize=4096)
def _parse_cached(text: str) -> Quantity:
    if not isinstance(text, str) or not text:
        raise QuantityError("quantities must match the regular expression "
                            f"'{QUANTITY_PATTERN}'")
    match = _QUANTITY_RE.match(text)
    if match is None:
        raise QuantityError(f"quantities must match the regular expression '{QUANTITY_PATTERN}'")
    number, suffix = match.group(1), match.group(2)
    if not _NUMBER_RE.match(number):
        raise QuantityError(f"quantities must match the regular expression '{QUANTITY_PATTERN}'")
    digits = number.lstrip("+-")
    base = Fraction(0) if digits in ("", ".") else Fraction(number.lstrip("+"))
    if suffix in _BINARY_SUFFIXES:
        value, fmt = base * (1 << _BINARY_SUFFIXES[suffix]), BINARY_SI
    elif suffix in _DECIMAL_SUFFIXES:
        value, fmt = base * Fraction(10) ** _DECIMAL_SUFFIXES[suffix], DECIMAL_SI
    elif suffix[:1] in ("e", "E") and re.fullmatch(r"[eE][-+]?[0-9]+", suffix):
        value, fmt = base * Fraction(10) ** int(suffix[1:]), DECIMAL_EXPONENT
    else:
        raise QuantityError("unable to parse quantity's suffix")
    return Quantity(_round_up_to_nano(value), fmt, text=text)


def _round_up_to_nano(value: Fraction) -> Fraction:
    """Kubernetes keeps at most nano precision and rounds away from zero."""
    scaled = value / _NANO
    if scaled.denominator == 1:
        return value
    whole = -((-scaled.numerator) // scaled.denominator) if value > 0 else (
        scaled.numerator // scaled.denominator)
    return Fraction(whole) * _NANO


def canonical_string(value: Fraction, fmt: str) -> str:
    """The string apimachinery prints for a value in a format (`CanonicalizeBytes`)."""
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if fmt == BINARY_SI and magnitude >= 1024 and magnitude.denominator == 1:
        number = magnitude.numerator
        exponent = 0
        while exponent < 60 and number % 1024 == 0:
            number //= 1024
            exponent += 10
        return f"{sign}{number}{_BINARY_BY_EXPONENT.get(exponent, '')}"
    mantissa, exponent = _decimal_mantissa(magnitude)
    if fmt == DECIMAL_EXPONENT:
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    return f"{sign}{mantissa}{_DECIMAL_BY_EXPONENT[exponent]}"


def _decimal_mantissa(magnitude: Fraction) -> tuple[int, int]:
    """Integer mantissa and an exponent that is a multiple of 3 within n..E."""
    exponent = -9
    number = magnitude * 10**9
    # Values are rounded to nano at parse time; arithmetic keeps that precision.
    number_int = -((-number.numerator) // number.denominator)
    while exponent < 18 and number_int % 1000 == 0:
        number_int //= 1000
        exponent += 3
    return number_int, exponent
