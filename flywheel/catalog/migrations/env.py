"""Alembic environment, run programmatically by `flywheel.catalog.db.migrate` (no alembic.ini).

The caller hands in an open connection via `config.attributes["connection"]`; offline mode
(`--sql`) renders SQL for a URL given as `sqlalchemy.url`.
"""

from __future__ import annotations

from alembic import context

from flywheel.catalog.models import Base

target_metadata = Base.metadata
config = context.config


def run_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes["connection"]
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=True,  # SQLite cannot ALTER most things; batch mode copies the table
        transaction_per_migration=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
