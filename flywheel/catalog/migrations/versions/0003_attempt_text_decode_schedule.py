"""Attempt text and the decode schedule: why an attempt failed, and under which schedule it ran.

- `attempts.text`: the decoded continuation, bounded to `ATTEMPT_TEXT_LIMIT` characters (the
  token count beside it is `decode_tokens`), so a user can read why an attempt failed.
- `attempts.stop_reason`: stop (the stop rule), eos, or budget; NULL when nothing was decoded.
- `runs.decode_schedule`: canonical JSON of the batched decode schedule (slot count, kernel path,
  dtype); a run is never resumed under another schedule's kernel or dtype.

Columns are only added (no table rebuild), so the report views of 0002 stay as they are.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("attempts", sa.Column("text", sa.Text(), nullable=True))
    op.add_column("attempts", sa.Column("stop_reason", sa.String(8), nullable=True))
    op.add_column("runs", sa.Column("decode_schedule", sa.String(255), nullable=True))


def downgrade() -> None:
    from flywheel.catalog.migration_helpers import without_report_views

    with without_report_views():   # SQLite rebuilds the table to drop a column; views must not name it
        with op.batch_alter_table("runs") as batch:
            batch.drop_column("decode_schedule")
        with op.batch_alter_table("attempts") as batch:
            batch.drop_column("stop_reason")
            batch.drop_column("text")
