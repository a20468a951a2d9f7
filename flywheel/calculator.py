r"""Exact arithmetic inside the decode schedule: when a slot's text ends in `expression =`, compute it.

A frozen small model slips on arithmetic; the engine can take it over. When the text a slot has
produced ends in an arithmetic expression followed by `=` (`42 + 16 =`, or GSM8K's annotation
`<<6*7=`), `complete(text)` returns the result (` 58`, `42`) for the decoder to feed to that slot as
forced tokens; the model then carries on from it. Nothing here calls `eval`: a small recursive
descent parser over integers and decimals with + - * / × ÷ · and parentheses, in exact rationals
(`fractions.Fraction`), bounded in length, digits and nesting. Division by zero, a result too
large, or anything it does not read are outcomes (`None`: the model goes on by itself), never
errors.

    >>> complete("Together that is 42 + 16 =")
    ' 58'
    >>> complete("So each gets 7 / 2 =")
    ' 3.5'
    >>> complete("x =") is None
    True

`CALCULATOR` names this arithmetic and its formatting: it is part of a run's decode schedule,
like the sampler, so a run is never resumed under another. Two versions are kept, each runnable by
name (`VERSIONS`), so a recorded run replays under its own:

- `calc-v1` reads plain arithmetic only;
- `calc-v2` (the current one) also reads the LaTeX the chat models write their work in
  (`\[ 17 \times 60 =`, `\frac{1}{5} \times 325 =`, `\left( ... \right)`, `\$`, and unit text
  such as `\text{ eggs/day}` in a product or quotient, never in a sum), and refuses an expression
  that starts in the middle of a larger one (`x \times 2 + 3 =`, where v1 computed `2 + 3`).

    >>> complete("\\[ 17 \\times 60 =", "calc-v2")
    ' 1020'
    >>> complete("\\[ 17 \\times 60 =", "calc-v1") is None
    True

`false_steps` keeps v1's reading whatever the decode version: it decides which of the model's own
solutions deposit, so a cold library re-run under newer code deposits the same artifacts.
"""

from __future__ import annotations

import re
from fractions import Fraction

#: Names the decode-time tool's reading, arithmetic and formatting; bump it when a result's text could change.
CALCULATOR = "calc-v2"
#: Every version `complete` runs, oldest first (a run records the one it used).
VERSIONS = ("calc-v1", "calc-v2")
#: Longest expression read (characters before the `=`).
MAX_EXPRESSION = 80
#: Most digits of any number read or any result written.
MAX_DIGITS = 24
#: Deepest parenthesis nesting read.
MAX_DEPTH = 8
#: Decimal places written for a result that is not an integer (beyond: a fraction a/b).
MAX_DECIMALS = 6

# The expression: the longest run of number/operator/space/parenthesis characters before `=`.
_TAIL = re.compile(r"([0-9.,+\-*/×÷·()\s]{1," + str(MAX_EXPRESSION) + r"})=([ \t]*)$")
_TOKEN = re.compile(r"\s*(?:(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)|([+\-*/×÷·()]))")
_MUL = {"*", "×", "·"}
_DIV = {"/", "÷"}


# calc-v2's LaTeX: the longest run before a trailing `=` of plain arithmetic characters, braces, `$`, the
# commands below and unit text without digits; `_plain_tail` rewrites it as plain arithmetic.
#: Characters of a text's end that calc-v2 looks at (LaTeX spends several per operator).
MAX_LATEX_TEXT = 400
_LATEX_TAIL = re.compile(
    r"((?:\\(?:times|cdot|div|frac|dfrac|tfrac|left|right)(?![A-Za-z])|\\text\{[^{}\\\d=]*\}|\\[,;! $()\[\]]"
    r"|[0-9.,+\-*/×÷·()\s{}$])+)=([ \t]*)\Z")
_UNIT_TEXT = re.compile(r"\\text\{[^{}\\\d=]*\}")
_LATEX_FRAC = re.compile(r"\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}")
_LATEX_SPELLED = [(re.compile(p), r) for p, r in (
    (r"\{,\}", ","),                                     # 970{,}000
    (r"\\(?:times|cdot)(?![A-Za-z])", " × "), (r"\\div(?![A-Za-z])", " ÷ "),
    (r"\\left\(", "("), (r"\\right\)", ")"),
    (r"\\[,;! $()\[\]]|\$", " "),                          # spacing, dollars, math delimiters
)]
#: What may not end the text before a calc-v2 expression: an operator, a closing bracket, a digit,
#: `^`, `_` or a command (the expression would be the tail of a larger one).
_INSIDE_LARGER = re.compile(r"[0-9+\-*/×÷·)}\]^_\\][ \t]*\Z")
#: calc-v2 reads a text that ends in `=` and spaces only (v1's `$` also let `=` and a newline through).
_ENDS_IN_EQUALS = re.compile(r"=[ \t]*\Z")


