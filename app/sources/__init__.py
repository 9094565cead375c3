"""Things that feed the inventory: Kubernetes objects from files or from the API server.

Both sources speak the inventory's event API (`apply` / `replace` / `mark_synced`)
with raw object dicts, so the inventory never knows where an object came from.
"""
