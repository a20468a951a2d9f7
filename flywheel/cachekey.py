"""Signing cache entries of outside material, so a cache folder is trusted only as far as its writer.

A cache shared by path (`FLYWHEEL_PROBLEM_CACHE`, `~/.cache`) can be written by whoever can write that
folder; a hash stored beside an entry proves only that the entry agrees with itself. Entries are
therefore signed with HMAC-SHA256 under a key of this user's (`config.cache_key_path()`, mode 0600,
outside every cache folder), made on first use. An entry whose signature does not check (forged,
written under another user's key, or before entries were signed) is a miss: regenerated, never
trusted. A key file another user could have written (not ours, or writable by group or others) is
not used: then nothing read from a cache is trusted and every entry is a miss.

    >>> tag = sign({"template": 1, "instances": []})   # doctest: +SKIP
    >>> check({"template": 1, "instances": []}, tag)   # doctest: +SKIP
    True
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
import sys
from functools import cache
from pathlib import Path
from typing import Any

from flywheel import config
from flywheel.domain import canonical_json

KEY_BYTES = 32


def sign(obj: Any) -> str | None:
    """The signature of `obj` (its canonical JSON) under this user's key; None when there is no usable key."""
    key = _key(config.cache_key_path())
    if key is None:
        return None
    return hmac.new(key, canonical_json(obj).encode(), hashlib.sha256).hexdigest()


def check(obj: Any, tag: object) -> bool:
    """Whether `tag` is `obj`'s signature under this user's key (False without a usable key)."""
    expected = sign(obj)
    return expected is not None and isinstance(tag, str) and hmac.compare_digest(expected, tag)


@cache
def _key(path: Path) -> bytes | None:
    """This user's key at `path`, made on first use; None (said once) when it cannot be made or trusted."""
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    except OSError as err:
        _unusable(path, str(err))
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, secrets.token_bytes(KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)        # whole or absent; a process that raced us made the key first
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
        return _read(path)
    except OSError as err:
        _unusable(path, str(err))
        return None


def _read(path: Path) -> bytes | None:
    st = os.stat(path, follow_symlinks=False)
    if not stat.S_ISREG(st.st_mode):
        _unusable(path, "not a regular file")
        return None
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        _unusable(path, "owned by another user or writable by group or others")
        return None
    data = path.read_bytes()
    if len(data) != KEY_BYTES:
        _unusable(path, f"holds {len(data)} bytes, not {KEY_BYTES}")
        return None
    return data


def _unusable(path: Path, why: str) -> None:
    print(f"[flywheel] cache key {path} is not used ({why}): no cache entry is trusted, "
          "everything is generated again", file=sys.stderr, flush=True)
    return None
