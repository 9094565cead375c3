"""In-memory index of DRA objects and of what is allocated (see `store`)."""

from app.inventory.store import (
    KINDS,
    POD_CLAIM_NAME_ANNOTATION,
    Inventory,
    InventoryCounts,
    NodeState,
)

__all__ = ["KINDS", "POD_CLAIM_NAME_ANNOTATION", "Inventory", "InventoryCounts", "NodeState"]
