"""Read Kubernetes objects from YAML/JSON files and folders.

Used for the bundled sample cluster, `drax serve --inventory`, and the what-if
commands (`drax selector`, `allocate`, `simulate`, `capacity`, `preempt`).
Accepts what `kubectl get -o yaml` and hand-written manifests contain:
multi-document YAML, JSON, and `List` / `*List` wrappers. Folders are read
recursively in name order so a load is deterministic. A file that cannot be read or parsed raises
`SourceError` naming the file; nothing is half-loaded by the caller.

A large inventory is mostly ResourceSlices in JSON `List`s. Asked for
(`raw_slices`), those are not decoded here: msgspec finds each item's bounds
and the few fields a loader needs before parsing (`RawSlice`), and the
loader decodes the slice straight into the model (`decode_resource_slice`),
or not at all when a node pool leaves it out. A loader that keeps every
slice (no node pool) has them decoded here at once (`parsed_slices`,
`ParsedSlice`), one read of each item's JSON instead of two.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import orjson
import yaml

from app.config import yaml_problem
from app.model import ResourceSlice, decode_listed_slice

# libyaml's loader when the wheel has it: several times faster on large inventories.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

SUFFIXES = (".yaml", ".yml", ".json")


class SourceError(Exception):
    """A file that cannot be read or does not hold Kubernetes objects."""


def iter_files(paths: Iterable[str | Path]) -> Iterator[Path]:
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*")
                              if p.is_file() and p.suffix in SUFFIXES)
        elif path.is_file():
            yield path
        elif path.exists():
            raise SourceError(f"{path}: not a regular file or folder")
        else:
            raise SourceError(f"{path}: no such file or directory")


def load_objects(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """All objects in the given files/folders, in file order, `List`s flattened."""
    objects: list[dict[str, Any]] = []
    for path in iter_files(paths):
        objects.extend(_load_file(path))
    return objects


def iter_objects(paths: Iterable[str | Path]) -> Iterator[dict[str, Any]]:
    """The objects of `load_objects`, read one file at a time: a big inventory
    split over several files never has all its raw objects in memory at once.
    A file that fails raises `SourceError` after the earlier files' objects."""
    for path in iter_files(paths):
        yield from _load_file(path)


class Sourced(NamedTuple):
    """An object and the file it was read from, for errors that name the file."""

    path: Path
    obj: dict[str, Any]


def iter_sourced(paths: Iterable[str | Path], *, raw_slices: bool = False,
                 parsed_slices: bool = False) -> Iterator[Sourced]:
    """`iter_objects`, each object with its file: an object the inventory rejects
    is reported where the user can find it. With `raw_slices`, the slices of
    a JSON `List` come as `RawSlice`s; with `parsed_slices` too, those the
    typed decoder reads as written come as `ParsedSlice`s (a malformed one
    stays a `RawSlice`, for the reference parse to name what is wrong)."""
    for path in iter_files(paths):
        for obj in _load_file(path, raw_slices=raw_slices, parsed_slices=parsed_slices):
            yield Sourced(path, obj)


class RawSlice(dict[str, Any]):
    """A ResourceSlice of a JSON file, undecoded: as a dict only its `kind`,
    `metadata.name`, `spec.nodeName` and `spec.perDeviceNodeSelection` (what a
    loader reads before parsing, as published), and the whole object's JSON in
    `raw` for `decode_resource_slice`."""

    __slots__ = ("raw",)

    def __init__(self, head: dict[str, Any], raw: msgspec.Raw) -> None:
        super().__init__(head)
        self.raw = raw


class ParsedSlice(dict[str, Any]):
    """A ResourceSlice of a JSON file, decoded into the model (`slice`); as a
    dict its `kind` and `metadata.name`."""

    __slots__ = ("slice",)

    def __init__(self, s: ResourceSlice) -> None:
        super().__init__(kind="ResourceSlice", metadata={"name": s.name})
        self.slice = s


class _HeadMeta(msgspec.Struct, gc=False):
    name: Any = None


class _HeadSpec(msgspec.Struct, gc=False):
    nodeName: Any = None
    perDeviceNodeSelection: Any = None


class _Head(msgspec.Struct, gc=False):
    kind: Any = None
    metadata: _HeadMeta | None = None
    spec: _HeadSpec | None = None


