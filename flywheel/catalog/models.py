"""The catalog's tables as SQLAlchemy 2 typed declarative models.

The schema itself is created only by the Alembic migrations in `migrations/versions/`; these
models describe it for the ORM, and a test checks the two agree. Portable types only (no
SQLite-only SQL), so any SQLAlchemy URL — PostgreSQL in deployment — holds the same catalog.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from flywheel.errors import LibraryError

#: Deterministic constraint names, so migrations can name (and later drop) every constraint.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

SHA_LEN = 64  # hex SHA-256


def utcnow() -> datetime:
    """Timezone-aware now (stored as UTC)."""
    return datetime.now(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class ProblemRow(Base):
    """A problem statement; `text_hash` (SHA-256 of the normalized text) finds recurrences."""

    __tablename__ = "problems"

    id: Mapped[str] = mapped_column(String(255), primary_key=True)
    text: Mapped[str] = mapped_column(Text)
    text_hash: Mapped[str] = mapped_column(String(SHA_LEN), index=True)
    reference: Mapped[str | None] = mapped_column(Text)  # the reference answer, when known
    source: Mapped[str | None] = mapped_column(String(255))  # problem set name, e.g. "champ"
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SolutionRow(Base):
    """A worked solution to a problem, with the verifier's verdict and who deposited it."""

    __tablename__ = "solutions"
    __table_args__ = (UniqueConstraint("problem_id", "content_hash"),)

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    problem_id: Mapped[str] = mapped_column(ForeignKey("problems.id", ondelete="CASCADE"), index=True)
    text: Mapped[str] = mapped_column(Text)
    answer: Mapped[str] = mapped_column(Text)
    # SHA-256 over (solution text, answer): the idempotency key; Text columns are not portably unique.
    content_hash: Mapped[str] = mapped_column(String(SHA_LEN))
    verdict_status: Mapped[str] = mapped_column(String(32))  # verifiers.Verdict.status, or "unchecked"
    verdict_reason: Mapped[str | None] = mapped_column(Text)
    deposited_by: Mapped[str] = mapped_column(String(255))  # a flow-run id, or "curator:<user>"
    unverified: Mapped[bool] = mapped_column(default=False)  # True only by explicit --unverified
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ArtifactRow(Base):
    """A KV artifact's catalog row. The bytes live in the store under `sha256`."""

    __tablename__ = "artifacts"
    __table_args__ = (UniqueConstraint("solution_id", "fingerprint_digest"),)

    sha256: Mapped[str] = mapped_column(String(SHA_LEN), primary_key=True)
    fingerprint_digest: Mapped[str] = mapped_column(String(SHA_LEN), index=True)
    fingerprint_json: Mapped[str] = mapped_column(Text)
    model_name: Mapped[str] = mapped_column(String(255))
    token_count: Mapped[int]  # prefix tokens whose KV the artifact holds
    logits_sha256: Mapped[str | None] = mapped_column(String(SHA_LEN))  # logits after the prefix
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    problem_id: Mapped[str] = mapped_column(ForeignKey("problems.id", ondelete="CASCADE"), index=True)
    solution_id: Mapped[int] = mapped_column(ForeignKey("solutions.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RunRow(Base):
    """One flywheel pass over a problem set; re-opening the same id resumes it."""

    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    flow_run_id: Mapped[str | None] = mapped_column(String(64), index=True)
    problem_set: Mapped[str] = mapped_column(String(1024))  # as given: "champ", a path, "gen:..."
    problem_set_hash: Mapped[str] = mapped_column(String(SHA_LEN))
    budget: Mapped[int]  # per-problem decode-token budget
    run_budget: Mapped[int | None]  # optional decode-token budget for the whole run
    attempts: Mapped[int]  # attempts per problem
    no_graft: Mapped[bool] = mapped_column(default=False)
    model_name: Mapped[str] = mapped_column(String(255))
    model_fingerprint: Mapped[str] = mapped_column(String(SHA_LEN))
    status: Mapped[str] = mapped_column(String(16), default="running")  # running|finished|failed|interrupted
    decode_schedule: Mapped[str | None] = mapped_column(String(255))  # canonical JSON: slots, kernel, dtype
    # canonical JSON of the router, energy and verifier settings the run used (NULL: started before 0004)
    settings: Mapped[str | None] = mapped_column(Text)
    # host:pid:start of the process running it (flywheel.liveness); a `running` run whose owner
    # is gone was killed outright and is marked interrupted (NULL: started before 0005)
    owner: Mapped[str | None] = mapped_column(String(255))
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    def recorded(self, column: Literal["decode_schedule", "settings"]) -> dict[str, Any] | None:
        """The JSON object a run recorded in `column`; None when it recorded none (an older run).

        Raises:
            LibraryError: the column holds something other than a JSON object (a damaged or edited row).
        """
        text = getattr(self, column)
        if text is None:
            return None
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            value = None
        if not isinstance(value, dict):
            what = column.replace("_", " ")
            raise LibraryError(f"run {self.id!r} has an unreadable {what} (not a JSON object)",
                               hint="the catalog row was damaged or edited; restore it from a backup, "
                                    "or leave this run out (--run another)")
        return value


class AttemptRow(Base):
    """One attempt at one problem in one run: route, tokens, energy, answer and verdict."""

    __tablename__ = "attempts"
    __table_args__ = (
        UniqueConstraint("run_id", "problem_id", "attempt_index"),
        CheckConstraint("route IN ('exact', 'near', 'none')", name="route"),
        Index("ix_attempts_problem_route", "problem_id", "route"),
    )

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    problem_id: Mapped[str] = mapped_column(ForeignKey("problems.id", ondelete="CASCADE"))
    attempt_index: Mapped[int]  # 0-based within (run, problem)
    seed: Mapped[int | None]  # sampling seed; None for greedy
    route: Mapped[str] = mapped_column(String(8))  # exact|near|none, as decided by the router
    route_score: Mapped[float | None] = mapped_column(Float)  # 1.0 for exact, cosine for near
    routed_artifact_sha: Mapped[str | None] = mapped_column(String(SHA_LEN))  # the router's pick
    grafted_artifact_sha: Mapped[str | None] = mapped_column(String(SHA_LEN))  # None if refused/none
    # K attempts that fork one graft restore + prefill each carry a whole-token share of it (0007),
    # so summing rows counts the shared work once; `prompt_tokens` is what one attempt costs alone.
    prompt_tokens: Mapped[int] = mapped_column(default=0)  # the prompt it fed: tokens it would prefill alone
    prefill_tokens: Mapped[int] = mapped_column(default=0)  # its share of the tokens actually prefilled (computed)
    restored_tokens: Mapped[int] = mapped_column(default=0)  # its share of the tokens restored (prefill avoided)
    decode_tokens: Mapped[int] = mapped_column(default=0)
    tool_tokens: Mapped[int] = mapped_column(default=0, server_default="0")  # forced by the calculator (0008)
    budget: Mapped[int]  # this attempt's decode budget
    budget_exhausted: Mapped[bool] = mapped_column(default=False)
    answer: Mapped[str | None] = mapped_column(Text)
    verified: Mapped[bool] = mapped_column(default=False)
    verdict_status: Mapped[str | None] = mapped_column(String(32))
    wall_seconds: Mapped[float | None] = mapped_column(Float)
    energy_joules: Mapped[float | None] = mapped_column(Float)
    energy_source: Mapped[str | None] = mapped_column(String(16))  # nvml|rapl|estimate
    logits_sha256: Mapped[str | None] = mapped_column(String(SHA_LEN))  # first decode step's logits
    error: Mapped[str | None] = mapped_column(Text)  # error or refusal reason, if any
    text: Mapped[str | None] = mapped_column(Text)  # decoded continuation, at most ATTEMPT_TEXT_LIMIT chars
    stop_reason: Mapped[str | None] = mapped_column(String(8))  # stop|eos|budget
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class GraftRow(Base):
    """A graft tried during an attempt, and whether the engine accepted the artifact.

    `artifact_sha256` is deliberately not a foreign key: a refusal must be recordable even for
    an id the catalog does not (or no longer) know.
    """

    __tablename__ = "grafts"
    __table_args__ = (
        UniqueConstraint("attempt_id", "artifact_sha256"),
        CheckConstraint("outcome IN ('ok', 'refused')", name="outcome"),
    )

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    attempt_id: Mapped[int] = mapped_column(ForeignKey("attempts.id", ondelete="CASCADE"), index=True)
    artifact_sha256: Mapped[str] = mapped_column(String(SHA_LEN), index=True)
    outcome: Mapped[str] = mapped_column(String(8))
    reason: Mapped[str | None] = mapped_column(Text)  # e.g. the ArtifactIntegrityError message
    restored_tokens: Mapped[int | None]
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class LibraryRow(Base):
    """Which library this catalog belongs to (0009): one row, written when a library first opens it.

    `library_id` is the id in that library folder's `library.id` file, which moves with the folder;
    `root` is where the library was last opened from, kept for messages only (a library may move).
    """

    __tablename__ = "library"
    __table_args__ = (CheckConstraint("id = 1", name="one_row"),)

    id: Mapped[int] = mapped_column(primary_key=True)   # always 1: a catalog belongs to one library
    library_id: Mapped[str] = mapped_column(String(64))
    root: Mapped[str] = mapped_column(Text)
    claimed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
