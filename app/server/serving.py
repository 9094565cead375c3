"""Run the verbs' listener (HTTP or HTTPS) and the optional probe listener in one loop.

uvicorn's own `Server.run` installs its signal handlers per server and, after a
graceful shutdown, re-raises the signal: run that way, SIGTERM would end drax
with -15 and a second listener would never hear it. Here one handler stops
every listener: each stops accepting, lets in-flight requests finish (up to
`GRACE_SECONDS`, inside the pod's default 30 s termination grace), closes
idle keep-alive connections, runs the app's shutdown, and the process exits 0.

A listener may be handed its sockets bound (`bind`): it listens on them as it
starts, before the app's startup, and a listen that fails (another program
took the port since) is left in `listen_error` for the caller to report, where
uvicorn would log it and exit the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import signal
import socket
from collections.abc import Callable, Generator, Sequence
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
    """A uvicorn server that leaves signals to `serve_all`, on `sockets` when given."""

    def __init__(self, config: uvicorn.Config, sockets: Sequence[socket.socket] = ()) -> None:
        super().__init__(config)
        self.sockets = list(sockets)
        self.listen_error: OSError | None = None
        # Called once the listener listens (uvicorn, handed sockets, logs nothing).
        self.on_listening: Callable[[Listener], None] | None = None

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        await super().serve(sockets if sockets is not None else (self.sockets or None))

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        if sockets is not None:
            # Listened on here rather than by the loop's create_server: uvloop
            # (the loop uvicorn runs when installed) drops a failing listen
            # without a word, and the listener would serve nothing.
            try:
                for sock in sockets:
                    sock.listen(self.config.backlog)
            except OSError as exc:
                self.listen_error = exc
                self.should_exit = True
                return
        await super().startup(sockets)
        if self.started and self.on_listening is not None:
            self.on_listening(self)

    def urls(self) -> list[str]:
        """Where the listener listens, `http://[::]:8888` for each address."""
        scheme = "https" if self.config.ssl else "http"
        return [f"{scheme}://{authority(*sock.getsockname()[:2])}"
                for server in self.servers for sock in server.sockets]


# Times `bind` picks a port 0 again when the one the first address got is taken
# on a later one.
PORT_PICKS: Final = 8


def bind(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to every address of `host` (all interfaces when empty), not
    listening yet: as uvicorn binds, so a port left in TIME_WAIT by a stopped
    server is free, and an IPv6 socket takes IPv6 only. Port 0 is one port the
    system picks, the same on every address. Raises `OSError`
    (`socket.gaierror` for a host that does not resolve)."""
    infos = list(dict.fromkeys(socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                  flags=socket.AI_PASSIVE)))
    picks = 1
    while True:
        try:
            return _bind_each(infos)
        except OSError as exc:
            if port or exc.errno != errno.EADDRINUSE or picks == PORT_PICKS:
                raise
            picks += 1


def _bind_each(infos: Sequence[tuple[Any, ...]]) -> list[socket.socket]:
    sockets: list[socket.socket] = []
    unopened: OSError | None = None
    # asyncio's create_server, which uvicorn binds with, gives port 0 a port per
    # address. Here the later addresses take the port the first got: one
    # drax listens on one port, the one its log names, and a client reaching
    # `localhost:P` over either family finds drax rather than another program.
    port = 0
    try:
        for family, kind, proto, _, address in infos:
            try:
                sock = socket.socket(family, kind, proto)
            except OSError as exc:
                # A family the kernel does not offer (IPv6 switched off, while
                # the host still lists `::` or `::1`): skipped, as asyncio's
                # create_server skips it.
                unopened = exc
                continue
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((address[0], port or address[1], *address[2:]))
            port = sock.getsockname()[1]
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    if not sockets:
        assert unopened is not None  # getaddrinfo lists an address or raises
        raise unopened
    return sockets


def authority(host: str, port: int) -> str:
    """`host:port` as a URL spells it, an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(slots=True, frozen=True)
class ListenerSpec:
    app: Any
    host: str
    port: int
    lifespan: Literal["auto", "on", "off"] = "on"
    tls: ReloadingContext | None = None
    sockets: tuple[socket.socket, ...] = ()  # bound to host:port (`bind`); none: uvicorn binds


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
    return Listener(config, spec.sockets)


async def serve_all(listeners: Sequence[Listener]) -> bool:
    """Serve until SIGTERM/SIGINT or until a listener stops; True if the first started."""
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
        # stops, the others have nothing left to report on; and one that fails
        # to listen stops the rest, as a start with part of its ports would mislead.
        for task in (main, *others):
            task.add_done_callback(lambda _: stop())
        await asyncio.gather(main, *others)
    finally:
        collector.cancel()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
    return listeners[0].started
