"""The `drax` command: one subcommand per module in this package.

Each subcommand module exposes `register(subparsers)`, which adds its parser and
sets `func` to a callable taking the parsed arguments and returning the exit
code. Subcommands share the library code the service uses (inventory,
allocator, scoring), so what the CLI reports is what the extender would do.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from app import __version__

SUBCOMMANDS = ("serve", "selector", "allocate", "simulate", "capacity", "preempt")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="drax", description="Kubernetes DRA scheduler extender and what-if tools")
    parser.add_argument("--version", action="version", version=f"drax {__version__}")
    # Not required: without one, `main` prints the whole help (each command
    # with its line), not argparse's one-line complaint.
    sub = parser.add_subparsers(dest="command")
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"app.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"app.cli.{name}":
                raise
            continue
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
