"""CHAMP (270 competition problems): every reference answer verifies against itself (auto and
text mode), and the last step of its own worked solution is measured. The floor below is the
count measured when this test was written (134/270, see BENCHMARKS.md); the rest are prose steps
such as "So the equation has no solution." against "No integer solutions", which we do not
count as verified."""

from __future__ import annotations

import collections

import champ_dataset
import pytest

from verifiers import check

DS = champ_dataset.load("v0")
PROBLEMS = list(DS.problems.values())


def test_every_reference_matches_itself() -> None:
    bad = [p.answer for p in PROBLEMS if not check(candidate=p.answer, reference=p.answer).equivalent]
    assert bad == []
    bad_text = [p.answer for p in PROBLEMS if not check(candidate=p.answer, reference=p.answer, mode="text").equivalent]
    assert bad_text == []
    assert len(PROBLEMS) == 270


def test_last_solution_step_verifies() -> None:
    counts = collections.Counter(check(candidate=p.solution.steps[-1].text, reference=p.answer).status for p in PROBLEMS)
    assert counts["equivalent"] >= 130, counts
    assert counts["timeout"] == 0


@pytest.mark.parametrize("pid", ["P_Combinatorics_1", "P_Combinatorics_2"])
def test_a_reference_is_not_another_problems_answer(pid: str) -> None:
    p = DS.problems[pid]
    other = next(q for q in PROBLEMS if q.answer != p.answer and q.answer[0].isdigit())
    assert not check(candidate=other.answer, reference=p.answer).equivalent
