"""Answer extraction from free model text, and the reference-side phrase conventions.

Order of evidence, strongest first: the last `\\boxed{...}` (nested braces), "Final answer:",
"The answer is", "There are N such ...", the last display/inline math (`\\[...\\]`, `$...$`),
"... is X." closing a short final sentence, then the whole text if it is short and bare.
The last-number fallback runs only when asked (`last_number=True`): an unrelated digit must
never count as an answer by default.
"""

from __future__ import annotations

import re

_NUMBER = r"-?\d[\d,]*(?:\.\d+)?"

_FINAL = re.compile(r"(?:final answer|the answer|answer)\s*(?:is|:|=)\s*:?\s*(.+)", re.I | re.S)
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


def find_boxed(text: str) -> str | None:
    """Content of the last `\\boxed{...}` / `\\fbox{...}`, nested braces balanced; None if absent."""
    starts = [m.end() for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text)]
    for start in reversed(starts):
        depth, i = 1, start
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            return text[start:i - 1].strip()
    return None


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
    text = text.strip()
    if not text:
        return None
    boxed = find_boxed(text)
    if boxed is not None:
        return boxed
    finals = list(_FINAL.finditer(text))
    if finals:
        ans = _unwrap(_first_sentence(finals[-1].group(1)))
        if ans:
            return ans
    if _DANGLING.search(text):
        return None
    there = list(_THERE_ARE.finditer(text))
    if there:
        return _unwrap(there[-1].group(1))
    if len(text) <= max_chars:
        short = strip_phrases(_LEAD.sub("", text))
        if not _prose_words(short) or _YES_NO.match(short):
            if short != strip_phrases(text) and "=" in short and not _VAR_EQ.match(short):
                short = short.rsplit("=", 1)[1]  # "So P(4)=1+14+36+24=75." -> 75
            return _unwrap(short)
    last = _last_sentence(text)
    found = list(_DISPLAY.finditer(last or text))
    closing = _closing(last, max_chars)
    if closing is not None and (not found or closing[0] >= found[-1].end() - 1):
        return closing[1]  # "The value of $3^{105} \bmod 11$ is 2." -> 2
    if found:
        # "$x = 3$ and $x = 2$": a run of math joined only by separators is one answer
        run = [found[-1]]
        src = last or text
        for m in reversed(found[:-1]):
            if not re.fullmatch(r"\s*(?:,|and|or|, and|, or)?\s*", src[m.end():run[0].start()]):
                break
            run.insert(0, m)
        out = ", ".join(_unwrap(next(g for g in m.groups() if g is not None)) for m in run)
        if len(run) == 1 and "=" in out and not _VAR_EQ.match(out) and _prose_words(src):
            out = out.rsplit("=", 1)[1].strip()  # "is $8! - 1260 - 6720 = 120$." -> 120
        return out
    if closing is not None:
        return closing[1]
    if last and len(last) <= max_chars and "=" in last and re.search(r"[A-Za-z]{2,}\s", last):
        cand = _unwrap(_QUALIFIER.sub("", last.rsplit("=", 1)[1]))
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
               "text", "mathrm", "boxed", "and", "or", "gcd", "lcm", "max", "min", "oo", "cup", "in"}


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
        if "=" in cand and not _VAR_EQ.match(cand):  # (139+178)*2=317*2=634 -> 634
            cand = cand.rsplit("=", 1)[1].strip()
        if cand and len(_prose_words(cand)) <= 1 and not _YES_NO.match(last):
            return m.start(), cand
    return None


def _strip_period(s: str) -> str:
    return s[:-1].rstrip() if s.endswith(".") and not s.endswith("...") else s


def _unwrap(s: str) -> str:
    """Remove one layer of `$`, `\\[ \\]`, `\\( \\)`, `\\text{}` wrappers and a trailing period."""
    s = _strip_period(s.strip())
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

    `, or approximately ...` is dropped: an approximation is not an accepted answer.
    """
    alts = [strip_phrases(p) for p in _ALTERNATIVE.split(_APPROX.sub("", reference.strip()))]
    return [a for a in alts if a] or [reference.strip()]
