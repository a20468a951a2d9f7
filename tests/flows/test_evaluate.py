"""`flows.evaluate`: Wilson intervals against known values, and both arms of `heldout_eval` on a scripted engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows import RunConfig, runtime
from flows.evaluate import heldout_eval, wilson
from flywheel import config

PROBLEMS = [
    {"id": "lin-a", "problem": "Solve for x: 3x + 8 = 35.", "reference": "9",
     "solution": "Subtract 8: 3x = 27. Divide by 3: x = 9."},
    {"id": "lin-b", "problem": "Solve for x: 2x + 1 = 7.", "reference": "3",
     "solution": "Subtract 1: 2x = 6. Divide by 2: x = 3."},
]


# Computed independently: the roots in p of (p - k/n)^2 = z^2 p (1 - p) / n with z = Phi^-1(0.975).
@pytest.mark.parametrize(("k", "n", "lo", "hi"), [
    (0, 10, 0.0, 0.27753),
    (5, 10, 0.23659, 0.76341),
    (10, 10, 0.72247, 1.0),
    (81, 263, 0.25529, 0.36621),
    (1, 2, 0.09453, 0.90547),
])
def test_wilson_matches_known_intervals(k: int, n: int, lo: float, hi: float) -> None:
    assert wilson(k, n) == pytest.approx((lo, hi), abs=1e-5)


def test_wilson_of_no_trials_is_the_whole_range() -> None:
    assert wilson(0, 0) == (0.0, 1.0)


def test_wilson_is_symmetric_and_narrows_with_n() -> None:
    lo, hi = wilson(3, 10)
    assert wilson(7, 10) == pytest.approx((1 - hi, 1 - lo))
    assert wilson(30, 100)[1] - wilson(30, 100)[0] < hi - lo


@pytest.fixture
def set_file(tmp_path: Path) -> Path:
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS))
    return path


def test_heldout_eval_measures_the_graft_as_the_only_difference(scripted: str, lib_dir: Path,
                                                               set_file: Path) -> None:
    # The scripted model writes "9\n...": with a 2-token budget, an ungrafted attempt (asked for a
    # worked solution) states no final answer, while a grafted recurrence is asked for the answer
    # on its first line, so only lin-a (answer 9) is solved, and only with its graft.
    cfg = RunConfig(problems=str(set_file), model=scripted, library=str(lib_dir), budget=2)
    out = heldout_eval(cfg, str(set_file))
    assert out["deposited"] == 2 and out["library_set"] == str(set_file)
    without, with_ = out["without_graft"], out["with_graft"]
    assert (without["correct"], without["n"], without["accuracy"]) == (0, 2, 0.0)
    assert (with_["correct"], with_["n"], with_["accuracy"]) == (1, 2, 0.5)
    assert without["ci95"] == pytest.approx(list(wilson(0, 2)))
    assert with_["ci95"] == pytest.approx(list(wilson(1, 2)))
    assert without["run_id"] != with_["run_id"]
    assert without["decode_tokens"] == 4 and with_["decode_tokens"] == 4   # two tokens per problem, both arms
    assert out["routes"] == {"exact": 2, "near": 0, "none": 0}
    assert (out["only_with"], out["only_without"]) == (1, 0)
    rows = {r["problem_id"]: r for r in out["results"]}
    assert rows["lin-a"]["with"] and not rows["lin-a"]["without"]
    assert not rows["lin-b"]["with"] and not rows["lin-b"]["without"]
    assert all(r["grafted_artifact"] for r in out["results"])
    # Neither arm deposits: the library holds the two curated solutions only.
    lib = runtime.library(str(lib_dir), config.database_url(lib_dir))
    assert len(lib.catalog.list_artifacts()) == 2


def test_heldout_eval_without_a_library_set_has_equal_ungrafted_arms(scripted: str, lib_dir: Path,
                                                                     set_file: Path) -> None:
    cfg = RunConfig(problems=str(set_file), model=scripted, library=str(lib_dir), budget=24)
    out = heldout_eval(cfg, None)
    assert out["deposited"] == 0 and out["routes"] == {"exact": 0, "near": 0, "none": 2}
    # 24 tokens fit the whole script "9\nFinal answer: 9\n": lin-a is solved in both arms, lin-b in neither.
    assert out["without_graft"]["correct"] == out["with_graft"]["correct"] == 1
    assert (out["only_with"], out["only_without"]) == (0, 0)
    assert all(r["grafted_artifact"] is None for r in out["results"])
    lib = runtime.library(str(lib_dir), config.database_url(lib_dir))
    assert lib.catalog.list_artifacts() == []   # a verified attempt is not deposited during evaluation
