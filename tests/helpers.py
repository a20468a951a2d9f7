"""Helpers several test folders share (`from tests.helpers import ...`): what only tests need lives
here, not in the product."""

from __future__ import annotations

from flywheel.router import Router


def index_size(router: Router, fingerprint: str) -> int:
    """Entries in `router`'s index for `fingerprint`, loaded or built from the catalog as a route would."""
    return len(router._index(fingerprint))
