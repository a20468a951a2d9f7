"""The one canonical graft template, and the prompts attempts are asked with.

A deposit prefills `graft_prefix(...)`: a worked example ending at the slot where the next
problem is asked. An attempt feeds `attempt_suffix(problem)` on top of the grafted state (or
on top of nothing, for an ungrafted attempt: `plain_prompt`). Changing any string here changes
every artifact's bytes: bump `TEMPLATE_VERSION` and rebuild the library.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

TEMPLATE_VERSION = "v2"

AttemptMode = Literal["answer", "solve"]
OPEN_SLOT = "Problem:"   # where the next problem is asked
ANSWER_LINE = "Answer:"  # where a recurrence (`answer` mode) is asked for its answer
RECAPS = 2               # how many times a graft shows its problem asked again and answered at once


#: A line that opens with one of the template's markers (any case), and the answer marker anywhere.
_MARKER_LINE = re.compile(r"\s*(problem|solution|(?:final\s+)?answer)\s*:", re.IGNORECASE)
_ANSWER_MARKER = re.compile(r"final\s+answer\s*:", re.IGNORECASE)


def template_break(problem: str, solution: str, answer: str, reference: str = "") -> str | None:
    """Why these texts would break the graft template, or None when they fit it.

    The answer (and the reference it is checked against) is one line; no text holds a line opening with a template marker ("Problem:",
    "Answer:", "Solution:", "Final answer:") or the answer marker anywhere: otherwise the graft reads as
    another problem, or shows another final answer first (which the model then repeats).

    Example:
        >>> template_break("What is 2+3?", "2+3=5", "99\\nFinal answer: 5")
        'the answer is more than one line'
    """
    for name, text in (("answer", answer), ("reference", reference)):
        if len(text.strip().splitlines()) > 1:
            return f"the {name} is more than one line"
    for name, text in (("problem", problem), ("solution", solution), ("answer", answer), ("reference", reference)):
        found = _ANSWER_MARKER.search(text) or next(
            (m for line in text.splitlines() if (m := _MARKER_LINE.match(line))), None)
        if found:
            return f"the {name} holds the template marker {found.group(0).strip()!r}"
    return None


def graft_prefix(problem: str, solution: str, answer: str) -> str:
    """Problem, worked solution and final answer; the problem asked again and answered (twice); the open slot.

    The recap lines (`Problem: <same text>` then `Answer: <answer>`, `RECAPS` times) show the
    model that a problem it has seen solved is answered at once, with the same answer: a
    recurrence, asked the same way (`attempt_suffix(problem, "answer")`), continues with the
    answer. Decided on 30 train recurrences (BENCHMARKS.md, "Exact recurrences"): SmolLM2-135M
    copied 8/30 under v1 (no recap, asked `Final answer:`), 18/30 with the answer stated after
    the problem, 20/30 with one recap, 30/30 with two (Gemma 3 270M: 30/30). A `solve` attempt
    (a `near` graft) still sees a worked example ending in its final-answer line.
    """
    p, a = problem.strip(), answer.strip()
    recap = f"Problem: {p}\n{ANSWER_LINE} {a}\n\n" * RECAPS
    return f"Problem: {p}\nSolution: {solution.strip()}\nFinal answer: {a}\n\n" + recap + OPEN_SLOT


def composite_prefix(examples: Sequence[tuple[str, str, str]]) -> str:
    """Several worked examples (problem, solution, answer) in the given order, then the open slot.

    With one example it is exactly `graft_prefix`; a `near` graft of m related solutions uses it.
    """
    blocks = [graft_prefix(*example)[:-len(OPEN_SLOT)] for example in examples]
    return "".join(blocks) + OPEN_SLOT


def attempt_suffix(problem: str, mode: AttemptMode = "solve") -> str:
    """What follows the graft's open slot: the new problem, then where the model answers.

    `answer` asks for the answer at once, where the graft stated it (a recurring problem: the
    answer is in context); `solve` asks for a worked solution that ends in a final-answer line.
    """
    tail = ANSWER_LINE if mode == "answer" else "Solution:"
    return f" {problem.strip()}\n{tail}"


def plain_prompt(problem: str, mode: AttemptMode = "solve") -> str:
    """The ungrafted prompt: the same wording, with no worked example before it."""
    return "Problem:" + attempt_suffix(problem, mode)
