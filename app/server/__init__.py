"""HTTP edge of drax: the kube-scheduler extender verbs, probes and metrics.

`create_app` builds the ASGI app around any object with the extender verbs
(`app.extender.Extender` in production); `wire` holds the request parsing and
response building, `probes` health, readiness, metrics and version, `metrics`
the Prometheus registry other packages share, `tls` the verbs' certificates
and their rotation, `serving` the listeners and their one graceful stop. The
edge holds no scheduling logic, so the CLI and the tests reach the same
verbs without HTTP.
"""

from app.server.app import create_app

__all__ = ["create_app"]
