"""Semantic versions (`kubernetes.Semver`) with the parsing rules of blang/semver v4.

DRA `version` attributes and the CEL `semver()` function both parse with
blang's strict `Parse`; `semver(s, true)` normalises first (leading `v`,
missing components, leading zeros), like the apiserver library. Ordering is
semver 2.0 precedence; build metadata never takes part, not even in `==`.
Error texts are blang's, because Kubernetes passes them through.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

_DIGITS: Final = frozenset(string.digits)
_ALNUM: Final = frozenset(string.ascii_letters + string.digits + "-")
_UINT64_MAX: Final = (1 << 64) - 1


class SemverError(ValueError):
    """A string blang/semver rejects; the message is blang's."""


@dataclass(frozen=True, slots=True)
class Semver:
    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()
    build: tuple[str, ...] = ()

    CEL_KIND = "kubernetes.Semver"

    def compare(self, other: Semver) -> int:
        a = (self.major, self.minor, self.patch)
        b = (other.major, other.minor, other.patch)
        if a != b:
            return -1 if a < b else 1
        if not self.pre or not other.pre:
            return (not self.pre) - (not other.pre)
        for x, y in zip(self.pre, other.pre, strict=False):
            c = _compare_identifier(x, y)
            if c:
                return c
        return (len(self.pre) > len(other.pre)) - (len(self.pre) < len(other.pre))

    def cel_equals(self, other: object) -> bool | None:
        if not isinstance(other, Semver):
            return None
        return self.compare(other) == 0

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(str(p) for p in self.pre)
        if self.build:
            text += "+" + ".".join(self.build)
        return text


def _compare_identifier(x: int | str, y: int | str) -> int:
    if type(x) is int and type(y) is int:
        return (x > y) - (x < y)
    if type(x) is int:
        return -1
    if type(y) is int:
        return 1
    return (str(x) > str(y)) - (str(x) < str(y))


@lru_cache(maxsize=2048)
def parse_semver(text: str) -> Semver:
    """blang `semver.Parse`: exactly MAJOR.MINOR.PATCH[-PRE][+BUILD], no leading zeros."""
    if not text:
        raise SemverError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise SemverError("No Major.Minor.Patch elements found")
    major = _component(parts[0], "major")
    minor = _component(parts[1], "minor")
    rest = parts[2]
    build: list[str] = []
    pre: list[str] = []
    if "+" in rest:
        rest, _, build_text = rest.partition("+")
        build = build_text.split(".")
    if "-" in rest:
        rest, _, pre_text = rest.partition("-")
        pre = pre_text.split(".")
    patch = _component(rest, "patch")
    pre_ids = tuple(_pre_identifier(p) for p in pre)
    for b in build:
        if not b:
            raise SemverError("Build meta data is empty")
        if not set(b) <= _ALNUM:
            raise SemverError(f"Invalid character(s) found in build meta data {_quote(b)}")
    return Semver(major, minor, patch, pre_ids, tuple(build))


def parse_semver_tolerant(text: str) -> Semver:
    """`semver(s, true)`: strip `v`, drop leading zeros, pad missing components."""
    text = text.strip().removeprefix("v")
    parts = text.split(".", 2)
    for i, part in enumerate(parts):
        if len(part) > 1:
            stripped = part.lstrip("0")
            if not stripped or stripped[0] not in _DIGITS:
                stripped = "0" + stripped
            parts[i] = stripped
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise SemverError("Short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse_semver(".".join(parts))


def _component(text: str, name: str) -> int:
    if not set(text) <= _DIGITS:
        raise SemverError(f"Invalid character(s) found in {name} number {_quote(text)}")
    if len(text) > 1 and text[0] == "0":
        raise SemverError(f"{name.capitalize()} number must not contain leading zeroes "
                          f"{_quote(text)}")
    if not text or int(text) > _UINT64_MAX:
        raise SemverError(f'strconv.ParseUint: parsing {_quote(text)}: '
                          + ("invalid syntax" if not text else "value out of range"))
    return int(text)


def _pre_identifier(text: str) -> int | str:
    if not text:
        raise SemverError("Prerelease is empty")
    if set(text) <= _DIGITS:
        if len(text) > 1 and text[0] == "0":
            raise SemverError("Numeric PreRelease version must not contain leading zeroes "
                              f"{_quote(text)}")
        return int(text)
    if set(text) <= _ALNUM:
        return text
    raise SemverError(f"Invalid character(s) found in prerelease {_quote(text)}")


def _quote(text: str) -> str:
    """Go's %q for the ASCII texts that reach these messages."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
