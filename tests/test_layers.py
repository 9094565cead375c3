"""Imports in app/ only run downwards through the layers of docs/architecture.md.

Every `import` and `from ... import` in every module of app/ (including those
inside functions and `if TYPE_CHECKING:`) is read with `ast` and checked
against `LAYERS`: a module may import from its own layer or a lower one,
never a higher one. Direct imports are enough: any upward chain of imports
has an upward step, and that step is reported with its file and line. A
top-level package or module missing from `LAYERS` fails too, so a new one is
placed in the table when it is added.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parent.parent / "app"

# Lowest first; the names on one line share a layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("", "model", "features", "config", "garbage_collector", "bounded_cache",
     "timeslice"),
    ("cel",),
    ("allocator",),
    ("inventory", "topology"),
    ("extender", "sources"),
    ("binder", "capacity", "observability", "preemption"),
    ("server",),
    ("runtime",),
    ("cli", "__main__"),
)
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def _module_name(path: Path, root: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


def _imported(node: ast.AST, module: str, is_package: bool, root: Path) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level == 0:
            base = node.module or ""
        else:
            package = module.split(".") if is_package else module.split(".")[:-1]
            anchor = package[:len(package) - (node.level - 1)]
            base = ".".join([*anchor, *([node.module] if node.module else [])])
        # `from app import garbage_collector` imports the module app.garbage_collector
        return [f"{base}.{alias.name}" if base == "app" and _is_module(root, alias.name)
                else base for alias in node.names]
    return []


def _is_module(root: Path, name: str) -> bool:
    return (root / f"{name}.py").is_file() or (root / name).is_dir()


def _layer_of(module: str) -> str | None:
    """The top-level name under app/ that `module` belongs to; None outside app."""
    parts = module.split(".")
    if parts[0] != "app":
        return None
    return parts[1] if len(parts) > 1 else ""


def upward_imports(root: Path = APP) -> list[str]:
    """One line per import of a higher layer (or of a name `LAYERS` lacks)."""
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        module, is_package = _module_name(path, root)
        own = _layer_of(module)
        assert own is not None
        if own not in RANK:
            found.append(f"{path.relative_to(root.parent)}: app/{own} is in no layer of "
                         "tests/test_layers.py LAYERS")
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            for target in _imported(node, module, is_package, root):
                layer = _layer_of(target)
                if layer is None or layer == own:
                    continue
                if layer not in RANK:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno}: imports "
                                 f"{target}, and app/{layer} is in no layer")
                elif RANK[layer] > RANK[own]:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno}: imports "
                                 f"{target} (layer {RANK[layer]}: {layer}) from layer "
                                 f"{RANK[own]} ({own or 'app'})")
    return found


def test_app_imports_only_run_downwards() -> None:
    upward = upward_imports()
    assert not upward, "imports from a higher layer:\n" + "\n".join(upward)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "app"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.mark.parametrize("text", [
    "from app.server.metrics import REGISTRY\n",
    "import app.server.metrics\n",
    "from ..server import metrics\n",
    "def late():\n    from app.server import metrics\n",
])
def test_an_upward_import_is_caught_and_named(tmp_path: Path, text: str) -> None:
    root = _tree(tmp_path, {"model/__init__.py": "", "model/low.py": text,
                            "server/__init__.py": "", "server/metrics.py": ""})
    [line] = upward_imports(root)
    assert line.startswith("app/model/low.py:")
    assert "app.server" in line and "from layer 0 (model)" in line


def test_downward_and_same_layer_imports_pass(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "model/__init__.py": "", "features.py": "from app.model import x\n",
        "server/__init__.py": "from app import garbage_collector\nfrom . import app\n",
        "server/app.py": "from app.model import y\nfrom .metrics import z\n",
        "server/metrics.py": "", "garbage_collector.py": ""})
    assert upward_imports(root) == []


def test_a_package_missing_from_the_table_is_reported(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"model/__init__.py": "from app.newthing import x\n",
                            "newthing/__init__.py": ""})
    found = upward_imports(root)
    assert any("app/newthing is in no layer" in line for line in found)
