"""Right answers in the formats models write (issue 13), one table per format; and the documented
policy for a value, an assignment, a tuple assignment and a tuple."""

from __future__ import annotations

import pytest

from verifiers import check


def _accepted(candidate: str, reference: str) -> None:
    v = check(candidate=candidate, reference=reference)
    assert v.equivalent, (candidate, reference, v)


FINAL_LINES = [
    ("Final Answer: The final answer is $100$. I hope it is correct.", "100"),
    (r"So $x=\boxed{5}$ at first. Checking again, it fails. Final Answer: The final answer is $7$. I hope it is "
     "correct.", "7"),
    ("Final answer: 45 km", "45 km"), ("Final answer: 45 km", "45"), ("Final answer: $12.50", "$12.50"),
    (r"Final answer: \$12.50", "12.5"), ("Final answer: 12 apples", "12"), ("**Final Answer:** 42", "42"),
    ("Final Answer: The largest $n$ is 34.", "34"), ("The answer is 12.50 dollars.", "$12.50"),
    ('Final Answer: The final answer is "$12$ and $13$". I hope it is correct.', r"12\text{ and }13"),
    (r"\boxed{\text{(C)}}", r"\text{C}"),
]


@pytest.mark.parametrize(("candidate", "reference"), FINAL_LINES)
def test_final_answer_lines(candidate: str, reference: str) -> None:
    _accepted(candidate, reference)


NUMBERS = [
    ("14{,}916", "14916"), ("14 {, }916", "14916"), (r"11,\!111,\!111,\!100", "11111111100"), (r"is $\boxed{32,\! 349}$", "32349"),
    ("1,000.99", "1000.99"), ("$1,000.99", "1000.99"), ("0,111", "0.111"), ("0,5", "1/2"),
    ("28 percent", r"28\%"), ("28%", r"28\%"), (r"28\%", "28%"), ("28 pct", "28%"), ("28", "28%"),
    ("0.28", "28%"), ("125 miles", "125"), (r"125\textnormal{ miles}", "$125$ miles"),
    (r"15\mbox{ cm}^2", "15"), (r"\frac{1}{3} \text{meters}", "1/3"), ("1,000.99€", "1000.99"),
]


@pytest.mark.parametrize(("candidate", "reference"), NUMBERS)
def test_digit_groups_units_percentages(candidate: str, reference: str) -> None:
    _accepted(candidate, reference)


LATEX = [
    ("Answer \\[ \n 9 \n \\]", "9"), ("Answer $$ \n 9 \n $$", "9"), (r"\tfrac{1}{3}", "1/3"),
    (r"\dfrac{1}{3}", "1/3"), (r"\cfrac{1}{3}", "1/3"), (r"1 - \frac{1}{\mathrm{e}}", "1-1/e"),
    (r"\left[\begin{array}{cc}1 & 2 \\ 3 & 4\end{array}\right]", r"\begin{pmatrix}1 & 2 \\ 3 & 4\end{pmatrix}"),
]


@pytest.mark.parametrize(("candidate", "reference"), LATEX)
def test_latex_forms(candidate: str, reference: str) -> None:
    _accepted(candidate, reference)


INTERVALS = [
    (r"(2,12) \cup (12,102)", r"(2,12) \cup (12,102)"), (r"(12,102) \cup (2,12)", r"(2,12) \cup (12,102)"),
    (r"x \in \boxed{(2,12) \cup (12,102)}", r"(2, 12) \cup (12, 102)"), ("(-793, 10)", "-793 < a < 10"),
    ("-793 < a < 10", "(-793, 10)"), (r"x \in [-2,7]", r"-2 \le x \le 7"), (r"10 > x \geq 3", "[3, 10)"),
    ("x > 5", r"(5, \infty)"), (r"[-1, -\tfrac12) \cup (-\tfrac12, 0)", r"[-1, -\frac{1}{2}) \cup (-\frac{1}{2}, 0)"),
    (r"\{-1\} \cup [0,7)", r"[0, 7) \cup \{-1\}"),
]


@pytest.mark.parametrize(("candidate", "reference"), INTERVALS)
def test_unions_and_inequalities_as_intervals(candidate: str, reference: str) -> None:
    _accepted(candidate, reference)


# The policy: a value equals the assignment of that value to one variable (3 = x = 3); a tuple
# equals a tuple assignment of the same values in the written order ((3,2) = (p,q)=(3,2)), and so
# does a bare list of values against assignments of several variables; a tuple answers a set
# reference as the set of its items (not a 2-item pair, which also reads as an interval).
POLICY = [
    ("3", "x = 3", True), ("x = 3", "3", True), ("(3,2)", "(p,q) = (3,2)", True),
    ("(p,q) = (3,2)", "(3,2)", True), ("p = 3, q = 2", "(p,q) = (3,2)", True), ("q = 2, p = 3", "p=3, q=2", True),
    ("(3,2)", "p = 3, q = 2", True), ("-5, 14/3", r"x = -5,\ p = \frac{14}{3}", True),
    ("(3, 2, 1)", r"\{1, 2, 3\}", True), (r"\boxed{2}, \boxed{3}", "2, 3", True),
    ("(2,3)", "(p,q) = (3,2)", False), ("(3,2)", "3", False), ("x = 3", "(3, 2)", False),
    ("(3, 2)", r"\{2, 3\}", False), (r"\{2, 3\}", "(2, 3)", False),
]


@pytest.mark.parametrize(("candidate", "reference", "equal"), POLICY)
def test_value_assignment_tuple_policy(candidate: str, reference: str, equal: bool) -> None:
    assert check(candidate=candidate, reference=reference).equivalent == equal, check(candidate=candidate, reference=reference)
