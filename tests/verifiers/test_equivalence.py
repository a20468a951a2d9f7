"""Equivalence kinds, each a table of real model-style answers (GPT/PaLM phrasing from CHAMP and
MATH-style boxed outputs). Every row runs through the public `check` (worker process)."""

from __future__ import annotations

import pytest

from verifiers import VerifierConfig, check

EQ, NE = "equivalent", "not_equivalent"


def _assert(candidate: str, reference: str, expected: str, mode: str = "auto", **cfg: object) -> None:
    v = check(candidate=candidate, reference=reference, mode=mode, config=VerifierConfig(**cfg))  # type: ignore[arg-type]
    assert v.status == expected, (candidate, reference, v)
    assert v.equivalent == (expected == EQ)


# Math-Verify's own issue tracker: each of these it got wrong at some version.
MATH_VERIFY_REGRESSIONS = [
    ("1-1/e", "1+1/e", NE),
    (r"\frac{1}{2004!}", r"\frac{1}{2006!}", NE),
    ("1/2004!", "1/2006!", NE),
    ("n=2,3,4", "n=1,2,3", NE),
    ("3x-y+13=0", "3x+4y+14=0", NE),
    (r"\dfrac{9}{7}", "9/7", EQ),
    (r"\frac{9}{7}", r"\tfrac{9}{7}", EQ),
    (r"\frac{\sqrt{3}}{2}", r"\sqrt{3}/2", EQ),  # bare LaTeX, no $...$
    (r"The answer is \frac{\sqrt{3}}{2}", r"$\frac{\sqrt{3}}{2}$", EQ),
]


@pytest.mark.parametrize(("cand", "ref", "expected"), MATH_VERIFY_REGRESSIONS)
def test_math_verify_regressions(cand: str, ref: str, expected: str) -> None:
    _assert(cand, ref, expected)


INTEGERS = [
    ("There are 29 valid strings of length 6.", "239", NE),
    ("There are 239 such strings.", "239", EQ),
    (r"The final answer is $\boxed{144}$.", "144", EQ),
    ("1,000,000", "1000000", EQ),
    ("2001000", "2,001,000", EQ),
    ("-9", "9", NE),
    ("12.0", "12", EQ),
]


@pytest.mark.parametrize(("cand", "ref", "expected"), INTEGERS)
def test_integers(cand: str, ref: str, expected: str) -> None:
    _assert(cand, ref, expected, "integer")


AIME = [("042", "42", EQ), ("\\boxed{7}", "007", EQ), ("1000", "1000", "unparseable"), ("2.5", "2", NE)]


@pytest.mark.parametrize(("cand", "ref", "expected"), AIME)
def test_aime(cand: str, ref: str, expected: str) -> None:
    # the reference is an AIME key; a candidate outside 000-999 is not an AIME answer
    v = check(candidate=cand, reference=ref, mode="aime")
    assert v.status == expected or expected == "unparseable" and v.status != EQ, v


RATIONALS_AND_DECIMALS = [
    ("0.333", "1/3", NE, None),
    ("0.333", "1/3", EQ, 1e-2),
    ("0.5", r"\frac{1}{2}", EQ, None),
    ("5/14", "5/14, or approximately 35.7%", EQ, None),
    ("35.7%", "5/14, or approximately 35.7%", NE, None),  # an approximation is not the answer
    ("50%", "1/2", EQ, None),
    ("1.41421356", r"\sqrt{2}", NE, None),
    ("1.41421356", r"\sqrt{2}", EQ, 1e-6),
    (r"\frac{1}{2004!}", r"\frac{1}{2006!}", NE, 1e-2),  # relative tolerance: tiny values still differ
    ("1176470588235294", "(20*10^15-2)/17, or equivalently 1176470588235294", EQ, None),
    ("2^997", "2^{997}", EQ, None),
    ("2^997+1", "2^997", NE, None),
]


@pytest.mark.parametrize(("cand", "ref", "expected", "tol"), RATIONALS_AND_DECIMALS)
def test_numbers(cand: str, ref: str, expected: str, tol: float | None) -> None:
    _assert(cand, ref, expected, tolerance=tol)


