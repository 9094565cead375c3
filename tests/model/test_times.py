"""RFC 3339 times are written as the API server's serialiser writes them and read
whatever the API server sends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.model.times import format_micro_time, format_time, parse_time


def test_a_time_is_utc_to_the_second() -> None:
    assert format_time(0) == "1970-01-01T00:00:00Z"
    assert format_time(1767225600.9) == "2026-01-01T00:00:00Z"
    local = datetime(2026, 1, 1, 2, 30, 5, 123, tzinfo=timezone(timedelta(hours=2)))
    assert format_time(local) == "2026-01-01T00:30:05Z"


def test_a_micro_time_has_six_fractional_digits() -> None:
    assert format_micro_time(1.5) == "1970-01-01T00:00:01.500000Z"
    assert format_micro_time(datetime(2026, 1, 1, tzinfo=UTC)) == "2026-01-01T00:00:00.000000Z"


def test_now_by_default() -> None:
    before = datetime.now(UTC).timestamp()
    written = parse_time(format_micro_time())
    assert before - 1e-6 <= written <= datetime.now(UTC).timestamp()
    assert parse_time(format_time()) == pytest.approx(written, abs=1.0)


@pytest.mark.parametrize(("text", "epoch"), [
    ("2026-01-01T00:00:00Z", 1767225600.0),
    ("2026-01-01T00:00:00.250Z", 1767225600.25),
    ("2026-01-01T00:00:00.123456789Z", 1767225600.123456),  # nanoseconds, cut to micro
    ("2026-01-01T01:00:00+01:00", 1767225600.0),
    ("2026-01-01T00:00:00", 1767225600.0),  # no offset: UTC, never this machine's zone
])
def test_what_the_api_server_sends_is_read(text: str, epoch: float) -> None:
    assert parse_time(text) == pytest.approx(epoch, abs=1e-6)


def test_written_times_read_back() -> None:
    assert parse_time(format_time(1767225600)) == 1767225600.0
    assert parse_time(format_micro_time(1767225600.5)) == 1767225600.5


@pytest.mark.parametrize("text", ["", "yesterday", "2026-13-01T00:00:00Z", "1767225600"])
def test_anything_else_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_time(text)
