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


def test_problem_files_are_read_like_curated_files_and_ignore_columns_they_do_not_use(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from flywheel.tables import BadRow, read_table

    path = tmp_path / "set.parquet"   # integer ids with a null: still "7", not "7.0"; tags are not read
    pq.write_table(pa.table({"id": [7, None], "problem": ["Compute 3*3.", "Compute 2*2."], "answer": [9, 4],
                             "tags": [["a"], ["b"]]}), path)
    s = load_problem_set(str(path))
    assert [(p.id, p.reference) for p in s.problems] == [("7", "9")]
    assert s.skipped == ["set.parquet line 2: missing 'id'"]
    # the curated-deposit reader, the same one: every field is checked unless the caller names its fields
    assert list(read_table(path, ("id", "problem"), fields=("id", "problem", "answer"))) == [
        (1, {"id": "7", "problem": "Compute 3*3.", "answer": "9"}), BadRow(2, "missing required field(s): id")]
    assert list(read_table(path, ("id", "problem")))[0] == BadRow(1, "field 'tags' is not text")


def test_missing_file_and_unknown_family_are_clear_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is no existing file and names no problem source"):
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


# --- the pre-registry arith/linear sets stay byte-identical -------------------------------------

def _pre_registry_generate(family: str, n: int, seed: int) -> list[tuple[str, str, str, str]]:
    """The generator as it was before the family registry (commit 294601f), kept as the reference."""
    import random

    rng = random.Random(f"{family}:{seed}")
    out: list[tuple[str, str, str, str]] = []
    seen: set[str] = set()
    while len(out) < n:
        if family == "arith":
            a, b, c = rng.randint(11, 99), rng.randint(3, 19), rng.randint(2, 99)
            text, sol, ans = f"Compute {a} * {b} + {c}.", f"First {a} * {b} = {a * b}. Then {a * b} + {c} = {a * b + c}.", str(a * b + c)
        else:
            a, x, b = rng.randint(2, 12), rng.randint(-15, 15), rng.randint(1, 40)
            c = a * x + b
            text = f"Solve for x: {a}x + {b} = {c}."
            sol, ans = f"Subtract {b} from both sides: {a}x = {c - b}. Divide both sides by {a}: x = {x}.", str(x)
        if text in seen:
            continue
        seen.add(text)
        out.append((f"gen-{family}-s{seed}-{len(out)}", text, sol, ans))
    return out


@pytest.mark.parametrize(("family", "n", "seed"), [("arith", 1, 0), ("arith", 300, 7), ("linear", 50, 1),
                                                   ("linear", 2_000, 3), ("linear", 13_640, 0)])
def test_arith_and_linear_without_a_split_are_byte_identical_to_before(family: str, n: int, seed: int) -> None:
    got = load_problem_set(f"gen:{family}?n={n}&seed={seed}").problems
    assert [(p.id, p.text, p.solution, p.reference) for p in got] == _pre_registry_generate(family, n, seed)
    assert all(p.source == f"gen:{family}" for p in got)


@pytest.mark.parametrize(("spec", "recorded"), [
    ("gen:linear?n=50&seed=1", "b6883aa1889cb3302bcac441d7395c275dc954ae237d59a4e8fc577d206db4ee"),
    ("gen:arith?n=20&seed=3", "030a8eed8079941e54031f306fa06e5073e57ad2a407962e7642531f87e3a199"),
    ("gen:linear?n=13640&seed=0", "0b3258e9c45a7519fe1aa0a6237c000bb876cb1e446941bbb83419e9772bf80a"),
])
def test_recorded_set_hashes_still_match(spec: str, recorded: str) -> None:
    assert load_problem_set(spec).hash == recorded


# --- refusing bad specs at once -------------------------------------------------------------------

def test_gen_alone_lists_every_family_with_its_size_and_description() -> None:
    from flywheel.families import FAMILIES

    with pytest.raises(InputError) as err:
        load_problem_set("gen:")
    lines = [err.value.message, *err.value.listing]
    for name, fam in FAMILIES.items():
        assert any(line.split()[:2] == [name, f"{fam.size:,}"] and fam.description in line for line in lines), name
    assert any(line.split()[0] == "all" for line in lines[1:])
    assert "gen:all?n=10&seed=1&split=heldout" in (err.value.hint or "")


@pytest.mark.parametrize(("spec", "message"), [
    ("gen:linear?n=20000", "n=20,000 but gen:linear has only 13,640 distinct problems in all"),
    ("gen:linear?n=2729&split=heldout", "n=2,729 but gen:linear has only 2,728 distinct problems in its heldout split"),
    ("gen:linear?n=10913&split=train", "n=10,913 but gen:linear has only 10,912 distinct problems in its train split"),
    ("gen:all?n=3000&split=heldout", "gen:units has only 1,689 distinct problems in its heldout split"),
    ("gen:ages+units?n=9000", "gen:units has only 8,448 distinct problems in all"),
    ("gen:linear?n=" + "9" * 30, "but gen:linear has only 13,640"),
    ("gen:linear?n=0", "n=0 must be a positive integer"),
    ("gen:linear?n=-5", "n=-5 must be a positive integer"),
    ("gen:linear?n=2.5", "n='2.5' is not an integer"),
    ("gen:linear?n=1e3", "n='1e3' is not an integer"),
    ("gen:linear?n=", "n='' is not an integer"),
    ("gen:linear?seed=-1", "seed=-1 must be 0 or more"),
    ("gen:linear?seed=x", "seed='x' is not an integer"),
    ("gen:linear?m=3", "unknown key 'm'; allowed: n, seed, split"),
    ("gen:ages?n=5&foo=1&bar=2", "unknown keys 'foo', 'bar'; allowed: n, seed, split"),
    ("champ?foo=1", "unknown key 'foo'; allowed: n"),
    ("champ?n=271", "n=271 but champ has only 270 problems"),
    ("champ?split=train", "unknown key 'split'; allowed: n"),
    ("gen:ages?n=5&n=6", "n given more than once"),
    ("gen:ages?split=test", "split='test' is not one of train, heldout"),
    ("gen:ages+ages?n=2", "lists ages more than once"),
    ("gen:ages+quartic?n=2", "unknown generated family gen:quartic"),
])
def test_bad_specs_are_refused_at_once_with_the_numbers(spec: str, message: str) -> None:
    import time

    start = time.perf_counter()
    with pytest.raises(InputError) as err:
        load_problem_set(spec)
    assert message in str(err.value) and time.perf_counter() - start < 0.5


def test_n_up_to_the_size_is_served_and_generate_validates_like_the_spec() -> None:
    from flywheel.problemsets import generate

    assert len(load_problem_set("gen:units?n=1689&seed=2&split=heldout").problems) == 1_689  # the whole split
    with pytest.raises(InputError, match="n=9,000 but gen:units has only 8,448"):
        generate("units", n=9_000, seed=0)
    with pytest.raises(InputError, match="unknown generated family gen:nope"):
        generate("nope", n=1, seed=0)


# --- several families in one set -------------------------------------------------------------------

def test_gen_all_is_n_per_word_family_and_matches_each_family_alone() -> None:
    from flywheel.families import word_families

    s = load_problem_set("gen:all?n=10&seed=1&split=heldout")
    names = [f.name for f in word_families()]
    assert len(s.problems) == 10 * len(names) and len({p.id for p in s.problems}) == len(s.problems)
    assert [p.meta["family"] for p in s.problems] == [name for name in names for _ in range(10)]
    assert "linear" not in names and "arith" not in names
    ages = load_problem_set("gen:ages?n=10&seed=1&split=heldout").problems
    assert [p for p in s.problems if p.meta["family"] == "ages"] == ages          # same draw either way
    assert s.hash == load_problem_set("gen:all?n=10&seed=1&split=heldout").hash


def test_plus_joins_named_families_in_the_order_given() -> None:
    s = load_problem_set("gen:rates+linear?n=3&seed=2&split=train", limit=5)
    assert [p.id for p in s.problems] == ["gen-rates-train-s2-0", "gen-rates-train-s2-1", "gen-rates-train-s2-2",
                                          "gen-linear-train-s2-0", "gen-linear-train-s2-1"]
