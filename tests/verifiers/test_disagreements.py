"""Disagreements with Math-Verify on CHAMP's stored conversations (bench/verifier_agreement.py, seed 0),
each judged by hand; the expected value is the human judgement, not either tool's output."""

from __future__ import annotations

import pytest

from verifiers import check

JUDGED = [
    # final model sentence, reference, correct?, judgement
    ("The largest value of the given expression (ab(a+b)+bc(b+c)+ac(a+c)-a^3-b^3-c^3)/abc for positive a, b, c "
     "is 3*(abc)^(1/3) - (a+b+c).", "3", False, "an expression in a, b, c is not the constant 3 (MV accepted)"),
    ("The minimum value of x₁² + x₂² + ... + xₙ², where x₁, x₂, ..., xₙ≥0 and x₁ + x₂ + ... + xₙ = 1, is 1/(4n).",
     "1/n", False, "1/(4n) is not 1/n (MV accepted)"),
    ("The expression x^3 + y^3 + z^3 - 3xyz can be factorized as (x + y + z)(x^2 + y^2 + z^2 - xy - xz - yz).",
     "(x+y+z)(x^2+y^2+z^2-xy-yz-xz)", True, "same factorization, terms reordered (MV rejected)"),
    ("The largest value of the expression √(ab + bc + ac) / (a + b + c) for positive a, b, and c is √3 / 3.",
     "sqrt(3)/3, or equivalently 1/sqrt(3)", True, "unicode root, same value (MV rejected)"),
    ("There are 999 values of x_1, x_2, ..., x_1000 that satisfy the inequality x_n ≤ 5/4.",
     "999 (i.e., all except for one value)", True, "999 stated (MV rejected)"),
    ("The only positive integer solution to the equation \\(x^3 - y^3 = xy + 61\\) is \\(x = 6\\) and \\(y = 5\\).",
     "x=6, y=5", True, "same assignment (MV rejected)"),
    ("Yes, $a_{9000}>30$.", "Yes", True, "answers yes (MV rejected)"),
    ("The limit of the sequence defined by a_0 = √a and a_(n+1) = √(a + a_n) exists and is given by "
     "(1 + √(1 + 4a)) / 2.", "The limit exists and is equal to (1+sqrt(4a+1))/2", True, "same limit (MV rejected)"),
    ("The only integer solution to the equation x^2 + y^2 = x^2*y^2 is (x, y) = (0, 0).", "x=y=0", True,
     "(x, y) = (0, 0) is x=y=0 (we rejected before the tuple-assignment fix)"),
    ("The value of \\(3^{105} + 4^{105} \\mod 11\\) is 2.", "2", True,
     "answer after 'is', not the math in the subject (we failed to extract before the fix)"),
    ("The possible values of \\( x^2 \\mod 30 \\) for prime numbers \\( x > 30 \\) are 1 and 19.", "1 and 19", True,
     "answer after 'are' (we extracted 'x > 30' before the fix)"),
    ("The only possible value of \\( p^2 - q^2 \\mod 24 \\) for prime numbers \\( p \\) and \\( q \\) greater than 3 "
     "is 0.", "0 is the only possible value", True, "0 stated (we extracted 'p, q' before the fix)"),
    ("The number of ways to distribute 3 cookies to 8 dogs such that each dog gets at most one cookie is "
     "$8! - 1260 - 6720 = 120$.", "120", True, "final stated value 120, although the arithmetic shown is wrong"),
]


@pytest.mark.parametrize(("final", "reference", "correct", "why"), JUDGED)
def test_judged_disagreement(final: str, reference: str, correct: bool, why: str) -> None:
    v = check(candidate=final, reference=reference)
    assert v.equivalent == correct, (why, v)
