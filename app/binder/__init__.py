"""Allocator mode's writes to the API server (see `kube` for the protocol and RBAC)."""

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
