"""Answer extraction from free model text, and the reference-side phrase conventions.

Order of evidence, strongest first:

1. The last *statement*: the last run of `\\boxed{...}` (nested braces), or an answer marker
   ("Final answer:", "The final answer is", "The answer is") written *after* that run. Boxes
   joined only by separators (`,`, `;`, `and`, `or`, `\\quad`, `\\text{and}`) are one list
   answer: `\\boxed{2}, \\boxed{3}` is `2, 3`, never `3`. Boxes parted by other text are separate
   statements, and only the last one counts (`\\boxed{1} no \\boxed{2}` is `2`). A marker after
   the last box wins when what follows it is a short mathematical answer (the MATH/Minerva line
   "Final Answer: The final answer is $100$. I hope it is correct." after an intermediate box).
2. "There are N such ...", the last display/inline math (`\\[...\\]` across lines, `$...$`),
   "... is X." closing a short final sentence, then the whole text if it is short and bare.

A chain `a = b = 75` is read as its last value only when it is one chain of equalities: never
at the `=` of a comparison (`x <= 2` stays a relation) and never across a separator
(`x = 19, \\quad y = 2` stays a system). The last-number fallback runs only when asked
(`last_number=True`): an unrelated digit must never count as an answer by default.
"""

from __future__ import annotations

import re

_NUMBER = r"-?\d[\d,]*(?:\.\d+)?"

#: The line a worked solution states its answer on (the graft template's marker), up to its newline.
FINAL_LINE = re.compile(r"final answer\s*[:：]\s*(\S[^\n]*)\n", re.IGNORECASE)

#: "Final answer:", "The final answer is", "**Final Answer:**", "answer = ": what follows is the answer.
_MARKER = re.compile(r"(?:final answer|the answer|answer)\s*(?:\*\*)?\s*(?:is\b|:|=)\s*:?\s*(?:\*\*)?\s*", re.I)
#: Text that may stand between boxes of one list answer.
_BOX_SEP = re.compile(r"(?:\s|[,;$.]|\\[\[\]()]|\\q?quad(?![A-Za-z])|\\[,;:! ]|\b(?:and|or)\b"
                      r"|\\(?:text|mbox|textnormal)\s*\{\s*(?:and|or|,)?\s*\})*", re.I)
#: Operators that make `=` part of a comparison, or the statement an approximation.
_COMPARISON = re.compile(r"[<>≤≥≠≈]|(?<![\d)!])!=|\\(?:le|ge|leq|geq|ne|neq|lt|gt|leqslant|geqslant|approx|sim|equiv)"
                         r"(?![A-Za-z])")
_DISPLAY_BLOCK = re.compile(r"\\\[(.+?)\\\]|\$\$(.+?)\$\$", re.S)
#: An answer marker with nothing after it: the text was cut off before the answer (a spent budget).
_DANGLING = re.compile(r"(?:final answer|the answer|answer)\s*(?:is|:|=)?\s*:?\s*$", re.I)
_THERE_ARE = re.compile(
    r"\bthere (?:are|is|exist|exists|were)\s+(?:a total of\s+|exactly\s+|only\s+)?"
    r"(\$[^$]+\$|" + _NUMBER + r")(?=[\s.,;$]|$)", re.I)
_DISPLAY = re.compile(r"\\\[(.+?)\\\]|\$\$(.+?)\$\$|\\\((.+?)\\\)|\$([^$]+)\$", re.S)
_CLOSING_IS = re.compile(
    r"(?<![A-Za-z])(?:is|are|equals|equal to|be|as|get|obtain)\s+"
    r"(?:exactly\s+|equal to\s+|given by\s+|approximately\s+)?", re.I)
_QUALIFIER = re.compile(r"\s+(?:for (?:all|every|each|any) |when |where |if ).*$", re.I | re.S)
_LAST_NUMBER = re.compile(_NUMBER)
_LEAD = re.compile(r"^(?:thus|so|hence|therefore|in total|finally|then|overall)\b,?\s*"
                   r"(?:(?:we|i) (?:have|get|obtain|find)\s+)?", re.I)
_TRAIL = re.compile(r",\s*(?:which|achieved|attained|when|where|as|with|and the|for)\b.*$", re.I | re.S)
_VAR_EQ = re.compile(r"^\s*(?:[A-Za-z](?:_\w+)?|\(\s*[A-Za-z](?:\s*,\s*[A-Za-z])+\s*\))\s*=")

