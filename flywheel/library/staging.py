"""Staging folders of bundle imports, inside the library root (same filesystem, its free space):
made and locked by their importer, found stale once that importer is gone, removed by the next import."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: Staging folders are `<library>/.import-<pid>-<random>/`. Each holds `.lock`, which its importer
#: keeps `flock`ed until the folder is removed; the kernel drops the lock when the importer dies
#: (even by `kill -9`), which is how a live import's folder is told from a stale one.
STAGING_PREFIX = ".import-"
_STAGING_LOCK = ".lock"
#: An unlocked folder whose named process still runs is stale only when older than this: a live
#: importer locks its folder microseconds after making it, so an old one means the pid was reused.
_UNLOCKED_GRACE_S = 60.0


@contextmanager
def staging_dir(root: Path) -> Iterator[Path]:
    """A fresh staging folder in `root`, locked as this process's while the block runs, then removed."""
    path = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=root))
    try:
        with open(path / _STAGING_LOCK, "wb") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def stale_staging_dirs(root: Path) -> list[Path]:
    """Staging folders in `root` whose import is gone (killed or crashed); a live import's are not listed."""
    return sorted(d for d in root.glob(f"{STAGING_PREFIX}*") if d.is_dir() and not d.is_symlink() and _stale(d))


def remove_stale_staging(root: Path) -> list[Path]:
    """Remove the staging folders that interrupted imports left in `root`; returns those removed."""
    stale = stale_staging_dirs(root)
    for d in stale:
        shutil.rmtree(d, ignore_errors=True)
    return stale


def _stale(folder: Path) -> bool:
    try:
        with open(folder / _STAGING_LOCK, "rb") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False                      # its importer holds the lock: running
            fcntl.flock(lock, fcntl.LOCK_UN)
    except FileNotFoundError:
        pass                                      # not locked yet, or killed before it was
    except OSError:
        return False                              # cannot tell: leave it
    match = re.match(rf"{re.escape(STAGING_PREFIX)}(\d+)-", folder.name)
    if match is None or not _running(int(match.group(1))):
        return True
    try:
        return time.time() - folder.stat().st_mtime > _UNLOCKED_GRACE_S
    except OSError:
        return False


def _running(pid: int) -> bool:
    """Whether a process with this id exists on this machine."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:                       # exists, owned by someone else
        return True
    return True
