"""Problem-text identity: what counts as "the same problem" for exact routing.

Only whitespace is normalized. Case, superscripts, sub/superscript digits, ligatures and every
other character are part of the text: "What is 2³ + 1?" and "What is 23 + 1?", or "What is A?"
and "What is a?", are different problems (an NFKC + casefold identity once filed such pairs as
one; migration 0006 re-keys catalogs written under it).
"""

from __future__ import annotations

import hashlib
import json
import re

_WS = re.compile(r"\s+")


def normalize_text(text: str) -> str:
    """Every whitespace run collapsed to one space, trimmed; nothing else changes.

    Example:
        >>> normalize_text("  Solve  x+1=2\\n")
        'Solve x+1=2'
    """
    return _WS.sub(" ", text).strip()


def text_hash(text: str) -> str:
    """SHA-256 hex of the normalized text — the exact-recurrence key stored in `problems.text_hash`."""
    return hashlib.sha256(normalize_text(text).encode("utf-8")).hexdigest()


def content_hash(solution: str, answer: str) -> str:
    """SHA-256 hex over (solution text, answer) exactly as given — a solution's idempotency key."""
    return hashlib.sha256(json.dumps([solution, answer], ensure_ascii=False).encode("utf-8")).hexdigest()
