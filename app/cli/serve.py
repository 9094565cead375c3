"""`drax serve`: run the extender HTTP service.

Flags mirror the settings keys (`config/drax.yaml`); a flag left unset keeps
the value from the config file or `DRAX_*` environment. uvicorn runs one
worker with uvloop and httptools when they are installed: drax's inventory is
in-process state, so a second worker would be a second, diverging inventory,
and one event loop answers kube-scheduler's one-pod-at-a-time calls fastest.
"""

from __future__ import annotations

import argparse
import gc
import logging
import sys
from typing import Any, Final

import uvicorn

from app.config import LOG_LEVELS, MODES, ConfigError, Settings, load_settings
from app.server.runtime import build_runtime
from app.sources.files import SourceError

log = logging.getLogger("app.cli.serve")

# kube-scheduler keeps connections alive (Go's idle timeout is 90 s); closing
# them sooner only adds reconnects to the scheduling path.
KEEP_ALIVE_SECONDS: Final = 75


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("serve", help="run the kube-scheduler extender service",
                              description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--config", help="YAML settings file (see config/drax.yaml)")
    p.add_argument("--host", help="listen address (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="listen port (default 8888)")
    p.add_argument("--inventory", nargs="+", metavar="PATH",
                   help="files or folders of Kubernetes objects (default: the bundled "
                        "sample cluster, unless a kubeconfig is given)")
    p.add_argument("--kubeconfig", help="watch this cluster instead of reading files")
    p.add_argument("--log-level", choices=LOG_LEVELS)
    p.add_argument("--access-log", action="store_true", default=None,
                   help="log every HTTP request")
    p.add_argument("--max-body-bytes", type=int, help="largest request body (default 16 MiB)")
    p.add_argument("--url-prefix", help="also serve the verbs under this path "
                                        "(default /scheduler)")
    p.add_argument("--mode", choices=MODES, help="allocator (default) or advisor")
    p.add_argument("--feature-gates", metavar="Name=bool,...",
                   help="DRA feature gates, as given to kube-scheduler")
    p.set_defaults(func=run)


def settings_from(args: argparse.Namespace) -> Settings:
    overrides = {key: getattr(args, key) for key in (
        "host", "port", "inventory", "kubeconfig", "log_level", "access_log",
        "max_body_bytes", "url_prefix", "mode", "feature_gates")}
    return load_settings(config_path=args.config, overrides=overrides)


def run(args: argparse.Namespace) -> int:
    try:
        settings = settings_from(args)
    except ConfigError as exc:
        print(f"drax serve: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        runtime = build_runtime(settings)
    except (ConfigError, SourceError) as exc:
        print(f"drax serve: {exc}", file=sys.stderr)
        return 2
    # The inventory is long-lived: keep the collector from re-scanning it on
    # every young-generation pass over request garbage.
    gc.collect()
    gc.freeze()
    log.info("drax %s serving %s inventory on http://%s:%d (verbs also under %s)",
             runtime.settings.mode, runtime.source, settings.host, settings.port,
             settings.url_prefix or "/")
    config = uvicorn.Config(runtime.app, host=settings.host, port=settings.port,
                            log_level=settings.log_level, access_log=settings.access_log,
                            workers=1, timeout_keep_alive=KEEP_ALIVE_SECONDS,
                            server_header=False, log_config=None)
    uvicorn.Server(config).run()
    return 0
