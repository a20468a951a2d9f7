"""A store on any fsspec filesystem (s3://, gs://, az://, memory://, file://) for shared buckets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec

from flywheel.errors import LibraryError
from flywheel.fsutil import atomic_write_bytes
from flywheel.store.base import ArtifactStore, Namer, check_sha, sha256_hex, verified


class FsspecStore(ArtifactStore):
    """Artifacts as objects `<url>/<first two hex>/<sha>` on an fsspec filesystem.

    Object stores have no rename; an object PUT is already all-or-nothing there, and on
    filesystems that do rename (local ones) the write is `flywheel.fsutil.atomic_write_bytes`.

    Args:
        url: the artifacts prefix, e.g. `s3://bucket/flywheel/artifacts` or `memory://lib/artifacts`.
        name_of: bytes -> 64-hex name; SHA-256 of the bytes by default.
        storage_options: passed to `fsspec.url_to_fs` (credentials, endpoints).

    Example:
        >>> store = FsspecStore("s3://team-bucket/flywheel/artifacts")
        >>> sha = store.put(blob); store.get(sha) == blob
        True
    """

    def __init__(self, url: str, name_of: Namer = sha256_hex, **storage_options: Any) -> None:
        self.name_of = name_of  # type: ignore[method-assign]
        try:
            self.fs, root = fsspec.core.url_to_fs(url, **storage_options)
        except (ImportError, ValueError) as err:
            raise LibraryError(
                f"cannot open artifact store {url!r}: {err}",
                hint="install the fsspec backend for that scheme (e.g. s3fs for s3://, gcsfs for gs://)",
            ) from err
        self.url = url
        self.root = root.rstrip("/")
        self._atomic_rename = "local" in self.fs.protocol or "file" in self.fs.protocol
        self.fs.makedirs(self.root, exist_ok=True)

    def path_for(self, sha: str) -> str:
        check_sha(sha)
        return f"{self.root}/{sha[:2]}/{sha}"

    def put(self, data: bytes) -> str:
        sha = check_sha(self.name_of(data))
        key = self.path_for(sha)
        if self.fs.exists(key) and self.fs.size(key) == len(data):
            return sha
        self.fs.makedirs(f"{self.root}/{sha[:2]}", exist_ok=True)
        if self._atomic_rename:   # a local filesystem: `key` is a path on it
            atomic_write_bytes(Path(key), data)
        else:
            self.fs.pipe_file(key, data)
        return sha

    def get(self, sha: str) -> bytes | None:
        key = self.path_for(sha)
        try:
            data = self.fs.cat_file(key)
        except FileNotFoundError:
            return None
        return verified(sha, bytes(data), f"{self.fs.protocol}:{key}", self.name_of)

    def get_unchecked(self, sha: str) -> bytes | None:
        try:
            return bytes(self.fs.cat_file(self.path_for(sha)))
        except FileNotFoundError:
            return None

    def contains(self, sha: str) -> bool:
        return bool(self.fs.exists(self.path_for(sha)))

    def remove(self, sha: str) -> bool:
        key = self.path_for(sha)
        if not self.fs.exists(key):
            return False
        self.fs.rm(key)
        return True

    def iter_ids(self) -> Iterator[str]:
        if not self.fs.exists(self.root):
            return
        for shard in self.fs.ls(self.root, detail=False):
            shard_name = shard.rstrip("/").rsplit("/", 1)[-1]
            if len(shard_name) != 2 or not self.fs.isdir(shard):
                continue
            for entry in self.fs.ls(shard, detail=False):
                name = entry.rstrip("/").rsplit("/", 1)[-1]
                if len(name) == 64 and name.startswith(shard_name):
                    yield name

    def __repr__(self) -> str:
        return f"FsspecStore({self.url!r})"
