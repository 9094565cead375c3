"""What the what-if commands (`selector`, `allocate`, `simulate`, `capacity`) share.

They read objects from files into the same inventory the service uses, take
feature gates the way kube components do, and print JSON for programs or a
table for people. Their options (`--objects`, `-o`, `--feature-gates`) and the
start of their `run` (`command`) live here, so every command spells an option
the same way, fails the same way on bad input (exit 2, one line on stderr) and
chooses its output the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, Protocol, TextIO

import orjson

from app.features import FeatureGates, parse_feature_gates
from app.inventory import KINDS, Inventory
from app.model import InvalidObject, parse_object
from app.sources.files import Sourced, SourceError, iter_sourced

EXIT_INPUT: Final = 2


class InputError(Exception):
    """The objects or arguments cannot be used: exit 2 with the message."""


class Runner(Protocol):
    """A subcommand's `func`: the parsed arguments to an exit code; tests pass streams."""

    def __call__(self, args: argparse.Namespace, *, out: TextIO | None = None,
                 err: TextIO | None = None) -> int: ...


Body = Callable[[argparse.Namespace, TextIO, TextIO], int]


def command(name: str) -> Callable[[Body], Runner]:
    """The start every subcommand's `run` shares: streams default to stdout and
    stderr, and an `InputError` is one line `drax NAME: message` and exit 2."""
    def wrap(body: Body) -> Runner:
        @functools.wraps(body)
        def run(args: argparse.Namespace, *, out: TextIO | None = None,
                err: TextIO | None = None) -> int:
            err = err or sys.stderr
            try:
                return body(args, out or sys.stdout, err)
            except InputError as exc:
                print(f"drax {name}: {exc}", file=err)
                return EXIT_INPUT
        return run
    return wrap


def add_objects_argument(parser: Any, *, required: bool = True,
                         help: str = "YAML/JSON files or folders with the objects") -> None:
    """`--objects PATH...`; `parser` may be a mutually exclusive group."""
    parser.add_argument("--objects", nargs="+", required=required, metavar="PATH", help=help)


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """`--objects PATH...` or `--kubeconfig PATH`, exactly one: files, or a live
    cluster listed once (`list_cluster`)."""
    source = parser.add_mutually_exclusive_group(required=True)
    add_objects_argument(source, required=False)
    source.add_argument("--kubeconfig", metavar="PATH", help="list a live cluster once")


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


def read_objects(paths: Sequence[str]) -> list[Sourced]:
    """The objects in the files and folders, each with its file; an unreadable
    file is an input error."""
    try:
        return list(iter_sourced(paths))
    except SourceError as exc:
        raise InputError(str(exc)) from None


def parse_sourced(kind: str, item: Sourced) -> Any:
    """`parse_object`, an invalid object an input error naming its file."""
    try:
        return parse_object(kind, item.obj)
    except InvalidObject as exc:
        raise InputError(f"{item.path}: {exc}") from None


def inventory_from(objects: Iterable[Sourced]) -> Inventory:
    """A synced inventory of the objects of the kinds drax uses; any invalid
    object is an input error naming its file (a what-if answer from half the
    input would mislead)."""
    inventory = Inventory()
    for path, obj in objects:
        kind = obj.get("kind")
        if kind not in KINDS:
            continue
        try:
            inventory.apply(kind, "ADDED", obj)
        except InvalidObject as exc:
            raise InputError(f"{path}: {exc}") from None
    for kind in KINDS:
        inventory.mark_synced(kind)
    return inventory


def write_output(out: TextIO, choice: str | None, *, document: Any,
                 table: Callable[[], str]) -> None:
    """JSON of `document`, or `table()`; without a choice, a table only on a terminal."""
    if (choice or ("table" if out.isatty() else "json")) == "json":
        out.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        out.write(table())


def namespaced_key(text: str, flag: str) -> str:
    """`text` when it is NAMESPACE/NAME; an input error naming `flag` otherwise."""
    namespace, sep, name = text.partition("/")
    if not sep or not namespace or not name:
        raise InputError(f"{flag}: expected NAMESPACE/NAME, got {text!r}")
    return text


def source_inventory(args: argparse.Namespace) -> Inventory:
    """The inventory `add_source_arguments` chose: the files, or the cluster listed once."""
    if args.objects:
        return inventory_from(read_objects(args.objects))
    return list_cluster(args.kubeconfig)


def list_cluster(kubeconfig: str) -> Inventory:
    """`--kubeconfig`: the cluster's objects, listed once (`_listed`)."""
    return asyncio.run(_listed(kubeconfig))


async def _listed(kubeconfig: str) -> Inventory:
    """The cluster's objects, listed once as `drax serve`'s informers list them;
    a list that fails is an input error, not retried."""
    from prometheus_client import CollectorRegistry

    from app.sources.kube import (
        WATCHED_KINDS,
        KubeConfigError,
        ListError,
        WatchMetrics,
        api_client,
        list_once,
    )

    try:
        api = await api_client(kubeconfig=kubeconfig)
    except KubeConfigError as exc:
        raise InputError(str(exc)) from None
    inventory = Inventory()
    metrics = WatchMetrics(CollectorRegistry(), kinds=[w.kind for w in WATCHED_KINDS])
    try:
        await list_once(api, inventory, metrics=metrics)
    except ListError as exc:
        raise InputError(f"{kubeconfig}: {exc}") from None
    finally:
        await api.close()
    return inventory
