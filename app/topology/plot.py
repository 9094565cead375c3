"""A picture of who holds which device: one row per node, devices grouped by
NUMA node (wide gaps) and PCIe root (narrow gaps), each coloured by the pod
holding it, free ones grey. GPUs are full-height cells, NICs half-height.

It encodes the PNG itself (zlib + struct, a few dozen lines) because drax adds
no plotting dependency; the bytes are returned, the caller writes the file.
Partitions of one GPU are drawn as that one GPU (a topology unit).
"""

from __future__ import annotations

import colorsys
import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from app.allocator.types import DeviceId
from app.topology.normalise import NodeTopology

CELL: Final = 8
HEIGHT: Final = 12
NIC_HEIGHT: Final = 6
ROW_GAP: Final = 4
ROOT_GAP: Final = 3
NUMA_GAP: Final = 8
MARGIN: Final = 6
WHITE: Final = (255, 255, 255)
FREE: Final = (210, 210, 210)

Color = tuple[int, int, int]


@dataclass(slots=True, frozen=True)
class Cell:
    numa: int | None
    root: str | None
    nic: bool
    holder: str | None  # pod key, None when free


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


def pod_color(pod: str) -> Color:
    """A stable, well-spread colour per pod (hue from a hash of its key)."""
    h = zlib.crc32(pod.encode())
    r, g, b = colorsys.hsv_to_rgb((h % 360) / 360, 0.55 + (h >> 9) % 40 / 100,
                                  0.6 + (h >> 17) % 35 / 100)
    return int(r * 255), int(g * 255), int(b * 255)


def _row_layout(cells: Sequence[Cell]) -> list[tuple[int, Cell]]:
    x, out, previous = MARGIN, [], None
    for cell in cells:
        if previous is not None:
            x += NUMA_GAP if cell.numa != previous.numa else (
                ROOT_GAP if cell.root != previous.root else 1)
        out.append((x, cell))
        x += CELL
        previous = cell
    return out


def render_png(rows: Sequence[Sequence[Cell]]) -> bytes:
    layouts = [_row_layout(r) for r in rows]
    width = max((x + CELL for layout in layouts for x, _ in layout), default=0) + MARGIN
    height = 2 * MARGIN + len(rows) * (HEIGHT + ROW_GAP)
    pixels = [[WHITE] * width for _ in range(height)]
    for index, layout in enumerate(layouts):
        top = MARGIN + index * (HEIGHT + ROW_GAP)
        for x, cell in layout:
            color = FREE if cell.holder is None else pod_color(cell.holder)
            first = top + (HEIGHT - NIC_HEIGHT if cell.nic else 0)
            for y in range(first, top + HEIGHT):
                pixels[y][x:x + CELL] = [color] * CELL
    return encode_png(width, height, pixels)


def encode_png(width: int, height: int, pixels: Sequence[Sequence[Color]]) -> bytes:
    """8-bit RGB PNG bytes of `pixels` (rows of (r, g, b)), no dependency."""
    raw = b"".join(b"\x00" + bytes(c for px in row for c in px) for row in pixels)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
