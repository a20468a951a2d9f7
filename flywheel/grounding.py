"""Number-grounded decoding: a number a worked solution uses must come from the problem or from earlier work.

A small model's worked solutions go wrong most often by binding (BENCHMARKS.md, "Formats and
binding"): it copies the grafted sibling's numbers, or ends on a final answer that is not the last
thing it computed (`The change is 100 - 16 = 84 dollars. Final answer: 104`). Grounding is a
constraint on the tokens a slot picks, read from the slot's own text only:

- an *operand* (a number not right after `=`) must be one of the problem's numbers, a small
  constant (`CONSTANTS`: counts, percent, minutes, centimeters...), a number the problem spells in
  words (`four days` -> 4), or a number already written earlier in the same solution;
- a *result* (right after `=`) is free: it is the model's arithmetic (or the calculator's);
- the *final answer* (after `answer:`) must be the solution's last result, when it computed one.

While a number is being written, its digits so far must begin one of the allowed numbers, and it
may only end once it is one. The decoder asks `permits(...)` about the token it picked; when the
answer is no it picks again from the same row without that token (`flywheel.decode`), so a slot's
tokens stay a function of its own logits, seed and problem. `GROUNDING` names these rules; it is
part of a run's decode schedule, so a run is never resumed under other rules.

    >>> allowed = allowed_numbers("Maya buys 4 erasers at 7 dollars each, paying with a 100-dollar bill.")
    >>> permits(allowed, "The erasers cost 4 * 1", "The erasers cost 4 * 15")
    False
    >>> permits(allowed, "The erasers cost 4 * ", "The erasers cost 4 * 7")
    True
    >>> permits(allowed, "4 * 7 = 28. The change is 100 - 28 = 72.\\nFinal answer: ", "4 * 7 = 28. The change is 100 - 28 = 72.\\nFinal answer: 28")
    False
"""

from __future__ import annotations

import re

#: Names the rules below; bump it when a slot could be allowed another token.
GROUNDING = "ground-v1"

#: Numbers a word problem uses without writing them: small counts, percent, minutes, hours in a
#: day, days in a week, centimeters in a meter, meters in a kilometer, months, a dozen.
CONSTANTS = frozenset({"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "12", "24", "60", "100", "1000"})

_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
    "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "thousand": 1000,
    "twice": 2, "double": 2, "half": 2, "triple": 3, "thrice": 3, "quarter": 4, "dozen": 12,
}
_WORD = re.compile(r"[a-z]+")
#: A number as the rules read it: digits, an optional decimal part (commas separate numbers).
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
#: Where a number is free: right after `=` (a result), a minus sign allowed.
_RESULT_BEFORE = re.compile(r"=\s*-?\s*$")
#: Where a number must be the last result: after a final-answer marker.
_ANSWER_BEFORE = re.compile(r"answer\s*:\s*-?\s*$", re.IGNORECASE)
#: The unfinished number at the end of a text ("3." may still become 3.5).
_OPEN_TAIL = re.compile(r"\d+(?:\.\d*)?$")


def allowed_numbers(problem: str) -> frozenset[str]:
    """The operands a solution of `problem` may use: its numbers, the numbers it spells, `CONSTANTS`."""
    found = set(CONSTANTS)
    found.update(_NUMBER.findall(problem))
    found.update(m.replace(",", "") for m in re.findall(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", problem))
    found.update(str(_WORDS[w]) for w in _WORD.findall(problem.lower()) if w in _WORDS)
    return frozenset(found)


def permits(allowed: frozenset[str], text: str, new_text: str) -> bool:
    """Whether a slot whose solution reads `text` may go on to read `new_text` (one more token).

    Only the numbers the new token touches are judged: the one open at the end of `text`, and any
    the token starts. An open number at the end of `new_text` needs only to begin an allowed one.
    """
    tail = _OPEN_TAIL.search(text)
    start = tail.start() if tail else len(text)
    if start == len(text) and not any(c.isdigit() for c in new_text[len(text):]):
        return True
    earlier = text[:start]
    for m in _NUMBER.finditer(new_text, start):
        number, before, after = m.group(), new_text[:m.start()], new_text[m.end():]
        is_open = after in ("", ".")
        if _RESULT_BEFORE.search(before):
            continue
        operands = allowed | set(_NUMBER.findall(earlier))
        pool = (_last_result(earlier) or operands) if _ANSWER_BEFORE.search(before) else operands
        if not (any(p.startswith(number) for p in pool) if is_open else number in pool):
            return False
    return True


def _last_result(text: str) -> frozenset[str]:
    """The last number written right after `=` in `text`, as a one-element set; empty when none was."""
    results = [m.group() for m in _NUMBER.finditer(text) if _RESULT_BEFORE.search(text[:m.start()])]
    return frozenset(results[-1:])


def ungrounded(problem: str, solution: str) -> list[str]:
    """The operands of a finished worked `solution` that the rules above would have refused, in order.

    What a deposit of the model's own solution checks: a right final answer reached through another
    problem's numbers (a grafted sibling's working copied, which happens to end on the same answer)
    is not a worked solution of this problem, and would teach the wrong working to every later graft.

        >>> ungrounded("Pack 90 crates; 50 are packed; 8 and 12 per hour.", "80 - 50 = 30 remain. 30 / 15 = 2.")
        ['80', '15']
    """
    allowed, seen, refused = allowed_numbers(problem), set(), []
    for m in _NUMBER.finditer(solution):
        number = m.group()
        if not _RESULT_BEFORE.search(solution[:m.start()]) and number not in allowed and number not in seen:
            refused.append(number)
        seen.add(number)
    return refused


def copied_numbers(problem: str, solution: str, grafted: list[str]) -> list[str]:
    """The ungrounded operands of `solution` that appear in the `grafted` texts (the sibling's problem
    and worked solution it was shown): another problem's working, copied.

        >>> copied_numbers("Pack 90 crates; 50 are packed; 8 and 12 per hour.", "80 - 50 = 30 remain. 30 / 15 = 2.",
        ...                ["Pack 80 boxes; 50 are packed; 12 and 3 per hour.", "80 - 50 = 30. 12 + 3 = 15. 30 / 15 = 2."])
        ['80', '15']
    """
    theirs = {n for text in grafted for n in _NUMBER.findall(text)}
    return [n for n in ungrounded(problem, solution) if n in theirs]
