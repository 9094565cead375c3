"""Binds on their way: a filter waits, briefly, for the binds of the pods before it.

drax learns which node kube-scheduler chose for a pod only from `bind`, and
assumes the pod's devices there. kube-scheduler sends that bind from a
goroutine of its own while its next scheduling cycle already runs, so the
next pod's filter can reach drax first and see those devices as free; if that
pod then gets the same node, its bind is refused ("can no longer hold the
pod's claims") and it goes to the back-off queue, behind pods created after
it. On a real control plane a bind regularly arrives after the next pod's
filter, tens of milliseconds after its own cycle (docs/performance.md has
the figures).

So a filter or prioritize that leaves a pod with devices to allocate and at
least one node marks it as expected to bind, and the next filter of another
pod first waits until every expected bind has arrived (the bind clears its
mark before it assumes anything, and assumes before it first yields), each
for at most `wait` seconds after its mark: a pod the scheduler gave up on in
Reserve or Permit costs the next filter that long once. kube-scheduler runs one
scheduling cycle at a time, so at most one filter waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Final

# Above the longest bind delay seen on a real control plane (module doc); what
# a bind that never comes costs.
DEFAULT_BIND_WAIT_SECONDS: Final = 0.1


class PendingBinds:
    """Pods whose bind is on its way (module doc), by `namespace/name`."""

    def __init__(self, *, wait: float) -> None:
        self._wait = wait
        self._deadlines: dict[str, float] = {}
        # Made by the waiting filter, in its own event loop.
        self._waiter: asyncio.Future[None] | None = None

    def expect(self, pod_key: str) -> None:
        if self._wait > 0:
            self._deadlines[pod_key] = time.monotonic() + self._wait

    def arrived(self, pod_key: str) -> None:
        if self._deadlines.pop(pod_key, None) is not None and self._waiter is not None \
                and not self._waiter.done():
            self._waiter.set_result(None)

    async def settle(self, pod_key: str) -> float | None:
        """Wait until no other pod's bind is expected; the seconds waited, or None
        when none was. The pod's own mark goes: it is in a new cycle."""
        self._deadlines.pop(pod_key, None)
        if not self._deadlines:
            return None
        start = time.monotonic()
        loop = asyncio.get_running_loop()
        while self._deadlines:
            now = time.monotonic()
            for key in [k for k, deadline in self._deadlines.items() if deadline <= now]:
                del self._deadlines[key]
            if not self._deadlines:
                break
            self._waiter = loop.create_future()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._waiter, timeout=min(self._deadlines.values()) - now)
        self._waiter = None
        return time.monotonic() - start
