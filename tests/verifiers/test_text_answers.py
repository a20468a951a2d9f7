"""Issue 23 items 5 and 6: prose answers and references the parser cannot read.

A Yes/No reference is answered only by that word, never by a hedge or by both words; a reference
the parser cannot read gives no verdict against a mathematical answer (unparseable, not a
contradiction), so a right answer can still be deposited `--unverified`.
"""

from __future__ import annotations

import pytest

from verifiers import VerifierConfig, check

YES_NO = [
    ("yes or no", "yes", False),
    ("yes and no", "yes", False),
    ("No or yes", "no", False),
    ("no idea", "no", False),
    ("No clue.", "no", False),
    ("Yes, maybe.", "yes", False),
    ("yes, I think so, but I'm not sure", "yes", False),
    ("No. Yes.", "no", False),
    ("Yes", "yes", True),
    ("no.", "No", True),
    ("No, because 91 = 7 * 13 is not prime.", "No", True),
    ("No such triangle exists.", "No", True),
    ("Yes: take n = 4.", "Yes", True),
]


@pytest.mark.parametrize(("cand", "ref", "equal"), YES_NO)
def test_yes_no_answers(cand: str, ref: str, equal: bool) -> None:
    v = check(candidate=cand, reference=ref)
    assert v.equivalent is equal, v
    if not equal:
        assert v.status == "not_equivalent", v  # prose against prose: text decides


@pytest.mark.parametrize(("cand", "ref"), [
    ("12", "twelve"),
    ("1/3", "0.333..."),
    (r"\frac{2}{3}", "0.666..."),
    ("7", "seven apples"),
    ("x = 2", "two"),
])
def test_a_reference_the_parser_cannot_read_is_no_verdict(cand: str, ref: str) -> None:
    v = check(candidate=cand, reference=ref)
    assert v.status == "unparseable", v


@pytest.mark.parametrize(("cand", "ref"), [
    ("14", "No"),  # a Yes/No reference is still answered only by its word
    ("Berlin", "Paris"),  # prose against prose: text decides
    ("thirteen", "twelve"),
])
def test_prose_references_still_contradict_where_text_decides(cand: str, ref: str) -> None:
    assert check(candidate=cand, reference=ref).status == "not_equivalent"


@pytest.mark.parametrize("bad", [
    {"tolerance": float("inf")}, {"tolerance": 1e300}, {"tolerance": 2.0}, {"tolerance": -0.1},
    {"tolerance": float("nan")}, {"timeout_s": 0.0}, {"timeout_s": -1.0}, {"timeout_s": float("nan")},
    {"timeout_s": float("inf")}, {"timeout_s": 1e9}, {"max_depth": -1}, {"probes": 2.5},
])
def test_verifier_config_refuses_values_out_of_bounds(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="not"):
        VerifierConfig(**bad)  # type: ignore[arg-type]


def test_the_largest_tolerance_still_tells_far_numbers_apart() -> None:
    cfg = VerifierConfig(tolerance=0.01)
    assert check(candidate="1", reference="1000000", config=cfg).status == "not_equivalent"
    assert check(candidate="1", reference="-5", config=cfg).status == "not_equivalent"
    assert check(candidate="100", reference="100.5", config=cfg).equivalent
