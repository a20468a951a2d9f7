"""The schema comes only from Alembic migrations, applies on open, and matches the models."""

from __future__ import annotations

import io
from pathlib import Path

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from flywheel import config
from flywheel.catalog import Base, Catalog, head_revision, open_catalog
from flywheel.catalog.db import alembic_config, current_revision, migrate

TABLES = {"problems", "solutions", "artifacts", "runs", "attempts", "grafts", "alembic_version"}


def test_open_creates_schema_at_head(catalog: Catalog) -> None:
    names = set(inspect(catalog.db).get_table_names())
    assert TABLES <= names
    with catalog.db.connect() as conn:
        assert current_revision(conn) == head_revision()


def test_migrating_twice_is_a_noop(library: Path, catalog: Catalog) -> None:
    with catalog.db.connect() as conn:
        before = conn.execute(text("SELECT sql FROM sqlite_master ORDER BY name")).all()
    assert migrate(catalog.db) == head_revision()
    again = open_catalog(config.database_url(library))
    with again.db.connect() as conn:
        after = conn.execute(text("SELECT sql FROM sqlite_master ORDER BY name")).all()
        versions = conn.execute(text("SELECT version_num FROM alembic_version")).all()
    assert before == after
    assert versions == [(head_revision(),)]
    again.close()


def test_models_match_the_migrations(catalog: Catalog) -> None:
    with catalog.db.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []


def test_sqlite_runs_in_wal_with_foreign_keys(catalog: Catalog) -> None:
    with catalog.db.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
        assert conn.execute(text("PRAGMA busy_timeout")).scalar() >= 1000


def test_migrations_render_for_postgresql_without_sqlite_sql() -> None:
    buf = io.StringIO()
    cfg = alembic_config("postgresql+psycopg://user@localhost/flywheel")
    cfg.output_buffer = buf
    command.upgrade(cfg, "head", sql=True)
    sql = buf.getvalue()
    assert "CREATE TABLE attempts" in sql and "CREATE TABLE artifacts" in sql
    assert "UNIQUE (run_id, problem_id, attempt_index)" in sql
    assert "AUTOINCREMENT" not in sql and "PRAGMA" not in sql
    assert "id SERIAL NOT NULL" in sql  # portable autoincrement, rendered natively
