"""`kubernetes.Quantity` as CEL sees it: an exact value plus apimachinery's representation.

The number itself is `app.model.quantity.Quantity` (exact, shared with the
allocator). What only CEL can observe lives here:
- `isInteger` / `asInteger` depend on how apimachinery stores the value: an
  int64 mantissa with a base-10 scale (`1000m` has scale -3, so it is not an
  integer), or an arbitrary-precision decimal (`1.5Gi`, `1Pi`), which never
  is. `amount` records that representation, derived from the text with the
  rules of `ParseQuantity` and carried through `add`/`sub`.
- `add` and `sub` return the pointer form; Kubernetes' `Equal` accepts only
  the value form on its right, so `pointer` makes `quantity(a) == q.add(1)` a
  runtime error as upstream. The receiver is never mutated (the fixed
  upstream behaviour).
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import Final

from app.model.quantity import Quantity, QuantityError, parse_quantity

_MAX_INT64_FACTORS: Final = 18
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1
_BINARY_EXP: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_EXP: Final = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12,
                       "P": 15, "E": 18}

__all__ = ["CelQuantity", "QuantityError", "cel_quantity", "from_model", "int_quantity"]


class CelQuantity:
    __slots__ = ("amount", "pointer", "quantity")

    CEL_KIND = "kubernetes.Quantity"

    def __init__(self, quantity: Quantity, amount: tuple[int, int] | None, *,
                 pointer: bool = False) -> None:
        self.quantity = quantity
        # (int64 mantissa, base-10 scale), or None for the arbitrary-precision form.
        self.amount = amount
        self.pointer = pointer

    def cel_equals(self, other: object) -> bool | None:
        if not isinstance(other, CelQuantity) or other.pointer:
            return None
        return self.quantity.value == other.quantity.value

    def compare(self, other: CelQuantity) -> int:
        a, b = self.quantity.value, other.quantity.value
        return (a > b) - (a < b)

    def as_int64(self) -> int | None:
        if self.amount is None:
            return None
        value, scale = self.amount
        if scale < 0:
            return None
        result = value * 10**scale
        return result if _INT64_MIN <= result <= _INT64_MAX else None

    def add(self, other: CelQuantity, *, sign: int = 1) -> CelQuantity:
        amount = None
        if self.amount is not None and other.amount is not None:
            amount = _add_amounts(self.amount, _signed(other.amount, sign))
        if amount is None:
            value = self.quantity.value + sign * other.quantity.value
        else:
            # The int64 path decides the value too: it is what upstream computes,
            # even where negating INT64_MIN wrapped (x.sub(INT64_MIN) adds it).
            value = Fraction(amount[0]) * Fraction(10) ** amount[1]
        return CelQuantity(Quantity(value, self.quantity.format), amount, pointer=True)

    def __repr__(self) -> str:
        return f"quantity({self.quantity})"


def _signed(amount: tuple[int, int], sign: int) -> tuple[int, int]:
    """`-amount` as Go's int64 negation computes it: INT64_MIN stays itself."""
    if sign > 0 or amount[0] == _INT64_MIN:
        return amount
    return (-amount[0], amount[1])


def _add_amounts(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int] | None:
    """apimachinery's int64Amount.Add: a zero operand leaves the other one as it
    is (scale included); otherwise both go to the smaller scale, and any int64
    overflow on the way (rescaling, or the sum) gives None, the decimal form."""
    if b[0] == 0:
        return a
    if a[0] == 0:
        return b
    scale = min(a[1], b[1])
    x, y = a[0] * 10 ** (a[1] - scale), b[0] * 10 ** (b[1] - scale)
    if not (_fits(x) and _fits(y) and _fits(x + y)):
        return None
    return (x + y, scale)


def _fits(value: int) -> bool:
    return _INT64_MIN <= value <= _INT64_MAX


@lru_cache(maxsize=4096)
def cel_quantity(text: str) -> CelQuantity:
    """Parse like `resource.ParseQuantity`; raises QuantityError with its message."""
    return CelQuantity(parse_quantity(text), _amount(text))


def int_quantity(value: int) -> CelQuantity:
    """`resource.NewQuantity` of an int (what `q.add(1)` adds): always the int64
    form, even for 19 digits, which ParseQuantity of the same text holds as a decimal."""
    return CelQuantity(Quantity.from_int(value), (value, 0))


def from_model(quantity: Quantity) -> CelQuantity:
    """A capacity value, in the representation its published text gives it."""
    return cel_quantity(quantity.text if quantity.text is not None else str(quantity))


def _amount(text: str) -> tuple[int, int] | None:
    """apimachinery's int64Amount for `text`, or None when it uses inf.Dec."""
    body = text.lstrip("+-")
    negative = text.startswith("-")
    i = 0
    while i < len(body) and (body[i].isdigit() or body[i] == "."):
        i += 1
    number, suffix = body[:i], body[i:]
    num, _, denom = number.partition(".")
    num = num.lstrip("0") or "0"
    if suffix in _BINARY_EXP:
        exponent = _BINARY_EXP[suffix]
        if denom:
            return None
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
        if precision < 0:
            return None
        value = int(num) << exponent
        if value > _INT64_MAX:
            return None
        return (-value if negative else value, 0)
    exponent = _DECIMAL_EXP[suffix] if suffix in _DECIMAL_EXP else int(suffix[1:])
    if _MAX_INT64_FACTORS - len(num) - len(denom) < 0:
        return None
    scale = exponent - len(denom)
    if scale < -9:
        return None
    value = int(num + denom)
    return (-value if negative else value, scale)

