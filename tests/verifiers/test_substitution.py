"""Reference-free checks for "solve" / "find all x" problems."""

from __future__ import annotations

import pytest

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
]


@pytest.mark.parametrize(("problem", "candidate", "expected"), CASES)
def test_substitution(problem: str, candidate: str, expected: str) -> None:
    v = check_by_substitution(problem, candidate)
    assert v.status == expected, v
