"""Load generation and benchmarks for drax.

`generator` builds synthetic GPU/NIC clusters and pod workloads (shared with
`drax simulate`); `__main__` is the end-to-end scheduling benchmark against a
real `drax serve`. See `loadtest/README.md` for the commands.
"""
