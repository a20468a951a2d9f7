"""One check, in this process: extract, parse, compare. The worker process runs these; call
`verifiers.check` instead, which adds the wall-clock and memory limits.
"""

from __future__ import annotations

import re
import time
from typing import Any, cast

import sympy

from verifiers.equivalence import Node, Outcome, canon, compare
from verifiers.extract import answer_in_output, extract_answer, reference_alternatives, strip_phrases
from verifiers.parse import parse
from verifiers.quantities import Quantity, read_quantity
from verifiers.types import MODES, Answered, Mode, ParseError, Verdict, VerifierConfig, input_refusal

_YES_NO = re.compile(r"^\W*(yes|no)\b(?P<rest>.*)$", re.S)
# Words that turn a yes/no into a hedge or a non-answer ("no idea", "yes, maybe").
_HEDGES = re.compile(r"\b(?:not sure|unsure|maybe|perhaps|possibly|idea|clue|comment|answer|unknown|unclear|depends"
                     r"|know|can't say|cannot say|cannot tell|can't tell)\b")


def normalize_text(s: str) -> str:
    """Lower-case words only: `\\text{}` unwrapped, `$`, punctuation and articles dropped."""
    s = re.sub(r"\\(?:text|textbf|mathrm|mbox)\s*\{([^{}]*)\}", r"\1", s)
    s = s.lower().replace("\\", " ")
    s = re.sub(r"[$.,;:!?\"'`(){}\[\]]", " ", s)
    words = [w for w in s.split() if w not in ("a", "an", "the")]
    return " ".join(words)


def _same_text(s: object) -> str:
    # case counts: X and x, E and e are different symbols (prose still matches case-free in text_equal)
    return " ".join(s.split()).rstrip(".") if isinstance(s, str) else ""


def text_equal(cand: str, ref: str) -> Outcome:
    """Normalized match; a bare Yes/No reference also matches an answer that *starts* with that word."""
    c, r = normalize_text(cand), normalize_text(ref)
    if not r:
        return Outcome(False, "empty reference")
    if c == r:
        return Outcome(True, "normalized text match")
    if r in ("yes", "no"):
        m = _YES_NO.match(" ".join(cand.lower().split()))
        other = re.compile(r"\bno\b" if r == "yes" else r"\byes\b")
        if m and m.group(1) == r and not _HEDGES.search(m.group("rest")) and not other.search(m.group("rest")):
            # "No, because ..." answers "No"; "no idea", "yes or no", "Yes, and no" do not
            return Outcome(True, f"answer starts with {r!r}")
    return Outcome(False, f"text {c[:40]!r} differs from {r[:40]!r}")


def _symbol_text(s: str) -> str:
    """A choice letter or symbol as written: `\\text{}`, `$`, brackets and spaces dropped; case and primes kept."""
    s = re.sub(r"\\(?:text|textbf|mathrm|mbox)\s*\{([^{}]*)\}", r"\1", s)
    return re.sub(r"[\s$(){}\[\].]", "", s)


def _parse_answer(s: str, cfg: VerifierConfig) -> tuple[Any, Quantity]:
    """Parse an extracted answer; a unit or percent word is split off first (`144 ways` -> 144)."""
    q = read_quantity(s)
    if q.math != s:
        try:
            value = parse(q.math, cfg)
        except ParseError as err:
            if err.refused:
                raise
        else:
            if q.decimal_comma or isinstance(value, sympy.Basic) and not value.free_symbols:
                return value, q  # only a number carries a unit
    return parse(s, cfg), Quantity(s, percent=q.percent)


def _is_number(v: Any) -> bool:
    return isinstance(v, sympy.Basic) and not isinstance(v, sympy.Set) and not v.free_symbols


def _quantity_gate(pc: Any, qc: Quantity, pr: Any, qr: Quantity) -> str | None:
    """Why two quantities cannot be equal whatever their numbers (None when they may be)."""
    if qc.unit and qr.unit and qc.unit != qr.unit:
        return f"unit {qc.unit!r} against {qr.unit!r}"
    for q, other in ((qc, pr), (qr, pc)):
        if q.decimal_comma and not _is_number(other):
            return "refused: a leading 0, followed by digits is a decimal comma or a list; ambiguous here"
    return None


