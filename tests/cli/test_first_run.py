"""What a new user meets first: the version, a port already taken, a kubeconfig not there."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import io
import itertools
import logging
import os
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app import __version__
from app.cli import SUBCOMMANDS, build_parser, main
from app.cli import serve as serve_cli
from app.cli.serve import AddressError, bind_addresses
from app.config import Settings
from app.server import serving
from app.server.serving import Listener
from loadtest.bench import free_port, free_ports


@pytest.fixture()
def taken_port() -> Iterator[int]:
    """A loopback port some other program listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield other.getsockname()[1]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"drax {__version__}\n"


def test_no_command_prints_every_command_with_its_line_and_exits_2(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    said = capsys.readouterr()
    assert said.out == ""
    assert said.err.startswith("usage: drax ")
    [commands] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    lines = {line.split()[0]: line for line in said.err.splitlines() if line.startswith("    ")}
    for name in SUBCOMMANDS:
        [choice] = [c for c in commands._choices_actions if c.dest == name]
        assert name in lines and choice.help and choice.help.split()[0] in lines[name], name


def test_a_taken_port_is_one_line_before_anything_loads(
        taken_port: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The inventory does not exist: the port is reported first, without loading it.
    assert main(["serve", "--port", str(taken_port), "--inventory", str(tmp_path / "no")]) == 2
    err = capsys.readouterr().err
    assert err == (f"drax serve: port: cannot listen on 127.0.0.1:{taken_port}: Address already "
                   "in use (--port picks another)\n")


def test_the_metrics_port_is_checked_too(taken_port: int) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    for sock in itertools.chain.from_iterable(bind_addresses(Settings(port=port))):
        sock.close()
    with pytest.raises(AddressError) as said:
        bind_addresses(Settings(port=port, metrics_port=taken_port))
    assert str(said.value) == (f"metrics_port: cannot listen on 127.0.0.1:{taken_port}: "
                               "Address already in use (--metrics-port picks another)")
    # The verbs' socket, bound before the probes' failed, was let go.
    with socket.socket() as again:
        again.bind(("127.0.0.1", port))


def listed(monkeypatch: pytest.MonkeyPatch, *addresses: str) -> None:
    """Every host resolves to `addresses`, in this order."""
    def getaddrinfo(host: str | None, port: int, *_: Any, **__: Any) -> list[Any]:
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port, 0, 0))
                if ":" in address else
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))
                for address in addresses]
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def test_a_family_the_kernel_does_not_offer_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """IPv6 switched off (ipv6.disable=1): a host still lists `::`, and an
    IPv6 socket cannot be opened. drax listens on the other addresses."""
    real = socket.socket

    class NoIPv6(real):  # type: ignore[misc,valid-type]
        def __init__(self, family: int = -1, *args: Any, **kwargs: Any) -> None:
            if family == socket.AF_INET6:
                raise OSError(errno.EAFNOSUPPORT, os.strerror(errno.EAFNOSUPPORT))
            super().__init__(family, *args, **kwargs)

    monkeypatch.setattr(socket, "socket", NoIPv6)
    listed(monkeypatch, "::", "127.0.0.1")
    [[sock]] = bind_addresses(Settings(host="", port=0))
    with sock:
        assert sock.getsockname()[0] == "127.0.0.1"
    listed(monkeypatch, "::")
    with pytest.raises(AddressError) as said:
        bind_addresses(Settings(host="::", port=0))
    assert str(said.value) == ("port: cannot listen on [::]:0: "
                               f"{os.strerror(errno.EAFNOSUPPORT)}")


def test_port_0_is_one_port_on_every_address(monkeypatch: pytest.MonkeyPatch) -> None:
    listed(monkeypatch, "127.0.0.1", "127.0.0.2", "127.0.0.3")
    [sockets] = bind_addresses(Settings(host="localhost", port=0))
    with contextlib.ExitStack() as stack:
        for sock in sockets:
            stack.enter_context(sock)
        assert [s.getsockname()[0] for s in sockets] == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
        assert len({s.getsockname()[1] for s in sockets}) == 1


