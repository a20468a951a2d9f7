"""Extraction from free model text (phrasings from CHAMP's GPT-3.5/GPT-4/PaLM conversations)."""

from __future__ import annotations

import pytest

from verifiers import extract_answer
from verifiers.extract import reference_alternatives

CASES = [
    (r"so the total is \boxed{\frac{1}{2}}.", r"\frac{1}{2}"),
    (r"\boxed{\{1, \{2\}\}} and then \boxed{\frac{a}{b^{2}}}", r"\frac{a}{b^{2}}"),
    ("Final answer: 42", "42"),
    (r"The final answer is $\dfrac{9}{7}$.", r"\dfrac{9}{7}"),
    ("The answer is 3.5 apples.", "3.5 apples"),
    ("There are 29 valid strings of length 6 that have adjacent digits differing by at most 1.", "29"),
    ("Thus, there are 87 ways to fill an 2 x 5 rectangle.", "87"),
    (r"We compute the sum. \[ \frac{n(n+1)}{2} \]", r"\frac{n(n+1)}{2}"),
    ("The probability is 5/14.", "5/14"),
    ("x = 3", "x = 3"),
    ("3x-y+13=0", "3x-y+13=0"),
    ("So P(4)=1+14+36+24=75.", "75"),
    ("Thus, the number of strings is exactly the number of ways to choose 5 of 10, which is C(10, 5).", "C(10, 5)"),
    ("Since P(2k+1)=P(2k), we have P(n)=2^floor(n/2)*floor(n/2)! for all n.", "2^floor(n/2)*floor(n/2)!"),
    ("So the smallest value is 3/2, achieved when a=b=c.", "3/2"),
    ("0 is the only possible value", "0"),
    ("No, it is not possible.", "No, it is not possible"),
    ("The sequence does not exist", "The sequence does not exist"),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_extract(text: str, expected: str) -> None:
    assert extract_answer(text) == expected


@pytest.mark.parametrize("text", ["9\nFinal answer: ", "so x = 9. Final answer:", "The answer is", "Answer ="])
def test_an_answer_cut_off_by_the_budget_is_no_answer(text: str) -> None:
    """A solution that stopped right after its answer marker states nothing (not the marker itself)."""
    assert extract_answer(text) is None


def test_last_number_is_a_mode_not_a_default() -> None:
    text = "We looked at 3 cases and then at 7 more, but the argument did not finish in time"
    assert extract_answer(text) is None
    assert extract_answer(text, last_number=True) == "7"


@pytest.mark.parametrize(("ref", "alts"), [
    ("C(10, 5), or equivalently 252", ["C(10, 5)", "252"]),
    ("5/14, or approximately 35.7%", ["5/14"]),
    ("100 (i.e., all values)", ["100"]),
    ("The limit exists and is equal to (a+3b)/2", ["(a+3b)/2"]),
    ("The only possible value for the limit is sqrt(a)", ["sqrt(a)"]),
])
def test_reference_alternatives(ref: str, alts: list[str]) -> None:
    assert reference_alternatives(ref) == alts
