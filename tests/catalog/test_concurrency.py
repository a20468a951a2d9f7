"""Several processes writing one SQLite catalog at once lose nothing and duplicate nothing;
a deposit killed midway leaves no row without its artifact bytes."""

from __future__ import annotations

import multiprocessing as mp
import os
from dataclasses import replace
from pathlib import Path

from catalog_fixtures import FP, artifact, problem, solution
from sqlalchemy import func, select

from flywheel import config
from flywheel.catalog import AttemptRecord, GraftRecord, open_catalog
from flywheel.catalog.models import ArtifactRow, AttemptRow, GraftRow, ProblemRow, SolutionRow
from flywheel.store import LocalStore

WORKERS = 4
SHARED = 15  # deposited by every worker: must end up once
OWN = 8  # deposited by one worker only


def _worker(library: str, worker: int, barrier: mp.synchronize.Barrier) -> None:  # type: ignore[name-defined]
    barrier.wait()  # start together, so migrations and inserts really race
    cat = open_catalog(config.database_url(Path(library)))
    items = list(range(SHARED)) + [1000 * (worker + 1) + i for i in range(OWN)]
    for i in items:
        cat.deposit(problem(i), solution(i), artifact(f"a{i}"))
    cat.create_run(run_id="shared-run", problem_set="demo", problem_set_hash="0" * 64, budget=8,
                   attempts=WORKERS, model_name="tiny", model_fingerprint=FP)
    for i in range(SHARED):  # every worker records attempt 0 (a resumed duplicate) and its own index
        for index in (0, worker + 1):
            cat.record_attempt(
                AttemptRecord(run_id="shared-run", problem_id=f"demo-{i}", attempt_index=index,
                              route="exact", budget=8, decode_tokens=3, grafted_artifact_sha=artifact(f"a{i}").sha256),
                [GraftRecord(artifact(f"a{i}").sha256, "ok", restored_tokens=42)])
    cat.close()


def _count(cat: object, model: type) -> int:
    with cat.session() as s:  # type: ignore[attr-defined]
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


def test_concurrent_writers_lose_no_rows_and_create_no_duplicates(tmp_path: Path) -> None:
    library = tmp_path / "library"
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(WORKERS)
    procs = [ctx.Process(target=_worker, args=(str(library), w, barrier)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=180)
    assert [p.exitcode for p in procs] == [0] * WORKERS

    cat = open_catalog(config.database_url(library))
    expected = SHARED + WORKERS * OWN
    assert _count(cat, ProblemRow) == expected
    assert _count(cat, SolutionRow) == expected
    assert _count(cat, ArtifactRow) == expected
    assert _count(cat, AttemptRow) == SHARED * (WORKERS + 1)  # index 0 once, plus one index per worker
    assert _count(cat, GraftRow) == SHARED * (WORKERS + 1)
    assert {a.sha256 for a in cat.list_artifacts(FP)} == {artifact(f"a{i}").sha256 for i in range(SHARED)} | {
        artifact(f"a{1000 * (w + 1) + i}").sha256 for w in range(WORKERS) for i in range(OWN)}
    cat.close()


def _killed_deposit(library: str) -> None:
    """Store the bytes, then die inside the catalog transaction before it commits."""
    import flywheel.catalog.api as api

    store = LocalStore(Path(library) / "artifacts")
    sha = store.put(b"artifact bytes of demo-7")
    cat = open_catalog(config.database_url(Path(library)))
    real = api.insert_ignore

    def die_on_artifact(session, model, values):  # type: ignore[no-untyped-def]
        if model is ArtifactRow:
            os._exit(9)  # like SIGKILL: no cleanup, no rollback, no commit
        return real(session, model, values)

    api.insert_ignore = die_on_artifact  # type: ignore[assignment]
    cat.deposit(problem(7), solution(7), replace(artifact("x"), sha256=sha))


def test_a_deposit_killed_midway_leaves_no_rows_and_an_orphan_file(tmp_path: Path) -> None:
    library = tmp_path / "library"
    open_catalog(config.database_url(library)).close()
    proc = mp.get_context("spawn").Process(target=_killed_deposit, args=(str(library),))
    proc.start()
    proc.join(timeout=120)
    assert proc.exitcode == 9

    cat = open_catalog(config.database_url(library))
    assert (_count(cat, ProblemRow), _count(cat, SolutionRow), _count(cat, ArtifactRow)) == (0, 0, 0)
    stored = list(LocalStore(library / "artifacts").iter_ids())
    assert len(stored) == 1 and cat.orphans(stored) == stored
    # Re-running the deposit completes it: the bytes are already there, the rows now appear once.
    d = cat.deposit(problem(7), solution(7), replace(artifact("x"), sha256=stored[0]))
    assert d.created and cat.orphans(stored) == []
    cat.close()
