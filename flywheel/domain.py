"""Shared domain vocabulary and the hash helpers every layer uses; no torch, no model.

    >>> canonical_json({"b": 1, "a": [1, 2]})
    '{"a":[1,2],"b":1}'
    >>> json_sha256({"a": 1}) == sha256_hex(b'{"a":1}')
    True
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal, get_args

#: How the router matched a problem: a recurrence of a deposited one (`exact`), related
#: deposits grafted as context (`near`), or nothing worth grafting (`none`).
RouteKind = Literal["exact", "near", "none"]
ROUTE_KINDS: tuple[RouteKind, ...] = get_args(RouteKind)


def canonical_json(data: Any) -> str:
    """Sorted-key, separator-fixed JSON: the byte form every hash in the project is taken over."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def sha256_hex(data: bytes) -> str:
    """The lowercase hex SHA-256 of `data` (an artifact's name is this of its bytes)."""
    return hashlib.sha256(data).hexdigest()


def json_sha256(data: Any) -> str:
    """The hex SHA-256 of `canonical_json(data)`: the digest of a structured value."""
    return sha256_hex(canonical_json(data).encode())
