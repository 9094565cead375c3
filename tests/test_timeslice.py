"""Background work in slices: the loop runs between slices, a slice waits for
quiet, and progress fires after so much work."""

from __future__ import annotations

import asyncio
import time

from app.timeslice import Progress, run_in_slices


def _busy(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pass


async def test_a_slice_waits_until_quiet_and_progress_counts_the_work() -> None:
    fired: list[int] = []
    progress = Progress(lambda: fired.append(1), every_seconds=0.004)
    loud = True
    done = 0
    seen_loud: list[int] = []

    def steps():
        nonlocal done
        for _ in range(4):
            _busy(0.002)
            done += 1
            yield

    def quiet() -> bool:
        if loud:
            seen_loud.append(done)
        return not loud

    async def hush() -> None:
        nonlocal loud
        await asyncio.sleep(0.02)
        loud = False

    await asyncio.gather(run_in_slices(steps(), slice_seconds=0.001, quiet=quiet,
                                       quiet_poll_seconds=0.001, progress=progress), hush())
    assert done == 4
    assert seen_loud and set(seen_loud) == {1}  # held after its first slice until quiet
    assert fired  # at least 0.004 s of the 0.006 s reported between slices


def test_progress_fires_once_per_period_of_work() -> None:
    fired: list[int] = []
    progress = Progress(lambda: fired.append(1), every_seconds=1.0)
    for _ in range(5):
        progress.worked(0.5)
    assert len(fired) == 2
    Progress(None, every_seconds=0.1).worked(1.0)  # no callback: nothing to call
