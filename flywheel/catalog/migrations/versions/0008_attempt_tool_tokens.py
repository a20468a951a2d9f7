"""Tool tokens: what the engine's calculator fed an attempt, counted apart from what it decoded.

- `attempts.tool_tokens`: tokens the calculator forced into the attempt's continuation (exact
  results after `expression =`, `flywheel.calculator`); they are in `text`, never in
  `decode_tokens` (the model's own sampled tokens). 0 for every attempt before this revision
  (no calculator existed).

A column is only added (no table rebuild), so the report views stay as they are; the downgrade
drops it under 0002's report views and 0007's `problem_savings`, and creates them again.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import sqlalchemy as sa
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("attempts", sa.Column("tool_tokens", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    from flywheel.catalog.migration_helpers import without_report_views

    spec = importlib.util.spec_from_file_location(
        "problem_savings_0007", next(Path(__file__).parent.glob("0007_*.py")))
    assert spec is not None and spec.loader is not None
    savings = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(savings)
    op.execute("DROP VIEW IF EXISTS problem_savings")
    with without_report_views():   # SQLite rebuilds the table to drop a column; views must not name it
        with op.batch_alter_table("attempts") as batch:
            batch.drop_column("tool_tokens")
    op.execute(savings.PROBLEM_SAVINGS)
