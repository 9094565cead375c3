"""What drax exports about itself beyond the HTTP edge: decision categories,
placement quality at bind, inventory and capacity gauges, extender internals.

Everything here is read at scrape time from state other packages keep, or
computed by a background task, so the verbs' path only pays for a few counter
increments (docs/metrics.md lists every metric).
"""
