"""Run settings: the router, energy and verifier settings that produced a run's results.

- `runs.settings`: canonical JSON of `flows.run.RunConfig.settings()` (router thresholds and
  index, energy metering, verifier bounds and tolerance), written when the run starts; a run is
  never resumed under other settings. NULL for runs started before this revision.

A column is only added (no table rebuild), so the report views of 0002 stay as they are.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("settings", sa.Text(), nullable=True))


def downgrade() -> None:
    # SQLite rebuilds a table to drop a column, and refuses while a view names it (see 0002).
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("report_views_0002", Path(__file__).with_name("0002_report_views.py"))
    assert spec is not None and spec.loader is not None
    views = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(views)
    views.downgrade()
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("settings")
    views.upgrade()
