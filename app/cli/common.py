"""What the what-if commands (`selector`, `allocate`, `simulate`) share.

They read objects from files into the same inventory the service uses, take
feature gates the way kube components do, and print JSON for programs or a
table for people. Keeping that here means every command fails the same way
on bad input (exit 2, one line on stderr) and chooses its output the same way.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, TextIO

import orjson

from app.features import FeatureGates, parse_feature_gates
from app.inventory import Inventory
from app.model import InvalidObject

EXIT_INPUT: Final = 2
INVENTORY_KINDS: Final = ("Node", "DeviceClass", "ResourceSlice", "ResourceClaim",
                          "ResourceClaimTemplate", "Pod")


class InputError(Exception):
    """The objects or arguments cannot be used: exit 2 with the message."""


def add_output_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=("json", "table"), default=None,
                        help="default: table on a terminal, JSON otherwise")


def add_feature_gates_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--feature-gates", default="", metavar="Name=true,...",
                        help="DRA feature gates, as kube components take them")


def feature_gates(text: str) -> FeatureGates:
    try:
        return FeatureGates().with_overrides(parse_feature_gates(text))
    except ValueError as exc:
        raise InputError(f"--feature-gates: {exc}") from None


def inventory_from(objects: Iterable[Mapping[str, Any]]) -> Inventory:
    """A synced inventory of the objects of the kinds drax uses; any invalid
    object is an input error (a what-if answer from half the input would mislead)."""
    inventory = Inventory()
    for obj in objects:
        kind = obj.get("kind")
        if kind not in INVENTORY_KINDS:
            continue
        try:
            inventory.apply(kind, "ADDED", obj)
        except InvalidObject as exc:
            raise InputError(str(exc)) from None
    for kind in INVENTORY_KINDS:
        inventory.mark_synced(kind)
    return inventory


def write_output(out: TextIO, choice: str | None, *, document: Any,
                 table: Callable[[], str]) -> None:
    """JSON of `document`, or `table()`; without a choice, a table only on a terminal."""
    if (choice or ("table" if out.isatty() else "json")) == "json":
        out.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        out.write(table())
