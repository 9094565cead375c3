"""Allocator mode's writes to the API server (see `kube` for the protocol and RBAC).

The extender decides and assumes; this package makes a bind real against
the API server (`kube`, starting from the claim watch's copies: `copies`),
finishes what a killed bind left half written (`repair`), and touches the
pods drax rejected once devices may have appeared (`requeue`). Every write
carries the resourceVersion or uid it read, and the ones drax makes on its
own run only in the leading replica. `call_with_retries` is the one rule
for sending a request again, which preemption's actor and catch-up share.
"""

from app.binder.copies import ClaimCopies
from app.binder.kube import (
    FINALIZER,
    RESERVED_FOR_MAX,
    BindMetrics,
    KubeBinder,
    call_with_retries,
)

__all__ = ["FINALIZER", "RESERVED_FOR_MAX", "BindMetrics", "ClaimCopies", "KubeBinder",
           "call_with_retries"]
