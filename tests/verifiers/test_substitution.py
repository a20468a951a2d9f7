"""Reference-free checks for "solve" / "find all x" problems."""

from __future__ import annotations

from pathlib import Path

import pytest

from flywheel.engine import Engine
from flywheel.errors import DepositRefusedError
from flywheel.library import Library
from flywheel.problemsets import Problem
from verifiers import check_by_substitution

CASES = [
    ("Solve x^2 - 5x + 6 = 0.", "x = 2 or x = 3", "equivalent"),
    ("Solve x^2 - 5x + 6 = 0.", "The solutions are $x = 3$ and $x = 2$.", "equivalent"),
    ("Solve x^2 - 5x + 6 = 0.", "x = 2", "not_equivalent"),  # incomplete
    ("Solve x^2 - 5x + 6 = 0.", "x = 2, 4", "not_equivalent"),
    ("Find all real x such that $x^3 = 8$.", "2", "equivalent"),
    ("Find all x with $x^2 = 4$.", r"\boxed{\{2, -2\}}", "equivalent"),
    ("Solve $x^2=4$.", "x=3", "not_equivalent"),
    ("Find all x such that $\\sin x = 0$.", "x = 0", "not_equivalent"),  # infinitely many
    ("Solve the system $x+y=3$ and $x-y=1$.", "x=2, y=1", "equivalent"),
    ("Solve the system $x+y=3$ and $x-y=1$.", "x=1, y=2", "not_equivalent"),
    ("What is the capital of France?", "Paris", "unparseable"),
    # issue 23 item 1: only the unknown the equation determines can be checked by substitution
    ("Given $4y - 3 = 9$, find $y$.", "3", "equivalent"),
    ("What is $n$ if $5n + 2 = 17$?", "n = 3", "equivalent"),
    ("What is $n$ if $5n + 2 = 17$?", "4", "not_equivalent"),
    ("Find $(p, q)$ if $p + q = 9$ and $p - q = 1$.", "(p, q) = (5, 4)", "equivalent"),
    ("Find $x$ if $x^2 = 9$ and $x > 0$.", "3", "unparseable"),  # sympy's {-3, 3} is not the answer set
    ("How many real solutions does $t^2 = 16$ have?", "2", "unparseable"),
    ("t^2 = 16", "4", "unparseable"),  # nothing says what is asked
    ("Find $x$ such that $x^3 = 27$.", "3", "unparseable"),  # real root: do complex ones count? not said
    ("What is $x$ when $x^2 = 25$?", "5", "unparseable"),  # one value asked for, two exist: no verdict
    ("Find all $x$ with $x^2 = 25$.", "5", "not_equivalent"),  # all asked for: -5 is missing
    ("Find all complex $x$ such that $x^3 = 27$.", "3", "not_equivalent"),
    ("Find all real $x$ such that $x^3 = 27$.", "3", "equivalent"),
]

# The problem's condition fixes a variable, but the question asks for something else: substitution
# must not call the condition's value "verified", nor the right answer "contradicted".
CONDITION_NOT_QUESTION = [
    ("If $y = 4$, what is $y^2 - 1$?", "4", "15"),
    ("Given $3k + 2 = 11$, compute $k^3$.", "3", "27"),
    ("Suppose $m - 5 = 2$. Evaluate $2m + 1$.", "7", "15"),
    ("If $a + b = 7$ and $a - b = 3$, what is $ab$?", "a = 5, b = 2", "10"),
    ("Let $w = 6$. Find the value of $w/2 + w$.", "6", "9"),
]


@pytest.mark.parametrize(("problem", "candidate", "expected"), CASES)
def test_substitution(problem: str, candidate: str, expected: str) -> None:
    v = check_by_substitution(problem, candidate)
    assert v.status == expected, v


@pytest.mark.parametrize(("problem", "condition_value", "right"), CONDITION_NOT_QUESTION)
def test_substitution_checks_the_question_not_the_condition(problem: str, condition_value: str, right: str) -> None:
    wrong = check_by_substitution(problem, condition_value)
    assert wrong.status == "unparseable" and wrong.reason.startswith("unverifiable"), wrong
    correct = check_by_substitution(problem, right)
    assert correct.status == "unparseable" and correct.reason.startswith("unverifiable"), correct


def test_a_right_answer_to_a_reference_free_problem_is_stored_unverified(tmp_path: Path, tiny_gemma: Engine) -> None:
    problem = Problem(id="cond", text="If x = 3, what is x^2 + 1?")
    with Library.open(tmp_path / "lib") as lib:
        with pytest.raises(DepositRefusedError, match="unparseable"):
            lib.deposit(tiny_gemma, problem, "x = 3", "3")  # the condition's value is not verified
        with pytest.raises(DepositRefusedError, match="unparseable"):
            lib.deposit(tiny_gemma, problem, "3^2 + 1 = 10", "10")  # no verdict: not verified either
        stored = lib.deposit(tiny_gemma, problem, "3^2 + 1 = 10", "10", unverified=True)
        assert stored.unverified and stored.created and stored.verdict_status == "unparseable"
        assert lib.catalog.list_artifacts() == []  # never routed as verified
