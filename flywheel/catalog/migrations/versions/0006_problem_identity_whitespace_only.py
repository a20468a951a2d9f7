"""Problem identity keeps meaning: `problems.text_hash` hashes the text with whitespace normalized only.

Before this revision the hash was taken after Unicode NFKC and casefolding, so different problems
were filed as one ("What is 23 + 1?" under "What is 2³ + 1?"; "... What is a?" under
"... What is A?") and a run of one routed as an exact recurrence to the other's artifact. This
revision re-keys every stored problem: `text_hash` is recomputed from the stored text under the
new identity (whitespace runs collapsed to one space, trimmed; nothing else changes). Problem ids
stay as they are (they are names: a later deposit of the same text finds the row by its hash).

A deposit that an older version filed under another problem's id kept only that problem's text,
so the catalog cannot split such a pair afterwards; its artifact's tokens still hold its own text.

The normalizations are frozen copies here (not imported): the migration must mean the same thing
whatever `flywheel.catalog.normalize` later becomes. Downgrade restores the old keys.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None

_WS = re.compile(r"\s+")
_BATCH = 1000


def _hash_0006(text: str) -> str:
    return hashlib.sha256(_WS.sub(" ", text).strip().encode("utf-8")).hexdigest()


def _hash_0001(text: str) -> str:
    return hashlib.sha256(_WS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()
                          .encode("utf-8")).hexdigest()


def _rekey(digest: Callable[[str], str]) -> None:
    from alembic import context

    if context.is_offline_mode():   # hashes are computed in Python from the stored rows
        op.execute("-- 0006: problems.text_hash is re-keyed only by an online migration "
                   "(flywheel opens the catalog and migrates it)")
        return
    conn = op.get_bind()
    problems = sa.table("problems", sa.column("id", sa.String), sa.column("text", sa.Text),
                        sa.column("text_hash", sa.String))
    after: str | None = None
    while True:   # in id order, a batch at a time: a large catalog is never held in memory whole
        stmt = sa.select(problems.c.id, problems.c.text, problems.c.text_hash).order_by(problems.c.id).limit(_BATCH)
        if after is not None:
            stmt = stmt.where(problems.c.id > after)
        rows = conn.execute(stmt).all()
        if not rows:
            return
        changed = [{"pid": pid, "h": digest(text)} for pid, text, old in rows if digest(text) != old]
        if changed:
            conn.execute(problems.update().where(problems.c.id == sa.bindparam("pid"))
                         .values(text_hash=sa.bindparam("h")), changed)
        after = rows[-1][0]


def upgrade() -> None:
    _rekey(_hash_0006)


def downgrade() -> None:
    _rekey(_hash_0001)
