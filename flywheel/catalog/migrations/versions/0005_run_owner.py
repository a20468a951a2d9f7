"""Run owner: which process runs a run, so one killed outright is shown as interrupted.

- `runs.owner`: `host:pid:start` of the process that started (or last resumed) the run
  (`flywheel.liveness.process_token`). A run still `running` whose owner is gone was killed
  (SIGKILL, power loss): the next run on the catalog marks it `interrupted`, and the report shows
  it so. NULL for runs started before this revision (never declared gone).

A column is only added (no table rebuild), so the report views of 0002 stay as they are.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("owner", sa.String(255), nullable=True))


def downgrade() -> None:
    from flywheel.catalog.migration_helpers import without_report_views

    with without_report_views():   # SQLite rebuilds the table to drop a column; views must not name it
        with op.batch_alter_table("runs") as batch:
            batch.drop_column("owner")