LATEX = [
    (r"\dfrac{\sqrt{3}}{3}", "sqrt(3)/3, or equivalently 1/sqrt(3)", EQ),
    (r"\frac{1}{\sqrt{3}}", "sqrt(3)/3", EQ),
    (r"\left( \frac{1}{2} \right)^2", "1/4", EQ),
    (r"2\pi", r"\pi \cdot 2", EQ),
    (r"\pi", "3.14159", NE),
    (r"\sqrt[3]{8}", "2", EQ),
    (r"\binom{10}{5}", "C(10, 5), or equivalently 252", EQ),
    (r"2 \times 3^{2}", "18", EQ),
    (r"\frac12", "0.5", EQ),
    (r"e^{i\pi}", "-1", NE),  # i is a plain symbol here (documented gap), so this must not pass
]


@pytest.mark.parametrize(("cand", "ref", "expected"), LATEX)
def test_latex(cand: str, ref: str, expected: str) -> None:
    _assert(cand, ref, expected)


EXPRESSIONS = [
    ("n(n-3)/2", "n(n-3)/2", EQ),
    ("(n^2-3n)/2", "n(n-3)/2", EQ),
    ("n(n-1)/2 - n", "n(n-3)/2", EQ),
    ("n(n+3)/2", "n(n-3)/2", NE),
    (r"\frac{(2n)!}{2^n n!}", "(2n)!/(2^n*n!)", EQ),
    ("2^{n-1}", "2^(n-1)", EQ),
    ("2^n", "2^(n-1)", NE),
    ("n(n+1)2^{n-2}", "n(n+1)*2^(n-2)", EQ),
    (r"\left(\frac{n(n+1)}{2}\right)^2", "sum_(i=1)^n i^3, or equivalently (n(n+1)/2)^2", EQ),
    ("n(n+1)(2n+1)/6", "sum_(i=1)^n i^2, or equivalently n(n+1)(2n+1)/6", EQ),
    ("(x^2-x+1)(x^2+x+1)", "(x^2+x+1)(x^2-x+1)", EQ),
    # a factorization is answered by factors: CHAMP's GPT-4 restated x^4+x^2+1 as "irreducible"
    ("x^4+x^2+1", "(x^2+x+1)(x^2-x+1)", NE),
    ("x^4+x^2-1", "(x^2+x+1)(x^2-x+1)", NE),
    ("(x+1)^9999 - x", "(x+1)^9999 - x + 1", NE),  # differ by 1 at ~10^9000: evaluated exactly
    ("C(n, 4)", "C(n, 4), or an equivalent form such as n(n-1)(n-2)(n-3)/4!", EQ),
    ("1-2^{-1/n}", "1-1/2^(1/n)", EQ),
]


@pytest.mark.parametrize(("cand", "ref", "expected"), EXPRESSIONS)
def test_expressions(cand: str, ref: str, expected: str) -> None:
    _assert(cand, ref, expected)


SETS_AND_LISTS = [
    ("1, 4 and 9", "1, 4 and 9", EQ),
    (r"\{9, 4, 1\}", "1, 4 and 9", EQ),
    ("9, 4, 1", "1, 4 and 9", EQ),
    ("1, 4", "1, 4 and 9", NE),
    ("376 and 625", "376 and 625", EQ),
    ("625, 376", "376 and 625", EQ),
    (r"x = \pm 1", "x=±1", EQ),
    ("x=1, x=-1, x=2, x=-2, x=1/2, x=-1/2", "x=±1, ±2, ±1/2", EQ),
    ("x=1, x=-1, x=2, x=-2", "x=±1, ±2, ±1/2", NE),
    ("x=16 or x=81", "x=16 and x=81", EQ),
    ("n = 2, 3, 4", "n=1,2,3", NE),
    ("p=5, q=3 and p=3, q=2", "p=3, q=2 and p=5, q=3", EQ),
    ("(x=2, y=8), (x=8, y=2)", "(x=8, y=2), (x=2, y=8)", EQ),
    ("x=8, y=2", "(x=8, y=2), (x=2, y=8)", NE),
]


@pytest.mark.parametrize(("cand", "ref", "expected"), SETS_AND_LISTS)
def test_sets(cand: str, ref: str, expected: str) -> None:
    _assert(cand, ref, expected)


TUPLES = [
    ("(1, 2)", "(1, 2)", EQ),
    ("(2, 1)", "(1, 2)", NE),
    ("(1, 2, 3)", "(1, 2)", NE),
    (r"\left(\frac{1}{2}, 3\right)", "(0.5, 3)", EQ),
]


