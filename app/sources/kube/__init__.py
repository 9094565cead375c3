"""The kube source: list and watch the cluster's DRA objects into the inventory.

`client` builds the kubernetes-asyncio ApiClient (kubeconfig or in-cluster),
`watch` runs one reflector-style informer per kind, `metrics` exports what
they applied and how fresh it is, and `lease` follows the leader-election
Lease of drax's kube-scheduler.

RBAC (see manifests/rbac.yaml): `get`, `list`, `watch` on
`resource.k8s.io` resourceslices, deviceclasses, resourceclaims (all
namespaces) and core nodes; `list`, `watch` on pods (live pods only: those
that use claims are kept whole, the others as their requests on their node,
see `watch.parse_live_pod`), poddisruptionbudgets and priorityclasses (what
preemption reads); `get`, `list`, `watch` on the one Lease. The source
writes nothing.
"""

from app.sources.kube.client import KubeConfigError, api_client, in_cluster
from app.sources.kube.metrics import InventorySizes, WatchMetrics
from app.sources.kube.watch import (
    WATCHED_KINDS,
    EventSink,
    Informer,
    KubeSource,
    ListError,
    WatchedKind,
    WatchSettings,
    list_once,
)

__all__ = [
    "WATCHED_KINDS", "EventSink", "Informer", "InventorySizes", "KubeConfigError", "KubeSource",
    "ListError", "WatchMetrics", "WatchSettings", "WatchedKind", "api_client", "in_cluster",
    "list_once",
]
