"""Durable, all-or-nothing file writes: a reader sees the old file or the whole new one, never a part.

One recipe for every file the library writes (artifacts, the store, the router index, bundles):
a temporary file in the same directory (so the rename stays on one filesystem), written, flushed
and fsynced, renamed over the target with `os.replace`, then the directory fsynced so the rename
itself survives a power cut.

    >>> with atomic_writer(Path("out.bin")) as fh:     # doctest: +SKIP
    ...     fh.write(b"all or nothing")
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


def fsync_dir(path: Path) -> None:
    """Make a rename or unlink inside `path` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. Windows
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_writer(path: Path, *, mode: int = 0o600) -> Iterator[BinaryIO]:
    """An open binary file whose contents replace `path` only when the block ends without an error.

    Args:
        path: the file to create or replace (its folder is created if absent).
        mode: permission bits of the new file, before the umask (0o600: owner only, as `mkstemp`).
    On an error the temporary file is removed and `path` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name[:24]}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def atomic_write_bytes(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Replace `path` with `data` all-or-nothing (see `atomic_writer`)."""
    with atomic_writer(path, mode=mode) as fh:
        fh.write(data)
