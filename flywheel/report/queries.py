"""Every SQL query the report runs, in one readable place (SQLAlchemy Core).

They read the `attempt_costs` view of migration 0002; the report folds its rows per problem
(`flywheel.report.figures`). Users can query the same figures in SQL through migration 0007's
`problem_savings` view, e.g.:

    SELECT problem_id, decode_tokens_without, decode_tokens_with, decode_factor FROM problem_savings;
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, column, func, select, table

from flywheel.catalog.models import ArtifactRow, AttemptRow, ProblemRow, RunRow, SolutionRow

ATTEMPT_COST_COLUMNS = (
    "attempt_id", "run_id", "problem_id", "attempt_index", "route", "grafted", "artifact_sha256",
    "prompt_tokens", "prefill_tokens", "restored_tokens", "decode_tokens", "computed_tokens", "budget",
    "budget_exhausted", "answer", "verified", "verdict_status", "wall_seconds", "energy_joules",
    "energy_source", "logits_sha256", "error", "problem_set_hash", "model_name", "model_fingerprint",
    "artifact_logits_sha256", "artifact_tokens", "artifact_bytes",
)
attempt_costs = table("attempt_costs", *(column(c) for c in ATTEMPT_COST_COLUMNS))

Rows = list[dict[str, Any]]


def _rows(conn: Connection, stmt: Any) -> Rows:
    return [dict(r) for r in conn.execute(stmt).mappings()]


def runs(conn: Connection, run_id: str | None = None) -> Rows:
    """Runs in the order they started (the flywheel passes), or just `run_id`."""
    stmt = select(RunRow.__table__).order_by(RunRow.started_at, RunRow.id)
    if run_id is not None:
        stmt = stmt.where(RunRow.id == run_id)
    return _rows(conn, stmt)


def attempts(conn: Connection, run_id: str | None = None) -> Rows:
    """Every attempt of the run(s) plus the ungrafted attempts any baseline rests on, with the
    problem's reference answer and the tokens the calculator forced (`tool_tokens`, counted apart
    from `decode_tokens`): all a third party needs to recompute the savings and re-score."""
    problems, rows = ProblemRow.__table__, AttemptRow.__table__
    stmt = (select(attempt_costs, problems.c.reference, rows.c.tool_tokens)
            .join(problems, problems.c.id == attempt_costs.c.problem_id)
            .join(rows, rows.c.id == attempt_costs.c.attempt_id)
            .order_by(attempt_costs.c.attempt_id))
    if run_id is not None:
        in_run = select(attempt_costs.c.problem_id).where(attempt_costs.c.run_id == run_id)
        stmt = stmt.where((attempt_costs.c.run_id == run_id)
                          | ((attempt_costs.c.grafted == 0) & attempt_costs.c.problem_id.in_(in_run)))
    return _rows(conn, stmt)


def solution_times(conn: Connection) -> Rows:
    """When each solution was deposited and whether it is verified (the learning curve's library size)."""
    sol = SolutionRow.__table__
    rows = _rows(conn, select(sol.c.created_at, sol.c.verdict_status, sol.c.unverified).order_by(sol.c.id))
    return [{"created_at": r["created_at"], "verified": r["verdict_status"] == "equivalent" and not r["unverified"]}
            for r in rows]


def library_context(conn: Connection) -> Rows:
    """Per model fingerprint: artifacts held, tokens stored, and the largest single artifact."""
    art = ArtifactRow.__table__
    stmt = (select(art.c.fingerprint_digest, art.c.model_name,
                   func.count().label("artifacts"),
                   func.sum(art.c.token_count).label("stored_tokens"),
                   func.sum(art.c.size_bytes).label("stored_bytes"),
                   func.max(art.c.token_count).label("largest_artifact_tokens"),
                   func.max(art.c.size_bytes).label("largest_artifact_bytes"))
            .group_by(art.c.fingerprint_digest, art.c.model_name)
            .order_by(art.c.model_name, art.c.fingerprint_digest))
    return _rows(conn, stmt)
