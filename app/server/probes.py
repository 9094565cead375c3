"""Health, readiness, metrics and version, and the error shape of Starlette's own answers.

The verbs' app serves these beside the verbs; `create_probe_app` serves them
alone on the plain-HTTP `metrics_port`, because kubelet probes and Prometheus
hold no client certificate for the verbs' TLS listener. Every answer here,
404 and 405 included, is JSON: `{"error": ...}` for an error, as the verbs
answer theirs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from app import __version__
from app.server import wire
from app.server.metrics import ServerMetrics

JSON: Final = "application/json"
NOT_SYNCED: Final = "drax is not ready: its inventory has not finished its initial sync"


def _json(value: Any, status: int = 200) -> Response:
    return Response(content=wire.encode(value), status_code=status, media_type=JSON)


def create_probe_app(*, ready: Callable[[], bool], metrics: ServerMetrics,
                     mode: str = "allocator", info: Mapping[str, Any] | None = None) -> FastAPI:
    """Health, readiness, metrics and version alone, for the plain-HTTP `metrics_port`:
    kubelet probes and Prometheus hold no client certificate."""
    app = FastAPI(title="drax probes", version=__version__, docs_url=None, redoc_url=None,
                  openapi_url=None)
    add_probes(app, ready=ready, metrics=metrics, mode=mode, info=info)
    return app


def _add_error_shape(app: FastAPI) -> None:
    """Starlette's own answers (404 unknown path, 405 wrong method) as
    `{"error": ...}`, the shape of every other error drax answers."""
    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        response = _json({"error": f"{request.method} {request.url.path}: {exc.detail}"},
                         exc.status_code)
        response.headers.update(exc.headers or {})
        return response

    app.add_exception_handler(HTTPException, http_error)


def add_probes(app: FastAPI, *, ready: Callable[[], bool], metrics: ServerMetrics,
               mode: str = "allocator", info: Mapping[str, Any] | None = None) -> None:
    """`/healthz`, `/readyz`, `/metrics` and `/version` (drax's version, its
    `mode` and `info`) on `app`, and Starlette's own answers in drax's error shape."""
    version = {"version": __version__, "mode": mode, **(info or {})}

    async def healthz(request: Request) -> Response:
        return _json({"status": "ok"})

    async def readyz(request: Request) -> Response:
        if ready():
            return _json({"status": "ready"})
        return _json({"status": "not ready", "reason": NOT_SYNCED}, 503)

    async def metrics_endpoint(request: Request) -> Response:
        body, content_type = metrics.exposition()
        return Response(content=body, media_type=content_type)

    async def version_endpoint(request: Request) -> Response:
        return _json(dict(version))

    app.router.add_route("/healthz", healthz, methods=["GET"])
    app.router.add_route("/readyz", readyz, methods=["GET"])
    app.router.add_route("/metrics", metrics_endpoint, methods=["GET"])
    app.router.add_route("/version", version_endpoint, methods=["GET"])
    _add_error_shape(app)
