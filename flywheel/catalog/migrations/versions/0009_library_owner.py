"""Library owner: which library a catalog belongs to, so another library's catalog is refused.

- `library`: at most one row (id 1): the `library_id` found in the owning library folder's
  `library.id` file, where that library was last opened from (`root`, for messages only: a
  library folder may move with its catalog), and when the catalog was claimed. A catalog from
  before this revision has no row; the first library that opens it writes its own
  (`flywheel.ownership`). A new table only: the report views stay as they are.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "library",
        sa.Column("id", sa.Integer(), nullable=False, autoincrement=False),
        sa.Column("library_id", sa.String(64), nullable=False),
        sa.Column("root", sa.Text(), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("id = 1", name=op.f("ck_library_one_row")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_library")),
    )


def downgrade() -> None:
    op.drop_table("library")
