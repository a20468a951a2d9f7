"""Problem sets: CHAMP, files with bad rows, seeded generated families."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flywheel.errors import InputError
from flywheel.problemsets import load_problem_set


def test_champ_has_270_problems_with_references_and_a_slice_query() -> None:
    full = load_problem_set("champ")
    assert len(full.problems) == 270 and all(p.reference and p.solution for p in full.problems)
    head = load_problem_set("champ?n=6")
    assert head.problems == full.problems[:6] and head.hash != full.hash


def test_jsonl_bad_rows_are_reported_with_line_numbers_and_skipped(tmp_path: Path) -> None:
    path = tmp_path / "set.jsonl"
    path.write_text("\n".join([
        json.dumps({"id": "a", "problem": "1+1?", "reference": "2"}),
        "{not json",
        json.dumps({"id": "b"}),
        "",
        json.dumps(["a", "list"]),
        json.dumps({"id": "a", "problem": "again"}),
        json.dumps({"id": 7, "problem": "What is 2*3?"}),
    ]) + "\n")
    s = load_problem_set(str(path))
    assert [(p.id, p.reference) for p in s.problems] == [("a", "2"), ("7", None)]
    assert [row.split(":")[0] for row in s.skipped] == ["set.jsonl line 2", "set.jsonl line 3",
                                                         "set.jsonl line 5", "set.jsonl line 6"]
    assert "missing 'problem'" in s.skipped[1] and "duplicate id 'a'" in s.skipped[3]


def test_csv_rows_are_numbered_by_physical_line(tmp_path: Path) -> None:
    path = tmp_path / "set.csv"
    path.write_text('id,problem,reference\nx1,"Compute 2+2.",4\nx2,,5\nx3,"multi\nline problem",\nx4,a,b,extra\n')
    s = load_problem_set(str(path))
    assert [p.id for p in s.problems] == ["x1", "x3"] and s.problems[1].reference is None
    assert s.skipped == ["set.csv line 3: missing 'problem'", "set.csv line 6: more fields than the header has"]


def test_parquet_files_load(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "set.parquet"
    pq.write_table(pa.table({"id": ["p1", "p2"], "problem": ["Compute 3*3.", None], "reference": ["9", "1"]}), path)
    s = load_problem_set(str(path))
    assert [(p.id, p.reference) for p in s.problems] == [("p1", "9")]
    assert s.skipped == ["set.parquet line 2: missing 'problem'"]


def test_missing_file_and_unknown_family_are_clear_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="neither `champ`, a `gen:` family, nor an existing file"):
        load_problem_set(str(tmp_path / "nope.jsonl"))
    with pytest.raises(InputError, match="unknown generated family gen:quartic"):
        load_problem_set("gen:quartic?n=3")
    with pytest.raises(InputError, match="not an integer"):
        load_problem_set("gen:linear?n=many")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("{}\n")
    with pytest.raises(InputError, match="no usable problems"):
        load_problem_set(str(empty))


@pytest.mark.parametrize("family", ["linear", "arith"])
def test_generated_families_are_seeded_with_correct_references(family: str) -> None:
    import verifiers

    a = load_problem_set(f"gen:{family}?n=20&seed=1")
    assert a.problems == load_problem_set(f"gen:{family}?n=20&seed=1").problems   # reproducible
    b = load_problem_set(f"gen:{family}?n=20&seed=2")
    assert not {p.text for p in a.problems} & {p.text for p in b.problems}        # fresh numbers
    assert len({p.id for p in a.problems + b.problems}) == 40
    for p in a.problems[:5]:
        assert p.reference and p.solution and p.solution.endswith(f"{p.reference}.")
        if family == "linear":   # the reference really solves the equation
            assert verifiers.check_by_substitution(p.text, f"x = {p.reference}").equivalent
