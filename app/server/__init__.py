"""HTTP edge of drax: the kube-scheduler extender verbs, probes and metrics.

`create_app` builds the ASGI app around any object with the extender verbs
(`app.extender.Extender` in production); `wire` holds the request parsing and
response building, `probes` health, readiness, metrics and version, `metrics`
the Prometheus registry other packages share.
"""

from app.server.app import create_app

__all__ = ["create_app"]