def _plain_tail(text: str) -> str | None:
    """`text` with its LaTeX arithmetic tail rewritten as plain arithmetic (calc-v2); None when the tail
    has unit text in a sum or difference (`1 \\text{ hour} + 30 \\text{ minutes}`: not 31)."""
    m = _LATEX_TAIL.search(text)
    if m is None:
        return text
    tail = m.group(1)
    units = _UNIT_TEXT.search(tail) is not None
    tail = _UNIT_TEXT.sub(" ", tail)
    for pattern, plain in _LATEX_SPELLED:
        tail = pattern.sub(plain, tail)
    for _ in range(MAX_DEPTH):
        tail, n = _LATEX_FRAC.subn(r"((\1)/(\2))", tail)
        if not n:
            break
    if units and re.search(r"[+\-]", tail):
        return None
    return text[:m.start(1)] + tail + "=" + m.group(2)


def checked(version: str) -> str:
    """`version` when this code runs it (one of `VERSIONS`); a ValueError naming the ones it runs otherwise."""
    if version not in VERSIONS:
        raise ValueError(f"unknown calculator {version!r}; this version runs {', '.join(VERSIONS)}")
    return version


class _Unreadable(Exception):
    """The tail is not an expression this calculator computes (an outcome, not an error)."""


def complete(text: str, version: str = CALCULATOR) -> str | None:
    """The text to force after `text` when it ends in `expression =`; None when it does not.

    The result keeps the model's spacing: after `=` it starts with a space, after `= ` it does not.
    An expression needs at least one operator and two numbers (`x = 5` and `= 12 =` are left alone).
    `version` is one of `VERSIONS` (a run's recorded one); another is a ValueError.
    """
    if checked(version) != "calc-v1":
        plain = _plain_tail(text[-MAX_LATEX_TEXT:]) if _ENDS_IN_EQUALS.search(text) else None
        if plain is None:
            return None
        text = plain
    read = _read_tail(text)
    if read is None or (version != "calc-v1" and _INSIDE_LARGER.search(text[:read[0]])):
        return None
    _, value, space = read
    out = format_result(value) if value is not None else None
    if out is None:
        return None
    return out if text[:read[0]].endswith("<<") or space else " " + out


def _read_tail(text: str) -> tuple[int, Fraction | None, str] | None:
    """Where the expression before a trailing `=` starts in `text`, its value (None: no value) and the
    spacing after the `=`; None when the tail is not `expression =`."""
    m = _TAIL.search(text)
    if not m:
        return None
    expr, space = m.group(1), m.group(2)
    # The run may start inside the sentence before it ("costs 3. 42 + 16 ="): the expression is
    # the longest suffix of it that reads as one.
    for start in range(len(expr)):
        if not (expr[start].isdigit() or expr[start] in "(-.") or (start and not (expr[start - 1].isspace() or expr[start - 1] in "(<")):
            continue
        try:
            return m.start(1) + start, evaluate(expr[start:]), space
        except _Unreadable:
            continue
    return None


def evaluate(expression: str) -> Fraction | None:
    """The exact value of `expression`, or None (division by zero, too large); raises `_Unreadable`."""
    tokens = _tokens(expression)
    if sum(kind == "num" for kind, _ in tokens) < 2 or not any(kind == "op" and v not in "()" for kind, v in tokens):
        raise _Unreadable(expression)
    parser = _Parser(tokens)
    try:
        value = parser.expression(0)
    except ZeroDivisionError:
        return None
    if parser.at < len(tokens):
        raise _Unreadable(expression)
    return value


def format_result(value: Fraction) -> str | None:
    """An integer, a short terminating decimal, or `a/b`; None when it would be too long to be useful."""
    if value.denominator == 1:
        text = str(value.numerator)
    else:
        scaled = value * 10 ** MAX_DECIMALS
        if scaled.denominator == 1:
            sign = "-" if value < 0 else ""
            whole, frac = divmod(abs(scaled.numerator), 10 ** MAX_DECIMALS)
            text = f"{sign}{whole}.{str(frac).rjust(MAX_DECIMALS, '0').rstrip('0')}"
        else:
            text = f"{value.numerator}/{value.denominator}"
    return text if sum(c.isdigit() for c in text) <= MAX_DIGITS else None


