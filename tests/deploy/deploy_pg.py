"""A real PostgreSQL server for the deploy tests, and a fresh database per test.

`scripts/test.sh` starts the server (`scripts/services/postgres.sh start`) and exports
`FLYWHEEL_TEST_PG_URL`. Without it, a CI run fails loudly (CI must have started it); a developer
run starts the same script itself. These tests never skip silently.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "services" / "postgres.sh"


def server_url() -> str:
    """The admin URL of the test server (a database the tests may connect to and create others from)."""
    url = os.environ.get("FLYWHEEL_TEST_PG_URL")
    if url:
        return url
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail("FLYWHEEL_TEST_PG_URL is not set under CI: scripts/test.sh must start PostgreSQL "
                    "(eval \"$(bash scripts/services/postgres.sh start)\") before pytest", pytrace=False)
    out = subprocess.run(["bash", str(SCRIPT), "start"], check=True, capture_output=True, text=True,
                         timeout=600).stdout
    match = re.search(r"FLYWHEEL_TEST_PG_URL='([^']+)'", out)
    if not match:
        pytest.fail(f"{SCRIPT} printed no FLYWHEEL_TEST_PG_URL: {out!r}", pytrace=False)
    os.environ["FLYWHEEL_TEST_PG_URL"] = match.group(1)
    return match.group(1)


def _admin_conninfo(url: str) -> dict[str, object]:
    u = make_url(url)
    return {"host": u.host, "port": u.port, "user": u.username, "password": u.password,
            "dbname": u.database, "autocommit": True}


@contextmanager
def fresh_database(prefix: str = "t") -> Iterator[str]:
    """Create an empty database on the test server; yield its SQLAlchemy URL; drop it after."""
    import psycopg

    admin = server_url()
    name = f"{prefix}_{secrets.token_hex(6)}"
    with psycopg.connect(**_admin_conninfo(admin)) as conn:  # type: ignore[arg-type]
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(admin).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(**_admin_conninfo(admin)) as conn:  # type: ignore[arg-type]
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
