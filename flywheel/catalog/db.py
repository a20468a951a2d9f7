"""Database connections (SQLAlchemy engines) and migrations: SQLite tuned for several writers.

The schema is created only by Alembic (`migrate`), applied on open and safe to run from several
processes at once: SQLite takes an exclusive file lock beside the database, PostgreSQL a session
advisory lock, and other backends retry until the version table says head.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from flywheel.errors import CatalogVersionError, LibraryError

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
#: How long a SQLite writer waits for the lock before failing (ms); deposits are short.
SQLITE_BUSY_TIMEOUT_MS = 30_000
#: Seconds to wait for a PostgreSQL server before reporting it unreachable.
PG_CONNECT_TIMEOUT_S = 10
#: Arbitrary constant key for pg_advisory_lock: "flywheel" in ASCII, as an int64.
_PG_LOCK_KEY = 0x666C7977686565


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
    cur.execute("PRAGMA journal_mode = WAL")  # readers never block the writer, nor it them
    cur.execute("PRAGMA synchronous = FULL")  # a committed row survives power loss
    cur.execute("PRAGMA foreign_keys = ON")
    cur.close()


def make_db(url: str, **kwargs: Any) -> Engine:
    """The SQLAlchemy engine for `url`; SQLite gets WAL, a busy timeout and foreign keys on every connection.

    Called `db` wherever it is held: in this codebase "engine" is the language model.

    Args:
        url: any SQLAlchemy URL, e.g. `sqlite:////abs/library/catalog.db`, `postgresql+psycopg://...`.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        if database and database != ":memory:" and not database.startswith("file:"):
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        kwargs.setdefault("connect_args", {}).setdefault("timeout", SQLITE_BUSY_TIMEOUT_MS / 1000)
    elif parsed.get_backend_name() == "postgresql" and "connect_timeout" not in parsed.query:
        # an unreachable host fails in seconds with a message, instead of hanging on TCP connect
        kwargs.setdefault("connect_args", {}).setdefault("connect_timeout", PG_CONNECT_TIMEOUT_S)
    db = create_engine(url, **kwargs)
    if parsed.get_backend_name() == "sqlite":
        event.listen(db, "connect", _sqlite_pragmas)
    return db


def alembic_config(url: str | None = None) -> Config:
    """An Alembic config pointing at the migrations shipped in this package."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def head_revision() -> str:
    """The newest migration revision shipped with this build."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def current_revision(conn: Connection) -> str | None:
    """The revision the database is at, or None for an empty database."""
    return MigrationContext.configure(conn).get_current_revision()


@contextmanager
def _migration_lock(db: Engine, conn: Connection) -> Iterator[None]:
    backend = db.url.get_backend_name()
    database = db.url.database
    if backend == "sqlite" and database and database != ":memory:" and not database.startswith("file:"):
        with open(f"{database}.migrate.lock", "a+b") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
    elif backend == "postgresql":
        conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _PG_LOCK_KEY})
        conn.commit()
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _PG_LOCK_KEY})
            conn.commit()
    else:
        yield


def _shown(db: Engine) -> str:
    """The database URL for a message: no password in any form."""
    from flywheel.config import redact_url

    return redact_url(db.url.render_as_string(hide_password=True))


def _shown_error(db: Engine, err: Exception | None) -> str:
    """A driver error's first line, with the URL's password (if a driver echoed it) hidden."""
    from flywheel.config import mask_secrets, url_secrets

    text = str(getattr(err, "orig", None) or err).strip().splitlines()[0] if err is not None else "unknown error"
    return mask_secrets(text, url_secrets(db.url.render_as_string(hide_password=False)))


def _known(script: ScriptDirectory, revision: str) -> bool:
    """Whether this build ships `revision` (alembic raises, rather than answers, for an unknown one)."""
    from alembic.util.exc import CommandError

    try:
        return script.get_revision(revision) is not None
    except CommandError:
        return False


def migrate(db: Engine, revision: str = "head", attempts: int = 5) -> str:
    """Upgrade the catalog to `revision` (default head); a no-op when already there.

    Returns:
        the revision the database is at afterwards.
    Raises:
        LibraryError: the database is newer than this build, or the upgrade kept failing.
    """
    head = head_revision()
    script = ScriptDirectory.from_config(alembic_config())
    last_error: Exception | None = None
    for attempt in range(attempts):
        try:
            with db.connect() as conn:
                now = current_revision(conn)
                conn.rollback()
                if now is not None and now != head and not _known(script, now):
                    raise CatalogVersionError(
                        f"catalog {_shown(db)} is at schema revision {now!r}, which this build of "
                        f"kv-flywheel does not know (it reads revisions up to {head})",
                        hint="upgrade kv-flywheel to the version that wrote this catalog, or point --db at another",
                    )
                if revision == "head" and now == head:
                    return head
                with _migration_lock(db, conn):
                    cfg = alembic_config()
                    cfg.attributes["connection"] = conn
                    command.upgrade(cfg, revision)
                    conn.commit()
                    after = current_revision(conn)
                    conn.rollback()
                    return after or ""
        except DBAPIError as err:  # another process raced us without a lock we could take
            last_error = err
            time.sleep(0.2 * (attempt + 1))
    raise LibraryError(
        f"could not open the catalog at {_shown(db)}: {_shown_error(db, last_error)}",
        hint="check that the database is reachable and writable",
    )
