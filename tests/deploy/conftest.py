from __future__ import annotations

from collections.abc import Iterator

import pytest
from deploy_pg import fresh_database


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database on the real test server (dropped afterwards)."""
    with fresh_database() as url:
        yield url
