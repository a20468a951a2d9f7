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
    from flywheel.catalog.migration_helpers import without_report_views

    with without_report_views():   # SQLite rebuilds the table to drop a column; views must not name it
        with op.batch_alter_table("runs") as batch:
            batch.drop_column("settings")
