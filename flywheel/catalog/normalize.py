"""Problem-text normalization: what counts as "the same problem" for exact routing."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata

_WS = re.compile(r"\s+")


def normalize_text(text: str) -> str:
    """Unicode NFKC, lowercase (casefold), every whitespace run collapsed to one space, trimmed.

    Example:
        >>> normalize_text("  Solve  x+1=2\\n")
        'solve x+1=2'
    """
    return _WS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def text_hash(text: str) -> str:
    """SHA-256 hex of the normalized text — the exact-recurrence key stored in `problems.text_hash`."""
    return hashlib.sha256(normalize_text(text).encode("utf-8")).hexdigest()


def content_hash(solution: str, answer: str) -> str:
    """SHA-256 hex over (solution text, answer) exactly as given — a solution's idempotency key."""
    return hashlib.sha256(json.dumps([solution, answer], ensure_ascii=False).encode("utf-8")).hexdigest()
