"""A picture of who holds which device, readable without the code.

One row per node, named on the left; its devices grouped by NUMA node (wide
gaps, labelled under the row) and PCIe root (narrow gaps); GPUs are tall
cells, NICs short ones; each cell coloured by the pod holding it, free ones
grey. A title says what was simulated, a key under the rows explains the
shapes, and a legend names the pod of every colour. Partitions of one GPU are
drawn as that one GPU (a topology unit).

Pillow draws it: text needs a font, and Pillow's own (FreeType, shipped in
its wheels) makes one dependency of a well-kept library instead of a bitmap
font kept here. `palette`, `font` and `png` are shared with the dashboard
pictures (tests/observability/render.py), so both read alike.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from PIL import Image, ImageDraw, ImageFont

from app.allocator.types import DeviceId
from app.topology.normalise import NodeTopology

CELL: Final = 18  # a device's width
GPU_HEIGHT: Final = 30
NIC_HEIGHT: Final = 15
CELL_GAP: Final = 2
ROOT_GAP: Final = 8
NUMA_GAP: Final = 22
ROW_GAP: Final = 26  # room for the NUMA labels under a row
MARGIN: Final = 16
TEXT: Final = (30, 30, 30)
MUTED: Final = (110, 110, 110)
WHITE: Final = (255, 255, 255)
FREE: Final = (215, 215, 215)
MIN_WIDTH: Final = 640
LEGEND_SWATCH: Final = 14
LEGEND_COLUMN: Final = 230
LEGEND_MAX: Final = 60  # pods named in the legend; more are counted

Color = tuple[int, int, int]
Box = tuple[int, int, int, int]  # left, top, right, bottom (inclusive)

KEY: Final = ("One row per node. Tall cells: GPUs; short cells: NICs.",
              "Narrow gaps separate PCIe roots, wide gaps NUMA nodes.",
              "Colour: the pod holding the device (legend below); grey: free.")

# Twenty colours far apart in hue and lightness, the first ones the most
# distinct: pods are coloured in order of appearance, so a small workload
# never has two pods that look alike.
PALETTE: Final[tuple[Color, ...]] = (
    (31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
    (140, 86, 75), (227, 119, 194), (23, 190, 207), (188, 189, 34), (127, 127, 127),
    (174, 199, 232), (255, 187, 120), (152, 223, 138), (255, 152, 150), (197, 176, 213),
    (196, 156, 148), (247, 182, 210), (158, 218, 229), (219, 219, 141), (57, 59, 121),
)


@dataclass(slots=True, frozen=True)
class Cell:
    numa: int | None
    root: str | None
    nic: bool
    holder: str | None  # pod key, None when free


@dataclass(slots=True, frozen=True)
class NodeRow:
    name: str
    cells: Sequence[Cell]


def node_cells(topology: NodeTopology, holders: Mapping[DeviceId, str]) -> list[Cell]:
    """One cell per unit with a topology, in (NUMA, root, GPUs before NICs) order."""
    cells = []
    for unit in topology.placed:
        members = topology.units[unit]
        topo = topology.unit_topology(unit)
        holder = next((holders[d] for d in members if d in holders), None)
        cells.append(Cell(numa=topo.numa_node, root=topo.pcie_root,
                          nic=any(d in topology.nics for d in members), holder=holder))
    return sorted(cells, key=lambda c: (c.numa is None, c.numa or 0, c.root or "", c.nic))


def hashed_color(key: str) -> Color:
    """A stable colour for a key beyond the palette (hue from a hash of the key)."""
    import colorsys

    h = zlib.crc32(key.encode())
    r, g, b = colorsys.hsv_to_rgb((h % 360) / 360, 0.55 + (h >> 9) % 40 / 100,
                                  0.6 + (h >> 17) % 35 / 100)
    return int(r * 255), int(g * 255), int(b * 255)


def palette(keys: Sequence[str]) -> dict[str, Color]:
    """Each key's colour: the palette in order, then hashed colours."""
    out: dict[str, Color] = {}
    for key in keys:
        if key not in out:
            out[key] = PALETTE[len(out)] if len(out) < len(PALETTE) else hashed_color(key)
    return out


def font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """Pillow's built-in font at `size` pixels."""
    return ImageFont.load_default(size)


def png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


@dataclass(slots=True, frozen=True)
class PlacedCell:
    node: str
    cell: Cell
    box: Box


