"""The floor: drax's HTTP stack with verbs that do no work.

The benchmark reports drax's scheduling-cycle time as a ratio to this server,
measured in the same run with the same request bodies. It is built with the
real `app.server.app.create_app` (same routing, body limit, orjson, wire
parsing of the Pod, metrics) and run by uvicorn with the same settings as
`drax serve`, so the only difference is the work behind the verbs: filter
passes every candidate node, prioritize scores every node 0, bind succeeds.

`python -m loadtest.floor --port N` serves it on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

import uvicorn
from fastapi import FastAPI

from app.config import Settings
from app.extender import BindFailure, NodeScores
from app.model import Pod
from app.server.app import create_app
from app.server.serving import KEEP_ALIVE_SECONDS


@dataclass(slots=True)
class PassAll:
    passed: Sequence[str]
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    rejections: dict[str, int] = field(default_factory=dict)


class FloorVerbs:
    """Answers every node as passing without looking at the pod."""

    def filter(self, pod: Pod, node_names: Sequence[str]) -> PassAll:
        return PassAll(passed=node_names)

    def node_scores(self, pod: Pod, node_names: Sequence[str]) -> NodeScores:
        return NodeScores(names=node_names, scores=[0] * len(node_names), zero_kept=True)

    async def wait_for_binds(self, pod: Pod) -> float | None:
        return None

    async def bind(self, *, namespace: str, name: str, uid: str, node: str
                   ) -> BindFailure | None:
        return None


def create_floor_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    return create_app(verbs=FloorVerbs(), ready=lambda: True,
                      max_body_bytes=settings.max_body_bytes, url_prefix=settings.url_prefix,
                      mode="floor")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.floor",
                                     description="Serve the no-op floor extender.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    settings = Settings(host=args.host, port=args.port, log_level=args.log_level)
    app = create_floor_app(settings)
    gc.collect()
    gc.freeze()
    # The same uvicorn configuration as `drax serve` (app/cli/serve.py).
    config = uvicorn.Config(app, host=settings.host, port=settings.port,
                            log_level=settings.log_level, access_log=settings.access_log,
                            workers=1, timeout_keep_alive=KEEP_ALIVE_SECONDS,
                            server_header=False, log_config=None)
    uvicorn.Server(config).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
