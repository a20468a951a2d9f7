"""Reference-free verification for "solve" / "find all x" problems: plug the answer in.

The equation is taken from the problem's math (`$...$`, `\\[...\\]`) or from a plain-text run
around `=`. Every claimed value must satisfy every equation exactly; where sympy can solve the
(single-unknown) equation to a finite set, the claimed set must also be complete.
"""

from __future__ import annotations

import re
from typing import Any

import sympy

from verifiers.equivalence import Node, _same_value, _set_equal, canon
from verifiers.extract import extract_answer, strip_phrases
from verifiers.parse import Rel, parse
from verifiers.types import ParseError, Verdict, VerifierConfig

_MATH = re.compile(r"\\\[(.+?)\\\]|\$\$(.+?)\$\$|\\\((.+?)\\\)|\$([^$]+)\$", re.S)
_PLAIN = re.compile(r"[-+*/^()\w .,]*?=[-+*/^()\w .]*")
_TARGET = re.compile(r"(?:find all|solve for|all (?:real |integer |complex )?(?:values of|numbers|solutions)?)"
                     r"\s*\$?([a-z])\b", re.I)


def _equations(text: str, cfg: VerifierConfig) -> list[Rel]:
    found: list[Rel] = []
    chunks = [next(g for g in m.groups() if g is not None) for m in _MATH.finditer(text)]
    if not chunks:
        for m in _PLAIN.finditer(text):
            words = m.group().strip(" .,").split()
            # drop leading/trailing prose until the run parses ("Solve x^2 - 5x + 6 = 0 for x")
            for i in range(len(words)):
                for j in range(len(words), i, -1):
                    piece = " ".join(words[i:j])
                    if "=" in piece:
                        chunks.append(piece)
    for chunk in chunks:
        try:
            v = parse(chunk, cfg)
        except ParseError:
            continue
        rels = [v] if isinstance(v, Rel) else []
        for r in rels:
            if r.op == "=" and isinstance(r.lhs, sympy.Basic) and isinstance(r.rhs, sympy.Basic) \
                    and (r.lhs - r.rhs).free_symbols:
                found.append(r)
        if found and not _MATH.search(text):
            break  # plain text: the longest parsing run is the equation
    return found


def _assignments(node: Node, unknowns: list[str]) -> list[dict[str, Any]] | None:
    def value(n: Node) -> Any:
        return n.value if n.kind == "expr" else None
    if node.kind == "assign":
        d = {k: value(v) for k, v in node.value}
        return [d] if all(v is not None for v in d.values()) else None
    if node.kind == "expr" and len(unknowns) == 1:
        return [{unknowns[0]: node.value}]
    if node.kind == "set":
        out: list[dict[str, Any]] = []
        for el in node.value:
            if node.var:
                el = Node("assign", ((node.var, el),))
            sub = _assignments(el, unknowns)
            if sub is None:
                return None
            out.extend(sub)
        return out
    return None


def check_substitution(problem: str, candidate: str, cfg: VerifierConfig) -> Verdict:
    """See `verifiers.check_by_substitution`."""
    mode = "substitution"
    eqs = _equations(problem, cfg)
    if not eqs:
        return Verdict("unparseable", "no parseable equation in the problem", mode)
    ans = extract_answer(candidate, last_number=cfg.last_number_fallback, max_chars=cfg.max_answer_chars)
    if ans is None:
        return Verdict("unparseable", "no answer found in candidate text", mode)
    ans = strip_phrases(ans)
    shown_eqs = "; ".join(f"{e.lhs} = {e.rhs}" for e in eqs)[:200]
    syms = sorted({s for e in eqs for s in (e.lhs - e.rhs).free_symbols}, key=str)
    target = _TARGET.search(problem)
    unknowns = [target.group(1)] if target and any(str(s) == target.group(1) for s in syms) else \
        [str(s) for s in syms]
    try:
        node = canon(parse(ans, cfg))
    except ParseError as err:
        return Verdict("unparseable", f"candidate unparseable: {err}", mode, ans, shown_eqs)
    claims = _assignments(node, unknowns)
    if not claims:
        return Verdict("unparseable", "candidate is not a value or assignment of the unknowns", mode, ans, shown_eqs)
    for claim in claims:
        sub = {sympy.Symbol(k): v for k, v in claim.items()}
        if any(str(s) not in claim for s in syms if str(s) in unknowns):
            return Verdict("not_equivalent", f"{claim} does not give every unknown {unknowns}", mode, ans, shown_eqs)
        for e in eqs:
            lhs, rhs = e.lhs.xreplace(sub), e.rhs.xreplace(sub)
            if lhs.free_symbols or rhs.free_symbols:
                return Verdict("unparseable", f"{e.lhs} = {e.rhs} keeps free symbols after substitution", mode,
                               ans, shown_eqs)
            if not _same_value(lhs, rhs, None):
                return Verdict("not_equivalent", f"{_fmt(claim)} gives {lhs} != {rhs}", mode, ans, shown_eqs)
    return _completeness(problem, eqs, unknowns, claims, cfg, ans, shown_eqs)


def _fmt(claim: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in claim.items())


def _completeness(problem: str, eqs: list[Rel], unknowns: list[str], claims: list[dict[str, Any]],
                  cfg: VerifierConfig, ans: str, shown: str) -> Verdict:
    mode = "substitution"
    ok = f"all {len(claims)} claimed solution(s) satisfy the equation"
    if len(unknowns) != 1 or len(eqs) != 1:
        return Verdict("equivalent", ok + "; completeness not checked (system)", mode, ans, shown)
    x = sympy.Symbol(unknowns[0])
    domain = sympy.S.Reals if re.search(r"\breal\b", problem, re.I) else sympy.S.Complexes
    try:
        sols = sympy.solveset(eqs[0].lhs - eqs[0].rhs, x, domain)
    except (TypeError, ValueError, NotImplementedError, ArithmeticError):
        return Verdict("equivalent", ok + "; completeness not checked (sympy cannot solve)", mode, ans, shown)
    if re.search(r"\b(?:integer|whole number)s?\b", problem, re.I) and isinstance(sols, sympy.FiniteSet):
        sols = sympy.FiniteSet(*[s for s in sols if s.is_integer])
    if isinstance(sols, sympy.ConditionSet) or (sols.free_symbols - {x}):
        return Verdict("equivalent", ok + "; completeness not checked (sympy cannot solve)", mode, ans, shown)
    if not isinstance(sols, sympy.FiniteSet):
        return Verdict("not_equivalent", f"{len(claims)} value(s) claimed but the solution set is infinite: {sols}",
                       mode, ans, shown)
    o = _set_equal(tuple(Node("expr", c[unknowns[0]]) for c in claims), tuple(Node("expr", s) for s in sols), cfg)
    if o.equal:
        return Verdict("equivalent", ok + f" and the set is complete ({len(sols)} solutions)", mode, ans, shown)
    return Verdict("not_equivalent", f"satisfies but incomplete: sympy finds {sorted(map(str, sols))}", mode,
                   ans, shown)
