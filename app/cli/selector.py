"""`drax selector`: which devices in these ResourceSlices does each CEL expression match?

The check a platform admin runs before rolling out a DeviceClass or claim
selector: the same `app.cel` engine the allocator uses, against a real
inventory dump (`kubectl get resourceslices -o yaml`). Runtime errors are
listed per device rather than counted as "no match", because Kubernetes
treats them as allocation failures, not as non-matching devices. An expression
that does not compile is reported the same way and makes the command exit 2,
as any bad input does, so a script cannot take it for "matches nothing".

`drax selector --objects PATH... EXPRESSION...` reads naturally, but argparse
would let `--objects` swallow the expressions; so trailing arguments that are
neither existing paths nor named like object files are taken as the
expressions (`--` also works).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from app.cel import CelCompileError, CelEvalError, compile_selector
from app.cli.common import (
    InputError,
    add_objects_argument,
    add_output_argument,
    command,
    parse_sourced,
    read_objects,
    write_output,
)
from app.model import Device, ResourceSlice
from app.sources.files import SUFFIXES


@dataclass(slots=True)
class SelectorReport:
    expression: str
    compile_error: str | None = None
    matches: list[str] = field(default_factory=list)
    non_matches: list[str] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"expression": self.expression, "compileError": self.compile_error,
                "matches": self.matches, "nonMatches": self.non_matches,
                "errors": self.errors}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "selector", help="show which devices CEL selector expressions match",
        description="Evaluate DRA CEL selector expressions (as in DeviceClasses and "
                    "ResourceClaims) against every device of the ResourceSlices given, "
                    "with Kubernetes semantics.",
        epilog="Exit status: 0 every expression compiles (runtime errors are listed per "
               "device, as the answer); 2 bad input or an expression that does not compile "
               "(the report is still printed, with the compile error).")
    add_objects_argument(parser, help="YAML/JSON files or folders with ResourceSlices "
                                      "(other kinds are ignored)")
    parser.add_argument("expressions", nargs="*", metavar="EXPRESSION",
                        help="CEL expressions, evaluated against the variable `device`")
    add_output_argument(parser)
    parser.set_defaults(func=run)


@command("selector")
def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    paths, expressions = split_arguments(args.objects, args.expressions)
    if not paths:
        raise InputError("--objects needs at least one file or folder")
    if not expressions:
        raise InputError("give at least one CEL expression")
    devices = load_devices(paths)
    reports = [evaluate(expression, devices) for expression in expressions]
    write_output(out, args.output, document=[r.to_dict() for r in reports],
                 table=lambda: render_table(reports, device_count=len(devices)))
    broken = [r.expression for r in reports if r.compile_error is not None]
    if broken:
        raise InputError(f"{len(broken)} of {len(reports)} expressions do not compile: "
                         + ", ".join(repr(e) for e in broken))
    return 0


def split_arguments(objects: list[str], expressions: list[str]) -> tuple[list[str], list[str]]:
    """Separate object paths from expressions that argparse put into `--objects`."""
    if expressions:
        return objects, expressions
    for i, item in enumerate(objects):
        if not _looks_like_path(item):
            return objects[:i], objects[i:]
    return objects, []


def _looks_like_path(item: str) -> bool:
    return Path(item).exists() or item.endswith(SUFFIXES)


def load_devices(paths: list[str]) -> list[Device]:
    devices: list[Device] = []
    for item in read_objects(paths):
        if item.obj.get("kind") == "ResourceSlice":
            resource_slice: ResourceSlice = parse_sourced("ResourceSlice", item)
            devices.extend(resource_slice.devices)
    return devices


def evaluate(expression: str, devices: list[Device]) -> SelectorReport:
    report = SelectorReport(expression)
    try:
        selector = compile_selector(expression)
    except CelCompileError as exc:
        report.compile_error = str(exc)
        return report
    for device in devices:
        try:
            matched = selector.matches(device)
        except CelEvalError as exc:
            report.errors.append({"device": device.id,
                                  "error": getattr(exc, "detail", str(exc))})
            continue
        (report.matches if matched else report.non_matches).append(device.id)
    return report


def render_table(reports: list[SelectorReport], *, device_count: int) -> str:
    lines: list[str] = []
    for report in reports:
        lines.append(f"EXPRESSION  {report.expression}")
        if report.compile_error is not None:
            lines.append("  compile error:")
            lines.extend(f"    {line}" for line in report.compile_error.splitlines())
            lines.append("")
            continue
        lines.append(f"  {len(report.matches)} of {device_count} devices match, "
                     f"{len(report.errors)} errors")
        lines.extend(f"  MATCH     {device}" for device in report.matches)
        lines.extend(f"  no match  {device}" for device in report.non_matches)
        lines.extend(f"  ERROR     {e['device']}: {e['error']}" for e in report.errors)
        lines.append("")
    return "\n".join(lines)
