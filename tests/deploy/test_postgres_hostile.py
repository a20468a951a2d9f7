"""Hostile input on a real PostgreSQL catalog (issue 23, items 12 and 13): every number a run may
record fits its INTEGER columns, and a NUL character costs one row, never the batch."""

from __future__ import annotations

from pathlib import Path

import pytest

from flywheel import config
from flywheel.catalog import AttemptRecord, ProblemSpec, open_catalog
from flywheel.catalog.records import bounded_text, storable
from flywheel.engine import Engine
from flywheel.library import Library


def test_the_largest_numbers_a_run_accepts_are_recorded_on_postgresql(pg_url: str) -> None:
    from flows.run import RunConfig
    from flywheel.errors import InputError

    cfg = RunConfig(problems="champ", seed=config.MAX_SEED, attempts=config.MAX_ATTEMPTS,
                    budget=config.MAX_BUDGET, run_budget=config.MAX_DB_INT)
    cat = open_catalog(pg_url)
    try:
        cat.upsert_problem(ProblemSpec(text="What is 1+1?", id="p"))
        cat.create_run(run_id="big", problem_set="champ", problem_set_hash="0" * 64, budget=cfg.budget,
                       attempts=cfg.attempts, run_budget=cfg.run_budget, model_name="m", model_fingerprint="0" * 64)
        last = cfg.attempts - 1
        rec = cat.record_attempt(AttemptRecord(run_id="big", problem_id="p", attempt_index=last, route="none",
                                               budget=cfg.budget, decode_tokens=cfg.budget, seed=cfg.seed + last))
        assert rec.created and rec.attempt.seed == config.MAX_DB_INT
        run = cat.get_run("big")
        assert run is not None and run.run_budget == config.MAX_DB_INT
    finally:
        cat.close()
    for too_big in ({"seed": config.MAX_SEED + 1}, {"run_budget": config.MAX_DB_INT + 1},
                    {"attempts": config.MAX_ATTEMPTS + 1}):
        with pytest.raises(InputError):
            RunConfig(problems="champ", **too_big)   # type: ignore[arg-type]


def test_a_nul_row_is_refused_alone_on_postgresql(tmp_path: Path, pg_url: str, tiny_gemma: Engine) -> None:
    rows = [(1, {"problem": "What is 1+1?", "solution": "1+1=2", "answer": "2", "reference": "2"}),
            (2, {"problem": "What is\x00 2+2?", "solution": "2+2=4", "answer": "4", "reference": "4"}),
            (3, {"problem": "What is 2+2?", "solution": "2+2=4\x00", "answer": "4", "reference": "4"}),
            (4, {"problem": "What is 3+3?", "solution": "3+3=6", "answer": "6", "reference": "6"})]
    with Library.open(tmp_path / "lib", db_url=pg_url) as lib:
        batch = lib.deposit_many(tiny_gemma, rows)
        assert [d.line for d in batch.deposited] == [1, 4]
        assert [r.line for r in batch.refused] == [2, 3] and all("NUL" in r.reason for r in batch.refused)
        assert lib.scan().ok                                      # no orphan artifact was left
        assert len(list(lib.store.iter_ids())) == 2


def test_a_models_nul_output_is_recorded_on_postgresql(pg_url: str) -> None:
    cat = open_catalog(pg_url)
    try:
        cat.upsert_problem(ProblemSpec(text="What is 1+1?", id="p"))
        cat.create_run(run_id="r", problem_set="s", problem_set_hash="0" * 64, budget=8, attempts=1,
                       model_name="m", model_fingerprint="0" * 64)
        rec = cat.record_attempt(AttemptRecord(run_id="r", problem_id="p", attempt_index=0, route="none", budget=8,
                                               answer=storable("2\x00"), text=bounded_text("Final\x00 answer: 2")))
        assert rec.created and rec.attempt.answer == "2\ufffd" and "\x00" not in (rec.attempt.text or "")
    finally:
        cat.close()


def test_a_postgresql_catalog_belongs_to_one_library_which_may_move(tmp_path: Path, pg_url: str) -> None:
    """`--db` URL of another library's catalog is refused; the library that owns it may move (issue 23)."""
    import shutil

    from flywheel.errors import CatalogOwnerError

    with Library.open(tmp_path / "a", db_url=pg_url) as lib:
        lib.catalog.upsert_problem(ProblemSpec(text="What is 2+2?", reference="4", source="test"))
    with pytest.raises(CatalogOwnerError, match="belongs to another library"):
        Library.open(tmp_path / "b", db_url=pg_url)
    assert not (tmp_path / "b").exists()
    shutil.move(tmp_path / "a", tmp_path / "moved")
    with Library.open(tmp_path / "moved", db_url=pg_url) as lib:
        assert len(lib.catalog.problems_by_text("What is 2+2?")) == 1
    with pytest.raises(CatalogOwnerError):
        Library.open(tmp_path / "b", db_url=pg_url, read_only=False)
