"""Quantities as models write them: a number with a unit (`125 miles`, `15\\mbox{ cm}^2`, `$12.50`),
a percentage (`28%`, `28\\%`, `28 percent`) and a decimal comma (`0,5`).

The unit is read off the text before parsing (otherwise `45 km` would be the product 45*k*m) and
compared only when both sides carry one: `45 km` against `45` is the number 45 (the question fixes
the unit), `45 km` against `45 m` is not equal. Only a number may carry a unit here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Short unit symbols that would otherwise read as variables; longer words (>= 3 letters) are units
# unless they are mathematics or glue words.
_SHORT_UNITS = {"m", "cm", "mm", "km", "g", "kg", "mg", "s", "ms", "h", "hr", "l", "ml", "ft", "in", "yd",
                "mi", "lb", "oz", "mph", "kmh", "min", "sec", "hrs", "lbs", "cc", "kw", "w", "j", "kj", "v"}
_NOT_UNITS = {"and", "or", "the", "is", "are", "for", "with", "not", "pi", "sqrt", "sin", "cos", "tan", "log",
              "ln", "exp", "choose", "mod", "cup", "cap", "infty", "frac", "dfrac", "tfrac", "cdot", "times",
              "quad", "qquad", "text", "left", "right", "only", "all", "none", "both", "each", "values",
              "value", "solution", "solutions", "answer", "when", "where", "if", "then", "than", "of", "to"}
# Scale words multiply, they are not units: 3 million is 3000000, never 3.
_SCALES = {"thousand": 3, "million": 6, "billion": 9, "trillion": 12}
_PERCENT_WORDS = {"percent", "percents", "percentage", "pct", "per cent"}
_ALIASES = {"kilometer": "km", "kilometre": "km", "meter": "m", "metre": "m", "centimeter": "cm",
            "centimetre": "cm", "millimeter": "mm", "millimetre": "mm", "gram": "g", "kilogram": "kg",
            "second": "s", "sec": "s", "minute": "min", "hour": "h", "hr": "h", "hrs": "h", "liter": "l",
            "litre": "l", "foot": "ft", "feet": "ft", "inch": "in", "mile": "mi", "pound": "lb", "lbs": "lb",
            "dollar": "$", "usd": "$", "cent": "cent", "degree": "deg"}

_WRAPPED = r"\\(?:text|mbox|textnormal|textrm|mathrm|textbf|textit)\s*\{\s*(?P<wrapped>[A-Za-z][A-Za-z .\-]*?)\s*\}"
_PLAIN = r"(?P<plain>[A-Za-z][A-Za-z\-]*(?:\s+[A-Za-z][A-Za-z\-]*){0,2})"
_POWER = r"(?P<power>\^\s*\{?\s*[23]\s*\}?|[²³])?"
_QUANTITY = re.compile(r"^(?P<num>.*?[\d}$%.])\s*(?:\$\s*)?(?:" + _WRAPPED + "|" + _PLAIN + r")\s*" + _POWER
                       + r"\s*\.?\s*$", re.S)
_PERCENT_SIGN = re.compile(r"(?:\\?%)\s*$")
_DECIMAL_COMMA = re.compile(r"^\s*\$?\s*([-+]?)\s*0,(\d+)\s*\$?\s*$")


@dataclass(frozen=True)
class Quantity:
    """An answer split into the mathematics to parse, its unit (normalized) and whether it is a percentage."""

    math: str
    unit: str | None = None
    percent: bool = False
    decimal_comma: bool = False  # `0,5` read as 0.5; ambiguous against a list, see `read_quantity`


def _unit_word(w: str) -> str | None:
    w = w.lower().strip(" .-")
    if not w or w in _NOT_UNITS:
        return None
    if len(w) < 3 and w not in _SHORT_UNITS:
        return None
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith(("ches", "shes", "xes")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith("ss") and len(w) > 3:
        w = w[:-1]
    return _ALIASES.get(w, w)


def _unit(phrase: str, power: str | None) -> str | None:
    words = phrase.split()
    if phrase.lower().strip() in _PERCENT_WORDS:
        return "%"
    if any(w.lower() in _NOT_UNITS for w in words):
        return None
    norm = [_unit_word(w) for w in words]
    if not norm or any(n is None for n in norm):
        return None
    exp = "".join(ch for ch in (power or "") if ch in "23²³").replace("²", "2").replace("³", "3")
    return " ".join(n for n in norm if n) + (f"^{exp}" if exp else "")


def read_quantity(answer: str) -> Quantity:
    """Split a trailing unit or percent word off `answer`; anything else is returned unchanged.

    Example: `read_quantity("125 miles")` -> Quantity("125", "mi"); `read_quantity("28 percent")` ->
    Quantity("28\\\\%", None, percent=True); `read_quantity("0,5")` -> Quantity("0.5", decimal_comma=True).
    A leading `0,` followed by digits is never a thousands group (`0,111` is not 111): as a whole
    answer it reads as a decimal comma, and `core` refuses it as ambiguous against a list.
    """
    m = _DECIMAL_COMMA.match(answer)
    if m:
        return Quantity(f"{m.group(1)}0.{m.group(2)}", decimal_comma=True)
    m = _QUANTITY.match(answer)
    if m and re.search(r"\d", m.group("num")):
        phrase = m.group("wrapped") or m.group("plain")
        num = m.group("num").strip()
        words = phrase.split()
        scale = _SCALES.get(words[0].lower().rstrip("s"))
        if scale is not None:
            num = f"({num})\\cdot 10^{{{scale}}}"
            if len(words) == 1 and not m.group("power"):
                return Quantity(num, None, percent=bool(_PERCENT_SIGN.search(m.group("num").strip())))
            phrase = " ".join(words[1:]) if len(words) > 1 else ""
            if not phrase:
                return Quantity(answer, None)  # "3 million^2": not a quantity we read
        unit = _unit(phrase, m.group("power"))
        if unit == "%":
            return Quantity(num + r"\%", None, percent=True)
        if unit is not None:
            return Quantity(num, unit, percent=bool(_PERCENT_SIGN.search(num)))
    return Quantity(answer, None, percent=bool(_PERCENT_SIGN.search(answer.replace("$", " ").rstrip(". "))))
