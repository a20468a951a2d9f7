"""Shared domain vocabulary and the hash helpers every layer uses; no torch, no model.

    >>> canonical_json({"b": 1, "a": [1, 2]})
    '{"a":[1,2],"b":1}'
    >>> json_sha256({"a": 1}) == sha256_hex(b'{"a":1}')
    True
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, NewType, get_args

#: Ids that cross modules, typed apart so they cannot be swapped silently (all plain `str` at run time).
#: An artifact's id: the lowercase hex SHA-256 of its bytes (64 characters).
ArtifactSha = NewType("ArtifactSha", str)
#: The leading part of an artifact id a person types (at least 4 hex digits), resolved by the catalog.
ShaPrefix = NewType("ShaPrefix", str)
#: The digest of a model fingerprint (`Fingerprint.digest`): what artifacts and indexes are filed under.
FingerprintDigest = NewType("FingerprintDigest", str)

#: The one shape of a progress callback: `progress(done, total, note)`: `done` items of `total` (None
#: while the total is not known), and a few words for a person (the item, a rate; may be empty).
#: Work that knows its total calls it once with `done=0` first, then after each item.
Progress = Callable[[int, int | None, str], None]

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
    artifact_sha: ArtifactSha | None
    score: float
    problem_id: str | None
    members: tuple[ArtifactSha, ...] = ()   # near: the member artifacts when several are grafted together


def canonical_json(data: Any) -> str:
    """Sorted-key, separator-fixed JSON: the byte form every hash in the project is taken over."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def sha256_hex(data: bytes) -> str:
    """The lowercase hex SHA-256 of `data` (an artifact's name is this of its bytes)."""
    return hashlib.sha256(data).hexdigest()


def json_sha256(data: Any) -> str:
    """The hex SHA-256 of `canonical_json(data)`: the digest of a structured value."""
    return sha256_hex(canonical_json(data).encode())
