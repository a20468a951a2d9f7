"""Restricted parser: a LaTeX subset and plain math -> sympy objects, never `eval`/`sympify`.

A regex tokenizer feeds a recursive-descent parser that builds sympy objects from an empty
namespace: only the names in `_FUNCS`/`_CONSTS` mean anything, every other letter is a plain
`Symbol`. Bounds (input length, nesting depth, exponent size, exact-result bits, factorial size)
are checked *before* sympy is asked to evaluate, so `9^9^9^9` is refused in microseconds.

Structures sympy has no neutral form for are small frozen dataclasses: `Rel` (an equation or
inequality, kept unevaluated so `1 = 2` is not `False`), `Seq` (a bracketed list, which may be a
tuple or an interval: the brackets are kept), `SetOf` (`{...}`) and `Items` (a bare list,
"1, 2 and 3"). `±` becomes a fresh `_pm<k>` symbol that `equivalence` expands to both signs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import sympy

from verifiers.types import ParseError, VerifierConfig


@dataclass(frozen=True)
class Rel:
    """`lhs op rhs` with op in = != < <= > >= in; unevaluated."""

    op: str
    lhs: Any
    rhs: Any


@dataclass(frozen=True)
class Seq:
    """A bracketed list: `(a, b)`, `[a, b)`, `[1, 2, 3]`; brackets kept for tuple/interval."""

    items: tuple[Any, ...]
    left: str
    right: str


@dataclass(frozen=True)
class SetOf:
    """`{a, b, ...}` / `\\{...\\}`: unordered."""

    items: tuple[Any, ...]


@dataclass(frozen=True)
class Items:
    """A bare list at top level: `1, 2 and 3`, `x=1, y=2`; unordered unless the context says so."""

    items: tuple[Any, ...]


# --- normalisation and tokens ---------------------------------------------------------------------

_UNICODE = {
    "−": "-", "–": "-", "—": "-", "×": "*", "·": "*", "⋅": "*", "÷": "/", "≤": "<=", "≥": ">=",
    "≠": "!=", "π": "pi", "∞": "oo", "√": "sqrt", "±": r"\pm ", "∓": r"\pm ", "∈": r"\in ",
    "∪": r"\cup ", "…": "...", "⩽": "<=", "⩾": ">=", "’": "'", "\u00a0": " ", "€": " ", "£": " ",
}
_DROP = re.compile(
    r"\\(?:left|right|big|Big|bigg|Bigg|bigl|bigr|Bigl|Bigr|displaystyle|textstyle|limits)(?![A-Za-z])"
    r"|(?<!\\)\\[,;:! ]|\\q?quad(?![A-Za-z])|~|\$|\\\[|\\\]|\\\(|\\\)|\{,\}"
)
# A degree sign: kept as a mark, since inside sin/cos/tan it converts to radians (sin 30° is 1/2)
_DEGREE = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|°")
# A mixed number: 2\frac{1}{4} is 9/4, not 2/4 (a digit run, then a proper fraction of digits)
_MIXED = re.compile(r"(?<![\d.^_}A-Za-z\\])(?<![\^_]\{)(\d+)\s*\\frac(?:\s*\{\s*(\d+)\s*\}\s*\{\s*(\d+)\s*\}|(\d)(\d)(?!\d))")
# ... and, as a whole answer, 3128 1/2
_MIXED_PLAIN = re.compile(r"^([-+]?)\s*(\d+)\s+(\d+)\s*/\s*(\d+)$")
_TOKEN = re.compile(
    r"(?P<ws>\s+)"
    r"|(?P<sci>\d+(?:\.\d+)?[eE]\+?\d+(?![\w.])|\d+\.\d+[eE]-\d+(?![\w.]))"
    r"|(?P<num>[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?(?![\d.,])|\d+(?:\.\d+)?(?![\d.])|\d+\.(?![\d.])|\.\d+)"
    r"|(?P<cmd>\\[A-Za-z]+|\\[{}|%\\&])"
    r"|(?P<name>[A-Za-z]+)"
    r"|(?P<op>\.\.\.|<=|>=|!=|==|=<|=>|\*\*|[-+*/^_()\[\]{}=<>,;!|%&:'])"
)
_WORDY = ("text", "textbf", "textit", "textnormal", "textrm", "mathrm", "mathbf", "mathit", "operatorname", "mbox",
          "rm", "bf")
# Digit-group separators written in LaTeX: 14{,}916 and 11,\!111 (a thin-space hint), not a list.
_GROUP_SEP = re.compile(r"(?<=\d)\s*(?:\{\s*,\s*\}|,\\!)\s*(?=\d{3}(?!\d))")


def normalize(text: str) -> str:
    """Strip delimiters, sizing and spacing commands; map unicode operators to ASCII/LaTeX."""
    for k, v in _UNICODE.items():
        text = text.replace(k, v)
    text = _GROUP_SEP.sub(",", text)
    text = re.sub(r"\\(q?quad)(?=[A-Za-z])", r"\\\1 ", text)  # ,\quadx_2 in answer keys: \quad then x_2
    text = re.sub(r"\\[dtc]frac(?![A-Za-z])", r"\\frac", text)
    # Minerva shorthand: \fracab is \frac{a}{b}, \sqrta is \sqrt{a}
    text = re.sub(r"\\[dtc]?frac([A-Za-z])([A-Za-z0-9])", r"\\frac{\1}{\2}", text)
    text = re.sub(r"\\sqrt([A-Za-z])", r"\\sqrt{\1}", text)
    text = _DEGREE.sub(r" \\degreemark ", text)
    text = _MIXED.sub(_mixed, text)
    text = text.replace("\\$", " ")  # an escaped dollar sign is a currency mark, not math
    text = re.sub(r"\\(?:math)?(?:left|right)?[.](?=\s|$)", " ", text)
    return _DROP.sub(" ", text).strip()


def _mixed(m: re.Match[str]) -> str:
    whole, num, den = m.group(1), m.group(2) or m.group(4), m.group(3) or m.group(5)
    if not 0 < int(num) < int(den):
        return m.group()  # 2\frac{5}{4} is not a mixed number: left as the product it is written as
    return f"({whole}+\\frac{{{num}}}{{{den}}})"


def tokenize(text: str) -> list[tuple[str, str]]:
    """Return `(kind, value)` tokens; kind in num/cmd/name/op; refuses any other character.

    Inside `(...)`, `[...]` and `\\{...\\}` a comma always separates: `(12,102)` is a pair, not 12102.
    """
    out: list[tuple[str, str]] = []
    pos = 0
    depth = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ParseError(f"unexpected character {text[pos]!r} at {pos}")
        pos = m.end()
        kind = m.lastgroup or ""
        if kind == "ws":
            continue
        val = m.group()
        if kind == "cmd" and val[1:] in _WORDY:
            # \text{ and } -> words; \mathrm{e} -> name e
            out.append(("wordy", val[1:]))
            continue
        if kind == "op":
            val = {"**": "^", "==": "=", "=<": "<=", "=>": ">="}.get(val, val)
            depth += 1 if val in ("(", "[") else -1 if val in (")", "]") else 0
        elif kind == "cmd" and val in ("\\{", "\\}"):
            depth += 1 if val == "\\{" else -1
        if kind == "num" and "," in val and depth > 0:
            for k, part in enumerate(val.split(",")):
                out.extend([("op", ","), ("num", part)] if k else [("num", part)])
            continue
        out.append((kind, val))
    return out


# --- vocabulary -----------------------------------------------------------------------------------

_INVERSE = {"sin": sympy.asin, "cos": sympy.acos, "tan": sympy.atan, "cot": sympy.acot, "sec": sympy.asec,
            "csc": sympy.acsc}  # \sin^{-1} x is arcsin x, not 1/sin x
_FUNCS: dict[str, Any] = {
    "sqrt": sympy.sqrt, "sin": sympy.sin, "cos": sympy.cos, "tan": sympy.tan, "cot": sympy.cot,
    "sec": sympy.sec, "csc": sympy.csc, "arcsin": sympy.asin, "arccos": sympy.acos, "arctan": sympy.atan,
    "sinh": sympy.sinh, "cosh": sympy.cosh, "tanh": sympy.tanh, "exp": sympy.exp, "ln": sympy.log,
    "log": sympy.log, "floor": sympy.floor, "ceil": sympy.ceiling, "ceiling": sympy.ceiling,
    "abs": sympy.Abs, "gcd": sympy.gcd, "lcm": sympy.lcm, "binom": sympy.binomial, "max": sympy.Max,
    "min": sympy.Min, "choose": sympy.binomial,
}
_CONSTS: dict[str, Any] = {"pi": sympy.pi, "e": sympy.E, "oo": sympy.oo, "inf": sympy.oo,
                           "infty": sympy.oo, "infinity": sympy.oo}
_GREEK = {"alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta", "vartheta",
          "iota", "kappa", "lambda", "mu", "nu", "xi", "rho", "sigma", "tau", "phi", "varphi", "chi",
          "psi", "omega", "Gamma", "Delta", "Theta", "Lambda", "Sigma", "Phi", "Psi", "Omega"}
_RELOPS = {"=": "=", "<": "<", ">": ">", "<=": "<=", ">=": ">=", "!=": "!=", r"\le": "<=", r"\leq": "<=",
           r"\ge": ">=", r"\geq": ">=", r"\ne": "!=", r"\neq": "!=", r"\lt": "<", r"\gt": ">", r"\in": "in",
           r"\leqslant": "<=", r"\geqslant": ">="}
_MULOPS = {"*", r"\cdot", r"\times", "/", r"\div"}
_SEPARATORS = {",", ";", "and", "or"}
# Words that mark prose: a string containing one is text, not mathematics.
_PROSE = {"is", "are", "the", "no", "yes", "not", "all", "for", "of", "to", "in", "if", "so", "as",
          "at", "be", "by", "on", "we", "it", "an", "a_", "any", "odd", "even", "none", "such", "only",
          "values", "value", "with", "that", "then", "where", "when", "each", "there", "has", "can",
          "one", "two", "six", "ten"}  # number words are words: "two" is not t*w*o


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]], cfg: VerifierConfig) -> None:
        self.toks = tokens
        self.i = 0
        self.cfg = cfg
        self.depth = 0
        self.pm = 0
        self.trig = 0  # > 0 inside the argument of sin/cos/...: a degree mark converts to radians

    # -- token helpers
    def peek(self, k: int = 0) -> tuple[str, str]:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else ("end", "")

    def next(self) -> tuple[str, str]:
        tok = self.peek()
        self.i += 1
        return tok

    def at(self, *vals: str) -> bool:
        return self.peek()[1] in vals and self.peek()[0] != "end"

    def expect(self, val: str) -> None:
        kind, v = self.next()
        if v != val:
            raise ParseError(f"expected {val!r}, got {v or 'end of input'!r}")

    def enter(self) -> None:
        self.depth += 1
        if self.depth > self.cfg.max_depth:
            raise ParseError(f"nesting deeper than {self.cfg.max_depth}", refused=True)

    # -- grammar
    def parse_top(self) -> Any:
        items = self.parse_list(())
        if self.peek()[0] != "end":
            raise ParseError(f"unexpected {self.peek()[1]!r}")
        return items[0] if len(items) == 1 else Items(tuple(items))

    def parse_list(self, closers: tuple[str, ...]) -> list[Any]:
        items = [self.parse_relation()]
        while self.at(*_SEPARATORS) or self.peek() == ("wordy", "text") and self._wordy_is_sep():
            if self.peek()[0] == "wordy":
                self._consume_wordy()
            else:
                self.next()
            if self.peek()[0] == "end" or self.at(*closers):
                break  # trailing comma
            items.append(self.parse_relation())
        return items

    def _wordy_is_sep(self) -> bool:
        return self.peek(1)[1] == "{" and self.peek(2)[1] in ("and", "or") and self.peek(3)[1] == "}"

    def _consume_wordy(self) -> None:
        self.next()
        self.expect("{")
        self.next()
        self.expect("}")

    def parse_relation(self) -> Any:
        parts = [self.parse_union()]
        ops: list[str] = []
        while self.peek()[1] in _RELOPS and self.peek()[0] in ("op", "cmd"):
            ops.append(_RELOPS[self.next()[1]])
            parts.append(self.parse_union())
        if not ops:
            return parts[0]
        if len(ops) == 1:
            return Rel(ops[0], parts[0], parts[1])
        chain = _chain_interval(ops, parts)
        if chain is not None:  # -793 < a < 10 is a in (-793, 10)
            return chain
        if all(o == "=" for o in ops):  # x = y = 0: every earlier part equals the last
            return Items(tuple(Rel("=", p, parts[-1]) for p in parts[:-1]))
        return Items(tuple(Rel(o, a, b) for o, a, b in zip(ops, parts, parts[1:], strict=False)))

    def parse_union(self) -> Any:
        """`A \\cup B \\cup ...` of intervals and finite sets of numbers -> one sympy set."""
        first = self.parse_sum()
        if not self.at(r"\cup"):
            return first
        pieces = [first]
        while self.at(r"\cup"):
            self.next()
            pieces.append(self.parse_sum())
        return sympy.Union(*(_real_set(p) for p in pieces))

    def parse_sum(self) -> Any:
        self.enter()
        left = self.parse_term()
        while self.at("+", "-", r"\pm", r"\mp"):
            op = self.next()[1]
            right = self.parse_term()
            if op == "+":
                left = left + right
            elif op == "-":
                left = left - right
            else:
                left = left + self._pm() * right
        self.depth -= 1
        return left

    def _pm(self) -> sympy.Symbol:
        self.pm += 1
        if self.pm > 3:
            raise ParseError("more than three ± signs", refused=True)
        return sympy.Symbol(f"_pm{self.pm}")

    def parse_term(self) -> Any:
        left = self.parse_unary()
        while True:
            kind, val = self.peek()
            if val in _MULOPS and kind in ("op", "cmd"):
                self.next()
                right = self.parse_unary()
                left = _div(left, right) if val in ("/", r"\div") else as_expr(left) * as_expr(right)
            elif self._starts_implicit():
                left = as_expr(left) * as_expr(self.parse_power())
            else:
                return left

    def _starts_implicit(self) -> bool:
        kind, val = self.peek()
        if kind == "num":
            return self.peek(-1)[1] == ")"  # (n+1)2^n is a product; "2 3" is not 6
        if kind == "name":
            return val not in _SEPARATORS
        if kind == "cmd":
            return val[1:] in _FUNCS or val[1:] in _CONSTS or val[1:] in _GREEK or val in (
                r"\frac", r"\sqrt", r"\binom", r"\lfloor", r"\lceil", r"\sum", r"\pi", r"\begin")
        if kind == "wordy":
            return not self._wordy_is_sep()
        return val == "("

    def parse_unary(self) -> Any:
        if self.at("-"):
            self.next()
            self.enter()
            v = -as_expr(self.parse_unary())
            self.depth -= 1
            return v
        if self.at("+"):
            self.next()
            return self.parse_unary()
        if self.at(r"\pm", r"\mp"):
            self.next()
            return self._pm() * as_expr(self.parse_unary())
        return self.parse_power()

    def parse_power(self) -> Any:
        base = self.parse_postfix()
        if self.at("^"):
            self.next()
            self.enter()
            exp = self.parse_group() if self.at("{") else self.parse_unary()
            self.depth -= 1
            return self._pow(base, exp)
        return base

    def _pow(self, base: Any, exp: Any) -> Any:
        base, exp = as_expr(base), as_expr(exp)
        cfg = self.cfg
        if exp.is_Number and base not in (sympy.S.Zero, sympy.S.One, sympy.S.NegativeOne):
            if abs(exp) > cfg.max_exponent:
                raise ParseError(f"exponent {_short(exp)} exceeds {cfg.max_exponent}", refused=True)
            if base.is_Rational and exp.is_Integer:
                bits = int(abs(exp)) * max(int(base.p).bit_length(), int(base.q).bit_length())
                if bits > cfg.max_result_bits:
                    raise ParseError(f"power of ~{bits} bits exceeds {cfg.max_result_bits}", refused=True)
        elif exp.is_number and exp.has(sympy.oo, sympy.zoo):
            raise ParseError("infinite exponent")
        return sympy.Pow(base, exp)

    def parse_postfix(self) -> Any:
        v = self.parse_atom()
        while True:
            if self.at("!"):
                self.next()
                v = self._factorial(v)
            elif self.at("%", r"\%"):
                self.next()
                v = as_expr(v) / 100
            elif self.at(r"\degreemark"):
                self.next()
                v = as_expr(v) * sympy.pi / 180 if self.trig else v
            elif self.at("'"):
                if not isinstance(v, sympy.Symbol) or str(v).startswith("_pm"):
                    raise ParseError("primes/derivatives are not supported")
                self.next()
                v = sympy.Symbol(f"{v}'")  # E' is its own symbol, never E
            else:
                return v

    def _factorial(self, v: Any) -> Any:
        v = as_expr(v)
        if v.is_Integer and (v < 0 or v > self.cfg.max_factorial):
            raise ParseError(f"factorial of {_short(v)} outside 0..{self.cfg.max_factorial}", refused=True)
        if v.is_number and not v.is_Integer:
            raise ParseError("factorial of a non-integer")
        return sympy.factorial(v)

    def _binomial(self, n: Any, k: Any) -> Any:
        n, k = as_expr(n), as_expr(k)
        if n.is_Integer and abs(n) > self.cfg.max_factorial:
            raise ParseError(f"binomial of {_short(n)} exceeds {self.cfg.max_factorial}", refused=True)
        return sympy.binomial(n, k)

    def parse_group(self) -> Any:
        """`{...}` as a LaTeX group: one expression."""
        self.expect("{")
        self.enter()
        v = self.parse_relation()
        self.depth -= 1
        self.expect("}")
        return v

    def _arg(self) -> Any:
        """Argument of \\frac, \\sqrt: a brace group or a single token (\\frac12)."""
        if self.at("{"):
            return self.parse_group()
        kind, val = self.next()
        if kind == "num":
            if len(val) > 1 and val.isdigit():   # \frac12 is \frac{1}{2}: the first digit is this argument
                self._push_back_digits(val[1:])
                return sympy.Integer(val[0])
            return _number(val)
        if kind == "name" and len(val) == 1:
            return _symbol(val)
        raise ParseError(f"bad argument {val!r}")

    def _push_back_digits(self, digits: str) -> None:
        """Make `digits` the next token (the rest of `\\frac12`'s `12` after its first digit)."""
        self.toks.insert(self.i, ("num", digits))

    def parse_atom(self) -> Any:
        self.enter()
        try:
            return self._atom()
        finally:
            self.depth -= 1

    def _atom(self) -> Any:
        kind, val = self.next()
        if kind == "num":
            return self._base_numeral(val) if self.at("_") else _number(val)
        if kind == "sci":
            return self._scientific(val)
        if kind == "fname":
            return sympy.Symbol(val)
        if kind == "name":
            return self._name(val)
        if kind == "wordy":
            return self._wordy()
        if kind == "cmd":
            return self._command(val)
        if val in ("(", "["):
            items = self.parse_list((")", "]"))
            close = self.next()[1]
            if close not in (")", "]"):
                raise ParseError(f"unclosed {val!r}")
            if len(items) == 1 and val == "(" and close == ")":
                return items[0]
            if len(items) == 1 and val == "[" and close == "]":
                return items[0]
            if len(items) == 1:
                raise ParseError("half-open bracket around one item")
            return Seq(tuple(items), val, close)
        if val == "{":
            items = self.parse_list(("}",))
            self.expect("}")
            return items[0] if len(items) == 1 else SetOf(tuple(items))
        if val == "|":
            inner = self.parse_sum()
            self.expect("|")
            return sympy.Abs(as_expr(inner))
        raise ParseError(f"unexpected {val or 'end of input'!r}")

    def _base_numeral(self, digits: str) -> Any:
        """`4210_7` / `4210_{7}`: a numeral written in base 7, kept as written (it answers "in base 7")."""
        self.next()
        if self.at("{"):
            self.next()
            kind, base = self.next()
            self.expect("}")
        else:
            kind, base = self.next()
        if kind != "num" or not base.isdigit() or not 2 <= int(base) <= 36 or not digits.isdigit():
            raise ParseError(f"bad base subscript on {digits}")
        if any(int(d) >= int(base) for d in digits):
            raise ParseError(f"{digits} is not a numeral in base {base}")
        return sympy.Symbol(f"{digits.lstrip('0') or '0'}_{int(base)}")

    def _scientific(self, val: str) -> Any:
        mantissa, _, exp = val.lower().partition("e")
        if abs(int(exp)) > self.cfg.max_exponent:
            raise ParseError(f"exponent {exp} exceeds {self.cfg.max_exponent}", refused=True)
        return _number(mantissa) * sympy.Integer(10) ** int(exp)

    def _wordy(self) -> Any:
        self.expect("{")
        words: list[str] = []
        while not self.at("}"):
            kind, val = self.next()
            if kind == "end":
                raise ParseError("unclosed \\text{")
            words.append(val)
        self.next()
        if len(words) == 1 and words[0] in _CONSTS:
            return _CONSTS[words[0]]
        if len(words) == 1 and len(words[0]) == 1 and words[0].isalpha():
            return _symbol(words[0])
        raise ParseError(f"text {' '.join(words)!r} inside math")

    def _name(self, val: str) -> Any:
        if val == "C" and self.at("(") or val in ("binom", "choose") and self.at("("):
            args = self._call_args()
            if len(args) == 2:
                return self._binomial(*args)
            if val == "C" and len(args) == 1:
                return _symbol("C") * args[0]
            raise ParseError("binomial takes two arguments")
        if val == "sum":
            return self._sum()
        if val in _FUNCS:
            return self._function(val)
        if val in _CONSTS:
            return self._subscripted(_CONSTS[val]) if val == "e" else _CONSTS[val]
        if val.lower() in _PROSE or len(val) > 3 and val not in _GREEK:
            raise ParseError(f"word {val!r}")
        if val in _GREEK:
            return self._subscripted(_symbol(val))
        if len(val) == 1:
            return self._subscripted(_symbol(val))
        # "xy" -> x*y (implicit product of single-letter symbols), last letter may carry a subscript
        out: Any = sympy.S.One
        for ch in val[:-1]:
            out = out * _symbol(ch)
        last = self._subscripted(_symbol(val[-1]))
        while self.at("'"):  # QP' is Q times P'
            self.next()
            last = sympy.Symbol(f"{last}'")
        return out * last

    def _subscripted(self, sym: Any) -> Any:
        if not self.at("_"):
            return sym
        self.next()
        if self.at("{"):
            self.next()
            parts: list[str] = []
            while not self.at("}"):
                kind, v = self.next()
                if kind == "end" or len(parts) > 8:
                    raise ParseError("bad subscript")
                parts.append(v)
            self.next()
            sub = "".join(parts)
        else:
            kind, sub = self.next()
            if kind not in ("num", "name"):
                raise ParseError("bad subscript")
        return sympy.Symbol(f"{sym}_{sub}")

    def _call_args(self) -> list[Any]:
        self.expect("(")
        args = self.parse_list((")",))
        self.expect(")")
        return [as_expr(a) for a in args]

    def _function(self, name: str) -> Any:
        base = None
        if name == "log" and self.at("_"):
            self.next()
            base = as_expr(self.parse_group() if self.at("{") else self.parse_atom())
        power = None
        if self.at("^"):  # \sin^2 x
            self.next()
            power = as_expr(self.parse_group() if self.at("{") else self.parse_atom())
        if name == "sqrt" and self.at("["):
            self.next()
            index = as_expr(self.parse_sum())
            self.expect("]")
            arg = as_expr(self._arg())
            return sympy.root(arg, index)
        fn = _FUNCS[name]
        if power == -1 and name in _INVERSE:
            fn, power = _INVERSE[name], None
        self.trig += name in _INVERSE
        try:
            if self.at("("):
                args = self._call_args()
            elif self.at("{"):
                args = [as_expr(self.parse_group())]
            else:
                args = [as_expr(self.parse_power())]
        finally:
            self.trig -= name in _INVERSE
        if name in ("gcd", "lcm", "max", "min"):
            if len(args) < 2:
                raise ParseError(f"{name} needs two arguments")
            out = fn(*args)
        elif len(args) != 1:
            raise ParseError(f"{name} takes one argument")
        elif base is not None:
            out = sympy.log(args[0], base)
        else:
            out = fn(args[0])
        return self._pow(out, power) if power is not None else out

    def _sum(self) -> Any:
        self.expect("_")
        closer = {"{": "}", "(": ")"}.get(self.peek()[1])
        if closer is None:
            raise ParseError("sum needs _{i=a}")
        self.next()
        var = self.next()
        if var[0] != "name" or len(var[1]) != 1:
            raise ParseError("bad summation variable")
        self.expect("=")
        lo = as_expr(self.parse_sum())
        self.expect(closer)
        self.expect("^")
        hi = as_expr(self.parse_group() if self.at("{") else self.parse_atom())
        body = as_expr(self.parse_term())
        if lo.is_Integer and hi.is_Integer and hi - lo > self.cfg.max_factorial:
            raise ParseError("sum too long", refused=True)
        return sympy.Sum(body, (_symbol(var[1]), lo, hi)).doit()

    def _command(self, val: str) -> Any:
        name = val[1:]
        if name == "frac":
            num = self._arg()
            den = self._arg()
            return _div(num, den)
        if name == "binom":
            n = self._arg()
            k = self._arg()
            return self._binomial(n, k)
        if name in _FUNCS:
            return self._function(name)
        if name in ("pi", "infty", "infinity"):
            return _CONSTS[name]
        if name in _GREEK:
            return self._subscripted(_symbol(name))
        if name == "sum":
            return self._sum()
        if name in ("lfloor", "lceil"):
            inner = as_expr(self.parse_sum())
            self.expect(r"\rfloor" if name == "lfloor" else r"\rceil")
            return sympy.floor(inner) if name == "lfloor" else sympy.ceiling(inner)
        if name == "{":
            items = self.parse_list((r"\}",))
            self.expect(r"\}")
            return SetOf(tuple(items))
        if name == "mathbb":
            self.expect("{")
            letter = self.next()[1]
            self.expect("}")
            if letter != "R":
                raise ParseError(f"unsupported set \\mathbb{{{letter}}}")
            return sympy.Interval(-sympy.oo, sympy.oo)
        if name == "degreemark":
            raise ParseError("a degree sign with no number")
        if name in ("emptyset", "varnothing"):
            return SetOf(())
        if name == "begin":
            return self._matrix()
        if name == "boxed":
            return self.parse_group()
        if name == "mid" or name == "|":
            inner = self.parse_sum()
            self.expect(val)
            return sympy.Abs(as_expr(inner))
        raise ParseError(f"unsupported command {val!r}")

    def _matrix(self) -> Any:
        self.expect("{")
        env = self.next()[1]
        self.expect("}")
        if env not in ("pmatrix", "bmatrix", "matrix", "vmatrix", "Bmatrix", "array"):
            raise ParseError(f"unsupported environment {env!r}")
        if env == "array":  # \begin{array}{cc}: skip the column specification
            self.expect("{")
            while not self.at("}"):
                if self.next()[0] == "end":
                    raise ParseError("unclosed array column specification")
            self.next()
        rows: list[list[Any]] = [[]]
        while True:
            rows[-1].append(as_expr(self.parse_sum()))
            if self.at("&"):
                self.next()
            elif self.at("\\\\"):
                self.next()
                if self.at(r"\end"):
                    break
                rows.append([])
            else:
                break
        self.expect(r"\end")
        self.expect("{")
        self.next()
        self.expect("}")
        if len({len(r) for r in rows}) != 1:
            raise ParseError("ragged matrix")
        m = sympy.ImmutableMatrix(rows)
        return m.det() if env == "vmatrix" else m


def _real_end(v: Any) -> Any:
    e = as_expr(v)
    if e.free_symbols or not (e.is_extended_real or e in (sympy.oo, -sympy.oo)):
        raise ParseError(f"interval end {_short(e)} is not a real number")
    return e


def _real_set(v: Any) -> Any:
    """One piece of a union: `(a, b)`/`[a, b]` with real ends, `{1, 2}`, a number, or a set already."""
    if isinstance(v, (sympy.Interval, sympy.Union, sympy.FiniteSet)) or v == sympy.S.EmptySet:
        return v
    if isinstance(v, Seq) and len(v.items) == 2:
        lo, hi = _real_end(v.items[0]), _real_end(v.items[1])
        if not bool(lo < hi):
            raise ParseError(f"interval ({_short(lo)}, {_short(hi)}) has its ends out of order")
        return sympy.Interval(lo, hi, v.left == "(", v.right == ")")
    if isinstance(v, SetOf):
        return sympy.FiniteSet(*(_real_end(i) for i in v.items))
    return sympy.FiniteSet(_real_end(v))


def _chain_interval(ops: list[str], parts: list[Any]) -> Rel | None:
    """`lo < x <= hi` (or the same written with >) -> Rel('in', x, interval); None for other chains."""
    if len(ops) != 2 or not (set(ops) <= {"<", "<="} or set(ops) <= {">", ">="}):
        return None
    lo, mid, hi = parts
    if not isinstance(mid, sympy.Symbol):
        return None
    lo_open, hi_open = ops[0] in ("<", ">"), ops[1] in ("<", ">")
    if ops[0] in (">", ">="):
        lo, hi, lo_open, hi_open = hi, lo, hi_open, lo_open
    try:
        lo, hi = _real_end(lo), _real_end(hi)
    except ParseError:
        return None
    if not bool(lo < hi):
        return None
    return Rel("in", mid, sympy.Interval(lo, hi, lo_open, hi_open))


def _short(v: Any) -> str:
    s = str(v)
    return s if len(s) < 24 else s[:10] + "..." + s[-6:]


def _number(val: str) -> sympy.Rational:
    """Exact: '0.333' is 333/1000, '1,000' is 1000."""
    val = val.replace(",", "")
    if val.endswith("."):
        val = val[:-1]
    return sympy.Rational(val)


def _symbol(name: str) -> sympy.Symbol:
    return sympy.Symbol(name)


def as_expr(v: Any) -> Any:
    if isinstance(v, (Rel, Seq, SetOf, Items)):
        raise ParseError("a list or relation where a number was expected")
    if isinstance(v, sympy.MatrixBase):
        return v
    if not isinstance(v, sympy.Basic):
        raise ParseError(f"unexpected value {v!r}")
    return v


def _div(a: Any, b: Any) -> Any:
    a, b = as_expr(a), as_expr(b)
    if b == 0:
        raise ParseError("division by zero")
    return a / b


def _function_name(tokens: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """`f(x) = 2x + 3`: a function's name and arguments opening an equation are one name, `f(x)`,
    so the answer is an assignment of 2x + 3 (not the relation f*x = 2x + 3)."""
    if len(tokens) < 5 or tokens[0][0] != "name" or len(tokens[0][1]) != 1 or tokens[1] != ("op", "("):
        return tokens
    args: list[str] = []
    j = 2
    while j + 1 < len(tokens) and tokens[j][0] == "name" and len(tokens[j][1]) == 1:
        args.append(tokens[j][1])
        if tokens[j + 1] != ("op", ","):
            break
        j += 2
    f = tokens[0][1]
    if not args or j + 2 >= len(tokens) or tokens[j + 1] != ("op", ")") or tokens[j + 2] != ("op", "=") \
            or f in args or ("name", f) in tokens[j + 3:] or ("op", "=") in tokens[j + 3:]:
        return tokens
    return [("fname", f"{f}({','.join(args)})"), *tokens[j + 2:]]


def parse(text: str, config: VerifierConfig | None = None) -> Any:
    """Parse one answer string into sympy objects and the structures above.

    Args:
        text: a short answer, LaTeX or plain (`\\dfrac{9}{7}`, `x = 3`, `[0, 1)`, `{1, 2}`).
        config: bounds; defaults to `VerifierConfig()`.
    Returns:
        a sympy object, `Rel`, `Seq`, `SetOf` or `Items`.
    Raises:
        ParseError: outside the grammar, or refused by a bound (`err.refused`).

    Example: `parse(r"\\frac{1}{2} + x")` -> `x + 1/2`.
    """
    cfg = config or VerifierConfig()
    if len(text) > cfg.max_input_chars:
        raise ParseError(f"input of {len(text)} chars exceeds {cfg.max_input_chars}", refused=True)
    norm = normalize(text)
    if not norm:
        raise ParseError("empty answer")
    norm = re.sub(r"\.\s*$", "", norm) if not re.search(r"\d\.$", norm) else norm[:-1]
    mixed = _MIXED_PLAIN.match(norm)
    if mixed and 0 < int(mixed.group(3)) < int(mixed.group(4)):
        norm = f"{mixed.group(1)}({mixed.group(2)}+{mixed.group(3)}/{mixed.group(4)})"
    tokens = _function_name(tokenize(norm))
    if not tokens:
        raise ParseError("empty answer")
    try:
        return _Parser(tokens, cfg).parse_top()
    except RecursionError as err:
        raise ParseError("nesting too deep", refused=True) from err
    except (TypeError, ValueError, ZeroDivisionError, AttributeError) as err:
        if isinstance(err, ParseError):
            raise
        raise ParseError(f"cannot build: {type(err).__name__}: {err}") from err
