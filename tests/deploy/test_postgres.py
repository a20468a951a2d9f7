"""The catalog on a real PostgreSQL server: migrations from scratch, idempotent deposits through
the library facade, and several processes depositing and recording attempts at once."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import func, inspect, select

from flywheel.catalog import AttemptRecord, Base, GraftRecord, head_revision, open_catalog
from flywheel.catalog.db import current_revision, migrate
from flywheel.catalog.models import ArtifactRow, AttemptRow, GraftRow, ProblemRow, RunRow, SolutionRow
from flywheel.engine import Engine
from flywheel.library import Library
from flywheel.problemsets import Problem

TABLES = {"problems", "solutions", "artifacts", "runs", "attempts", "grafts", "alembic_version"}
WORKERS = 4
SHARED = 6   # deposited by every worker: must end up exactly once
OWN = 3      # deposited by one worker only: none may be lost


def _count(cat: object, model: type) -> int:
    with cat.session() as s:  # type: ignore[attr-defined]
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


def _problem(i: int) -> Problem:
    return Problem(id=f"pg-{i}", text=f"What is {i} + {i + 1}?", reference=str(2 * i + 1), source="deploy")


def _solve(i: int) -> tuple[str, str]:
    return f"{i} + {i + 1} = {2 * i + 1}.", str(2 * i + 1)


def test_migrations_from_scratch_on_postgresql(pg_url: str) -> None:
    cat = open_catalog(pg_url)
    try:
        assert cat.db.url.get_backend_name() == "postgresql"
        assert TABLES <= set(inspect(cat.db).get_table_names())
        with cat.db.connect() as conn:
            assert current_revision(conn) == head_revision()
            assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
        assert migrate(cat.db) == head_revision()          # again: a no-op
    finally:
        cat.close()
    again = open_catalog(pg_url)
    with again.db.connect() as conn:
        assert current_revision(conn) == head_revision()
    again.close()


def test_deposit_is_idempotent_on_postgresql(tmp_path: Path, pg_url: str, tiny_gemma: Engine) -> None:
    problem = _problem(1)
    solution, answer = _solve(1)
    with Library.open(tmp_path / "lib", db_url=pg_url) as lib:
        assert lib.catalog.db.url.get_backend_name() == "postgresql"
        first = lib.deposit(tiny_gemma, problem, solution, answer, index=False)
        second = lib.deposit(tiny_gemma, problem, solution, answer, index=False)
        assert first.created and not second.created
        assert second.artifact_sha256 == first.artifact_sha256
        assert lib.store.contains(first.artifact_sha256)
    with Library.open(tmp_path / "lib", db_url=pg_url) as lib:   # a new connection sees the same rows
        third = lib.deposit(tiny_gemma, problem, solution, answer, index=False)
        assert not third.created and third.artifact_sha256 == first.artifact_sha256
        assert (_count(lib.catalog, ProblemRow), _count(lib.catalog, SolutionRow), _count(lib.catalog, ArtifactRow)) == (1, 1, 1)
        row = lib.catalog.get_artifact(first.artifact_sha256)
        assert row.fingerprint_digest == tiny_gemma.fingerprint.digest
        assert lib.load_graft(tiny_gemma, first.artifact_sha256).token_count == first.token_count


def _writer(model_dir: str, root: str, url: str, worker: int, barrier: mp.synchronize.Barrier) -> None:  # type: ignore[name-defined]
    engine = Engine.load(model_dir, progress=False)
    barrier.wait()                       # start together: migrations and inserts really race
    lib = Library.open(Path(root), db_url=url)
    items = list(range(SHARED)) + [100 * (worker + 1) + i for i in range(OWN)]
    shas = {}
    for i in items:
        solution, answer = _solve(i)
        shas[i] = lib.deposit(engine, _problem(i), solution, answer, deposited_by=f"worker-{worker}",
                              index=False).artifact_sha256
    lib.catalog.create_run(run_id="pg-run", problem_set="deploy", problem_set_hash="0" * 64, budget=8,
                           attempts=WORKERS + 1, model_name="tiny", model_fingerprint=engine.fingerprint.digest)
    for i in range(SHARED):              # attempt 0 by everyone (a resumed duplicate), then one's own
        for index in (0, worker + 1):
            lib.catalog.record_attempt(
                AttemptRecord(run_id="pg-run", problem_id=f"pg-{i}", attempt_index=index, route="exact",
                              budget=8, decode_tokens=3, grafted_artifact_sha=shas[i]),
                [GraftRecord(shas[i], "ok", restored_tokens=10)])
    lib.close()


def test_concurrent_writers_on_postgresql_lose_nothing(tmp_path: Path, pg_url: str,
                                                       tiny_dirs: dict[str, Path]) -> None:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(WORKERS)
    root = tmp_path / "shared-lib"
    procs = [ctx.Process(target=_writer, args=(str(tiny_dirs["gemma3"]), str(root), pg_url, w, barrier))
             for w in range(WORKERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    assert [p.exitcode for p in procs] == [0] * WORKERS

    expected = SHARED + WORKERS * OWN
    with Library.open(root, db_url=pg_url) as lib:
        cat = lib.catalog
        assert _count(cat, ProblemRow) == expected
        assert _count(cat, SolutionRow) == expected
        assert _count(cat, ArtifactRow) == expected
        assert _count(cat, RunRow) == 1
        assert _count(cat, AttemptRow) == SHARED * (WORKERS + 1)
        assert _count(cat, GraftRow) == SHARED * (WORKERS + 1)
        stored = set(lib.store.iter_ids())
        catalogued = {a.sha256 for a in cat.list_artifacts()}
        assert catalogued == stored and len(stored) == expected
        assert {a.problem_id for a in cat.attempts_for_run("pg-run")} == {f"pg-{i}" for i in range(SHARED)}
