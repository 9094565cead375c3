"""Pictures of the dashboards' panels from a real run, for the README.

There is no Grafana engine here, so this draws each panel's series, as
Prometheus returns them for the panel's own queries (variables resolved as in
test_prometheus.py), with Pillow and the font, palette and PNG writer of
`drax simulate --plot` (app/topology/plot.py). Panels sit where the
dashboard's gridPos puts them, each with its title, a y axis in the panel's
unit, a time axis in seconds since the run started, and a legend naming each
series by the panel's legendFormat. Time series are lines; bar gauges are
bars of each series' last value; stats are that value in large figures.

`python -m tests.observability.render docs/img` (needs prometheus on PATH).
"""

from __future__ import annotations

import math
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from PIL import Image, ImageDraw

from app.topology.plot import MUTED, TEXT, WHITE, Box, fit_text, font, palette, png
from tests.observability.stack import (
    Stack,
    dashboards,
    panels,
    prometheus_binaries,
    running,
    substitute,
)

UNIT_W: Final = 56
UNIT_H: Final = 36
PAD: Final = 12
HEADER: Final = 64
FRAME: Final = (190, 190, 190)
GRID: Final = (232, 232, 232)
LEGEND_W: Final = 210
Y_TICKS: Final = 4

Series = list[tuple[float, float]]


@dataclass(slots=True, frozen=True)
class Line:
    label: str
    points: Series


def panel_series(stack: Stack, panel: Mapping[str, Any], values: Mapping[str, str]
                 ) -> list[Line]:
    out = []
    for target in panel["targets"]:
        expr = substitute(target["expr"], values, range_seconds=stack.range_seconds)
        for s in stack.query_range(expr):
            points = [(float(t), float(v)) for t, v in s["values"]
                      if math.isfinite(float(v))]
            if points:
                out.append(Line(legend(target, s["metric"]), points))
    return out


def legend(target: Mapping[str, Any], metric: Mapping[str, str]) -> str:
    """Grafana's legendFormat: `{{label}}` replaced by the series' label value."""
    fmt = target.get("legendFormat")
    if not fmt:
        return ", ".join(f"{k}={v}" for k, v in sorted(metric.items())) or target["refId"]
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: metric.get(m.group(1), ""), fmt).strip()


def format_value(value: float, unit: str | None) -> str:
    """A value in the panel's unit, short: axis ticks and stats."""
    if unit == "percentunit":
        return f"{value * 100:.0f} %"
    if unit == "s":
        for scale, suffix in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
            if abs(value) >= scale or scale == 1e-6:
                return f"{_short(value / scale)} {suffix}" if value else "0"
    if unit == "bytes":
        for scale, suffix in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B")):
            if abs(value) >= scale or scale == 1:
                return f"{_short(value / scale)} {suffix}" if value else "0"
    suffix = {"reqps": " req/s", "ops": "/s"}.get(unit or "", "")
    for scale, si in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{_short(value / scale)}{si}{suffix}"
    return f"{_short(value)}{suffix}"


def _short(value: float) -> str:
    if value == int(value):
        return str(int(value))
    return f"{value:.2f}".rstrip("0").rstrip(".") if abs(value) < 10 else f"{value:.1f}"


def nice_ticks(low: float, high: float, count: int = Y_TICKS) -> list[float]:
    """Round tick values covering [low, high]: steps of 1, 2 or 5 times a power of ten."""
    span = (high - low) or abs(high) or 1.0
    raw = span / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step + 1e-9)
    last = max(first + 1, math.ceil(high / step - 1e-9))
    return [round(i * step, 12) for i in range(first, last + 1)]


def axis_ticks(low: float, high: float, unit: str | None) -> list[float]:
    """`nice_ticks`, in binary steps for bytes (1, 2, 5 x a power of ten of KiB, MiB...)."""
    scale = 1.0
    if unit == "bytes":
        while max(abs(low), abs(high)) >= 1024 * scale:
            scale *= 1024
    return [t * scale for t in nice_ticks(low / scale, high / scale)]


