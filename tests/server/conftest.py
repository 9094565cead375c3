"""Fixtures: a real drax server on the bundled sample cluster, and httpx clients."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.server.harness import running, sample_runtime

# Small enough that the over-limit tests send little, large enough for any
# real request the tests make.
TEST_BODY_LIMIT = 256 * 1024


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """Read-only tests share one server; tests that bind use `fresh_server`."""
    with running(sample_runtime(max_body_bytes=TEST_BODY_LIMIT).app) as url:
        yield url


@pytest.fixture()
def fresh_server() -> Iterator[str]:
    with running(sample_runtime(max_body_bytes=TEST_BODY_LIMIT).app) as url:
        yield url


@pytest.fixture()
def client(server: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server, timeout=30) as c:
        yield c
