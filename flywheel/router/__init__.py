"""Routing problems to verified KV artifacts: exact recurrence, near neighbour, or none.

Example:
    >>> from flywheel.router import Router, RouterConfig
    >>> router = Router(library, catalog, RouterConfig(near_threshold=0.6))
    >>> router.route("What is 2+2?", fingerprint_digest)
    RouteDecision(kind='exact', artifact_sha='3f9a...', score=1.0, problem_id='demo-1')
"""

from __future__ import annotations

from flywheel.domain import RouteDecision, RouteKind
from flywheel.router.index import VectorIndex, new_faiss_index
from flywheel.router.router import INDEX_DIR, Router, RouterConfig

__all__ = ["INDEX_DIR", "RouteDecision", "RouteKind", "Router", "RouterConfig", "VectorIndex", "new_faiss_index"]
