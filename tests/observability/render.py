"""Pictures of the dashboards' panels from a real run, for the README.

There is no Grafana engine here, so this draws each panel's series, as
Prometheus returns them for the panel's own queries (variables resolved as in
test_prometheus.py), with the PNG encoder `drax simulate` uses
(app/topology/plot.py). Panels sit where the dashboard's gridPos puts them;
time series are lines (one colour per series), bar gauges and stats are bars
of each series' last value. The images carry no text (plot.py has no font):
the README lists the panels in reading order under each picture.

`python -m tests.observability.render docs/img` (needs prometheus on PATH).
"""

from __future__ import annotations

import itertools
import math
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from app.topology.plot import encode_png, pod_color
from tests.observability.stack import (
    Stack,
    dashboards,
    panels,
    prometheus_binaries,
    running,
    substitute,
)

UNIT_W: Final = 40
UNIT_H: Final = 22
PAD: Final = 6
WHITE: Final = (255, 255, 255)
FRAME: Final = (170, 170, 170)
AXIS: Final = (225, 225, 225)

Color = tuple[int, int, int]
Series = list[tuple[float, float]]


def panel_series(stack: Stack, panel: Mapping[str, Any], values: Mapping[str, str]
                 ) -> list[tuple[str, Series]]:
    out = []
    for target in panel["targets"]:
        expr = substitute(target["expr"], values, range_seconds=stack.range_seconds)
        for s in stack.query_range(expr):
            points = [(float(t), float(v)) for t, v in s["values"]
                      if math.isfinite(float(v))]
            if points:
                label = f"{target['refId']} {sorted(s['metric'].items())}"
                out.append((label, points))
    return out


def _line(pixels: list[list[Color]], a: tuple[int, int], b: tuple[int, int],
          color: Color) -> None:
    (x0, y0), (x1, y1) = a, b
    steps = max(abs(x1 - x0), abs(y1 - y0), 1)
    for i in range(steps + 1):
        x = round(x0 + (x1 - x0) * i / steps)
        y = round(y0 + (y1 - y0) * i / steps)
        pixels[y][x] = color
        if y + 1 < len(pixels):
            pixels[y + 1][x] = color


def _rect(pixels: list[list[Color]], box: tuple[int, int, int, int], color: Color, *,
          fill: bool = False) -> None:
    left, top, right, bottom = box
    for y in range(top, bottom + 1):
        if fill or y in (top, bottom):
            pixels[y][left:right + 1] = [color] * (right - left + 1)
        else:
            pixels[y][left] = pixels[y][right] = color


def draw_panel(pixels: list[list[Color]], box: tuple[int, int, int, int], kind: str,
               series: Sequence[tuple[str, Series]], *, start: float, end: float) -> None:
    _rect(pixels, box, FRAME)
    left, top, right, bottom = box[0] + PAD, box[1] + PAD, box[2] - PAD, box[3] - PAD
    _line(pixels, (left, bottom), (right, bottom), AXIS)
    if not series:
        return
    values = [v for _, points in series for _, v in points]
    low, high = min(0.0, min(values)), max(values)
    span = (high - low) or 1.0

    def y_of(v: float) -> int:
        return bottom - round((v - low) / span * (bottom - top))

    if kind in ("bargauge", "stat"):
        width = max(2, (right - left) // max(1, len(series)) - 2)
        for i, (label, points) in enumerate(series):
            x = left + i * (width + 2)
            _rect(pixels, (x, y_of(points[-1][1]), min(x + width, right), bottom),
                  pod_color(label), fill=True)
        return
    duration = (end - start) or 1.0
    for label, points in series:
        color = pod_color(label)
        xy = [(left + round((t - start) / duration * (right - left)), y_of(v))
              for t, v in points]
        for a, b in itertools.pairwise(xy):
            _line(pixels, a, b, color)
        if len(xy) == 1:
            _line(pixels, xy[0], xy[0], color)


def render(stack: Stack, dashboard: Mapping[str, Any]) -> bytes:
    values = stack.variables(dashboard)
    shown = panels(dashboard)
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in shown)
    width, height = 24 * UNIT_W + 2 * PAD, rows * UNIT_H + 2 * PAD
    pixels = [[WHITE] * width for _ in range(height)]
    for panel in shown:
        g = panel["gridPos"]
        box = (PAD + g["x"] * UNIT_W, PAD + g["y"] * UNIT_H,
               PAD + (g["x"] + g["w"]) * UNIT_W - 4, PAD + (g["y"] + g["h"]) * UNIT_H - 4)
        draw_panel(pixels, box, panel["type"], panel_series(stack, panel, values),
                   start=stack.started, end=stack.finished)
    return encode_png(width, height, pixels)


def main(argv: Sequence[str]) -> int:
    binaries = prometheus_binaries()
    if binaries is None:
        print("render: prometheus and promtool must be on PATH", file=sys.stderr)
        return 2
    out = Path(argv[0] if argv else "docs/img")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, \
            running(Path(tmp), prometheus=binaries[0]) as stack:
        for name, dashboard in dashboards().items():
            path = out / name.replace(".json", ".png")
            path.write_bytes(render(stack, dashboard))
            print(f"{path}: {dashboard['title']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
