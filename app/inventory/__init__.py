"""In-memory index of DRA objects and of what is allocated (see `store`).

The inventory is drax's only mutable state, and `Inventory` its one writer:
sources feed it events, and the verbs, the observers and preemption read
per-node snapshots stamped with versions, so a reader can keep what it
computed for as long as the versions it read are unchanged. Its parts, one
job each: the objects and their pools (`objects`, `pools`), version stamps
(`versions`), what claims, assumptions and nominations take (`holdings`),
who holds what and what live pods request (`occupants`, `usage`), memoised
selector results (`selectors`) and the node pool served (`nodepool`).
"""

from app.inventory.holdings import Nomination, waiting_ended
from app.inventory.nodepool import NodePool
from app.inventory.occupants import Occupants
from app.inventory.store import (
    DEVICE_KINDS,
    KINDS,
    POD_CLAIM_NAME_ANNOTATION,
    Inventory,
    InventoryCounts,
    NodeState,
    compare_revisions,
)

__all__ = [
    "DEVICE_KINDS",
    "KINDS",
    "POD_CLAIM_NAME_ANNOTATION",
    "Inventory",
    "InventoryCounts",
    "NodePool",
    "NodeState",
    "Nomination",
    "Occupants",
    "compare_revisions",
    "waiting_ended",
]
