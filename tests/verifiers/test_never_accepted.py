"""Wrong answers that must never be accepted, one table per class (issue 13). A false accept
deposits wrong knowledge that every later graft repeats, so each row asserts `not equivalent`."""

from __future__ import annotations

import pytest

from verifiers import check, extract_answer


def _rejected(candidate: str, reference: str) -> None:
    v = check(candidate=candidate, reference=reference)
    assert not v.equivalent, (candidate, reference, v)


RELATIONS = [  # a comparison is not an equation: never split at the = of <=, >=, !=
    ("x <= 2", "2"), ("x >= 3", "3"), (r"x \leq 2", "2"), ("x != 5", "5"), (r"x \ne 5", "5"),
    (r"x \neq 5", "5"), ("x < 2", "2"), (r"x \geq 3", "3"), ("x ≤ 2", "2"),
    ("The solution is x <= 2.", "2"), (r"Thus $x \leq 2$.", "2"), ("So we get x < 2.", "2"),
    (r"Final answer: $x \ne 5$", "5"), (r"\boxed{x \geq 3}", "3"), (r"x = 1/3 \approx 0.33", "0.33"),
]


@pytest.mark.parametrize(("candidate", "reference"), RELATIONS)
def test_a_relation_is_not_its_right_side(candidate: str, reference: str) -> None:
    _rejected(candidate, reference)


SYSTEMS = [  # several assignments are a tuple or a system, not their last value
    (r"x = 19, \quad y = 2", "2"), (r"x = 19, \qquad y = 2", "2"), ("x = 19; y = 2", "2"),
    ("x = 19, y = 2", "2"), (r"So $x = 19, \quad y = 2$.", "2"), ("Therefore x = 19, y = 2.", "2"),
    (r"The solution is $a = 1$, $b = 7$.", "7"), (r"\boxed{x = 19, \quad y = 2}", "19"),
]


@pytest.mark.parametrize(("candidate", "reference"), SYSTEMS)
def test_a_system_is_not_its_last_value(candidate: str, reference: str) -> None:
    _rejected(candidate, reference)


LEADING_ZERO_COMMA = [  # 0,111 is a decimal comma or a list, never the integer 111
    ("0,111", "111"), ("0,5", "5"), ("0,5", "05"), ("0,111", "0.112"), (r"\boxed{0,5}", "5"),
    ("0,5", "0, 5"), ("0,5", r"\{0, 5\}"),
]


@pytest.mark.parametrize(("candidate", "reference"), LEADING_ZERO_COMMA)
def test_leading_zero_comma_is_not_a_thousands_group(candidate: str, reference: str) -> None:
    _rejected(candidate, reference)


def test_leading_zero_comma_against_a_list_is_refused_as_ambiguous() -> None:
    assert check(candidate="0,5", reference="0, 5").status == "unparseable"


SEVERAL_BOXES = [  # a run of boxes is one list answer; a later box parted by prose is the statement
    (r"\boxed{2}, \boxed{3}", "3"), (r"\boxed{2}, \boxed{3}", "2"), (r"\boxed{2} and \boxed{3}", "3"),
    (r"\boxed{2} \quad \text{and} \quad \boxed{3}", "3"), (r"\boxed{1} no no no no no \boxed{2}", "1, 2"),
    (r"We first guess \boxed{5}, but checking again gives \boxed{7}.", "5"),
    (r"\boxed{5}. Final answer: 100", "5"),
]


@pytest.mark.parametrize(("candidate", "reference"), SEVERAL_BOXES)
def test_other_boxes_do_not_leak_in(candidate: str, reference: str) -> None:
    _rejected(candidate, reference)


@pytest.mark.parametrize(("text", "answer"), [
    (r"\boxed{2}, \boxed{3}", "2, 3"),
    (r"\boxed{1} no no no no no \boxed{2}", "2"),
    (r"We get \boxed{5}. More work shows otherwise. Final Answer: The final answer is $100$.", "100"),
    (r"The final answer is $\boxed{100}$. I hope it is correct.", "100"),
    (r"\boxed{004} is right. **Final Answer** \boxed{004}", "004"),
])
def test_which_statement_counts(text: str, answer: str) -> None:
    assert extract_answer(text) == answer


TUPLES_AND_SETS = [  # ordered tuples compare in order; a tuple is not a set unless the reference is one
    ("(2, 3)", "(3, 2)"), ("(3, 2)", "2, 3"), ("(1, 3)", r"\{1, 3\}"), (r"\{1, 3\}", "(1, 3)"),
    ("1, 3", "(1, 3)"), ("(2, 3)", "(p, q) = (3, 2)"), ("(p, q) = (2, 3)", "(p, q) = (3, 2)"),
    ("p = 2, q = 3", "(3, 2)"), ("3, 2", "x = 2, y = 3"), ("(3, 2, 1)", "(1, 2, 3)"),
    ("(1, 2), (3, 4)", "(2, 1), (3, 4)"),
]


@pytest.mark.parametrize(("candidate", "reference"), TUPLES_AND_SETS)
def test_tuples_keep_their_order(candidate: str, reference: str) -> None:
    _rejected(candidate, reference)


QUANTITIES = [  # a wrong number with the right unit, or the right number with another unit
    ("Final answer: 46 km", "45 km"), ("Final answer: 45 m", "45 km"), ("Final answer: $13.50", "$12.50"),
    (r"Final answer: \$12.05", "$12.50"), ("Final answer: 13 apples", "12 apples"), ("29%", "28%"),
    ("28 percent", "29%"), ("0.28", "28"), ("1%", "1"), ("125 miles", "126"), ("45 km", "45 m"),
    ("x^4+x^2+1", "(x^2+x+1)(x^2-x+1)"),
]


@pytest.mark.parametrize(("candidate", "reference"), QUANTITIES)
def test_quantities_and_factorizations(candidate: str, reference: str) -> None:
    _rejected(candidate, reference)


INTERVALS = [
    (r"(2,12) \cup (12,103)", r"(2,12) \cup (12,102)"), ("(2, 102)", r"(2,12) \cup (12,102)"),
    ("(-793, 10]", "-793 < a < 10"), ("-793 < a <= 10", "(-793, 10)"), ("x > 5", "[5, oo)"),
    ("(12,102)", "12102"), ("x < 2", "(-oo, 2]"),
]


@pytest.mark.parametrize(("candidate", "reference"), INTERVALS)
def test_intervals_are_exact(candidate: str, reference: str) -> None:
    _rejected(candidate, reference)


def test_unparseable_math_is_not_accepted_by_its_words() -> None:
    # CHAMP: an unbalanced "((n(n+1)/2)^2" once matched the reference as normalized text
    assert not check(candidate="((n(n+1)/2)^2", reference="(n(n+1)/2)^2").equivalent