def _single_expr(n: Node) -> Any:
    if n.kind == "assign" and len(n.value) == 1:
        return _single_expr(n.value[0][1])
    if n.kind == "set" and len(n.value) == 1:
        return _single_expr(n.value[0])
    return n.value if n.kind == "expr" else None


def _mode_gate(value: Any, mode: str, side: str, raw: str) -> str | None:
    """Why `value` is not of the kind `mode` asks for (None when it is)."""
    if mode not in ("integer", "aime", "number", "expression"):
        return None
    e = _single_expr(canon(value))
    if e is None:
        return f"{side} is not a single {'expression' if mode == 'expression' else 'number'}"
    if mode == "expression":
        return None
    if e.free_symbols:
        return f"{side} {e} is not a number"
    if mode in ("integer", "aime") and not e.is_Integer:
        return f"{side} {e} is not an integer"
    if mode == "aime" and not (0 <= e <= 999 and re.fullmatch(r"\s*\d{1,3}\s*", raw)):
        return f"{side} {raw.strip()!r} is not an AIME answer (000-999)"
    return None


def check_local(candidate: str, reference: str, mode: str = "auto", config: VerifierConfig | None = None) -> Verdict:
    """`verifiers.check` without the process boundary (no timeout or memory limit). Never raises."""
    cfg = config or VerifierConfig()
    t0 = time.perf_counter()
    try:
        v = _check(candidate, reference, mode, cfg)
    except (Exception, RecursionError, MemoryError) as err:  # a check never raises into the flow
        v = Verdict("unparseable", f"internal error: {type(err).__name__}: {str(err)[:120]}", mode)
    return Verdict(v.status, v.reason, mode, v.candidate, v.reference, v.candidate_parsed, v.reference_parsed,
                   time.perf_counter() - t0)


def _check(candidate: str, reference: str, mode: str, cfg: VerifierConfig) -> Verdict:
    if mode not in MODES:
        return Verdict("unparseable", f"unknown mode {mode!r}; one of {', '.join(MODES)}", mode)
    known = cast(Mode, mode)   # one of MODES: the worker hands in what a request said
    for name, s in (("candidate", candidate), ("reference", reference)):
        if not isinstance(s, str):
            return Verdict("unparseable", f"{name} must be a string, got {type(s).__name__}", mode)
        if len(s) > cfg.max_input_chars:
            return Verdict("unparseable", f"refused: {name} of {len(s)} chars exceeds {cfg.max_input_chars}", mode)
    whole = _same_text(candidate)
    if whole and whole == _same_text(reference) and mode in ("auto", "text"):
        # identical up to case, spacing and a final period; brackets and signs still count
        return Verdict("equivalent", "identical text", mode, candidate, reference)
    cand = extract_answer(candidate, last_number=cfg.last_number_fallback, max_chars=cfg.max_answer_chars)
    if cand is None:
        return Verdict("unparseable", "no answer found in candidate text", mode)
    cand = strip_phrases(cand)
    refs = reference_alternatives(reference)
    if mode == "text":
        for r in refs:
            o = text_equal(cand, r)
            if o.equal:
                return Verdict("equivalent", o.reason, mode, cand, r)
        return Verdict("not_equivalent", o.reason, mode, cand, refs[0])
    pc: Any = None
    qc = Quantity(cand)
    try:
        pc, qc = _parse_answer(cand, cfg)
        cerr = None
    except ParseError as err:
        cerr = err
    results: list[Verdict] = []
    for r in refs:
        pr: Any = None
        qr = Quantity(r)
        try:
            pr, qr = _parse_answer(r, cfg)
            rerr = None
        except ParseError as err:
            rerr = err
        shown = (str(pc)[:200] if pc is not None else None, str(pr)[:200] if pr is not None else None)
        if pc is not None and pr is not None:
            why = _mode_gate(pr, mode, "reference", r) or _mode_gate(pc, mode, "candidate", cand)
            if why:
                results.append(Verdict("unparseable" if why.startswith("reference") else "not_equivalent",
                                       why, mode, cand, r, *shown))
                continue
            why = _quantity_gate(pc, qc, pr, qr)
            if why:
                results.append(Verdict("unparseable" if why.startswith("refused") else "not_equivalent",
                                       why, mode, cand, r, *shown))
                continue
            o = compare(candidate=pc, reference=pr, config=cfg, mode=known)
            if o.equal:
                return Verdict("equivalent", o.reason, mode, cand, r, *shown)
            if qr.percent and not qc.percent and _is_number(pc) and _is_number(pr) and mode in ("auto", "number"):
                # a percentage reference p% also accepts the bare number p ("28" for "28%")
                o2 = compare(candidate=pc, reference=pr * 100, config=cfg, mode=known)
                if o2.equal:
                    return Verdict("equivalent", f"the percentage's number: {o2.reason}", mode, cand, r, *shown)
            results.append(Verdict("not_equivalent", o.reason if o.equal is False else f"not shown equal ({o.reason})",
                                   mode, cand, r, *shown))
            continue
        t = text_equal(cand, r)
        if t.equal and mode == "auto" and (pr is None or isinstance(pr, sympy.Symbol)
                                           and _symbol_text(cand) == _symbol_text(r)):
            # prose, or a choice letter ("(C)" for "C", case and primes kept: E' is not E, X is not x);
            # unparsed math is never accepted by its words alone
            return Verdict("equivalent", t.reason, mode, cand, r, *shown)
        if pr is None and mode == "auto":
            # the reference is prose: text decides between two texts, and a Yes/No reference is answered
            # only by that word; other text against mathematics ("12" for "twelve", "1/3" for
            # "0.333...") gets no verdict, not a contradiction
            refused = rerr is not None and rerr.refused
            unread = pc is not None and normalize_text(r) not in ("yes", "no")
            results.append(Verdict("unparseable" if refused or unread else "not_equivalent",
                                   f"reference is text ({rerr}); {t.reason}", mode, cand, r, *shown))
        elif pr is None:
            results.append(Verdict("unparseable", f"reference unparseable: {rerr}", mode, cand, r, *shown))
        else:
            tag = "refused: " if cerr is not None and cerr.refused else ""
            results.append(Verdict("unparseable", f"{tag}candidate unparseable: {cerr}", mode, cand, r,
                                   *shown))
    results.sort(key=lambda v: v.status != "not_equivalent")
    return results[0]


