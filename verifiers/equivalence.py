"""Equivalence of two parsed answers: exact numbers, symbolic expressions, sets, tuples,
intervals, equations, assignments and matrices.

Parsed values (see `parse`) are first put in a canonical `Node`; `compare` then dispatches on the
two kinds. Numbers compare exactly unless a relative tolerance is configured (0.333 is not 1/3);
symbolic expressions compare by deterministic randomized probes (seeded with SHA-256 of the two
expressions, never Python's salted `hash`) backed by `simplify`; a disagreement at any probe point
is final. An undecided comparison is *not* an acceptance.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from itertools import product
from typing import Any

import sympy

from verifiers.parse import Items, Rel, Seq, SetOf, as_expr
from verifiers.types import Mode, ParseError, VerifierConfig

# Combinatorics answers use these as integer parameters; probing them at integers keeps
# floor(n/2), n!, C(n, 2) meaningful.
_INTEGER_NAMES = {"n", "m", "k", "r", "i", "j", "N", "M", "K", "l", "t", "s", "p", "q"}
_DIGITS = 60  # working precision of numeric comparison
_AGREE = sympy.Float("1e-40", _DIGITS)  # relative: two values this close are "the same number"


@dataclass(frozen=True)
class Node:
    """Canonical answer: kind in expr|set|tuple|seq|assign|rel|matrix|interval."""

    kind: str
    value: Any
    var: str | None = None  # for a set written "n = 2, 3, 4": the variable it lists values of
    written: tuple[Node, ...] | None = None  # a bare list's items in the order written ("-5, 14/3")


@dataclass(frozen=True)
class Outcome:
    equal: bool | None  # None: undecided (reported as not equivalent)
    reason: str


# --- canonical form -------------------------------------------------------------------------------


def _pm_expand(e: Any) -> list[Any]:
    pms = sorted((s for s in e.free_symbols if str(s).startswith("_pm")), key=str)
    if not pms:
        return [e]
    out = []
    for signs in product((sympy.S.One, sympy.S.NegativeOne), repeat=len(pms)):
        out.append(e.xreplace(dict(zip(pms, signs, strict=True))))
    return out


def _is_var(e: Any) -> bool:
    return isinstance(e, sympy.Symbol) and not str(e).startswith("_pm")


def canon(v: Any) -> Node:
    """Parsed value -> `Node`."""
    if isinstance(v, sympy.MatrixBase):
        return Node("matrix", v)
    if isinstance(v, (sympy.Interval, sympy.Union)):
        return Node("interval", v)
    if isinstance(v, sympy.Basic):
        alts = _pm_expand(v)
        return Node("expr", v) if len(alts) == 1 else Node("set", tuple(Node("expr", a) for a in alts))
    if isinstance(v, Rel):
        if v.op == "in" and _is_var(v.lhs):
            return _with_var(canon(v.rhs), str(v.lhs))
        if v.op == "=" and isinstance(v.lhs, Seq) and isinstance(v.rhs, Seq) and v.lhs.left == "(" \
                and len(v.lhs.items) == len(v.rhs.items) and all(_is_var(i) for i in v.lhs.items):
            # (x, y) = (0, 0): the variables keep the order they are written in
            return Node("assign", tuple((str(k), canon(val)) for k, val in
                                        zip(v.lhs.items, v.rhs.items, strict=True)))
        if v.op == "=" and _is_var(v.lhs) and not (isinstance(v.rhs, sympy.Basic) and v.rhs.has(v.lhs)):
            return Node("assign", ((str(v.lhs), canon(v.rhs)),))
        return Node("rel", v)
    if isinstance(v, SetOf):
        return _items(v.items, ordered=False)
    if isinstance(v, Items):
        return _items(v.items, ordered=False)
    if isinstance(v, Seq):
        nodes = [canon(i) for i in v.items]
        if v.left == "(" and v.right == ")" and all(n.kind == "assign" for n in nodes):
            merged = dict(kv for n in nodes for kv in n.value)  # (x=1, y=2)
            if len(merged) == sum(len(n.value) for n in nodes):
                return Node("assign", tuple(merged.items()))
        return Node("seq", v)
    raise ParseError(f"cannot compare {type(v).__name__}")


def _with_var(n: Node, var: str) -> Node:
    return Node(n.kind, n.value, var) if n.kind in ("set", "seq", "interval") else n


def _flatten(nodes: list[Node]) -> list[Node]:
    out: list[Node] = []
    for n in nodes:
        out.extend(n.value if n.kind == "set" and n.var is None else [n])
    return out


def _items(items: tuple[Any, ...], ordered: bool) -> Node:
    nodes = [canon(i) for i in items]
    first = nodes[0] if nodes else None
    # "n = 2, 3, 4": an assignment followed by bare values lists values of that variable
    if first is not None and first.kind == "assign" and len(first.value) == 1 and len(nodes) > 1 \
            and all(n.kind == "expr" or n.kind == "set" and n.var is None for n in nodes[1:]):
        var, val = first.value[0]
        return Node("set", tuple(_flatten([val, *nodes[1:]])), var)
    if nodes and all(n.kind == "assign" for n in nodes):
        groups: list[dict[str, Node]] = [{}]
        for n in nodes:
            for var, val in n.value:
                if var in groups[-1]:
                    groups.append({})
                groups[-1][var] = val
        names = {v for g in groups for v in g}
        if len(names) == 1:  # x = 1 or x = 2
            var = next(iter(names))
            return Node("set", tuple(_flatten([g[var] for g in groups])), var)
        assigns = [Node("assign", tuple(g.items())) for g in groups]
        return assigns[0] if len(assigns) == 1 else Node("set", tuple(assigns))
    return Node("set", tuple(_flatten(nodes)), written=tuple(nodes))


# --- comparison -----------------------------------------------------------------------------------


def compare(*, candidate: Any, reference: Any, config: VerifierConfig, mode: Mode = "auto") -> Outcome:
    """Compare two parsed values under `mode`; never raises for sympy trouble (undecided instead).

    Keyword-only: the candidate and the reference are not symmetric (a set reference accepts a
    tuple candidate, a factorization reference refuses an expanded one), so a swap must not pass silently.
    """
    cfg = config
    c, r = canon(candidate), canon(reference)
    if mode == "set":
        c, r = _as_set(c), _as_set(r)
    elif mode == "interval":
        ci, ri = _as_interval(c), _as_interval(r)
        if ci is None or ri is None:
            return Outcome(None, "not an interval")
        c, r = ci, ri
    elif mode == "equation" and (c.kind not in ("rel", "assign") or r.kind not in ("rel", "assign")):
        return Outcome(None, "not an equation")
    return _cmp(c, r, cfg)


def _as_set(n: Node) -> Node:
    if n.kind == "seq":
        return Node("set", tuple(canon(i) for i in n.value.items))
    if n.kind in ("expr", "assign") and n.kind != "set":
        return Node("set", (n,)) if n.kind != "assign" or len(n.value) != 1 else _as_set(n.value[0][1])
    return n


def _as_interval(n: Node) -> Node | None:
    if n.kind in ("interval", "ival"):
        return n
    if n.kind == "seq" and len(n.value.items) == 2:
        s: Seq = n.value
        try:
            lo, hi = as_expr(s.items[0]), as_expr(s.items[1])
        except ParseError:
            return None
        return Node("ival", (lo, hi, s.left, s.right))
    return None


def _cmp(c: Node, r: Node, cfg: VerifierConfig) -> Outcome:
    if {c.kind, r.kind} == {"rel", "assign"}:
        c, r = _as_rel(c), _as_rel(r)
    # x = 3 against 3 (either way round)
    if c.kind == "assign" and r.kind != "assign" and len(c.value) == 1:
        return _cmp(_with_var(c.value[0][1], c.value[0][0]), r, cfg)
    if r.kind == "assign" and c.kind != "assign" and len(r.value) == 1:
        return _cmp(c, _with_var(r.value[0][1], r.value[0][0]), cfg)
    # a one-element set against a single value
    if c.kind == "set" and r.kind != "set" and len(c.value) == 1:
        return _cmp(c.value[0], r, cfg)
    if r.kind == "set" and c.kind != "set" and len(r.value) == 1:
        return _cmp(c, r.value[0], cfg)
    if c.kind == "expr" and r.kind == "expr":
        if _factors(r.value) >= 2 and _factors(c.value) < 2 and not _complex_form(c.value, r.value):
            # "factor x^4+x^2+1": the expanded polynomial restates the question, it does not answer it
            return Outcome(False, "the reference is a factorization; an unfactored form does not answer it")
        return expr_equal(c.value, r.value, cfg)
    if {c.kind, r.kind} == {"assign", "set"}:
        a, listed = (c, r) if c.kind == "assign" else (r, c)
        if listed.written is not None and len(a.value) > 1:
            # x = -5, p = 14/3 against the bare list -5, 14/3: the values in the order written
            if len(listed.written) != len(a.value):
                return Outcome(False, f"{len(a.value)} assigned variables against {len(listed.written)} values")
            return _all_equal([(val, item) for (_, val), item in zip(a.value, listed.written, strict=True)], cfg,
                              f"values of ({', '.join(k for k, _ in a.value)}) in the order written")
    if {c.kind, r.kind} == {"assign", "seq"}:
        return _assign_tuple_equal(c if c.kind == "assign" else r, r if c.kind == "assign" else c, cfg)
    if c.kind == "set" and r.kind == "seq" and r.value.left == "(":
        return Outcome(False, "an unordered list or set against an ordered tuple")
    if c.kind == "seq" and r.kind == "set" and c.value.left == "(" and len(c.value.items) == 2 \
            and all(n.kind == "expr" for n in r.value):
        return Outcome(False, f"the pair {c.value.left}a, b{c.value.right} also reads as an interval, not a set")
    if c.kind == "set" and r.kind == "set" or c.kind == "seq" and r.kind == "set" and c.value.left == "(":
        # a tuple answer counts as a set only when the reference is a set (its order cannot matter)
        if c.var and r.var and c.var != r.var:
            return Outcome(False, f"values of {c.var} against values of {r.var}")
        return _set_equal(_as_set(c).value, _as_set(r).value, cfg)
    if c.kind == "rel" and r.kind in ("interval", "seq") or r.kind == "rel" and c.kind in ("interval", "seq"):
        c, r = _rel_as_interval(c), _rel_as_interval(r)
    if c.kind == "assign" and r.kind == "assign":
        cv, rv = dict(c.value), dict(r.value)
        if set(cv) != set(rv):
            return Outcome(False, f"variables {sorted(cv)} against {sorted(rv)}")
        return _all_equal([(cv[k], rv[k]) for k in sorted(cv)], cfg, f"assignment of {sorted(cv)}")
    if c.kind == "seq" and r.kind == "seq":
        return _seq_equal(c.value, r.value, cfg)
    if "interval" in (c.kind, r.kind) or "ival" in (c.kind, r.kind):
        return _interval_equal(c, r, cfg)
    if c.kind == "rel" and r.kind == "rel":
        return rel_equal(c.value, r.value, cfg)
    if c.kind == "matrix" or r.kind == "matrix":
        return _matrix_equal(c, r, cfg)
    return Outcome(False, f"a {c.kind} against a {r.kind}")


def _factors(e: Any) -> int:
    """Non-constant sums among the factors of a product, with multiplicity: (x+1)^2 (x-y) -> 3."""
    if isinstance(e, sympy.Mul):
        return sum(_factors(a) for a in e.args)
    if isinstance(e, sympy.Pow) and e.exp.is_Integer and e.exp > 0:
        return min(int(e.exp), 8) * _factors(e.base)
    return 1 if isinstance(e, sympy.Add) and e.free_symbols else 0


def _assign_tuple_equal(a: Node, t: Node, cfg: VerifierConfig) -> Outcome:
    """`(p, q) = (3, 2)` or `p = 3, q = 2` against the tuple `(3, 2)`: values in the written order."""
    seq: Seq = t.value
    if seq.left != "(" or seq.right != ")":
        return Outcome(False, f"an assignment against {seq.left}...{seq.right}")
    if len(a.value) != len(seq.items):
        return Outcome(False, f"{len(a.value)} assigned variables against {len(seq.items)} components")
    return _all_equal([(val, canon(item)) for (_, val), item in zip(a.value, seq.items, strict=True)], cfg,
                      f"values of ({', '.join(k for k, _ in a.value)}) in order")


def _rel_as_interval(n: Node) -> Node:
    """`x < 2` -> x in (-oo, 2); other relations unchanged."""
    if n.kind != "rel" or n.value.op not in ("<", "<=", ">", ">="):
        return n
    rel: Rel = n.value
    op, var, end = (rel.op, rel.lhs, rel.rhs) if _is_var(rel.lhs) else (_FLIP_SIDES[rel.op], rel.rhs, rel.lhs)
    if not _is_var(var) or not isinstance(end, sympy.Basic) or end.free_symbols or not end.is_extended_real:
        return n
    if op in ("<", "<="):
        return Node("interval", sympy.Interval(-sympy.oo, end, True, op == "<"), str(var))
    return Node("interval", sympy.Interval(end, sympy.oo, op == ">", True), str(var))


_FLIP_SIDES = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _as_rel(n: Node) -> Node:
    """`y = 2x + 1` back to a relation, to compare with `2x - y + 1 = 0`."""
    if n.kind == "assign" and len(n.value) == 1 and n.value[0][1].kind == "expr":
        return Node("rel", Rel("=", sympy.Symbol(n.value[0][0]), n.value[0][1].value))
    return n


def _all_equal(pairs: list[tuple[Node, Node]], cfg: VerifierConfig, what: str) -> Outcome:
    for a, b in pairs:
        o = _cmp(a, b, cfg)
        if not o.equal:
            return Outcome(o.equal, f"{what}: {o.reason}")
    return Outcome(True, f"{what} equal elementwise")


def _seq_equal(a: Seq, b: Seq, cfg: VerifierConfig) -> Outcome:
    if (a.left, a.right) != (b.left, b.right):
        return Outcome(False, f"brackets {a.left}{a.right} against {b.left}{b.right} (open/closed ends differ)")
    if len(a.items) != len(b.items):
        return Outcome(False, f"{len(a.items)} components against {len(b.items)}")
    return _all_equal([(canon(x), canon(y)) for x, y in zip(a.items, b.items, strict=True)], cfg, "ordered tuple")


def _interval_equal(c: Node, r: Node, cfg: VerifierConfig) -> Outcome:
    ci, ri = _as_interval(c), _as_interval(r)
    if ci is None or ri is None:
        return Outcome(False, f"a {c.kind} against a {r.kind}")
    if c.var and r.var and c.var != r.var:
        return Outcome(False, f"values of {c.var} against values of {r.var}")
    if ci.kind == "interval" or ri.kind == "interval":
        a, b = _sympy_interval(ci), _sympy_interval(ri)
        if a is None or b is None:
            return Outcome(False, f"a {c.kind} against a {r.kind}")
        try:
            same = a == b or (sympy.Complement(a, b) == sympy.S.EmptySet
                              and sympy.Complement(b, a) == sympy.S.EmptySet)
        except (TypeError, ValueError, ArithmeticError, RecursionError):
            return Outcome(None, "could not compare the sets")
        return Outcome(bool(same), "same set" if same else f"{_short(a)} against {_short(b)}")
    lo1, hi1, l1, r1 = ci.value
    lo2, hi2, l2, r2 = ri.value
    if (l1, r1) != (l2, r2):
        return Outcome(False, f"ends {l1}{r1} against {l2}{r2} (open/closed differ)")
    return _all_equal([(Node("expr", lo1), Node("expr", lo2)), (Node("expr", hi1), Node("expr", hi2))], cfg,
                      "interval ends")


def _sympy_interval(n: Node) -> Any:
    if n.kind == "interval":
        return n.value
    lo, hi, left, right = n.value
    if lo.free_symbols or hi.free_symbols:
        return None
    return sympy.Interval(lo, hi, left == "(", right == ")")


def _matrix_equal(c: Node, r: Node, cfg: VerifierConfig) -> Outcome:
    def as_matrix(n: Node) -> Any:
        if n.kind == "matrix":
            return n.value
        if n.kind == "seq" and all(isinstance(i, Seq) for i in n.value.items):
            try:
                return sympy.ImmutableMatrix([list(i.items) for i in n.value.items])
            except (ValueError, TypeError):
                return None
        return None
    a, b = as_matrix(c), as_matrix(r)
    if a is None or b is None:
        return Outcome(False, f"a {c.kind} against a {r.kind}")
    if a.shape != b.shape:
        return Outcome(False, f"shape {a.shape} against {b.shape}")
    return _all_equal([(Node("expr", x), Node("expr", y)) for x, y in zip(a, b, strict=True)], cfg, "matrix")


def _set_equal(a: tuple[Node, ...], b: tuple[Node, ...], cfg: VerifierConfig) -> Outcome:
    if max(len(a), len(b)) > cfg.max_set_size:
        return Outcome(None, f"set larger than {cfg.max_set_size}")
    ua, ub = _dedup(a, cfg), _dedup(b, cfg)
    if len(ua) != len(ub):
        return Outcome(False, f"{len(ua)} distinct elements against {len(ub)}")
    unmatched = list(ub)
    for x in ua:
        hit = next((y for y in unmatched if _cmp(x, y, cfg).equal), None)
        if hit is None:
            return Outcome(False, f"element {_show(x)} has no match")
        unmatched.remove(hit)
    return Outcome(True, f"same {len(ua)} elements (order-free)")


def _dedup(nodes: tuple[Node, ...], cfg: VerifierConfig) -> list[Node]:
    out: list[Node] = []
    for n in nodes:
        if not any(_cmp(n, m, cfg).equal for m in out):
            out.append(n)
    return out


def _show(n: Node) -> str:
    s = str(n.value) if n.kind == "expr" else f"{n.kind}"
    return s if len(s) < 40 else s[:37] + "..."


# --- numbers and expressions ----------------------------------------------------------------------


def _num(e: Any) -> Any:
    """Evaluate to a sympy number at working precision, or None if not finite."""
    try:
        v = sympy.N(e, _DIGITS)
    except (TypeError, ValueError, ArithmeticError, RecursionError):
        return None
    if not v.is_number or v.has(sympy.nan, sympy.zoo, sympy.oo, -sympy.oo) or v.free_symbols:
        return None
    return v


def _close(va: Any, vb: Any, rel: Any) -> bool:
    d = sympy.Abs(va - vb).evalf(_DIGITS)
    scale = sympy.Max(sympy.Abs(va), sympy.Abs(vb)).evalf(_DIGITS)
    if scale == 0:
        return bool(d == 0)
    return bool(d <= rel * scale)


def _same_value(a: Any, b: Any, rel: Any | None) -> bool | None:
    """Do two closed-form numbers agree? Exact when both are rational; otherwise the *difference*
    is evaluated (evalf raises its working precision through cancellation), so (x+1)^9999 - x and
    (x+1)^9999 - x + 1 differ by 1 at every point even though each side is ~10^9000.
    `rel` None means exact (up to 1e-40 relative for irrationals). None: not evaluable."""
    d = a - b
    if d == 0:
        return True
    if d.is_Rational and rel is None:
        return False
    va, vb = _num(a), _num(b)
    if va is None or vb is None:
        return None
    try:
        dv = sympy.Abs(sympy.N(d, 30)).evalf(_DIGITS)
    except (TypeError, ValueError, ArithmeticError, RecursionError):
        return None
    if not dv.is_number or dv.has(sympy.nan, sympy.zoo, sympy.oo):
        return None
    scale = sympy.Max(sympy.Abs(va), sympy.Abs(vb)).evalf(_DIGITS)
    return bool(dv <= (rel if rel is not None else _AGREE) * scale)


def expr_equal(a: Any, b: Any, cfg: VerifierConfig) -> Outcome:
    """Two sympy expressions: exact for numbers (tolerance only when configured), probes for symbols."""
    if a == b:
        return Outcome(True, "identical after parsing")
    if not (a.free_symbols or b.free_symbols):
        return _number_equal(a, b, cfg)
    o = _probe_equal(a, b, cfg)
    if not o.equal and _complex_form(a, b):
        ai, bi = a.xreplace({_I: sympy.I}), b.xreplace({_I: sympy.I})
        o2 = _number_equal(sympy.expand(ai), sympy.expand(bi), cfg)
        if o2.equal:
            return Outcome(True, f"with i the imaginary unit: {o2.reason}")
    return o


_I = sympy.Symbol("i")


def _complex_form(a: Any, b: Any) -> bool:
    """Is `i` the imaginary unit here? When it is the only letter on both sides and one side is written
    a + bi (degree 1 in i): then 1+2i and i(2-i) are one number. `i^2 + 1` (degree 2), an index, stays a symbol."""
    if not (a.free_symbols <= {_I} and b.free_symbols <= {_I}):
        return False
    for e in (a, b):
        try:
            poly = sympy.Poly(e, _I)
        except (sympy.PolynomialError, TypeError, ValueError):
            continue
        if poly.degree() == 1 and all(c.is_number and c.is_real for c in poly.all_coeffs()):
            return True
    return False


def _number_equal(a: Any, b: Any, cfg: VerifierConfig) -> Outcome:
    if a.is_infinite or b.is_infinite:
        return Outcome(False, f"{a} against {b}")
    if a.is_Rational and b.is_Rational and cfg.tolerance is None:
        return Outcome(False, f"exact values differ: {_short(a)} vs {_short(b)}")
    rel = sympy.Float(cfg.tolerance, _DIGITS) if cfg.tolerance is not None else None
    same = _same_value(a, b, rel)
    if same is None:
        return Outcome(None, "could not evaluate numerically")
    shown = f"{_short(_num(a))} vs {_short(_num(b))}"
    if cfg.tolerance is not None:
        return Outcome(same, f"within relative tolerance {cfg.tolerance}" if same else
                       f"differ beyond relative tolerance {cfg.tolerance}: {shown}")
    if not same:
        return Outcome(False, f"differ numerically: {shown}")
    if a.is_Rational != b.is_Rational:
        # a terminating decimal that matches an irrational to 40 digits is still not that number
        return Outcome(False, "a rational against an irrational value")
    return Outcome(True, "equal to 40 significant digits" + _proof(a, b))


def _proof(a: Any, b: Any) -> str:
    try:
        return " and simplify proves it" if sympy.simplify(a - b) == 0 else ""
    except (TypeError, ValueError, ArithmeticError, RecursionError):
        return ""


def _seed(a: Any, b: Any) -> int:
    key = "|".join(sorted((sympy.srepr(a), sympy.srepr(b))))
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")


def _probe_value(kind: int, integer: bool, rng: random.Random) -> Any:
    """One probe coordinate of a kind: 0 positive integer, 1 negative integer, 2 positive fraction,
    3 negative fraction, 4 a fraction near zero (either sign), 5 a fraction just below 1 or just above -1.
    Both signs and |v| < 1 are covered so that x and sqrt(x^2), |x| and x, or sqrt((x-1)^2) and x-1
    (equal only where x, or x-1, is positive) disagree somewhere."""
    if integer:  # n!, floor(n/2), C(n, 2): integers of both signs, and 0, 1
        return sympy.Integer((rng.randint(2, 12), -rng.randint(1, 12), rng.randint(2, 12), -rng.randint(1, 12),
                              rng.randint(0, 1), rng.randint(2, 12))[kind])
    if kind in (0, 1):
        v: Any = sympy.Integer(rng.randint(2, 12))
    elif kind in (2, 3):
        v = sympy.Rational(rng.randint(1, 4000), rng.randint(1, 997)) + sympy.Rational(1, 7)
    elif kind == 4:
        v = sympy.Rational(rng.randint(1, 96), 97 * rng.randint(1, 9))
    else:
        v = 1 - sympy.Rational(1, rng.randint(3, 29))
    return -v if kind in (1, 3) or kind >= 4 and rng.random() < 0.5 else v


def _probe_points(syms: list[Any], rng: random.Random, count: int) -> list[dict[Any, Any]]:
    points = []
    for k in range(count):
        points.append({s: _probe_value((k + j) % 6, str(s) in _INTEGER_NAMES, rng) for j, s in enumerate(syms)})
    return points


def _probe_equal(a: Any, b: Any, cfg: VerifierConfig) -> Outcome:
    syms = sorted(a.free_symbols | b.free_symbols, key=str)
    if a.free_symbols != b.free_symbols:
        # x - x + y has no x: compare anyway, but variables that differ usually mean different answers
        pass
    if len(syms) > 8:
        return Outcome(None, "more than 8 variables")
    rng = random.Random(_seed(a, b))
    agree = 0
    rel = sympy.Float(cfg.tolerance, _DIGITS) if cfg.tolerance is not None else sympy.Float("1e-30", _DIGITS)
    for pt in _probe_points(syms, rng, cfg.probes):
        pa, pb = a.xreplace(pt), b.xreplace(pt)
        same = _same_value(pa, pb, None if cfg.tolerance is None and pa.is_Rational and pb.is_Rational else rel)
        if same is None:
            continue
        if not same:
            where = ", ".join(f"{k}={v}" for k, v in pt.items())
            return Outcome(False, f"differ at {where}: {_short(_num(pa))} vs {_short(_num(pb))}")
        agree += 1
    if agree >= 3:
        return Outcome(True, f"agree at {agree} random points")
    try:
        if sympy.simplify(a - b) == 0:
            return Outcome(True, "simplify proves equal")
    except (TypeError, ValueError, ArithmeticError, RecursionError):
        pass
    return Outcome(None, f"undecided: only {agree} probe points evaluable")


def _short(v: Any) -> str:
    s = str(v) if not isinstance(v, sympy.Float) else sympy.N(v, 12).__str__()
    return s if len(s) <= 30 else s[:14] + "..." + s[-8:]


# --- equations and inequalities -------------------------------------------------------------------

_FLIP = {">": "<", ">=": "<=", "<": "<", "<=": "<=", "=": "=", "!=": "!="}


def _side(rel: Rel) -> tuple[str, Any]:
    lhs, rhs = as_expr(rel.lhs), as_expr(rel.rhs)
    return (_FLIP[rel.op], rhs - lhs) if rel.op in (">", ">=") else (rel.op, lhs - rhs)


def rel_equal(a: Rel, b: Rel, cfg: VerifierConfig) -> Outcome:
    """Equations: proportional sides or the same univariate solution set. Inequalities: positive ratio."""
    if "in" in (a.op, b.op):
        return Outcome(False, "membership against a relation")
    try:
        op_a, da = _side(a)
        op_b, db = _side(b)
    except ParseError:
        return Outcome(None, "relation sides are not expressions")
    if op_a != op_b:
        return Outcome(False, f"relation {a.op} against {b.op}")
    ratio = _constant_ratio(da, db, cfg)
    if ratio is not None and (op_a in ("=", "!=") or ratio > 0):
        return Outcome(True, "sides proportional" if ratio != 1 else "same relation")
    syms = da.free_symbols | db.free_symbols
    if op_a == "=" and len(syms) == 1:
        x = next(iter(syms))
        try:
            sa, sb = sympy.solveset(da, x), sympy.solveset(db, x)
        except (TypeError, ValueError, NotImplementedError, ArithmeticError):
            return Outcome(False, "equations not proportional; solution sets unknown")
        if isinstance(sa, sympy.FiniteSet) and isinstance(sb, sympy.FiniteSet):
            o = _set_equal(tuple(Node("expr", s) for s in sa), tuple(Node("expr", s) for s in sb), cfg)
            return Outcome(o.equal, "same solution set" if o.equal else f"solution sets differ: {o.reason}")
    if op_a == "=" and len(syms) == 2:
        explicit = _explicit_equal(a, b, cfg) or _explicit_equal(b, a, cfg)
        if explicit is not None:
            return explicit
    return Outcome(False, "relations are not proportional")


def _explicit_equal(exp: Rel, imp: Rel, cfg: VerifierConfig) -> Outcome | None:
    """`y = x/(2x-1)` against the implicit `1/x + 1/y = 2`: equal when the implicit relation, cleared of
    denominators, is of degree 1 in y (one branch only: a circle against one half of it stays unequal),
    no factor of it is free of y (x*y = 0 is not y = 0), and its one solution is the explicit right side. None when the pair is not of that shape."""
    y = exp.lhs
    if not isinstance(y, sympy.Symbol) or not isinstance(exp.rhs, sympy.Basic) or exp.rhs.has(y):
        return None
    try:
        num, _ = sympy.fraction(sympy.together(as_expr(imp.lhs) - as_expr(imp.rhs)))
        if not num.has(y) or not num.is_polynomial(y) or sympy.degree(num, y) != 1:
            return None
        coeff, const = num.coeff(y, 1), num.coeff(y, 0)
        if sympy.gcd(coeff, const).free_symbols:
            return None  # x*y = 0 is two lines, not y = 0
        solved = -const / coeff
    except (ParseError, TypeError, ValueError, ArithmeticError, sympy.PolynomialError):
        return None
    o = expr_equal(solved, exp.rhs, cfg)
    return Outcome(True, f"the implicit relation is {y} = {_short(solved)}") if o.equal else \
        Outcome(False, f"the implicit relation gives {y} = {_short(solved)}: {o.reason}")


def _constant_ratio(da: Any, db: Any, cfg: VerifierConfig) -> Any:
    """The constant c with da == c*db (checked at probe points), or None."""
    syms = sorted(da.free_symbols | db.free_symbols, key=str)
    if not syms:
        return None
    rng = random.Random(_seed(da, db))
    ratios = []
    for pt in _probe_points(syms, rng, cfg.probes):
        va, vb = _num(da.xreplace(pt)), _num(db.xreplace(pt))
        if va is None or vb is None:
            continue
        if vb == 0:
            if va != 0:
                return None
            continue
        ratios.append(va / vb)
    if len(ratios) < 3 or ratios[0] == 0:
        return None
    if all(_close(q, ratios[0], sympy.Float("1e-30", _DIGITS)) for q in ratios[1:]):
        return ratios[0]
    return None
