"""The API server's copies of the claims a bind may allocate, as the watch last saw them.

The claim write of a bind is a PUT of the whole object guarded by its
resourceVersion, so it needs the object as the server holds it. Reading it
first costs a round trip per claim, on the path between kube-scheduler's
bind call and the pod's Binding. The in-tree PreBind writes from its
informer's copy instead and reads only after a conflict; so does drax's
binder, from these copies: the raw objects of the claim watch's events,
kept only while unallocated (the claims a bind allocates; an allocated one
is only reserved, and is read), and at most `capacity` of them.

A copy that is stale costs one 409 and the read the binder would have made
anyway; a relist drops them all (what changed while the watch was away is
not known), so a deleted claim is never written from a copy.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final

DEFAULT_CAPACITY: Final = 4096
KIND: Final = "ResourceClaim"


class ClaimCopies:
    """Unallocated claims by `namespace/name`, fed by the watch's change hook."""

    def __init__(self, *, capacity: int = DEFAULT_CAPACITY) -> None:
        self._capacity = capacity
        self._claims: OrderedDict[str, Mapping[str, Any]] = OrderedDict()

    def on_change(self, kind: str, event_type: str, obj: Mapping[str, Any] | None) -> None:
        """The watch source's change hook (`app.sources.kube.watch.OnChange`)."""
        if kind != KIND:
            return
        if event_type == "LIST" or obj is None:
            self._claims.clear()
            return
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping):
            return
        key = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
        status = obj.get("status")
        allocated = isinstance(status, Mapping) and status.get("allocation") is not None
        if event_type == "DELETED" or allocated or meta.get("deletionTimestamp"):
            self._claims.pop(key, None)
            return
        self._claims[key] = obj
        self._claims.move_to_end(key)
        while len(self._claims) > self._capacity:
            self._claims.popitem(last=False)

    def get(self, key: str, *, uid: str = "") -> dict[str, Any] | None:
        """A copy to edit and write (metadata and status are the copy's own), or None
        when none is held or the one held is another object than `uid`."""
        obj = self._claims.get(key)
        if obj is None:
            return None
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping) or (uid and meta.get("uid") != uid):
            return None
        status = obj.get("status")
        return {**obj, "metadata": dict(meta),
                "status": dict(status) if isinstance(status, Mapping) else {}}

    def __len__(self) -> int:
        return len(self._claims)
