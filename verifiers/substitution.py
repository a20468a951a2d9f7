"""Reference-free verification for "solve" / "find all x" problems: plug the answer in.

The equation is taken from the problem's math (`$...$`, `\\[...\\]`) or from a plain-text run
around `=`. Every claimed value must satisfy every equation exactly; where sympy can solve the
(single-unknown) equation to a finite set, the claimed set must also be complete.

Substitution answers only one question: which values of the unknowns satisfy the equations. So it
gives a verdict only when that is what the problem asks: "Solve ...", or a question whose asked
quantity is one of the equation's unknowns ("Find x", "what is $x$ if ..."). "If x = 3, what is
x^2 + 1?" asks for something else: no verdict (`unparseable`, reason "unverifiable: ..."), never a
contradiction of the right answer. Likewise a completeness shortfall is a contradiction only when
the problem asks for all solutions, states no further condition (an inequality, "positive",
"smallest", ...), and, where only the real roots are claimed, says that complex ones count.
"""

from __future__ import annotations

import re
from typing import Any

import sympy

from verifiers.equivalence import Node, _same_value, _set_equal, canon
from verifiers.extract import extract_answer, strip_phrases
from verifiers.parse import Items, Rel, Seq, SetOf, parse
from verifiers.types import ParseError, Verdict, VerifierConfig

_MATH = re.compile(r"\\\[(.+?)\\\]|\$\$(.+?)\$\$|\\\((.+?)\\\)|\$([^$]+)\$", re.S)
_PLAIN = re.compile(r"[-+*/^()\w .,]*?=[-+*/^()\w .]*")
# What a problem asks for: the words after "what is", "find", ... up to the end of that clause.
_ASK = re.compile(r"\b(?:what (?:is|are|was|were|must be|should be|would be)|which (?:is|are)|find|compute|evaluate"
                  r"|determine|calculate|solve for|give|express|simplify|how (?:many|much))\b(?P<what>.*?)"
                  r"(?=[?;:]|\.(?:\s|$)|$)", re.I | re.S)
_SOLVE = re.compile(r"\bsolve\b", re.I)
# Where the asked quantity ends and its condition begins ("x if ...", "all x such that ...").
_CONDITION = re.compile(r"\s*(?:,(?![^()]*\))|\b(?:if|when|where|given|such that|so that|for which|satisfying|that satisf\w*"
                        r"|with|in|for|provided)\b).*$", re.I | re.S)
# Words that only say "the unknown(s)" around it.
_FILLER = re.compile(r"\b(?:the|all|possible|values?|of|real|complex|integers?|numbers?|solutions?|roots?)\b",
                     re.I)
# A problem that asks for every solution: only then is a missing one a contradiction.
_ASKS_ALL = re.compile(r"\b(?:solve|all|every|solutions|roots)\b", re.I)
# Conditions on the unknowns other than the equations: then sympy's solution set is not the answer's.
_EXTRA_CONDITION = re.compile(r"[<>≤≥≠]|\\(?:le|ge|leq|geq|lt|gt|ne|neq|in)(?![A-Za-z])|\b(?:positive|negative|"
                              r"non-?negative|non-?positive|non-?zero|smallest|largest|least|greatest|maximum|"
                              r"minimum|distinct|natural|prime|odd|even|interval|rational|irrational|digit)\b",
                              re.I)


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


def asked_unknowns(problem: str, syms: list[str], cfg: VerifierConfig) -> tuple[list[str] | None, str]:
    """The unknowns the problem asks for, when what it asks is only which values satisfy its
    equations; else (None, why). "Solve ..." asks for every unknown; "find x" / "what is $x$ if ..."
    for x; "what is x^2 + 1" or "find the sum of the roots" for something substitution cannot check."""
    asked: list[str] = []
    for m in _ASK.finditer(problem):
        what = _CONDITION.sub("", m.group("what").replace("$", " ")).strip(" ,:")
        if not what:
            continue
        shown = what[:60]
        what = _FILLER.sub(" ", what).strip(" ,")
        try:
            v = parse(what, cfg) if what else None
        except ParseError:
            return None, f"the problem asks for {shown!r}, not a value of an unknown of its equation"
        items = v.items if isinstance(v, (Items, Seq, SetOf)) else (v,)
        if not items or not all(isinstance(i, sympy.Symbol) and str(i) in syms for i in items):
            return None, f"the problem asks for {shown!r}, not the unknown its equation determines ({', '.join(syms)})"
        asked.extend(str(i) for i in items if str(i) not in asked)
    if asked:
        return asked, ""
    if _SOLVE.search(problem):
        return syms, ""
    return None, "the problem neither says what to solve for nor asks for an unknown of its equation"


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
    unknowns, why = asked_unknowns(problem, [str(s) for s in syms], cfg)
    if unknowns is None:
        return Verdict("unparseable", f"unverifiable: {why}", mode, ans, shown_eqs)
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
    # the equation's own solution set is the answer only when nothing else restricts the unknown
    extra = _EXTRA_CONDITION.search(_MATH.sub(lambda m: " = " if "=" in m.group() and not
                                              _EXTRA_CONDITION.search(m.group()) else m.group(), problem))
    unsure = f"the problem adds {extra.group()!r}" if extra else None
    if unsure is None and not _ASKS_ALL.search(problem):
        unsure = "the problem asks for a value, not for all of them"
    if not isinstance(sols, sympy.FiniteSet):
        if unsure:
            return Verdict("unparseable", f"unverifiable: the solution set is infinite ({_short(sols)}) and {unsure}",
                           mode, ans, shown)
        return Verdict("not_equivalent", f"{len(claims)} value(s) claimed but the solution set is infinite: {sols}",
                       mode, ans, shown)
    o = _set_equal(tuple(Node("expr", c[unknowns[0]]) for c in claims), tuple(Node("expr", s) for s in sols), cfg)
    if o.equal:
        return Verdict("equivalent", ok + f" and the set is complete ({len(sols)} solutions)", mode, ans, shown)
    if unsure:
        return Verdict("unparseable", f"unverifiable: satisfies the equation; sympy finds {sorted(map(str, sols))} "
                       f"but {unsure}", mode, ans, shown)
    real = tuple(Node("expr", v) for v in sols if v.is_real)
    if domain is sympy.S.Complexes and not re.search(r"\bcomplex\b", problem, re.I) and len(real) < len(sols) \
            and _set_equal(tuple(Node("expr", c[unknowns[0]]) for c in claims), real, cfg).equal:
        # "find x with x^3 = 8": 2 is the answer unless complex roots count, which the problem does not say
        return Verdict("unparseable", "unverifiable: every real solution is claimed; the problem does not say "
                       "whether complex ones count", mode, ans, shown)
    return Verdict("not_equivalent", f"satisfies but incomplete: sympy finds {sorted(map(str, sols))}", mode,
                   ans, shown)


def _short(v: Any) -> str:
    s = str(v)
    return s if len(s) <= 60 else s[:57] + "..."