@pytest.mark.parametrize(("cand", "ref", "expected"), TUPLES)
def test_tuples(cand: str, ref: str, expected: str) -> None:
    _assert(cand, ref, expected)


INTERVALS = [
    ("[-1, 1]", "[-1, 1]", EQ, "auto"),
    ("(-1, 1)", "[-1, 1]", NE, "auto"),
    ("[-1, 1)", "[-1, 1]", NE, "auto"),
    (r"\left[ -1, 1 \right]", "[-1,1]", EQ, "auto"),
    ("(0, 1]", "(0, 1)", NE, "interval"),
    (r"(-\infty, 2]", "(-oo, 2]", EQ, "interval"),
    (r"[\frac{1}{2}, 3)", "[0.5, 3)", EQ, "interval"),
    ("[0, 2)", "[0, 3)", NE, "interval"),
]


@pytest.mark.parametrize(("cand", "ref", "expected", "mode"), INTERVALS)
def test_intervals(cand: str, ref: str, expected: str, mode: str) -> None:
    _assert(cand, ref, expected, mode)


EQUATIONS = [
    ("y = 2x + 1", "2x - y + 1 = 0", EQ),
    ("4x - 2y + 2 = 0", "y = 2x + 1", EQ),  # proportional sides
    ("3x-y+13=0", "3x+4y+14=0", NE),
    ("x^2 - 4 = 0", "(x-2)(x+2) = 0", EQ),
    ("x^2 = 4", "x = 2", NE),
    ("x + 1 > 0", "x > -1", EQ),
    ("x < 3", "x > 3", NE),
    ("f(x)=0", "f(x)=0", EQ),
]


@pytest.mark.parametrize(("cand", "ref", "expected"), EQUATIONS)
def test_equations(cand: str, ref: str, expected: str) -> None:
    _assert(cand, ref, expected)


ASSIGNMENT_VS_VALUE = [
    ("x = 3", "3", EQ),
    ("3", "x = 3", EQ),
    ("x = 4", "3", NE),
    ("a=3, b=-4", "a=3, b=-4", EQ),
    ("b=-4, a=3", "a=3, b=-4", EQ),
    ("a=3, b=4", "a=3, b=-4", NE),
    ("The limit is 3.", "The limit exists and is equal to 3", EQ),
    ("0", "0 is the only possible value", EQ),
    ("100", "100 (i.e., all values)", EQ),
]


@pytest.mark.parametrize(("cand", "ref", "expected"), ASSIGNMENT_VS_VALUE)
def test_assignments(cand: str, ref: str, expected: str) -> None:
    _assert(cand, ref, expected)


MATRICES = [
    (r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}", "[[1, 2], [3, 4]]", EQ),
    (r"\begin{bmatrix} 1 & 2 \\ 3 & 5 \end{bmatrix}", "[[1, 2], [3, 4]]", NE),
    (r"\begin{pmatrix} \frac{1}{2} & 0 \end{pmatrix}", r"\begin{pmatrix} 0.5 & 0 \end{pmatrix}", EQ),
]


@pytest.mark.parametrize(("cand", "ref", "expected"), MATRICES)
def test_matrices(cand: str, ref: str, expected: str) -> None:
    _assert(cand, ref, expected)


TEXT = [
    ("The sequence does not exist.", "The sequence does not exist", EQ, "auto"),
    ("the sequence does not exist", "The sequence does not exist", EQ, "text"),
    ("The sequence exists", "The sequence does not exist", NE, "auto"),
    ("0 is the only possible value.", "0 is the only possible value", EQ, "text"),
    ("No, such a labeling is not possible.", "No", EQ, "auto"),
    ("Yes, it is possible.", "No", NE, "auto"),
    ("No integer solutions", "No integer solutions", EQ, "auto"),
    ("No positive integer solutions", "No integer solutions", NE, "auto"),
]


@pytest.mark.parametrize(("cand", "ref", "expected", "mode"), TEXT)
def test_text(cand: str, ref: str, expected: str, mode: str) -> None:
    _assert(cand, ref, expected, mode)


def test_candidate_and_reference_are_keyword_only() -> None:
    # Both are strings; Math-Verify takes them in the other order, so a positional call is refused.
    with pytest.raises(TypeError):
        check("x^2", "x**2")  # type: ignore[misc]
    swapped = check(reference="{1, 2}", candidate="{1, 2, 3}", mode="set")
    assert swapped.candidate is not None and "3" in swapped.candidate and swapped.status == NE
