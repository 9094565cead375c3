"""The holder picture: every device where the layout says, in its pod's colour,
with a title, node names, a key and a legend a reader can use without the code."""

from __future__ import annotations

import io
import itertools

from PIL import Image

from app.topology.plot import (
    FREE,
    LEGEND_MAX,
    MIN_WIDTH,
    PALETTE,
    WHITE,
    Cell,
    HolderPlot,
    NodeRow,
    palette,
)


def gpu(numa: int, root: str, holder: str | None = None, *, nic: bool = False) -> Cell:
    return Cell(numa=numa, root=root, nic=nic, holder=holder)


ROWS = [
    NodeRow("node-a", [gpu(0, "r0", "ns/p1"), gpu(0, "r0", "ns/p1"), gpu(0, "r0", nic=True),
                       gpu(0, "r1"), gpu(1, "r2", "ns/p2"), gpu(1, "r2", "ns/p2", nic=True)]),
    NodeRow("node-b", []),
    NodeRow("node-c", [gpu(0, "r0", "ns/p3"), gpu(0, "r0")]),
]


def picture(plot: HolderPlot) -> Image.Image:
    with Image.open(io.BytesIO(plot.render())) as image:
        return image.convert("RGB")


def test_every_device_is_drawn_where_the_layout_says_in_its_pods_colour() -> None:
    plot = HolderPlot(ROWS, "three nodes")
    image = picture(plot)
    assert (image.width, image.height) == (plot.width, plot.height)
    assert image.width >= MIN_WIDTH
    assert [p.node for p in plot.cells] == ["node-a"] * 6 + ["node-c"] * 2
    colours = {"ns/p1": PALETTE[0], "ns/p2": PALETTE[1], "ns/p3": PALETTE[2]}
    for placed in plot.cells:
        left, top, right, bottom = placed.box
        want = FREE if placed.cell.holder is None else colours[placed.cell.holder]
        assert image.getpixel(((left + right) // 2, (top + bottom) // 2)) == want
        # NICs are half as tall as GPUs, both sitting on the row's baseline
        assert (bottom - top + 1) * (2 if placed.cell.nic else 1) == 30


def test_gaps_show_roots_and_numa_nodes() -> None:
    a = [p.box for p in HolderPlot(ROWS, "t").cells if p.node == "node-a"]
    gaps = [right_next[0] - box[2] - 1 for box, right_next in itertools.pairwise(a)]
    # same root, same root, next root, next NUMA node, same root
    assert gaps[0] == gaps[1] < gaps[2] < gaps[3] and gaps[4] == gaps[0]


def test_the_picture_has_text_a_title_labels_and_a_legend() -> None:
    plot = HolderPlot(ROWS, "a title")
    image = picture(plot)
    first_cell = plot.cells[0].box
    # the title band, the node-name column and the legend below the rows hold ink
    for box in ((0, 0, image.width, 40), (0, first_cell[1], first_cell[0] - 4, first_cell[3]),
                (0, max(p.box[3] for p in plot.cells) + 30, image.width, image.height)):
        region = image.crop(box)
        inked = sum(n for n, colour in region.getcolors(1_000_000) or [] if colour != WHITE)
        assert inked > 50, box
    # every pod's colour is in the legend too: three swatches beside the cells
    below = image.crop((0, max(p.box[3] for p in plot.cells) + 30, image.width, image.height))
    legend = {colour for _, colour in below.getcolors(1_000_000) or []}
    assert {PALETTE[0], PALETTE[1], PALETTE[2], FREE} <= legend


def test_many_pods_get_distinct_colours_and_a_capped_legend() -> None:
    pods = [f"ns/p{i:03d}" for i in range(LEGEND_MAX + 5)]  # listed in name order
    colours = palette(pods)
    assert len(set(list(colours.values())[:len(PALETTE)])) == len(PALETTE)
    row = NodeRow("big", [gpu(0, f"r{i}", pod) for i, pod in enumerate(pods)])
    plot = HolderPlot([row], "many")
    image = picture(plot)
    below = image.crop((0, max(p.box[3] for p in plot.cells) + 30, image.width, image.height))
    legend = {colour for _, colour in below.getcolors(1_000_000) or []}
    # The legend names the first LEGEND_MAX pods by name, the others only by count.
    assert {colours[p] for p in pods[:LEGEND_MAX]} <= legend
    assert not {colours[p] for p in pods[LEGEND_MAX:]} & legend
