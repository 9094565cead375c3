"""`drax serve`: run the extender HTTP service.

Flags mirror the settings keys (`config/drax.yaml`); a flag left unset keeps
the value from the config file or `DRAX_*` environment. uvicorn runs one
worker with uvloop and httptools when they are installed: drax's inventory is
in-process state, so a second worker would be a second, diverging inventory,
and one event loop answers kube-scheduler's one-pod-at-a-time calls fastest.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import itertools
import logging
import socket
import sys
from collections.abc import Sequence
from typing import Any

from app import garbage_collector
from app.cli.common import command_settings
from app.config import (
    DEFAULT_SCHEDULER_NAMES,
    LOG_LEVELS,
    MODES,
    ConfigError,
    Settings,
)
from app.runtime import Runtime, build_runtime
from app.server.serving import (
    Listener,
    ListenerSpec,
    authority,
    bind,
    listener,
    serve_all,
)
from app.server.tls import ReloadingContext, TLSError, TLSFiles
from app.sources.files import SourceError

log = logging.getLogger("app.cli.serve")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("serve", help="run the kube-scheduler extender service",
                              description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--config", metavar="FILE",
                   help="YAML settings file (see config/drax.yaml; default: $DRAX_CONFIG); "
                        "flags given > DRAX_* environment > this file > defaults")
    p.add_argument("--host", metavar="ADDRESS", help="listen address (default 127.0.0.1)")
    p.add_argument("--port", type=int, metavar="N", help="listen port (default 8888)")
    p.add_argument("--inventory", nargs="+", metavar="PATH",
                   help="files or folders of Kubernetes objects (default: the bundled "
                        "sample cluster, unless a kubeconfig is given)")
    p.add_argument("--kubeconfig", metavar="PATH",
                   help="watch this cluster instead of reading files")
    p.add_argument("--log-level", choices=LOG_LEVELS, help="default: info")
    p.add_argument("--access-log", action="store_true", default=None,
                   help="log every HTTP request")
    p.add_argument("--max-body-bytes", type=int, metavar="N",
                   help="largest request body (default 16 MiB)")
    p.add_argument("--body-read-timeout", type=float, metavar="SECONDS",
                   help="408 for a body not received this long after its headers (default 10)")
    p.add_argument("--verb-deadline", type=float, metavar="SECONDS",
                   help="once a verb has computed this long, filter answers with Error "
                        "(the scheduler retries the pod) and prioritize with no scores "
                        "(every node 0) (default 4; keep it below the scheduler's "
                        "httpTimeout)")
    p.add_argument("--url-prefix", metavar="/PATH",
                   help="also serve the verbs under this path (default /scheduler)")
    p.add_argument("--mode", choices=MODES, help="allocator (default) or advisor")
    p.add_argument("--feature-gates", metavar="Name=true,...",
                   help="DRA feature gates, as given to kube-scheduler")
    p.add_argument("--tls-cert-file", metavar="FILE",
                   help="serve the verbs over HTTPS with this certificate "
                        "(PEM, re-read when it changes)")
    p.add_argument("--tls-private-key-file", metavar="FILE",
                   help="the certificate's private key (PEM)")
    p.add_argument("--client-ca-file", metavar="FILE",
                   help="require client certificates signed by this CA "
                        "(kube-scheduler's extender tlsConfig)")
    p.add_argument("--metrics-port", type=int, metavar="N",
                   help="also serve /healthz, /readyz, /metrics over plain HTTP on this port "
                        "(default: off)")
    p.add_argument("--metrics-host", metavar="ADDRESS",
                   help="address of --metrics-port (default: --host)")
    p.add_argument("--leader-election-lease", metavar="NAMESPACE/NAME",
                   help="the Lease kube-scheduler elects its leader with; drax's own writes "
                        "run only while this replica's kube-scheduler holds it "
                        "(default: none, always lead)")
    p.add_argument("--leader-election-identity", metavar="NAME",
                   help="this replica's kube-scheduler holds the Lease as NAME_<uuid> "
                        "(default: the host name)")
    p.add_argument("--scheduler-name", metavar="NAME[,NAME]",
                   help="the kube-scheduler profiles that call drax (every profile of its "
                        "kube-scheduler): drax preempts for their pods and counts their "
                        "nominations together "
                        f"(default: {','.join(DEFAULT_SCHEDULER_NAMES)})")
    p.add_argument("--node-selector", metavar="LABEL=VALUE[,...]",
                   help="serve only the Nodes with all these labels, their ResourceSlices "
                        "and the network-attached slices that can reach them; other nodes "
                        "fail filter (default: every node)")
    p.set_defaults(func=run)


# The settings keys with a flag of their own (`--max-body-bytes` for max_body_bytes).
FLAGS = ("host", "port", "inventory", "kubeconfig", "log_level", "access_log",
         "max_body_bytes", "body_read_timeout", "verb_deadline", "url_prefix", "mode",
         "feature_gates", "tls_cert_file", "tls_private_key_file", "client_ca_file",
         "metrics_port", "metrics_host", "leader_election_lease", "leader_election_identity",
         "scheduler_name", "node_selector")


def settings_from(args: argparse.Namespace) -> Settings:
    return command_settings(args, FLAGS, check_files=True)


def run(args: argparse.Namespace) -> int:
    try:
        settings = settings_from(args)
    except ConfigError as exc:
        print(f"drax serve: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        bound = bind_addresses(settings)
    except AddressError as exc:
        print(f"drax serve: {exc}", file=sys.stderr)
        return 2
    with contextlib.ExitStack() as stack:
        for sock in itertools.chain.from_iterable(bound):
            stack.enter_context(sock)
        return serve_on(settings, bound)


def serve_on(settings: Settings, bound: Sequence[Sequence[socket.socket]]) -> int:
    """Load the inventory and serve on the sockets `bind_addresses` bound."""
    try:
        # The inventory and the answers warmed for it are long-lived and hold no
        # cycles: they are frozen out of the collector without ever being
        # scanned, since a full collection over a large cluster's start-up
        # costs a large share of the start itself.
        with garbage_collector.paused(then_freeze=True):
            runtime = build_runtime(settings)
    except (ConfigError, SourceError) as exc:
        print(f"drax serve: {exc}", file=sys.stderr)
        return 2
    try:
        listeners = listeners_for(runtime, bound)
    except TLSError as exc:
        print(f"drax serve: {exc}", file=sys.stderr)
        return 2
    verbs, *probes = listeners
    verbs.on_listening = lambda each: log.info(
        "drax %s serving %s inventory on %s (verbs also under %s)%s", runtime.settings.mode,
        runtime.source, ", ".join(each.urls()), settings.url_prefix or "/",
        ", client certificates required" if settings.client_ca_file else "")
    for probe in probes:
        probe.on_listening = lambda each: log.info("probes and metrics on %s",
                                                  ", ".join(each.urls()))
    # The loop uvicorn itself would run (its `loop="auto"`): uvloop when installed.
    with asyncio.Runner(loop_factory=verbs.config.get_loop_factory()) as runner:
        started = runner.run(serve_all(listeners))
    for (key, host, port), each in zip(listen_addresses(settings), listeners,
                                       strict=True):
        if each.listen_error is not None:
            print(f"drax serve: {cannot_listen(key, host, port, each.listen_error)}",
                  file=sys.stderr)
            return 2
    return 0 if started else 1


class AddressError(Exception):
    """A listen address that cannot be bound: one line naming its flag."""


def listen_addresses(settings: Settings) -> list[tuple[str, str, int]]:
    """The verbs' address, then the probes' if any, each with its settings key."""
    addresses = [("port", settings.host, settings.port)]
    if settings.metrics_port:
        addresses.append(("metrics_port", settings.metrics_host or settings.host,
                          settings.metrics_port))
    return addresses


def bind_addresses(settings: Settings) -> list[list[socket.socket]]:
    """The sockets of each listen address (`listen_addresses`), bound and not
    yet listening; `AddressError` when one cannot be bound (in use, say).

    Bound before the inventory loads, which on a large cluster takes a while:
    a port already taken (another drax, or a notebook server on 8888) is then
    one line at once, and the port stays drax's during the load. The sockets
    listen once the inventory is loaded, so a client meanwhile is refused
    rather than kept waiting."""
    bound: list[list[socket.socket]] = []
    try:
        for key, host, port in listen_addresses(settings):
            try:
                bound.append(bind(host, port))
            except OSError as exc:
                raise AddressError(cannot_listen(key, host, port, exc)) from None
    except AddressError:
        for sock in itertools.chain.from_iterable(bound):
            sock.close()
        raise
    return bound


def cannot_listen(key: str, host: str, port: int, exc: OSError) -> str:
    said = f"{key}: cannot listen on {authority(host, port)}: {exc.strerror or exc}"
    if exc.errno in (errno.EADDRINUSE, errno.EACCES):  # a port taken, or below 1024
        return f"{said} (--{key.replace('_', '-')} picks another)"
    return said


def listeners_for(runtime: Runtime, bound: Sequence[Sequence[socket.socket]] = ()
                  ) -> list[Listener]:
    """The verbs' listener (with TLS when configured), then the probe listener if
    any; on the sockets `bound` for each (`bind_addresses`), when given."""
    s = runtime.settings
    tls = None
    if s.tls_cert_file:
        tls = ReloadingContext(TLSFiles(cert_file=s.tls_cert_file,
                                        key_file=s.tls_private_key_file,
                                        client_ca_file=s.client_ca_file))
    sockets = [tuple(each) for each in bound] or [(), ()]
    specs = [ListenerSpec(runtime.app, host=s.host, port=s.port, tls=tls, sockets=sockets[0])]
    if s.metrics_port:
        specs.append(ListenerSpec(runtime.probes, host=s.metrics_host or s.host,
                                  port=s.metrics_port, lifespan="off", sockets=sockets[1]))
    return [listener(spec, log_level=s.log_level, access_log=s.access_log) for spec in specs]
