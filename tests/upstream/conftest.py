"""The `oracle` fixture: one upstream oracle process for the whole session.

Skipped, with one reason, only when `go` is not on PATH; a failing build fails.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.build import go_available
from tests.upstream.oracle import Oracle


@pytest.fixture(scope="session")
def oracle() -> Iterator[Oracle]:
    if not go_available():
        pytest.skip("the upstream oracle needs Go: `go` is not on PATH")
    with Oracle() as running:
        yield running
