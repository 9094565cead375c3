"""Read Kubernetes objects from YAML/JSON files and folders.

Used for the bundled sample cluster, `drax serve --inventory`, and the what-if
commands (`drax selector`, `allocate`, `simulate`). Accepts what `kubectl get
-o yaml` and hand-written manifests contain: multi-document YAML, JSON, and
`List` / `*List` wrappers. Folders are read recursively in name order so a
load is deterministic. A file that cannot be read or parsed raises
`SourceError` naming the file; nothing is half-loaded by the caller.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import orjson
import yaml

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


def iter_sourced(paths: Iterable[str | Path]) -> Iterator[Sourced]:
    """`iter_objects`, each object with its file: an object the inventory rejects
    is reported where the user can find it."""
    for path in iter_files(paths):
        for obj in _load_file(path):
            yield Sourced(path, obj)


def _load_file(path: Path) -> list[dict[str, Any]]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SourceError(f"{path}: {exc.strerror or exc}") from None
    try:
        if path.suffix == ".json":
            # orjson: a 100,000-node inventory is gigabytes of JSON, and the
            # stdlib decoder would be a large share of the start-up time
            docs: list[Any] = [orjson.loads(data)]
        else:
            docs = list(yaml.load_all(data.decode("utf-8"), Loader=_YAML_LOADER))
    except (yaml.YAMLError, orjson.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SourceError(f"{path}: cannot parse: {exc}") from None
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
        item_kind = kind[:-4] if kind != "List" else None
        for item in doc.get("items") or []:
            if isinstance(item, Mapping) and item_kind and "kind" not in item:
                item = {**item, "kind": item_kind}
            yield from _flatten(item, path)
        return
    yield dict(doc)
