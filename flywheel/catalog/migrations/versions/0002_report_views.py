"""Report views: attempt_costs, baselines, tokens_saved — the savings, in SQL users can query.

- `attempt_costs`: one row per attempt with its computed tokens (prefill + decode), energy, and
  the hashes it rests on (problem set, model fingerprint, grafted artifact and its logits).
- `baselines`: per (problem, model fingerprint), what ungrafted attempts measurably spent —
  the mean over every recorded attempt without a graft, budget-exhausted ones included.
  A problem with no such attempt has no row: its saving is unknown, never assumed.
- `tokens_saved`: one row per grafted attempt against its problem's baseline (NULL when none).
  `restored_tokens` is the prefill avoided by restoring the artifact, reported apart from the
  saving. Energy is compared only when baseline and graft share a source (else NULL, 'mixed').

Portable SQL (SQLite and PostgreSQL). A later migration that rebuilds `attempts`, `runs` or
`artifacts` in SQLite batch mode must drop these views first and recreate them after: SQLite
refuses to rename a table while a view names a missing one.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None

ATTEMPT_COSTS = """
CREATE VIEW attempt_costs AS
SELECT
    a.id AS attempt_id,
    a.run_id,
    a.problem_id,
    a.attempt_index,
    a.route,
    CASE WHEN a.grafted_artifact_sha IS NULL THEN 0 ELSE 1 END AS grafted,
    a.grafted_artifact_sha AS artifact_sha256,
    a.prompt_tokens,
    a.prefill_tokens,
    a.restored_tokens,
    a.decode_tokens,
    a.prefill_tokens + a.decode_tokens AS computed_tokens,
    a.budget,
    a.budget_exhausted,
    a.answer,
    a.verified,
    a.verdict_status,
    a.wall_seconds,
    a.energy_joules,
    a.energy_source,
    a.logits_sha256,
    a.error,
    r.problem_set_hash,
    r.model_name,
    r.model_fingerprint,
    art.logits_sha256 AS artifact_logits_sha256,
    art.token_count AS artifact_tokens,
    art.size_bytes AS artifact_bytes
FROM attempts a
JOIN runs r ON r.id = a.run_id
LEFT JOIN artifacts art ON art.sha256 = a.grafted_artifact_sha
"""

BASELINES = """
CREATE VIEW baselines AS
SELECT
    problem_id,
    model_fingerprint,
    COUNT(*) AS baseline_attempts,
    SUM(CASE WHEN budget_exhausted THEN 1 ELSE 0 END) AS budget_exhausted_attempts,
    CAST(AVG(CAST(computed_tokens AS DOUBLE PRECISION)) AS DOUBLE PRECISION) AS baseline_tokens,
    CAST(AVG(CAST(prefill_tokens AS DOUBLE PRECISION)) AS DOUBLE PRECISION) AS baseline_prefill_tokens,
    CAST(AVG(CAST(decode_tokens AS DOUBLE PRECISION)) AS DOUBLE PRECISION) AS baseline_decode_tokens,
    COUNT(energy_joules) AS energy_attempts,
    CAST(AVG(energy_joules) AS DOUBLE PRECISION) AS energy_j,
    CASE WHEN COUNT(DISTINCT energy_source) = 1 THEN MIN(energy_source)
         WHEN COUNT(DISTINCT energy_source) > 1 THEN 'mixed' END AS energy_source
FROM attempt_costs
WHERE grafted = 0
GROUP BY problem_id, model_fingerprint
"""

TOKENS_SAVED = """
CREATE VIEW tokens_saved AS
SELECT
    g.attempt_id,
    g.run_id,
    g.problem_id,
    g.attempt_index,
    g.route,
    b.baseline_attempts,
    b.budget_exhausted_attempts,
    b.baseline_tokens,
    g.computed_tokens AS graft_tokens,
    g.prefill_tokens AS graft_prefill_tokens,
    g.decode_tokens AS graft_decode_tokens,
    g.restored_tokens,
    b.baseline_tokens - g.computed_tokens AS tokens_saved,
    CASE WHEN g.computed_tokens > 0 THEN b.baseline_tokens / g.computed_tokens END AS ratio,
    b.energy_j AS energy_j_baseline,
    g.energy_joules AS energy_j_graft,
    CASE WHEN b.energy_source = g.energy_source THEN b.energy_j - g.energy_joules END AS energy_saved_j,
    CASE WHEN b.energy_source IS NULL OR b.energy_source = g.energy_source THEN g.energy_source
         ELSE 'mixed' END AS energy_source,
    g.verified,
    g.answer,
    g.budget,
    g.budget_exhausted,
    g.problem_set_hash,
    g.model_fingerprint,
    g.artifact_sha256,
    g.artifact_logits_sha256,
    g.logits_sha256
FROM attempt_costs g
LEFT JOIN baselines b ON b.problem_id = g.problem_id AND b.model_fingerprint = g.model_fingerprint
WHERE g.grafted = 1
"""

VIEWS = ("attempt_costs", "baselines", "tokens_saved")  # creation order; dropped in reverse


def upgrade() -> None:
    for ddl in (ATTEMPT_COSTS, BASELINES, TOKENS_SAVED):
        op.execute(ddl)


def downgrade() -> None:
    for name in reversed(VIEWS):
        op.execute(f"DROP VIEW IF EXISTS {name}")
