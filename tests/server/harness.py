"""Run a real drax HTTP server on a free loopback port, for tests.

`running(app)` serves an ASGI app with uvicorn in a background thread and
yields its base URL; `sample_runtime()` builds exactly what `drax serve`
runs on the bundled sample cluster. Other test packages reuse both (for
example to serve a runtime fed by the kube source's API-server double).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from app.config import Settings
from app.runtime import Runtime, build_runtime
from app.server.tls import ReloadingContext

START_TIMEOUT_SECONDS = 20.0


def sample_runtime(**settings: Any) -> Runtime:
    """The runtime `drax serve` builds with no inventory: the bundled sample."""
    return build_runtime(Settings(**settings))


@contextmanager
def running(app: Any, *, host: str = "127.0.0.1", tls: ReloadingContext | None = None,
            access_log: bool = False) -> Iterator[str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    # uvicorn sets its access logger to `log_level`: at warning it would log nothing.
    config = uvicorn.Config(app, log_level="info" if access_log else "warning",
                            access_log=access_log, log_config=None, lifespan="on")
    if tls is not None:
        # As `drax serve` does: uvicorn's own context would never re-read the files.
        config.load()
        config.ssl = tls.context
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True,
                              name=f"drax-test-server-{port}")
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.01)
    try:
        yield f"{'https' if tls else 'http'}://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=START_TIMEOUT_SECONDS)
        sock.close()