def _tokens(expression: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos, text = 0, expression.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise _Unreadable(text)
        number, op = m.group(1), m.group(2)
        if number is not None:
            digits = number.replace(",", "")
            if sum(c.isdigit() for c in digits) > MAX_DIGITS:
                raise _Unreadable(text)
            out.append(("num", digits))
        else:
            out.append(("op", op))
        pos = m.end()
    return out


class _Parser:
    """expression := term (('+'|'-') term)* ; term := factor (('*'|'/') factor)* ; factor := '-' factor | number | '(' expression ')'."""

    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens, self.at = tokens, 0

    def _peek(self) -> str | None:
        return self.tokens[self.at][1] if self.at < len(self.tokens) and self.tokens[self.at][0] == "op" else None

    def expression(self, depth: int) -> Fraction:
        value = self.term(depth)
        while (op := self._peek()) in ("+", "-"):
            self.at += 1
            rhs = self.term(depth)
            value = value + rhs if op == "+" else value - rhs
            _bounded(value)
        return value

    def term(self, depth: int) -> Fraction:
        value = self.factor(depth)
        while (op := self._peek()) is not None and (op in _MUL or op in _DIV):
            self.at += 1
            rhs = self.factor(depth)
            value = value * rhs if op in _MUL else value / rhs   # ZeroDivisionError: an outcome
            _bounded(value)
        return value

    def factor(self, depth: int) -> Fraction:
        if self.at >= len(self.tokens):
            raise _Unreadable("expression ends early")
        kind, v = self.tokens[self.at]
        self.at += 1
        if kind == "num":
            return Fraction(v)
        if v == "-":
            return -self.factor(depth)
        if v == "(":
            if depth >= MAX_DEPTH:
                raise _Unreadable("nested too deep")
            value = self.expression(depth + 1)
            if self._peek() != ")":
                raise _Unreadable("unbalanced parenthesis")
            self.at += 1
            return value
        raise _Unreadable(f"unexpected {v!r}")


def _bounded(value: Fraction) -> None:
    if len(str(abs(value.numerator))) > 2 * MAX_DIGITS or len(str(value.denominator)) > 2 * MAX_DIGITS:
        raise _Unreadable("intermediate result too large")


#: `= number` as a worked solution states a result (commas grouping digits, a decimal or a fraction),
#: the whole right side: not followed by more of an expression (`= 317*2`, `= 7u^2`).
_STATED = re.compile(r"=[ \t]*(-?\d[\d,]*(?:\.\d+)?(?:/\d+)?)(?![\w*/^(+\-×÷·]|\.\d|[ \t]*[*/^×÷·+\-(])")
#: What may stand before a step's expression: the start, a space or an opening mark. A letter, digit,
#: `^`, `_` or `)` there means the expression is part of a larger term (`x^2+1 =`, `f_8+2 =`, `sqrt(6+3) =`).
_STEP_BEFORE = re.compile(r"(?:^|[\s(:;,=])$")


def false_steps(text: str) -> list[str]:
    """Each `expression = number` in a worked solution whose number is not the expression's exact value.

    A step this calculator cannot read, or whose sides are parts of larger terms, is left alone; a
    decimal is right when the exact value rounds to it at its own number of places (`10 / 3 = 3.33`).
    A solution that ends on the right answer through a false step (`20 / 24 = 2`) is not a worked
    solution: the deposit of the model's own refuses it (`flows.tasks.deposit_own`).

        >>> false_steps("20 / 24 = 2 batches. One batch uses 2 + 2 = 4 cups. 10 / 3 = 3.33")
        ['20 / 24 = 2']
    """
    wrong = []
    for m in _STATED.finditer(text):
        read = _read_tail(text[:m.start() + 1])
        if read is None or read[1] is None or not _STEP_BEFORE.search(text[:read[0]]):
            continue
        stated_text = m.group(1).replace(",", "")
        exact, stated = read[1], Fraction(stated_text)
        places = len(stated_text.split(".")[1]) if "." in stated_text and "/" not in stated_text else 0
        if stated != exact and not (places and round(exact, places) == stated):
            wrong.append(f"{text[read[0]:m.start()].strip()} = {m.group(1)}")
    return wrong