class _ListDoc(msgspec.Struct, gc=False):
    kind: str
    items: list[msgspec.Raw]


_LIST_DOC = msgspec.json.Decoder(_ListDoc)
_HEAD = msgspec.json.Decoder(_Head)


def _raw_slices(data: bytes, path: Path, *, parsed: bool = False
                ) -> list[dict[str, Any]] | None:
    """The objects of a JSON `List` file, its slices as `RawSlice`s (with
    `parsed`, as `ParsedSlice`s where the typed decoder reads them); None
    when the file is not one, or not UTF-8 (`_load_file` reads it whole,
    and words what it refuses), as the typed decoder does not check the text
    of an item it skips."""
    if not data.isascii():
        try:
            codecs.utf_8_decode(data, "strict", True)
        except UnicodeDecodeError:
            return None
    try:
        doc = _LIST_DOC.decode(data)
    except msgspec.DecodeError:
        return None
    kind = doc.kind
    if kind != "List" and not kind.endswith("List"):
        return None
    item_kind = _item_kind(kind)
    out: list[dict[str, Any]] = []
    for raw in doc.items:
        if parsed:
            typed = decode_listed_slice(raw, item_kind)
            if typed is not None:
                out.append(ParsedSlice(typed))
                continue
        try:
            head = _HEAD.decode(raw)
        except msgspec.DecodeError:
            head = None
        if head is not None and (head.kind or item_kind) == "ResourceSlice":
            out.append(RawSlice(_head_dict(head), raw))
            continue
        out.extend(_flatten(_kinded(orjson.loads(memoryview(raw)), item_kind), path))
    return out


def _item_kind(list_kind: str) -> str | None:
    """The kind of a `<Kind>List`'s items; None for a `List`, whose items name theirs."""
    return list_kind[:-4] if list_kind != "List" else None


def _kinded(item: Any, item_kind: str | None) -> Any:
    """A List's item, given the list's item kind where it names none."""
    if isinstance(item, Mapping) and item_kind and "kind" not in item:
        return {**item, "kind": item_kind}
    return item


def _head_dict(head: _Head) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "ResourceSlice"}
    if head.metadata is not None:
        out["metadata"] = {"name": head.metadata.name}
    if head.spec is not None:
        out["spec"] = {"nodeName": head.spec.nodeName,
                       "perDeviceNodeSelection": head.spec.perDeviceNodeSelection}
    return out


def _load_file(path: Path, *, raw_slices: bool = False,
               parsed_slices: bool = False) -> list[dict[str, Any]]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SourceError(f"{path}: {exc.strerror or exc}") from None
    if raw_slices and path.suffix == ".json":
        try:
            listed = _raw_slices(data, path, parsed=parsed_slices)
        except orjson.JSONDecodeError as exc:
            raise SourceError(f"{path}: cannot parse: {exc}") from None
        if listed is not None:
            return listed
    try:
        if path.suffix == ".json":
            # orjson: a 100,000-node inventory is gigabytes of JSON, and the
            # stdlib decoder would be a large share of the start-up time
            docs: list[Any] = [orjson.loads(data)]
        else:
            docs = list(yaml.load_all(data.decode("utf-8"), Loader=_YAML_LOADER))
    except (yaml.YAMLError, orjson.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SourceError(f"{path}: cannot parse: {yaml_problem(exc)}") from None
    out: list[dict[str, Any]] = []
    for doc in docs:
        if doc is None:
            continue
        out.extend(_flatten(doc, path))
    return out


def _flatten(doc: Any, path: Path) -> Iterator[dict[str, Any]]:
    if isinstance(doc, list):
        for item in doc:
            yield from _flatten(item, path)
        return
    if not isinstance(doc, Mapping) or not isinstance(doc.get("kind"), str):
        raise SourceError(f"{path}: expected Kubernetes objects with a 'kind', got "
                          f"{type(doc).__name__}")
    kind: str = doc["kind"]
    if kind == "List" or (kind.endswith("List") and isinstance(doc.get("items"), list)):
        item_kind = _item_kind(kind)
        for item in doc.get("items") or []:
            yield from _flatten(_kinded(item, item_kind), path)
        return
    yield dict(doc)
