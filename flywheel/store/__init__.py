"""Content-addressed artifact storage: `ArtifactStore` and one backend per medium.

Example:
    >>> store = open_store(library_root)              # LocalStore(<library>/artifacts)
    >>> store = open_store("s3://bucket/artifacts")   # FsspecStore
"""

from __future__ import annotations

import os
from pathlib import Path

from flywheel.store.base import ArtifactStore, Namer, check_sha, sha256_hex
from flywheel.store.fsspec_store import FsspecStore
from flywheel.store.local import LocalStore

#: Sub-directory of the library root that holds artifact files.
ARTIFACTS_DIR = "artifacts"


def open_store(location: str | os.PathLike[str], name_of: Namer = sha256_hex) -> ArtifactStore:
    """A store for `location`: a URL with a scheme gives `FsspecStore(url)`, a path
    `LocalStore(<path>/artifacts)` (the path is the library root).

    Args:
        location: library root directory, or an fsspec URL of the artifacts prefix.
        name_of: how bytes are named (SHA-256 of the bytes by default; see `ArtifactStore`).
    Returns:
        the store; close it (or use it as a context manager) when done.
    """
    text = os.fspath(location)
    if "://" in text and not text.startswith("file://"):
        return FsspecStore(text, name_of=name_of)
    if text.startswith("file://"):
        text = text[len("file://"):]
    return LocalStore(Path(text) / ARTIFACTS_DIR, name_of=name_of)


__all__ = ["ARTIFACTS_DIR", "ArtifactStore", "Namer", "FsspecStore", "LocalStore", "check_sha", "open_store", "sha256_hex"]
