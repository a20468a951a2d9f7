"""Text from users and bundles, made safe to print: no control sequence reaches the terminal."""

from __future__ import annotations

import unicodedata

#: Bidirectional overrides and isolates (Trojan Source), and line/paragraph separators.
_INVISIBLE = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029")


def printable(text: object, limit: int | None = None) -> str:
    """`text` with control characters escaped (`\\x1b`, `\\n`, `\\u202e`), cut to `limit` characters.

    ANSI/OSC escape sequences, carriage returns and bidi overrides in an id or a problem text
    are shown as escapes instead of acting on the terminal.

    Example:
        >>> printable("ok\\x1b[2Jgone")
        'ok\\\\x1b[2Jgone'
    """
    s = str(text)
    if limit is not None and len(s) > limit:
        s = s[: max(limit - 1, 0)] + "…"
    if s.isprintable():
        return s
    out = []
    for ch in s:
        if ch in _INVISIBLE or unicodedata.category(ch) == "Cc":
            out.append(ch.encode("unicode_escape").decode("ascii"))
        else:
            out.append(ch)
    return "".join(out)
