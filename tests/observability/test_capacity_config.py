"""`capacity.shapes`: the config section the capacity gauges are computed for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.capacity import DEFAULT_SHAPES, CapacityShape, parse_capacity
from app.config import load_settings
from app.runtime import capacity_shapes


def test_defaults_are_the_three_documented_shapes() -> None:
    assert parse_capacity({}) == DEFAULT_SHAPES
    assert [s.name for s in DEFAULT_SHAPES] == ["1-gpu", "2-gpu-1-nic-same-root", "8-gpu"]
    assert capacity_shapes(load_settings(environ={})) == DEFAULT_SHAPES


def test_shapes_from_a_config_file(tmp_path: Path) -> None:
    cfg = tmp_path / "drax.yaml"
    cfg.write_text("capacity:\n  shapes:\n    - {name: four, gpus: 4, nics: 2, same_root: true}\n")
    shapes = capacity_shapes(load_settings(config_path=cfg, environ={}))
    assert shapes == (CapacityShape(name="four", gpus=4, nics=2, same_root=True),)
    claim = shapes[0].claim()
    assert [r.name for r in claim.spec.requests] == ["gpu", "nic"]
    assert len(claim.spec.constraints) == 1


@pytest.mark.parametrize(("section", "message"), [
    ({"shape": []}, "unknown key(s) shape"),
    ({"shapes": {}}, "expected a list"),
    ({"shapes": [{"gpus": 1}]}, "capacity.shapes[0].name"),
    ({"shapes": [{"name": "x", "gpus": 0}]}, "capacity.shapes[0].gpus"),
    ({"shapes": [{"name": "x", "gpus": 1, "same_root": True}]}, "same_root"),
    ({"shapes": [{"name": "x", "gpus": 1, "colour": "red"}]}, "unknown key(s) colour"),
    ({"shapes": [{"name": "x", "gpus": 1}, {"name": "x", "gpus": 2}]}, "unique"),
])
def test_bad_shapes_are_refused_with_the_key(section: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(")
                       .replace(")", r"\)")):
        parse_capacity(section)


def test_drax_serve_stops_on_a_bad_shape_with_exit_2(tmp_path: Path) -> None:
    cfg = tmp_path / "drax.yaml"
    cfg.write_text("capacity:\n  shapes:\n    - {name: x, gpus: -1}\n")
    done = subprocess.run([sys.executable, "-m", "app", "serve", "--config", str(cfg)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert "capacity.shapes[0].gpus" in done.stderr