@dataclass
class HolderPlot:
    """The layout of one picture; `cells` says where each device is drawn."""

    rows: Sequence[NodeRow]
    title: str

    def __post_init__(self) -> None:
        self._title_font = font(20)
        self._font = font(14)
        self._small = font(12)
        self.colors = palette([c.holder for r in self.rows for c in r.cells if c.holder])
        probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
        self._label_width = max((int(probe.textlength(r.name, font=self._font))
                                 for r in self.rows), default=0) + 14
        self._title_height = 34 + 16 * len(KEY) + 10  # the title and the key under it
        self.cells: list[PlacedCell] = []
        self._numa_labels: list[tuple[int, int, str]] = []  # x, y, text
        y = MARGIN + self._title_height
        for row in self.rows:
            self._place_row(row, top=y)
            y += GPU_HEIGHT + ROW_GAP
        self._rows_bottom = y
        right = max((p.box[2] for p in self.cells), default=0) + MARGIN
        self.width = max(MIN_WIDTH, right, int(probe.textlength(
            self.title, font=self._title_font)) + 2 * MARGIN)
        per_line = max(1, (self.width - 2 * MARGIN) // LEGEND_COLUMN)
        entries = min(len(self.colors), LEGEND_MAX) + 1  # + "free"
        more = 1 if len(self.colors) > LEGEND_MAX else 0
        self._legend_top = self._rows_bottom + 6
        self.height = (self._legend_top + 24 + ((entries + more + per_line - 1) // per_line)
                       * 22 + MARGIN)

    def _place_row(self, row: NodeRow, *, top: int) -> None:
        x = MARGIN + self._label_width
        previous: Cell | None = None
        numa_start = x
        for cell in row.cells:
            if previous is not None:
                if cell.numa != previous.numa:
                    self._numa_labels.append((numa_start, top + GPU_HEIGHT + 4,
                                              _numa_name(previous.numa)))
                    x += NUMA_GAP
                    numa_start = x
                else:
                    x += ROOT_GAP if cell.root != previous.root else CELL_GAP
            height = NIC_HEIGHT if cell.nic else GPU_HEIGHT
            self.cells.append(PlacedCell(row.name, cell, (
                x, top + GPU_HEIGHT - height, x + CELL - 1, top + GPU_HEIGHT - 1)))
            x += CELL
            previous = cell
        if previous is not None:
            self._numa_labels.append((numa_start, top + GPU_HEIGHT + 4,
                                      _numa_name(previous.numa)))

    def color(self, cell: Cell) -> Color:
        return FREE if cell.holder is None else self.colors[cell.holder]

    def render(self) -> bytes:
        image = Image.new("RGB", (self.width, self.height), WHITE)
        draw = ImageDraw.Draw(image)
        draw.text((MARGIN, MARGIN), self.title, fill=TEXT, font=self._title_font)
        for i, line in enumerate(KEY):
            draw.text((MARGIN, MARGIN + 30 + 16 * i), line, fill=MUTED, font=self._small)
        row_top = MARGIN + self._title_height
        for row in self.rows:
            middle = row_top + GPU_HEIGHT // 2
            draw.text((MARGIN, middle), row.name, fill=TEXT, font=self._font, anchor="lm")
            if not row.cells:
                draw.text((MARGIN + self._label_width, middle), "no DRA devices with a topology",
                          fill=MUTED, font=self._small, anchor="lm")
            row_top += GPU_HEIGHT + ROW_GAP
        for placed in self.cells:
            draw.rectangle(placed.box, fill=self.color(placed.cell))
        for x, y, text in self._numa_labels:
            draw.text((x, y), text, fill=MUTED, font=self._small)
        self._legend(draw)
        return png(image)

    def _legend(self, draw: ImageDraw.ImageDraw) -> None:
        top = self._legend_top
        draw.text((MARGIN, top), "Pods", fill=TEXT, font=self._font)
        entries: list[tuple[Color, str]] = [(FREE, "free")]
        entries += [(color, pod) for pod, color in sorted(self.colors.items())[:LEGEND_MAX]]
        if len(self.colors) > LEGEND_MAX:
            entries.append((WHITE, f"... and {len(self.colors) - LEGEND_MAX} more pods"))
        per_line = max(1, (self.width - 2 * MARGIN) // LEGEND_COLUMN)
        for i, (color, text) in enumerate(entries):
            x = MARGIN + (i % per_line) * LEGEND_COLUMN
            y = top + 24 + (i // per_line) * 22
            draw.rectangle((x, y, x + LEGEND_SWATCH - 1, y + LEGEND_SWATCH - 1), fill=color)
            draw.text((x + LEGEND_SWATCH + 6, y + LEGEND_SWATCH // 2), fit_text(
                draw, text, LEGEND_COLUMN - LEGEND_SWATCH - 14, self._small), fill=TEXT,
                font=self._small, anchor="lm")


def _numa_name(numa: int | None) -> str:
    return "no NUMA info" if numa is None else f"NUMA {numa}"


def fit_text(draw: ImageDraw.ImageDraw, text: str, width: int,
         face: ImageFont.FreeTypeFont | ImageFont.ImageFont) -> str:
    """`text`, cut with an ellipsis to `width` pixels."""
    if draw.textlength(text, font=face) <= width:
        return text
    while text and draw.textlength(text + "…", font=face) > width:
        text = text[:-1]
    return text + "…"


def render_png(rows: Sequence[NodeRow], *, title: str) -> bytes:
    return HolderPlot(rows, title).render()
