"""Shared prefill counted once: each fork of a shared graft restore + prefill carries its share.

Since batched passes (runs with a `decode_schedule`), the K attempts of one problem fork one graft
restore and one prefill, but every fork recorded the whole `prefill_tokens` and `restored_tokens`
(energy and seconds were already split), so run totals, the report and the joules-per-token fit
counted the shared work K times. From this revision:

- `attempts.prefill_tokens`, `attempts.restored_tokens`: the attempt's whole-token share of what
  the pass actually ran; the K forks' shares add up to it exactly (fork i of K gets
  total // K, plus 1 while i < total % K, forks in attempt-index order: `flywheel.attempt.apportion`);
- `attempts.prompt_tokens`: the prompt the attempt fed, i.e. what it would prefill alone (it was
  a copy of `prefill_tokens`); `grafts.restored_tokens` keeps what it would restore alone.

Old rows are moved: within a run that has a decode schedule, the live attempts (budget > 0) of one
problem with the same graft and prompt are taken as one fork group. A resumed run's later attempts
fall into the same group (their true group is not recorded), and runs without a decode schedule
(before batching) are left as they were. Columns are only updated (no table rebuild), so the report
views of 0002 stay as they are.

- view `problem_savings`: one row per (run, problem) grafted in that run, its K attempts folded, against
  what ungrafted passes spent on it: the report's named figures (`flywheel.report.figures`) in SQL,
  e.g. `SELECT problem_id, decode_tokens_without, decode_tokens_with, decode_factor FROM problem_savings`.
  (`tokens_saved` of 0002 stays for old queries: per attempt, against a per-attempt mean.)

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None

#: Rows `b` in the same fork group as the row being updated (stable columns only: none is updated).
_GROUP = ("b.run_id = attempts.run_id AND b.problem_id = attempts.problem_id AND b.budget > 0 "
          "AND b.prompt_tokens = attempts.prompt_tokens "
          "AND COALESCE(b.grafted_artifact_sha, '') = COALESCE(attempts.grafted_artifact_sha, '')")
_FORKS = f"(SELECT COUNT(*) FROM attempts b WHERE {_GROUP})"
_FORK = f"(SELECT COUNT(*) FROM attempts b WHERE {_GROUP} AND b.attempt_index < attempts.attempt_index)"


def _share(column: str) -> str:
    return f"{column} / {_FORKS} + CASE WHEN {_FORK} < {column} % {_FORKS} THEN 1 ELSE 0 END"


PROBLEM_SAVINGS = """
CREATE VIEW problem_savings AS
WITH passes AS (
    SELECT problem_id, model_fingerprint, run_id, SUM(decode_tokens) AS decode_tokens,
           SUM(computed_tokens) AS computed_tokens, COUNT(*) AS attempts,
           MAX(CASE WHEN verified THEN 1 ELSE 0 END) AS verified
    FROM attempt_costs WHERE grafted = 0
    GROUP BY problem_id, model_fingerprint, run_id
), without_graft AS (
    SELECT problem_id, model_fingerprint, COUNT(*) AS baseline_passes, SUM(attempts) AS baseline_attempts,
           CAST(AVG(CAST(decode_tokens AS DOUBLE PRECISION)) AS DOUBLE PRECISION) AS decode_tokens_without,
           CAST(AVG(CAST(computed_tokens AS DOUBLE PRECISION)) AS DOUBLE PRECISION) AS computed_tokens_without,
           MAX(verified) AS verified_without
    FROM passes GROUP BY problem_id, model_fingerprint
), with_graft AS (
    SELECT run_id, problem_id, model_fingerprint, COUNT(*) AS attempts,
           MAX(CASE WHEN verified THEN 1 ELSE 0 END) AS verified,
           SUM(decode_tokens) AS decode_tokens_with, SUM(computed_tokens) AS computed_tokens_with,
           SUM(restored_tokens) AS restored_tokens
    FROM attempt_costs WHERE grafted = 1
    GROUP BY run_id, problem_id, model_fingerprint
)
SELECT g.run_id, g.problem_id, g.model_fingerprint, g.attempts, g.verified, b.verified_without,
       b.baseline_passes, b.baseline_attempts,
       b.decode_tokens_without, g.decode_tokens_with,
       CASE WHEN g.decode_tokens_with > 0 THEN b.decode_tokens_without / g.decode_tokens_with END AS decode_factor,
       b.computed_tokens_without, g.computed_tokens_with,
       CASE WHEN g.computed_tokens_with > 0 THEN b.computed_tokens_without / g.computed_tokens_with END
           AS computed_factor,
       g.restored_tokens
FROM with_graft g
LEFT JOIN without_graft b ON b.problem_id = g.problem_id AND b.model_fingerprint = g.model_fingerprint
"""


def upgrade() -> None:
    op.execute(PROBLEM_SAVINGS)
    op.execute(f"""
UPDATE attempts
SET prefill_tokens = {_share('prompt_tokens')}, restored_tokens = {_share('restored_tokens')}
WHERE budget > 0 AND prompt_tokens > 0 AND prefill_tokens = prompt_tokens
  AND run_id IN (SELECT id FROM runs WHERE decode_schedule IS NOT NULL)
  AND {_FORKS} > 1
""")
    # A zero-budget attempt ran nothing, so it restored nothing either (it carried the whole restore).
    op.execute("UPDATE attempts SET restored_tokens = 0 WHERE budget = 0 "
               "AND run_id IN (SELECT id FROM runs WHERE decode_schedule IS NOT NULL)")


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS problem_savings")
    # Back to every fork carrying the whole: the prompt, and the graft's own length.
    op.execute("""
UPDATE attempts
SET prefill_tokens = prompt_tokens,
    restored_tokens = COALESCE((SELECT MAX(g.restored_tokens) FROM grafts g
                                WHERE g.attempt_id = attempts.id AND g.outcome = 'ok'), restored_tokens)
""")