class PanelPainter:
    """Draws one panel into its box of the dashboard's picture."""

    def __init__(self, draw: ImageDraw.ImageDraw, box: Box, panel: Mapping[str, Any],
                 lines: Sequence[Line], *, start: float, end: float) -> None:
        self.draw = draw
        self.box = box
        self.panel = panel
        self.lines = lines
        self.start, self.end = start, end
        self.unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit")
        self.colors = palette([line.label for line in lines])
        self.title_font, self.font, self.small = font(15), font(12), font(11)

    def paint(self) -> None:
        left, top, right, bottom = self.box
        self.draw.rectangle(self.box, outline=FRAME)
        self.draw.text((left + 8, top + 6), self.panel.get("title", ""), fill=TEXT,
                       font=self.title_font)
        area = (left + 8, top + 30, right - 8, bottom - 8)
        if not self.lines:
            self.draw.text((area[0], area[1] + 10), "no data", fill=MUTED, font=self.font)
        elif self.panel["type"] == "stat":
            self._stat(area)
        elif self.panel["type"] == "bargauge":
            self._bars(area)
        else:
            self._time_series(area)

    def _time_series(self, area: Box) -> None:
        left, top, right, bottom = area
        legend_left = right - LEGEND_W
        self._legend((legend_left + 10, top, right, bottom))
        values = [v for line in self.lines for _, v in line.points]
        ticks = axis_ticks(min(0.0, min(values)), max(values), self.unit)
        labels = [format_value(t, self.unit) for t in ticks]
        axis_w = max(int(self.draw.textlength(s, font=self.small)) for s in labels) + 8
        plot = (left + axis_w, top + 4, legend_left - 4, bottom - 30)
        low, high = ticks[0], ticks[-1]

        def y_of(v: float) -> float:
            return plot[3] - (v - low) / ((high - low) or 1.0) * (plot[3] - plot[1])

        for tick, text in zip(ticks, labels, strict=True):
            y = y_of(tick)
            self.draw.line((plot[0], y, plot[2], y), fill=GRID)
            self.draw.text((plot[0] - 6, y), text, fill=MUTED, font=self.small, anchor="rm")
        duration = (self.end - self.start) or 1.0

        def x_of(t: float) -> float:
            return plot[0] + (t - self.start) / duration * (plot[2] - plot[0])

        for second in nice_ticks(0.0, duration, 5):
            if second <= duration + 1e-9:
                x = x_of(self.start + second)
                self.draw.line((x, plot[3], x, plot[3] + 4), fill=FRAME)
                self.draw.text((x, plot[3] + 6), f"{_short(second)}", fill=MUTED,
                               font=self.small, anchor="mt")
        self.draw.line((plot[0], plot[3], plot[2], plot[3]), fill=FRAME)
        self.draw.text(((plot[0] + plot[2]) / 2, bottom - 2), "seconds since the run started",
                       fill=MUTED, font=self.small, anchor="mb")
        for line in self.lines:
            xy = [(x_of(t), y_of(v)) for t, v in line.points]
            color = self.colors[line.label]
            if len(xy) == 1:
                x, y = xy[0]
                self.draw.ellipse((x - 2, y - 2, x + 2, y + 2), fill=color)
            else:
                self.draw.line(xy, fill=color, width=2)

    def _legend(self, area: Box) -> None:
        left, top, right, bottom = area
        rows = max(1, (bottom - top) // 17)
        shown = self.lines if len(self.lines) <= rows else self.lines[:rows - 1]
        for i, line in enumerate(shown):
            y = top + 4 + i * 17
            self.draw.rectangle((left, y + 2, left + 10, y + 12), fill=self.colors[line.label])
            self.draw.text((left + 16, y + 7), fit_text(self.draw, line.label, right - left - 16,
                                                    self.small),
                           fill=TEXT, font=self.small, anchor="lm")
        if len(shown) < len(self.lines):
            self.draw.text((left + 16, top + 4 + len(shown) * 17 + 7),
                           f"+ {len(self.lines) - len(shown)} more series", fill=MUTED,
                           font=self.small, anchor="lm")

    def _bars(self, area: Box) -> None:
        left, top, right, bottom = area
        last = sorted(((line.label, line.points[-1][1]) for line in self.lines),
                      key=lambda item: _bucket_order(item[0]))
        high = max((v for _, v in last), default=0.0) or 1.0
        label_w = min(160, max(int(self.draw.textlength(label, font=self.small))
                               for label, _ in last) + 8)
        rows = max(1, (bottom - top) // 18)
        row_h = min(24, (bottom - top) // max(1, min(len(last), rows)))
        for i, (label, value) in enumerate(last[:rows]):
            y = top + i * row_h
            self.draw.text((left + label_w - 6, y + row_h / 2), fit_text(
                self.draw, label, label_w - 8, self.small), fill=TEXT, font=self.small,
                anchor="rm")
            width = (right - 70 - left - label_w) * max(0.0, value) / high
            self.draw.rectangle((left + label_w, y + 3, left + label_w + max(1, width),
                                 y + row_h - 3), fill=self.colors[label])
            self.draw.text((left + label_w + width + 6, y + row_h / 2),
                           format_value(value, self.unit), fill=MUTED, font=self.small,
                           anchor="lm")

    def _stat(self, area: Box) -> None:
        left, top, right, bottom = area
        big = font(40)
        width = (right - left) // max(1, len(self.lines))
        for i, line in enumerate(self.lines):
            x = left + i * width + width / 2
            self.draw.text((x, (top + bottom) / 2 - 10), format_value(line.points[-1][1],
                                                                      self.unit),
                           fill=self.colors[line.label], font=big, anchor="mm")
            self.draw.text((x, (top + bottom) / 2 + 28), f"{line.label} (last value)",
                           fill=MUTED, font=self.font, anchor="mm")


def _bucket_order(label: str) -> tuple[int, float, str]:
    """Bars in numeric order when labelled by numbers (scores, histogram `le`s)."""
    try:
        return (0, float(label), label)
    except ValueError:
        return (1, 0.0, label)


def render(stack: Stack, dashboard: Mapping[str, Any]) -> bytes:
    values = stack.variables(dashboard)
    series = [panel_series(stack, panel, values) for panel in panels(dashboard)]
    return draw_dashboard(dashboard, series, start=stack.started, end=stack.finished)


def draw_dashboard(dashboard: Mapping[str, Any], series: Sequence[Sequence[Line]], *,
                   start: float, end: float) -> bytes:
    """The picture of `dashboard` whose panels (in `panels` order) show `series`."""
    shown = panels(dashboard)
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in shown)
    width, height = 24 * UNIT_W + 2 * PAD, HEADER + rows * UNIT_H + PAD
    image = Image.new("RGB", (width, height), WHITE)
    draw = ImageDraw.Draw(image)
    draw.text((PAD, PAD), dashboard["title"], fill=TEXT, font=font(22))
    draw.text((PAD, PAD + 30), "Rendered from the dashboard's panel queries on a real "
              "Prometheus that scraped drax under a scheduling load (not a Grafana "
              "screenshot).", fill=MUTED, font=font(13))
    for panel, lines in zip(shown, series, strict=True):
        g = panel["gridPos"]
        box = (PAD + g["x"] * UNIT_W, HEADER + g["y"] * UNIT_H,
               PAD + (g["x"] + g["w"]) * UNIT_W - 6, HEADER + (g["y"] + g["h"]) * UNIT_H - 6)
        PanelPainter(draw, box, panel, lines, start=start, end=end).paint()
    return png(image)


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
