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
        verdict = verifiers.check(candidate=row["answer"], reference=row["reference"])
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


# --- issue 23, items 11 and 13: one bad cell never costs the good rows ----------------------------


def test_csv_cells_up_to_the_documented_limit_are_read_and_longer_ones_refused_by_row(tmp_path: Path) -> None:
    import csv as csv_module

    from flywheel.tables import CSV_FIELD_LIMIT, MAX_CELL_CHARS, BadRow, read_table

    path = tmp_path / "cells.csv"
    with path.open("w", newline="") as fh:
        w = csv_module.writer(fh)
        w.writerow(["id", "problem"])
        w.writerow(["long", "x" * 150_000])                    # over csv's own 131,072, under ours
        w.writerow(["over", "y" * (MAX_CELL_CHARS + 1)])
        w.writerow(["nul", "What is\x00 1+1?"])
        w.writerow(["good", "What is 1+1?"])
        w.writerow(["huge", "z" * (CSV_FIELD_LIMIT + 10)])     # csv cannot read on past this one
        w.writerow(["after", "What is 2+2?"])
    rows = list(read_table(path, required=("problem",)))
    good = [r[1]["id"] for r in rows if not isinstance(r, BadRow)]
    bad = [r for r in rows if isinstance(r, BadRow)]
    assert good == ["long", "good"]
    assert [b.line for b in bad[:2]] == [3, 4]
    assert "limit 200,000" in bad[0].reason and "NUL" in bad[1].reason
    assert bad[2].line == 6 and "the rest of the file from line 6 was not read" in bad[2].reason
