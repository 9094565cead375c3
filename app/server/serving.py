"""Run the verbs' listener (HTTP or HTTPS) and the optional probe listener in one loop.

uvicorn's own `Server.run` installs its signal handlers per server and, after a
graceful shutdown, re-raises the signal: run that way, SIGTERM would end drax
with -15 and a second listener would never hear it. Here one handler stops
every listener: each stops accepting, lets in-flight requests finish (up to
`GRACE_SECONDS`, inside the pod's default 30 s termination grace), closes
idle keep-alive connections, runs the app's shutdown, and the process exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import uvicorn

from app import garbage_collector
from app.server.tls import ReloadingContext

# kube-scheduler keeps connections alive (Go's idle timeout is 90 s); closing
# them sooner only adds reconnects to the scheduling path.
KEEP_ALIVE_SECONDS: Final = 75
GRACE_SECONDS: Final = 20


class Listener(uvicorn.Server):
    """A uvicorn server that leaves signals to `serve_all`."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


@dataclass(slots=True, frozen=True)
class ListenerSpec:
    app: Any
    host: str
    port: int
    lifespan: Literal["auto", "on", "off"] = "on"
    tls: ReloadingContext | None = None


def listener(spec: ListenerSpec, *, log_level: str = "info", access_log: bool = False,
             read_timeout: float | None = None) -> Listener:
    config = uvicorn.Config(spec.app, host=spec.host, port=spec.port, log_level=log_level,
                            access_log=access_log, workers=1,
                            timeout_keep_alive=KEEP_ALIVE_SECONDS, server_header=False,
                            log_config=None, lifespan=spec.lifespan,
                            timeout_graceful_shutdown=GRACE_SECONDS)
    config.load()
    if spec.tls is not None:
        # Set after load(): uvicorn would otherwise build a context that never
        # re-reads its files.
        config.ssl = spec.tls.context
    return Listener(config)


async def serve_all(listeners: Sequence[Listener]) -> bool:
    """Serve until SIGTERM/SIGINT or until the first listener stops; True if it started."""
    loop = asyncio.get_running_loop()

    def stop() -> None:
        for each in listeners:
            each.should_exit = True

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    # Full collections wait for a quiet moment between verbs.
    garbage_collector.defer_full_collections()
    collector = loop.create_task(garbage_collector.idle_collector(
        busy=lambda: any(each.server_state.tasks for each in listeners)))
    try:
        main, *others = [loop.create_task(each.serve()) for each in listeners]
        # The first listener carries the app's lifespan: if it fails to start or
        # stops, the others have nothing left to report on.
        main.add_done_callback(lambda _: stop())
        await asyncio.gather(main, *others)
    finally:
        collector.cancel()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
    return listeners[0].started
