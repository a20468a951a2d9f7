"""Shared domain vocabulary and the hash helpers every layer uses; no torch, no model.

    >>> canonical_json({"b": 1, "a": [1, 2]})
    '{"a":[1,2],"b":1}'
    >>> json_sha256({"a": 1}) == sha256_hex(b'{"a":1}')
    True
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal, get_args

#: How the router matched a problem: a recurrence of a deposited one (`exact`), related
#: deposits grafted as context (`near`), or nothing worth grafting (`none`).
RouteKind = Literal["exact", "near", "none"]
ROUTE_KINDS: tuple[RouteKind, ...] = get_args(RouteKind)


@dataclass(frozen=True)
class RouteDecision:
    """What the router chose: `artifact_sha` is None exactly when `kind == "none"`.

    `score` is 1.0 for exact, the cosine for near, and the best cosine seen (or 0.0) for none;
    `problem_id` is the library problem whose artifact was picked.
    """

    kind: RouteKind
    artifact_sha: str | None
    score: float
    problem_id: str | None
    members: tuple[str, ...] = ()   # near: the member artifacts when several are grafted together


def canonical_json(data: Any) -> str:
    """Sorted-key, separator-fixed JSON: the byte form every hash in the project is taken over."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def sha256_hex(data: bytes) -> str:
    """The lowercase hex SHA-256 of `data` (an artifact's name is this of its bytes)."""
    return hashlib.sha256(data).hexdigest()


def json_sha256(data: Any) -> str:
    """The hex SHA-256 of `canonical_json(data)`: the digest of a structured value."""
    return sha256_hex(canonical_json(data).encode())
