"""The curated sets committed under library/curated/ are what a curator deposits first: each must verify."""

from __future__ import annotations

from pathlib import Path

import pytest

import verifiers
from flywheel.engine import Engine
from flywheel.library import Library
from flywheel.problemsets import Problem
from flywheel.tables import BadRow, read_table

CURATED = sorted((Path(__file__).resolve().parents[1] / "library" / "curated").glob("*.jsonl"))
FIELDS = ("id", "problem", "solution", "answer", "reference")


def _rows(path: Path) -> list[dict[str, str]]:
    rows = list(read_table(path, required=FIELDS))
    bad = [r for r in rows if isinstance(r, BadRow)]
    assert not bad, bad
    return [row for _, row in rows]  # type: ignore[misc]


def test_there_is_a_curated_set() -> None:
    assert CURATED


@pytest.mark.parametrize("path", CURATED, ids=lambda p: p.name)
def test_every_curated_answer_verifies_against_its_reference(path: Path) -> None:
    for row in _rows(path):
        verdict = verifiers.check(row["answer"], row["reference"])
        assert verdict.equivalent, (row["id"], verdict.status, verdict.reason)


@pytest.mark.parametrize("path", CURATED, ids=lambda p: p.name)
def test_curated_set_deposits_into_a_fresh_library(path: Path, tmp_path: Path, tiny_gemma: Engine) -> None:
    rows = _rows(path)
    with Library.open(tmp_path / "lib") as lib:
        results = [lib.deposit(tiny_gemma, Problem(id=r["id"], text=r["problem"], reference=r["reference"]),
                               r["solution"], r["answer"], deposited_by="curator:test") for r in rows]
        assert all(r.created and not r.unverified for r in results)
        assert len({r.artifact_sha256 for r in results}) == len(rows)
        assert sorted(a.problem_id for a in lib.catalog.list_artifacts()) == sorted(r["id"] for r in rows)
