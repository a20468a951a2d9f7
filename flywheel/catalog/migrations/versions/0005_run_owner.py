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
    # SQLite rebuilds a table to drop a column, and refuses while a view names it (see 0002).
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("report_views_0002", Path(__file__).with_name("0002_report_views.py"))
    assert spec is not None and spec.loader is not None
    views = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(views)
    views.downgrade()
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("owner")
    views.upgrade()
