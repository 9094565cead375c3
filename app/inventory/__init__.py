"""In-memory index of DRA objects and of what is allocated (see `store`)."""

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