# Reference conventions (CHAMP and most answer keys): clarifications that are not the answer.
_ALTERNATIVE = re.compile(r",?\s+or (?:equivalently|an equivalent form such as)\s+", re.I)
_APPROX = re.compile(r",?\s+or approximately\s+.*$", re.I | re.S)
_PAREN_NOTE = re.compile(r"\s*\((?:i\.e\.|e\.g\.|no |none|that is)[^()]*\)\s*$", re.I)
_PHRASES = [
    re.compile(r"^(.+?) is the only (?:possible )?(?:value|answer|solution)s?\.?$", re.I),
    re.compile(r"^the only possible (?:value|answer)s?(?: for [^,]+?)? (?:is|are) (.+?)\.?$", re.I),
    re.compile(r"^the limit exists and is equal to (.+?)\.?$", re.I),
    re.compile(r"^the (?:limit|value|answer|sum|number|minimum|maximum) is (.+?)\.?$", re.I),
]


def _boxes(text: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of every complete `\\boxed{...}` / `\\fbox{...}`, nested braces balanced."""
    out: list[tuple[int, int, str]] = []
    for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text):
        if out and m.start() < out[-1][1]:
            continue  # a box inside a box: the outer one holds it
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            out.append((m.start(), i, text[m.end():i - 1].strip()))
    return out


def last_box_run(text: str) -> tuple[int, str] | None:
    """(start, answer) of the last run of boxes joined only by separators; a run of several is a list."""
    boxes = _boxes(text)
    if not boxes:
        return None
    run = [boxes[-1]]
    for b in reversed(boxes[:-1]):
        if not _BOX_SEP.fullmatch(text[b[1]:run[0][0]]):
            break
        run.insert(0, b)
    contents = [c for _, _, c in run]
    if all(c == contents[0] for c in contents):
        contents = contents[:1]  # the same answer boxed twice in a row is one answer
    return run[0][0], ", ".join(contents)


def value_after_equals(s: str) -> str | None:
    """The last value of the chain of equalities that ends `s` (`So P(4)=1+14+36+24=75` -> `75`), else None.

    None when that chain compares or approximates (`x <= 2`, `x \\ne 5`, `\\approx`), or when it is the
    last of several statements (`x = 19, \\quad y = 2`, `x = 1; y = 2`): those are not one value.
    Prose before the chain ("Since 120=5!, we have ... = 0") is context, not a statement.
    """
    i = s.rfind("=")
    if i < 0:
        return None
    start = 0
    for m in re.finditer(r"[A-Za-z]{2,}", s[:i]):
        if _prose_words(m.group()) and not s[:m.start()].endswith("\\"):
            start = m.end()
    clause = start
    depth = 0
    for j in range(start, i):
        ch = s[j]
        depth += 1 if ch in "([{" else -1 if ch in ")]}" else 0
        if depth == 0 and ch in ",;":
            clause = j + 1
    for m in re.finditer(r"\\q?quad(?![A-Za-z])|\b(?:and|or)\b", s[start:i]):
        clause = max(clause, start + m.end())
    if "=" in s[start:clause] or _COMPARISON.search(_QUALIFIER.sub("", s[clause:])):
        return None
    rhs = s[i + 1:].strip()
    return rhs or None


def _one_line_display(text: str) -> str:
    """Display math written across lines (`\\[ \\n 9 \\n \\]`) joined onto one line."""
    return _DISPLAY_BLOCK.sub(lambda m: " ".join(m.group().split()), text)


def _first_sentence(s: str) -> str:
    """Up to the first sentence end: a period/newline not inside a number or math."""
    out: list[str] = []
    in_math = False
    for i, ch in enumerate(s):
        if ch == "$":
            in_math = not in_math
        if not in_math and (ch == "\n" or ch == "." and (i + 1 == len(s) or s[i + 1].isspace())
                            and not (i > 0 and s[i - 1] == "." )):
            break
        out.append(ch)
    return "".join(out).strip()


def _last_sentence(text: str) -> str:
    parts = [p for p in re.split(r"(?<=[.!?])\s+(?=[A-Z])|\n+", text.strip()) if p.strip()]
    return parts[-1].strip() if parts else ""


def _is_bare(text: str, max_chars: int) -> bool:
    words = re.findall(r"[A-Za-z]{2,}", re.sub(r"\\[A-Za-z]+", " ", text))
    return len(text) <= max_chars and len(words) <= 6 and "\n\n" not in text


def extract_answer(text: str, *, last_number: bool = False, max_chars: int = 600) -> str | None:
    """Pull the final answer out of model text.

    Args:
        text: free model output (or an already-bare answer).
        last_number: fall back to the last number in the text (off by default: a stray digit in
            prose must not become the answer).
        max_chars: an answer longer than this is not a short answer.
    Returns:
        the answer string (delimiters removed), or None when nothing answer-like is present.

    Example: `extract_answer("so the total is \\boxed{\\frac{1}{2}}.")` -> `"\\frac{1}{2}"`.
    """
    text = _one_line_display(text.strip())
    if not text:
        return None
    run = last_box_run(text)
    markers = list(_MARKER.finditer(text))
    if markers and (run is None or markers[-1].start() > run[0]):
        stated = _unwrap(_first_sentence(text[markers[-1].end():]))
        if len(_prose_words(stated)) > 1:  # "Final Answer: The largest $n$ is 34."
            closing = _closing(stated, max_chars)
            stated = closing[1] if closing is not None else stated
        if stated and (run is None or len(_prose_words(stated)) <= 1):
            return stated  # a final statement after an intermediate box wins over it
    if run is not None:
        return run[1]
    if _DANGLING.search(text):
        return None
    there = list(_THERE_ARE.finditer(text))
    if there:
        return _unwrap(there[-1].group(1))
    if len(text) <= max_chars:
        short = strip_phrases(_LEAD.sub("", text))
        if not _prose_words(short) or _YES_NO.match(short):
            rhs = value_after_equals(short)
            if short != strip_phrases(text) and rhs and not _VAR_EQ.match(short):
                short = rhs  # "So P(4)=1+14+36+24=75." -> 75
            return _unwrap(short)
    last = _last_sentence(text)
    found = list(_DISPLAY.finditer(last or text))
    closing = _closing(last, max_chars)
    if closing is not None and (not found or closing[0] >= found[-1].end() - 1):
        return closing[1]  # "The value of $3^{105} \bmod 11$ is 2." -> 2
    if found:
        # "$x = 3$ and $x = 2$": a run of math joined only by separators is one answer
        maths = [found[-1]]
        src = last or text
        for m in reversed(found[:-1]):
            if not re.fullmatch(r"\s*(?:,|and|or|, and|, or)?\s*", src[m.end():maths[0].start()]):
                break
            maths.insert(0, m)
        out = ", ".join(_unwrap(next(g for g in m.groups() if g is not None)) for m in maths)
        rhs = value_after_equals(out)
        if len(maths) == 1 and rhs and not _VAR_EQ.match(out) and _prose_words(src):
            out = rhs  # "is $8! - 1260 - 6720 = 120$." -> 120
        return out
    if closing is not None:
        return closing[1]
    rhs = value_after_equals(last) if last and len(last) <= max_chars else None
    if rhs and re.search(r"[A-Za-z]{2,}\s", last):
        cand = _unwrap(_QUALIFIER.sub("", rhs))
        if cand and not _prose_words(cand):
            return cand
    if _is_bare(text, max_chars):
        return _unwrap(strip_phrases(text))
    if last_number:
        nums = _LAST_NUMBER.findall(text)
        if nums:
            return nums[-1].rstrip(".,")
    return None


_MATH_WORDS = {"sqrt", "sin", "cos", "tan", "log", "ln", "exp", "floor", "ceil", "pi", "frac", "dfrac",
               "binom", "sum", "cdot", "times", "infty", "left", "right", "le", "ge", "leq", "geq", "pm",
               "text", "mathrm", "boxed", "and", "or", "gcd", "lcm", "max", "min", "oo", "cup", "in", "quad",
               "qquad", "neq", "tfrac", "cfrac", "mathbf", "textbf", "mbox"}


_SHORT_WORDS = {"so", "we", "is", "it", "of", "to", "as", "be", "by", "on", "an", "at", "if", "no", "thus"}


def _prose_words(s: str) -> list[str]:
    """Words that are not mathematics (`sqrt`, `\\frac`, `xy`, ...): signs of a sentence."""
    return [w for w in re.findall(r"[A-Za-z]{2,}", s)
            if w.lower() in _SHORT_WORDS or len(w) >= 3 and w.lower() not in _MATH_WORDS]


_YES_NO = re.compile(r"^(?:yes|no)\b", re.I)


def _closing(last: str, max_chars: int) -> tuple[int, str] | None:
    """(position, answer) for "... is X." closing the last sentence, X short and mathematical."""
    if not last or len(last) > max_chars:
        return None
    for m in reversed(list(_CLOSING_IS.finditer(last))):
        cand = _unwrap(_QUALIFIER.sub("", _TRAIL.sub("", last[m.end():])))
        rhs = value_after_equals(cand)
        if rhs and not _VAR_EQ.match(cand):  # (139+178)*2=317*2=634 -> 634
            cand = rhs
        if cand and len(_prose_words(cand)) <= 1 and not _YES_NO.match(last):
            return m.start(), cand
    return None


def _strip_period(s: str) -> str:
    return s[:-1].rstrip() if s.endswith(".") and not s.endswith("...") else s


def _unwrap(s: str) -> str:
    """Remove one layer of `$`, `\\[ \\]`, `\\( \\)`, `\\text{}` wrappers and a trailing period."""
    s = _strip_period(s.strip())
    quoted = re.fullmatch(r'\\?"(.*?)\\?"', s, re.S)  # the answer in quotes: "$12$ and $13$"
    if quoted:
        s = quoted.group(1).strip()
    for pat in (r"^\$\$(.*)\$\$$", r"^\$(.*)\$$", r"^\\\[(.*)\\\]$", r"^\\\((.*)\\\)$"):
        m = re.match(pat, s, re.S)
        if m:
            s = m.group(1).strip()
    return _strip_period(s.strip().rstrip(",;"))


def strip_phrases(answer: str) -> str:
    """`0 is the only possible value` -> `0`; `100 (i.e., all values)` -> `100`; others unchanged."""
    s = _strip_period(answer.strip())
    s = _APPROX.sub("", s)
    s = _PAREN_NOTE.sub("", s).strip()
    for pat in _PHRASES:
        m = pat.match(s)
        if m:
            return m.group(1).strip()
    return s


def reference_alternatives(reference: str) -> list[str]:
    """A reference may list equivalent forms: `C(10, 5), or equivalently 252` -> both, phrases stripped.

    `, or approximately ...` is dropped: an approximation is not an accepted answer. A reference
    written as a worked solution (MATH style) is its boxed answer, by the same rule as a candidate's.
    """
    run = last_box_run(reference)
    if run is not None:
        reference = run[1]
    alts = [strip_phrases(p) for p in _ALTERNATIVE.split(_APPROX.sub("", reference.strip()))]
    return [a for a in alts if a] or [reference.strip()]


def answer_in_output(text: str, form: str, markers: str = "final-line") -> str | None:
    """The answer a model's continuation states: its first line in `answer` form, its final-answer
    line in `solve` form (a cut-off solution that still says "answer" or "boxed" is read whole).
    Under `boxed` markers (the chat format) the last `\\boxed{...}` run comes first, in either form;
    an `answer`-form output without a box states nothing (its first line is not read).

    Prose without a stated answer has none (a stray number is not one).

    Example: `answer_in_output("x = 9.\\nFinal answer: 9\\n", "solve")` -> `"9"`.
    """
    if markers == "boxed":
        run = last_box_run(text)
        if run is not None:
            return extract_answer(text) or run[1].strip() or None
        if form == "answer":
            # An answer-form turn under boxed markers is `$\boxed{A}$` (what its recap turns show);
            # without the box its first line is prose, and reading a number out of it could accept
            # an answer the model never stated. Prefer the reject.
            return None
    elif markers != "final-line":
        raise ValueError(f"unknown answer markers {markers!r}")
    if form == "answer":
        line = text.strip().splitlines()[0].strip() if text.strip() else ""
        return (extract_answer(line) or line.rstrip(".")) or None
    m = FINAL_LINE.search(text + "\n")
    if m:
        return extract_answer("Final answer: " + m.group(1)) or m.group(1).strip().rstrip(".")
    if re.search(r"answer|boxed", text, re.IGNORECASE):
        return extract_answer(text)
    return None
