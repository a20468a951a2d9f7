"""The artifact storage interface: content-addressed bytes, keyed by their SHA-256 hex digest.

A store never interprets the bytes (the KV artifact format is the engine's business); it only
promises that `get(sha)` returns bytes whose SHA-256 is `sha`, or `None` when it has none.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType

from flywheel.domain import sha256_hex
from flywheel.errors import ArtifactIntegrityError, InputError

_SHA_RE = re.compile(r"^[0-9a-f]{64}$")

#: How a store names bytes: a 64-hex-digit SHA-256 computed from them alone.
Namer = Callable[[bytes], str]


def check_sha(sha: str) -> str:
    """Return `sha` if it is 64 lowercase hex digits, else raise `InputError` (no path tricks)."""
    if not isinstance(sha, str) or not _SHA_RE.match(sha):
        raise InputError(
            f"not an artifact id: {sha!r}",
            hint="artifact ids are the 64-character lowercase hex SHA-256 of the artifact file",
        )
    return sha


def verified(sha: str, data: bytes, where: str, name_of: Namer = sha256_hex) -> bytes:
    """Return `data` if it hashes to `sha`; otherwise raise `ArtifactIntegrityError`."""
    try:
        actual = name_of(data)
    except ArtifactIntegrityError:
        raise
    except Exception as err:  # a format-aware namer refusing truncated or malformed bytes
        raise ArtifactIntegrityError(
            f"artifact {sha[:12]} at {where} is corrupt: {err} ({len(data)} bytes)",
            hint="remove it (`flywheel library verify` lists every bad one) and deposit it again",
        ) from err
    if actual != sha:
        raise ArtifactIntegrityError(
            f"artifact {sha[:12]} at {where} is corrupt: its bytes hash to {actual[:12]} "
            f"({len(data)} bytes)",
            hint="remove it (`flywheel library verify` lists every bad one) and deposit it again",
        )
    return data


class ArtifactStore(ABC):
    """Content-addressed artifact bytes. A miss is `None`; corrupt bytes raise, never return.

    The name of some bytes is `name_of(bytes)`: by default their plain SHA-256; a backend may be
    given a format-aware namer (e.g. the KV format's content digest, which a file can carry
    inside itself) as long as it is a pure function of the bytes.

    Example:
        >>> sha = store.put(b"...")          # durable when put returns
        >>> store.get(sha) == b"..."
        True
    """

    name_of: Namer = staticmethod(sha256_hex)

    @abstractmethod
    def put(self, data: bytes) -> str:
        """Store `data` durably and return its SHA-256 hex; idempotent for the same bytes."""

    @abstractmethod
    def get(self, sha: str) -> bytes | None:
        """The verified bytes named `sha`, or None; raises `ArtifactIntegrityError` on a mismatch."""

    def get_unchecked(self, sha: str) -> bytes | None:
        """The stored bytes named `sha` without re-hashing them, or None.

        Only for the one checked read (`flywheel.kv.checked.CheckedArtifacts`), which checks the
        content hash itself before a byte is used, so an artifact is hashed once, not twice.
        The default is the checked `get`.
        """
        return self.get(sha)

    @abstractmethod
    def contains(self, sha: str) -> bool:
        """Whether bytes named `sha` are present (not re-hashed; `get` does that)."""

    @abstractmethod
    def remove(self, sha: str) -> bool:
        """Delete `sha`; True if it was present."""

    @abstractmethod
    def iter_ids(self) -> Iterator[str]:
        """Every artifact id present, in no particular order."""

    def path_for(self, sha: str) -> Path | str:
        """Where `sha` lives (a filesystem path or an object URL), present or not."""
        raise NotImplementedError(f"{type(self).__name__} has no addressable location")

    def close(self) -> None:  # noqa: B027 - optional hook; most backends hold nothing open
        """Release resources; the default store holds none."""

    def __enter__(self) -> ArtifactStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
