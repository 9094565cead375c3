"""Record where a running server spends its time, with py-spy, and summarise it.

py-spy samples the target process from outside (no instrumentation, so the
profile is of the same code path the benchmark times). It is not a project
dependency: install it into the venv for a profiling run
(`.venv/bin/pip install py-spy`). `Recorder` attaches to a pid for the span of
a `with` block and writes py-spy's collapsed-stack ("raw") output;
`summarize_collapsed` turns that into the two tables RESULTS.md needs: where
the samples are (self time) and which calls they happen under (inclusive time).

`python -m loadtest.profile FILE` prints the summary of a recorded file.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from loadtest.bench import BenchmarkError, stop_process

ENTRY = ("app/__main__.py", "app/cli/")
BACKGROUND = "keep_warm"  # Extender.keep_warm, the server's background task
# Leaves that are waits py-spy does not see as idle (the wait is in C with the GIL
# released): a thread-pool worker blocked on its queue, the event loop in select.
IDLE_LEAVES = frozenset({("_worker", "concurrent/futures/thread.py"),
                         ("select", "selectors.py"), ("EpollSelector.select", "selectors.py")})


@contextmanager
def recording(pid: int, out: Path, *, rate: int = 250) -> Iterator[Path]:
    """py-spy samples `pid` while the block runs; the collapsed stacks land in `out`."""
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(exe).exists():
        raise BenchmarkError("py-spy is not installed (.venv/bin/pip install py-spy)")
    log = out.with_suffix(".log")
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [exe, "record", "--pid", str(pid), "--format", "raw", "--rate", str(rate),
             "--output", str(out)], stdout=sink, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)
    time.sleep(1.0)  # let py-spy attach before the measured work starts
    try:
        yield out
    finally:
        stop_process(process, timeout=30)


def _frame(raw: str) -> tuple[str, str]:
    """`func (app/extender/verbs.py:123)` -> (`func`, `app/extender/verbs.py`):
    line numbers would split one function into many rows."""
    name, _, where = raw.partition(" (")
    return name, where.rstrip(")").rsplit(":", 1)[0]


def _area(path: str) -> str:
    """`app/extender/verbs.py` -> `app/extender`; `app/features.py` -> `app/features`."""
    parts = path.split("/")
    return "/".join(parts[:2]).removesuffix(".py")


def summarize_collapsed(text: str, *, top: int = 25) -> dict[str, Any]:
    """Sample shares from py-spy's raw output (py-spy leaves idle samples out, and
    waits it cannot see as idle, `IDLE_LEAVES`, are left out here).

    - `self`: the functions the samples land in (any code);
    - `inclusive`: drax's own functions (`app/...`) and the samples under them;
    - `by_area`: each sample charged to the drax package of its deepest `app/`
      frame (so `fractions` under the allocator counts as the allocator), marked
      when it ran in the background warming task rather than in a request;
      samples with no drax frame below the entry point are the HTTP stack
      (uvicorn, Starlette, FastAPI) and asyncio."""
    self_counts: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    areas: Counter[str] = Counter()
    total = 0
    for line in text.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_frame(f) for f in stack.split(";")
                  if f and not f.startswith(("process ", "thread "))]
        if not frames or frames[-1] in IDLE_LEAVES:
            continue
        total += count
        name, path = frames[-1]
        self_counts[f"{name} ({path})"] += count
        # The entry frames (app/__main__, app/cli) sit under everything, the event
        # loop included; drax's own work is what runs below them.
        own = [(n, p) for n, p in frames if p.startswith("app/") and not p.startswith(ENTRY)]
        for key in {f"{n} ({p})" for n, p in own}:
            inclusive[key] += count
        if not own:
            area = "HTTP stack + asyncio"
        elif any(n.endswith(BACKGROUND) for n, _ in own):
            area = f"{_area(own[-1][1])} (background warming)"
        else:
            area = _area(own[-1][1])
        areas[area] += count

    def share(counter: Counter[str], limit: int) -> list[dict[str, Any]]:
        return [{"function": name, "samples": n, "percent": round(100 * n / total, 1)}
                for name, n in counter.most_common(limit)] if total else []

    return {"samples": total, "self": share(self_counts, top),
            "inclusive": share(inclusive, top), "by_area": share(areas, 50)}


def markdown(summary: dict[str, Any], *, top: int = 20) -> str:
    lines = [f"{summary['samples']} samples.", "", "| area | % of samples |", "|---|---|"]
    lines += [f"| {a['function']} | {a['percent']} |" for a in summary["by_area"]]
    lines += ["", "| self % | function | | inclusive % | drax function |",
              "|---|---|---|---|---|"]
    rows_self, rows_incl = summary["self"][:top], summary["inclusive"][:top]
    for i in range(max(len(rows_self), len(rows_incl))):
        s = rows_self[i] if i < len(rows_self) else None
        c = rows_incl[i] if i < len(rows_incl) else None
        lines.append(f"| {s['percent'] if s else ''} | {s['function'] if s else ''} | "
                     f"| {c['percent'] if c else ''} | {c['function'] if c else ''} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.profile",
                                     description="Summarise a py-spy raw profile.")
    parser.add_argument("file")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args(argv)
    text = Path(args.file).read_text(errors="replace")
    print(markdown(summarize_collapsed(text, top=args.top), top=args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
