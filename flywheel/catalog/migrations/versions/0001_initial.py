"""Initial catalog: problems, solutions, artifacts, runs, attempts, grafts.

Revision ID: 0001
Revises: (none)
Create Date: 2026-12-02 10:17:15.261949
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('problems',
    sa.Column('id', sa.String(length=255), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('text_hash', sa.String(length=64), nullable=False),
    sa.Column('reference', sa.Text(), nullable=True),
    sa.Column('source', sa.String(length=255), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_problems'))
    )
    with op.batch_alter_table('problems', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_problems_text_hash'), ['text_hash'], unique=False)

    op.create_table('runs',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('flow_run_id', sa.String(length=64), nullable=True),
    sa.Column('problem_set', sa.String(length=1024), nullable=False),
    sa.Column('problem_set_hash', sa.String(length=64), nullable=False),
    sa.Column('budget', sa.Integer(), nullable=False),
    sa.Column('run_budget', sa.Integer(), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('no_graft', sa.Boolean(), nullable=False),
    sa.Column('model_name', sa.String(length=255), nullable=False),
    sa.Column('model_fingerprint', sa.String(length=64), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_runs'))
    )
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_runs_flow_run_id'), ['flow_run_id'], unique=False)

    op.create_table('attempts',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('run_id', sa.String(length=64), nullable=False),
    sa.Column('problem_id', sa.String(length=255), nullable=False),
    sa.Column('attempt_index', sa.Integer(), nullable=False),
    sa.Column('seed', sa.Integer(), nullable=True),
    sa.Column('route', sa.String(length=8), nullable=False),
    sa.Column('route_score', sa.Float(), nullable=True),
    sa.Column('routed_artifact_sha', sa.String(length=64), nullable=True),
    sa.Column('grafted_artifact_sha', sa.String(length=64), nullable=True),
    sa.Column('prompt_tokens', sa.Integer(), nullable=False),
    sa.Column('prefill_tokens', sa.Integer(), nullable=False),
    sa.Column('restored_tokens', sa.Integer(), nullable=False),
    sa.Column('decode_tokens', sa.Integer(), nullable=False),
    sa.Column('budget', sa.Integer(), nullable=False),
    sa.Column('budget_exhausted', sa.Boolean(), nullable=False),
    sa.Column('answer', sa.Text(), nullable=True),
    sa.Column('verified', sa.Boolean(), nullable=False),
    sa.Column('verdict_status', sa.String(length=32), nullable=True),
    sa.Column('wall_seconds', sa.Float(), nullable=True),
    sa.Column('energy_joules', sa.Float(), nullable=True),
    sa.Column('energy_source', sa.String(length=16), nullable=True),
    sa.Column('logits_sha256', sa.String(length=64), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("route IN ('exact', 'near', 'none')", name=op.f('ck_attempts_route')),
    sa.ForeignKeyConstraint(['problem_id'], ['problems.id'], name=op.f('fk_attempts_problem_id_problems'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], name=op.f('fk_attempts_run_id_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_attempts')),
    sa.UniqueConstraint('run_id', 'problem_id', 'attempt_index', name=op.f('uq_attempts_run_id_problem_id_attempt_index'))
    )
    with op.batch_alter_table('attempts', schema=None) as batch_op:
        batch_op.create_index('ix_attempts_problem_route', ['problem_id', 'route'], unique=False)
        batch_op.create_index(batch_op.f('ix_attempts_run_id'), ['run_id'], unique=False)

    op.create_table('solutions',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('problem_id', sa.String(length=255), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('answer', sa.Text(), nullable=False),
    sa.Column('content_hash', sa.String(length=64), nullable=False),
    sa.Column('verdict_status', sa.String(length=32), nullable=False),
    sa.Column('verdict_reason', sa.Text(), nullable=True),
    sa.Column('deposited_by', sa.String(length=255), nullable=False),
    sa.Column('unverified', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['problem_id'], ['problems.id'], name=op.f('fk_solutions_problem_id_problems'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_solutions')),
    sa.UniqueConstraint('problem_id', 'content_hash', name=op.f('uq_solutions_problem_id_content_hash'))
    )
    with op.batch_alter_table('solutions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_solutions_problem_id'), ['problem_id'], unique=False)

    op.create_table('artifacts',
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('fingerprint_digest', sa.String(length=64), nullable=False),
    sa.Column('fingerprint_json', sa.Text(), nullable=False),
    sa.Column('model_name', sa.String(length=255), nullable=False),
    sa.Column('token_count', sa.Integer(), nullable=False),
    sa.Column('logits_sha256', sa.String(length=64), nullable=True),
    sa.Column('size_bytes', sa.BigInteger(), nullable=False),
    sa.Column('problem_id', sa.String(length=255), nullable=False),
    sa.Column('solution_id', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['problem_id'], ['problems.id'], name=op.f('fk_artifacts_problem_id_problems'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['solution_id'], ['solutions.id'], name=op.f('fk_artifacts_solution_id_solutions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('sha256', name=op.f('pk_artifacts')),
    sa.UniqueConstraint('solution_id', 'fingerprint_digest', name=op.f('uq_artifacts_solution_id_fingerprint_digest'))
    )
    with op.batch_alter_table('artifacts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_artifacts_fingerprint_digest'), ['fingerprint_digest'], unique=False)
        batch_op.create_index(batch_op.f('ix_artifacts_problem_id'), ['problem_id'], unique=False)

    op.create_table('grafts',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('attempt_id', sa.Integer(), nullable=False),
    sa.Column('artifact_sha256', sa.String(length=64), nullable=False),
    sa.Column('outcome', sa.String(length=8), nullable=False),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('restored_tokens', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("outcome IN ('ok', 'refused')", name=op.f('ck_grafts_outcome')),
    sa.ForeignKeyConstraint(['attempt_id'], ['attempts.id'], name=op.f('fk_grafts_attempt_id_attempts'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_grafts')),
    sa.UniqueConstraint('attempt_id', 'artifact_sha256', name=op.f('uq_grafts_attempt_id_artifact_sha256'))
    )
    with op.batch_alter_table('grafts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_grafts_artifact_sha256'), ['artifact_sha256'], unique=False)
        batch_op.create_index(batch_op.f('ix_grafts_attempt_id'), ['attempt_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('grafts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_grafts_attempt_id'))
        batch_op.drop_index(batch_op.f('ix_grafts_artifact_sha256'))

    op.drop_table('grafts')
    with op.batch_alter_table('artifacts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_artifacts_problem_id'))
        batch_op.drop_index(batch_op.f('ix_artifacts_fingerprint_digest'))

    op.drop_table('artifacts')
    with op.batch_alter_table('solutions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_solutions_problem_id'))

    op.drop_table('solutions')
    with op.batch_alter_table('attempts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_attempts_run_id'))
        batch_op.drop_index('ix_attempts_problem_route')

    op.drop_table('attempts')
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_runs_flow_run_id'))

    op.drop_table('runs')
    with op.batch_alter_table('problems', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_problems_text_hash'))

    op.drop_table('problems')