def test_port_0_is_picked_again_when_a_later_address_has_it_taken(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Another program holds 127.0.0.2 on the port 127.0.0.1 got first."""
    real = socket.socket
    taken: list[int] = []

    class TakenOnce(real):  # type: ignore[misc,valid-type]
        def bind(self, address: Any) -> None:
            if address[0] == "127.0.0.2" and not taken:
                taken.append(address[1])
                raise OSError(errno.EADDRINUSE, os.strerror(errno.EADDRINUSE))
            super().bind(address)

    monkeypatch.setattr(socket, "socket", TakenOnce)
    listed(monkeypatch, "127.0.0.1", "127.0.0.2")
    [sockets] = bind_addresses(Settings(host="localhost", port=0))
    with contextlib.ExitStack() as stack:
        for sock in sockets:
            stack.enter_context(sock)
        [port] = {s.getsockname()[1] for s in sockets}
        assert len(sockets) == 2 and taken and port != 0
    # A port given is not picked again: one line, as for a port taken outright.
    taken.clear()
    port = free_port()
    with pytest.raises(AddressError) as said:
        bind_addresses(Settings(host="localhost", port=port))
    assert taken == [port]
    assert str(said.value) == (f"port: cannot listen on localhost:{port}: Address already in "
                               "use (--port picks another)")


@pytest.mark.parametrize("key", ["port", "metrics_port"])
def test_a_port_taken_while_the_inventory_loads_is_one_line_too(
        key: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Another program that binds the port as drax does (SO_REUSEADDR) and
    listens on it first: drax's listen fails once the app has started."""
    ports = dict(zip(("port", "metrics_port"), free_ports(2), strict=True))
    other = socket.socket()
    loaded = serve_cli.build_runtime

    def load_then_taken(settings: Settings) -> Any:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        other.bind(("127.0.0.1", ports[key]))
        other.listen()
        return loaded(settings)

    monkeypatch.setattr(serve_cli, "build_runtime", load_then_taken)
    with other:
        code = main(["serve", "--port", str(ports["port"]),
                     "--metrics-port", str(ports["metrics_port"])])
    flag = key.replace("_", "-")
    assert (code, capsys.readouterr().err) == (
        2, f"drax serve: {key}: cannot listen on 127.0.0.1:{ports[key]}: Address already in "
           f"use (--{flag} picks another)\n")


def test_each_listen_address_is_logged_once_drax_listens_on_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each line comes when a client can connect to what it names, and names
    every address with its port, an IPv6 address in brackets."""
    metrics_port = free_port()
    said: dict[str, bool] = {}

    class Connects(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            message = record.getMessage()
            urls = re.findall(r"http://(?:\[([^]]+)\]|([\d.]+)):(\d+)", message)
            listening = bool(urls)
            for v6, v4, port in urls:
                try:
                    socket.create_connection((v6 or v4, int(port)), timeout=5).close()
                except OSError:
                    listening = False
            said[message] = listening
            if len(said) == 2:
                stop()

    running: list[Listener] = []

    def stop() -> None:
        for each in running:
            each.should_exit = True

    async def serve_all(listeners: list[Listener]) -> bool:
        running.extend(listeners)
        return await serving.serve_all(listeners)

    monkeypatch.setattr(serve_cli, "serve_all", serve_all)
    logger = logging.getLogger("app.cli.serve")
    monkeypatch.setattr(logger, "level", logging.INFO)
    handler = Connects()
    logger.addHandler(handler)
    at_the_latest = threading.Timer(30, stop)
    at_the_latest.start()
    try:
        code = main(["serve", "--host", "::1", "--port", "0", "--metrics-host", "127.0.0.1",
                     "--metrics-port", str(metrics_port)])
    finally:
        at_the_latest.cancel()
        logger.removeHandler(handler)
    assert code == 0
    assert list(said.values()) == [True, True], said
    [verbs] = [m for m in said if "serving" in m]
    assert re.fullmatch(r"drax allocator serving sample inventory on http://\[::1\]:\d+ "
                        r"\(verbs also under /scheduler\)", verbs), verbs
    assert said == {verbs: True,
                    f"probes and metrics on http://127.0.0.1:{metrics_port}": True}


def test_drax_serves_on_uvloop_when_it_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    uvloop = pytest.importorskip("uvloop")
    loops: list[asyncio.AbstractEventLoop] = []

    async def serve_all(listeners: list[Listener]) -> bool:
        loops.append(asyncio.get_running_loop())
        return True

    monkeypatch.setattr(serve_cli, "serve_all", serve_all)
    assert main(["serve", "--port", "0"]) == 0
    assert [type(loop) for loop in loops] == [uvloop.Loop]


@pytest.mark.parametrize("command", [["capacity", "--gpus", "1"],
                                     ["preempt", "--pod", "default/p"]])
def test_a_missing_kubeconfig_is_named_as_serve_names_it(
        command: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DRAX_CONFIG", raising=False)
    monkeypatch.delenv("DRAX_INVENTORY", raising=False)
    monkeypatch.setenv("DRAX_KUBECONFIG", "/no/such/kubeconfig")
    for argv in ([*command, "--kubeconfig", "/no/such/kubeconfig"], command):
        args = build_parser().parse_args(argv)
        out, err = io.StringIO(), io.StringIO()
        assert args.func(args, out=out, err=err) == 2
        assert err.getvalue() == (f"drax {command[0]}: kubeconfig: /no/such/kubeconfig: "
                                  "no such file\n")


def test_every_option_of_every_command_says_what_it_is_for() -> None:
    [commands] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    silent = [f"drax {name} {action.option_strings[-1] if action.option_strings else action.dest}"
              for name, command in commands.choices.items() for action in command._actions
              if not action.help]
    assert silent == []


def test_every_value_an_option_takes_has_a_readable_name() -> None:
    """`--tls-cert-file FILE`, not argparse's `--tls-cert-file TLS_CERT_FILE`; an
    option with choices shows them; and a flag two commands share is spelled the
    same in both (`--pod` excepted: preempt also takes a pod's file)."""
    [commands] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    raw: list[str] = []
    spelled: dict[str, set[str | None]] = {}
    for name, command in commands.choices.items():
        for action in command._actions:
            if not action.option_strings or action.nargs == 0:
                continue
            flag = action.option_strings[-1]
            if (action.metavar is None and action.choices is None) \
                    or action.metavar == action.dest.upper():
                raw.append(f"drax {name} {flag}")
            spelled.setdefault(flag, set()).add(action.metavar)
    assert raw == []
    assert {flag: metavars for flag, metavars in spelled.items()
            if len(metavars) > 1 and flag != "--pod"} == {}
