"""RFC 3339 times as the Kubernetes API writes and reads them.

A `metav1.Time` (creationTimestamp, a condition's lastTransitionTime, an
allocationTimestamp) is written in UTC to the second, a `metav1.MicroTime`
(an Event's eventTime) with six fractional digits; either is read back into
epoch seconds, whatever offset or fraction the API server sent. One home, so
every writer in drax produces the form the API server's own serialiser does.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

TIME_FORMAT: Final = "%Y-%m-%dT%H:%M:%SZ"
MICRO_TIME_FORMAT: Final = "%Y-%m-%dT%H:%M:%S.%fZ"


def format_time(when: datetime | float | None = None) -> str:
    """`when` (now by default; a datetime or epoch seconds) as a metav1.Time."""
    return _utc(when).strftime(TIME_FORMAT)


def format_micro_time(when: datetime | float | None = None) -> str:
    """`when` (now by default) as a metav1.MicroTime."""
    return _utc(when).strftime(MICRO_TIME_FORMAT)


def parse_time(text: str) -> float:
    """An RFC 3339 time in epoch seconds (a time without an offset is UTC);
    raises ValueError for anything else."""
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def _utc(when: datetime | float | None) -> datetime:
    if when is None:
        return datetime.now(UTC)
    if isinstance(when, datetime):
        return when.astimezone(UTC)
    return datetime.fromtimestamp(when, UTC)
