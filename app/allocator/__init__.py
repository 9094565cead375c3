"""Structured DRA allocation for one pod on one node (see `types` for the contract)."""
