"""A model's output: the answer it states (`answer_in_output`, moved here from `flywheel.attempt`) and
`check_output`, which finds that answer and checks it in one bounded request to the worker."""

from __future__ import annotations

import pytest

import verifiers
import verifiers.api
from verifiers import Answered, CheckTimeout, VerifierConfig, answer_in_output, check_output
from verifiers.types import MAX_OUTPUT_CHARS


# Continuations as the models write them: a recurrence (`answer` mode) is asked for the answer on
# its first line; a worked solution (`solve` mode) ends with a `Final answer:` line.
@pytest.mark.parametrize(("text", "expected"), [
    ("239\n", "239"),
    (" 239.\n", "239"),                              # a sentence's full stop is not part of it
    ("$\\frac{1}{2}$\n", "\\frac{1}{2}"),
    ("\\boxed{12}\n", "12"),
    ("The answer is 7.\n", "7"),
    ("  42  \nmore text", "42"),                     # only the first line counts
    ("x = 9\nProblem:", "x = 9"),
    ("3, 4\n", "3, 4"),
    ("", None),
    ("   \n", None),
])
def test_answer_mode_takes_the_first_line(text: str, expected: str | None) -> None:
    assert answer_in_output(text, "answer") == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("Subtract 8: 3x = 27. Divide by 3: x = 9.\nFinal answer: 9\n", "9"),
    ("So x = 9.\nFinal Answer: $x = 9$.\n", "x = 9"),
    ("Final answer：12\n", "12"),                     # full-width colon
    ("There are 3 cases. Final answer: (1, 2)\n", "(1, 2)"),
    ("final answer: \\frac{3}{4}\nProblem: next", "\\frac{3}{4}"),
    ("Final answer: 9", "9"),                        # cut off right after the answer
    ("The answer is \\boxed{5}", "5"),               # a cut-off solution that still states it
    ("We get 12 apples.\n", None),                   # a stray number in prose is not an answer
    ("Thus 3 + 4 = 7 and 2", None),
    ("The answer is", None),
    ("Final answer:  \n", None),
])
def test_solve_mode_takes_the_final_answer_line(text: str, expected: str | None) -> None:
    assert answer_in_output(text, "solve") == expected


@pytest.mark.parametrize(("text", "form", "reference", "answer", "status"), [
    ("Subtract 8: 3x = 27.\nFinal answer: 9\n", "solve", "9", "9", "equivalent"),
    ("So x = 9.\nFinal Answer: $x = 9$.\n", "solve", "9", "x = 9", "equivalent"),
    (" 8.\n", "answer", "9", "8", "not_equivalent"),
    ("We get 12 apples.\n", "solve", "12", None, "unparseable"),      # no stated answer: no verdict
    ("", "solve", "9", None, "unparseable"),
    ("x = 2 or x = 3\n", "answer", None, "x = 2 or x = 3", "equivalent"),   # no reference: substitution
])
def test_check_output_answers_and_judges_in_one_request(text: str, form: str, reference: str | None,
                                                        answer: str | None, status: str) -> None:
    got = check_output(text, form=form, reference=reference,  # type: ignore[arg-type]
                       problem_text="Solve x^2 - 5x + 6 = 0.")
    assert got.answer == answer and got.verdict.status == status


def test_the_answer_is_never_extracted_in_the_calling_process(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("model text parsed outside the worker")

    for module in (verifiers, verifiers.extract):
        monkeypatch.setattr(module, "answer_in_output", refuse)
        monkeypatch.setattr(module, "extract_answer", refuse)
    got = check_output("3x = 27.\nFinal answer: 9\n", form="solve", reference="9", problem_text="3x = 27")
    assert got == Answered("9", got.verdict) and got.verdict.equivalent


def test_a_killed_worker_gives_no_answer_and_no_verdict_not_an_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    def past_its_time(*args: object) -> None:
        raise CheckTimeout("no answer within 5 s")   # what the pool raises once it killed the worker

    monkeypatch.setattr(verifiers.api.POOL, "run", past_its_time)
    got = check_output("Final answer: 1\n", form="solve", reference="1", problem_text="p",
                       config=VerifierConfig(timeout_s=5))
    assert got.answer is None and got.verdict.status == "timeout" and not got.verdict.equivalent


def test_an_output_past_the_bound_is_refused_unread() -> None:
    got = check_output("1" * (MAX_OUTPUT_CHARS + 1), form="answer", reference="1", problem_text="p")
    assert got.answer is None and got.verdict.status == "unparseable" and "refused" in got.verdict.reason
