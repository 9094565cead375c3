"""What the what-if commands (`selector`, `allocate`, `simulate`, `capacity`, `preempt`) share.

They read objects from files into the same inventory the service uses, take
feature gates the way kube components do, and print JSON for programs or a
table for people. Their options (`--objects`, `-o`, `--feature-gates`,
`--config`) and the start of their `run` (`command`) live here, so every
command spells an option the same way, fails the same way on bad input (exit
2, one line on stderr) and chooses its output the same way.

A dry run is only worth as much as its settings are the server's, so the
settings that change an answer (mode, feature gates, topology, the profiles
served, the node pool, where the objects come from) are read as `drax serve`
reads them (`command_settings`): flags given > `DRAX_*` environment >
`--config` file > defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol, TextIO

import orjson

from app.config import ConfigError, Settings, load_settings
from app.inventory import KINDS, Inventory, NodePool
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
    stderr, and an `InputError` or `ConfigError` is one line `drax NAME:
    message` and exit 2."""
    def wrap(body: Body) -> Runner:
        @functools.wraps(body)
        def run(args: argparse.Namespace, *, out: TextIO | None = None,
                err: TextIO | None = None) -> int:
            err = err or sys.stderr
            try:
                return body(args, out or sys.stdout, err)
            except (InputError, ConfigError) as exc:
                print(f"drax {name}: {exc}", file=err)
                return EXIT_INPUT
        return run
    return wrap


def add_objects_argument(parser: Any, *, required: bool = True,
                         help: str = "YAML/JSON files or folders with the objects") -> None:
    """`--objects PATH...`; `parser` may be a mutually exclusive group."""
    parser.add_argument("--objects", nargs="+", required=required, metavar="PATH", help=help)


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """`--objects PATH...` or `--kubeconfig PATH`, at most one: files, or a live
    cluster listed once (`list_cluster`); without either, the settings'
    `inventory` or `kubeconfig` (`source_of`)."""
    source = parser.add_mutually_exclusive_group()
    add_objects_argument(source, required=False,
                         help="YAML/JSON files or folders with the objects "
                              "(default: the settings' inventory)")
    source.add_argument("--kubeconfig", metavar="PATH",
                        help="list a live cluster once (default: the settings' kubeconfig)")


def add_output_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=("json", "table"), default=None,
                        help="default: table on a terminal, JSON otherwise")


def add_feature_gates_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--feature-gates", metavar="Name=true,...",
                        help="DRA feature gates, as kube components take them "
                             "(default: the settings' feature_gates)")


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE",
                        help="`drax serve`'s YAML settings (config/drax.yaml), read as serve "
                             "reads them: flags given here > DRAX_* environment > this file "
                             "(default: $DRAX_CONFIG) > defaults")


def command_settings(args: argparse.Namespace, flags: Iterable[str], *,
                     check_files: bool = False) -> Settings:
    """`drax serve`'s settings, with the command's `flags` (settings keys, None
    when not given) over the `--config` file and the environment; its
    `topology` and `capacity` sections are checked as serve checks them at
    start, so a file serve refuses is refused here too. The what-if commands
    leave the server's TLS files unchecked (`load_settings`)."""
    from app.runtime import capacity_shapes, topology_config

    settings = load_settings(config_path=getattr(args, "config", None),
                             overrides={key: getattr(args, key) for key in flags},
                             check_files=check_files)
    topology_config(settings)
    capacity_shapes(settings)
    return settings


@dataclass(frozen=True, slots=True)
class Source:
    """Where a command's objects come from: files, or a cluster listed once."""

    paths: tuple[str, ...] = ()
    kubeconfig: str = ""

    def inventory(self) -> Inventory:
        if self.paths:
            return inventory_from(read_objects(self.paths))
        return list_cluster(self.kubeconfig)


def source_of(args: argparse.Namespace, settings: Settings) -> Source:
    """`--objects`, else `--kubeconfig` (when the command takes it), else the
    settings' inventory, else their kubeconfig: the order `drax serve` picks
    its source in, flags first."""
    if args.objects:
        return Source(paths=tuple(args.objects))
    if getattr(args, "kubeconfig", None):
        return Source(kubeconfig=args.kubeconfig)
    if settings.inventory:
        return Source(paths=settings.inventory)
    if settings.kubeconfig and hasattr(args, "kubeconfig"):
        return Source(kubeconfig=settings.kubeconfig)
    flags = "--objects or --kubeconfig" if hasattr(args, "kubeconfig") else "--objects"
    raise InputError(f"no objects: give {flags}, or set them in the settings "
                     "(--config, DRAX_INVENTORY)")


def served_nodes(inventory: Inventory, settings: Settings,
                 given: Sequence[str] = ()) -> list[str]:
    """The nodes `given` (default: every node known) that the settings'
    `node_selector` leaves to drax: a node outside the pool is one `drax serve`
    fails, so a what-if answer about it would mislead, and one given is an
    input error. Unknown nodes given are left to the caller."""
    names = list(given) or inventory.node_names()
    if not settings.node_selector:
        return names
    pool = NodePool(settings.node_selector)
    outside = {n for n in names if (state := inventory.node_state(n)) is not None
               and not pool.matches(state.view.node)}
    if outside & set(given):
        raise InputError(f"--node: {', '.join(sorted(outside & set(given)))} outside the "
                         f"node pool {pool.describe()} (node_selector)")
    return [n for n in names if n not in outside]


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


def list_cluster(kubeconfig: str) -> Inventory:
    """`--kubeconfig`: the cluster's objects, listed once (`_listed`). A
    kubeconfig that is not a file is named as `drax serve` names it (the
    client would call it a file without a current-context)."""
    if not Path(kubeconfig).is_file():
        raise InputError(f"kubeconfig: {kubeconfig}: no such file")
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
