"""The dashboard pictures' drawing, on made-up series: titles, axes and legends
are drawn, ticks cover the data, values read in the panel's unit."""

from __future__ import annotations

import io

from PIL import Image

from app.topology.plot import WHITE
from tests.observability.render import (
    HEADER,
    LEGEND_W,
    PAD,
    UNIT_H,
    UNIT_W,
    Line,
    axis_ticks,
    draw_dashboard,
    format_value,
    legend,
    nice_ticks,
)

DASHBOARD = {"title": "drax / test", "panels": [
    {"type": "timeseries", "title": "Latency", "gridPos": {"x": 0, "y": 0, "w": 12, "h": 8},
     "fieldConfig": {"defaults": {"unit": "s"}},
     "targets": [{"refId": "A", "expr": "x", "legendFormat": "p99 {{verb}}"}]},
    {"type": "bargauge", "title": "Scores", "gridPos": {"x": 12, "y": 0, "w": 12, "h": 8},
     "targets": [{"refId": "A", "expr": "y", "legendFormat": "{{score}}"}]},
    {"type": "stat", "title": "Aligned", "gridPos": {"x": 0, "y": 8, "w": 12, "h": 8},
     "fieldConfig": {"defaults": {"unit": "percentunit"}},
     "targets": [{"refId": "A", "expr": "z"}]},
    {"type": "timeseries", "title": "Empty", "gridPos": {"x": 12, "y": 8, "w": 12, "h": 8},
     "targets": [{"refId": "A", "expr": "w"}]},
]}


def inked(image: Image.Image, box: tuple[int, int, int, int]) -> int:
    return sum(n for n, c in image.crop(box).getcolors(10_000_000) or [] if c != WHITE)


def test_every_panel_has_its_title_axes_and_legend() -> None:
    series = [
        [Line("p99 filter", [(100.0 + t, 0.001 * t) for t in range(20)]),
         Line("p99 bind", [(100.0 + t, 0.002 * t) for t in range(20)])],
        [Line(s, [(119.0, float(n))]) for s, n in (("10", 1), ("2", 5), ("6", 59))],
        [Line("one PCIe root", [(119.0, 0.89)])],
        [],
    ]
    with Image.open(io.BytesIO(draw_dashboard(DASHBOARD, series, start=100.0, end=120.0))) \
            as image:
        picture = image.convert("RGB")
    assert picture.width == 24 * UNIT_W + 2 * PAD
    assert inked(picture, (0, 0, picture.width, HEADER - 10)) > 500  # the dashboard's title
    for panel in DASHBOARD["panels"]:
        g = panel["gridPos"]  # type: ignore[index]
        left, top = PAD + g["x"] * UNIT_W, HEADER + g["y"] * UNIT_H
        assert inked(picture, (left + 4, top + 4, left + 200, top + 26)) > 100, panel
        right, bottom = left + g["w"] * UNIT_W - 10, top + g["h"] * UNIT_H - 10
        assert inked(picture, (left + 4, top + 30, right, bottom)) > 200, panel
    # The time series: a legend right of the plot, value labels left of it and
    # the time axis under it, each in its own strip.
    g = DASHBOARD["panels"][0]["gridPos"]  # type: ignore[index]
    left, top = PAD + g["x"] * UNIT_W, HEADER + g["y"] * UNIT_H
    right, bottom = left + g["w"] * UNIT_W - 14, top + g["h"] * UNIT_H - 14
    assert inked(picture, (right - LEGEND_W + 10, top + 30, right, bottom)) > 100
    assert inked(picture, (left + 8, top + 30, left + 24, bottom - 30)) > 50
    assert inked(picture, (left + 60, bottom - 28, right - LEGEND_W - 10, bottom)) > 100


def test_ticks_cover_the_data_in_round_steps() -> None:
    assert nice_ticks(0, 0.6) == [0.0, 0.2, 0.4, 0.6]
    assert nice_ticks(0, 5.0) == [0, 2, 4, 6]
    assert nice_ticks(0, 3991)[-1] == 4000
    assert axis_ticks(0, 120 * 2**20, "bytes") == [0, 50 * 2**20, 100 * 2**20, 150 * 2**20]


def test_values_read_in_the_panels_unit() -> None:
    assert format_value(0.0042, "s") == "4.2 ms"
    assert format_value(2.5, "s") == "2.5 s"
    assert format_value(100 * 2**20, "bytes") == "100 MiB"
    assert format_value(0.83, "percentunit") == "83 %"
    assert format_value(2500, "short") == "2.5k"
    assert format_value(0.5, "reqps") == "0.5 req/s"


def test_legends_follow_the_legend_format() -> None:
    target = {"refId": "A", "legendFormat": "failed: {{cause}}"}
    assert legend(target, {"cause": "conflict", "job": "drax"}) == "failed: conflict"
    assert legend({"refId": "B"}, {"verb": "bind"}) == "verb=bind"
    assert legend({"refId": "C"}, {}) == "C"
