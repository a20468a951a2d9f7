"""The default store: files under `<library>/artifacts/<first two hex>/<sha>`, written atomically."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from flywheel.fsutil import atomic_write_bytes, fsync_dir
from flywheel.store.base import ArtifactStore, Namer, check_sha, sha256_hex, verified


class LocalStore(ArtifactStore):
    """Artifacts as files on a local filesystem, sharded by the first two hex digits.

    Args:
        root: the artifacts directory, normally `<library>/artifacts` (created if absent).
        name_of: bytes -> 64-hex name; SHA-256 of the bytes by default.

    Example:
        >>> store = LocalStore(library / "artifacts")
        >>> sha = store.put(blob); store.path_for(sha)
        PosixPath('library/artifacts/3f/3f9a...')
    """

    def __init__(self, root: str | os.PathLike[str], name_of: Namer = sha256_hex) -> None:
        self.name_of = name_of  # type: ignore[method-assign]
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def path_for(self, sha: str) -> Path:
        check_sha(sha)
        return self.root / sha[:2] / sha

    def put(self, data: bytes) -> str:
        sha = check_sha(self.name_of(data))
        final = self.path_for(sha)
        if final.exists() and final.stat().st_size == len(data):
            return sha  # same name, same length: content-addressed, so the same bytes
        atomic_write_bytes(final, data)
        return sha

    def get(self, sha: str) -> bytes | None:
        path = self.path_for(sha)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        return verified(sha, data, str(path), self.name_of)

    def get_unchecked(self, sha: str) -> bytes | None:
        try:
            return self.path_for(sha).read_bytes()
        except FileNotFoundError:
            return None

    def contains(self, sha: str) -> bool:
        return self.path_for(sha).is_file()

    def remove(self, sha: str) -> bool:
        path = self.path_for(sha)
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        fsync_dir(path.parent)
        return True

    def iter_ids(self) -> Iterator[str]:
        for shard in sorted(self.root.iterdir()):
            if not shard.is_dir() or len(shard.name) != 2:
                continue
            for entry in shard.iterdir():
                name = entry.name
                if len(name) == 64 and name.startswith(shard.name) and entry.is_file():
                    yield name

    def __repr__(self) -> str:
        return f"LocalStore({str(self.root)!r})"