def substitution_local(problem: str, candidate: str, config: VerifierConfig | None = None) -> Verdict:
    """`verifiers.check_by_substitution` in this process. Never raises."""
    from verifiers.substitution import check_substitution

    cfg = config or VerifierConfig()
    t0 = time.perf_counter()
    try:
        v = check_substitution(problem, candidate, cfg)
    except (Exception, RecursionError, MemoryError) as err:
        v = Verdict("unparseable", f"internal error: {type(err).__name__}: {str(err)[:120]}", "substitution")
    return Verdict(v.status, v.reason, v.mode, v.candidate, v.reference, v.candidate_parsed, v.reference_parsed,
                   time.perf_counter() - t0)


def output_local(text: str, form: str, reference: str, problem: str,
                 config: VerifierConfig | None = None, markers: str = "final-line") -> Answered:
    """`verifiers.check_output` in this process: extract the answer `text` states (`answer_in_output`),
    then check it against `reference`, or by substitution into `problem` when the reference is
    blank. Never raises."""
    cfg = config or VerifierConfig()
    t0 = time.perf_counter()
    try:
        answer = answer_in_output(text, form, markers)
    except (Exception, RecursionError, MemoryError) as err:
        return Answered(None, Verdict("unparseable", f"internal error: {type(err).__name__}: {str(err)[:120]}",
                                      elapsed_s=time.perf_counter() - t0))
    if answer is None or not answer.strip():
        return Answered(answer, Verdict("unparseable", "no answer in the output", elapsed_s=time.perf_counter() - t0))
    if reference.strip():
        return Answered(answer, check_local(answer, reference, "auto", config=cfg))
    why = input_refusal(answer, problem, cfg)
    if why:
        return Answered(answer, Verdict("unparseable", why, "substitution"))
    return Answered(answer, substitution_local(problem, answer, config=cfg))


__all__ = ["check_local", "substitution_local", "output_local", "normalize_text", "text_equal", "sympy"]
