"""The SQL catalog: what the library holds, and what every run did with it.

Example:
    >>> from flywheel import config
    >>> from flywheel.catalog import open_catalog, ProblemSpec
    >>> cat = open_catalog(config.database_url(config.library_root()))
    >>> cat.upsert_problem(ProblemSpec(text="What is 2+2?", id="demo-1", reference="4"))
"""

from __future__ import annotations

from flywheel.catalog.api import Catalog
from flywheel.catalog.db import head_revision, make_db, migrate
from flywheel.catalog.models import ArtifactRow, AttemptRow, Base, GraftRow, ProblemRow, RunRow, SolutionRow
from flywheel.catalog.normalize import content_hash, normalize_text, text_hash
from flywheel.catalog.records import (
    ArtifactSpec,
    AttemptRecord,
    Deposit,
    GraftRecord,
    ProblemSpec,
    RecordedAttempt,
    RouterEntry,
    SolutionSpec,
)


def open_catalog(url: str) -> Catalog:
    """Open the catalog at `url`, applying any pending migrations first (safe from several processes).

    Args:
        url: a SQLAlchemy URL, usually `flywheel.config.database_url(library, explicit_db)`.
    Returns:
        the Catalog; `close()` it when done.
    """
    db = make_db(url)
    migrate(db)
    return Catalog(db)


__all__ = [
    "ArtifactRow", "ArtifactSpec", "AttemptRecord", "AttemptRow", "Base", "Catalog", "Deposit",
    "GraftRecord", "GraftRow", "ProblemRow", "ProblemSpec", "RecordedAttempt", "RouterEntry", "RunRow",
    "SolutionRow", "SolutionSpec", "content_hash", "head_revision", "make_db", "migrate",
    "normalize_text", "open_catalog", "text_hash",
]
