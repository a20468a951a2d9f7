"""Generated GSM-Symbolic instances on disk: one JSON file per (package version, template, seed, n).

A file is named by the SHA-256 of its key and holds the key, the SHA-256 of its instances and the
signature of both under this user's cache key (`flywheel.cachekey`: whoever can write the folder
cannot forge it), so a read checks all three; a file that fails any is a miss (regenerated and
rewritten, said on stderr), never trusted. Writes are atomic. A miss returns None, as a cache should.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from flywheel import cachekey, config
from flywheel.domain import canonical_json, json_sha256
from flywheel.fsutil import atomic_write_bytes
from flywheel.sources.gsm_package import PACKAGE, VERSION

CACHE_FORMAT = 2      # 2: entries signed (flywheel.cachekey); bump when what an entry holds, or how instances are drawn, changes

Pair = tuple[str, str]    # (question, answer) as the package generated them


class InstanceCache:
    """Instances of one template under one seed and n, in `root/gsm-symbolic/<sha256 of key>.json`."""

    def __init__(self, root: Path) -> None:
        self.folder = root / "gsm-symbolic"

    def get(self, template: int, *, n: int, seed: int) -> list[Pair] | None:
        """The cached instances, or None when absent or when the file does not check out."""
        key = _key(template, n=n, seed=seed)
        path = self.folder / f"{json_sha256(key)}.json"
        try:
            entry: Any = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError, ValueError) as err:
            _say(f"gsm-symbolic: cache file {path} is unreadable ({err}); generating again")
            return None
        pairs = entry.get("instances") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or entry.get("key") != key or not isinstance(pairs, list) \
                or entry.get("sha256") != json_sha256(pairs) or not all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in pairs):
            _say(f"gsm-symbolic: cache file {path} does not match its key or hash; generating again")
            return None
        if not cachekey.check({"key": key, "instances": pairs}, entry.get("signature")):
            _say(f"gsm-symbolic: cache file {path} is not signed by this user's cache key "
                 f"({config.cache_key_path()}); generating again")
            return None
        return [(q, a) for q, a in pairs]

    def put(self, template: int, *, n: int, seed: int, pairs: list[Pair]) -> None:
        """Write the instances with their key and hash (atomically; an unwritable cache is said, not fatal)."""
        key = _key(template, n=n, seed=seed)
        rows = [[q, a] for q, a in pairs]
        signature = cachekey.sign({"key": key, "instances": rows})
        if signature is None:   # no usable key: an unsigned entry would never be read back
            return
        data = canonical_json({"key": key, "instances": rows, "sha256": json_sha256(rows),
                               "signature": signature}).encode()
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(self.folder / f"{json_sha256(key)}.json", data, mode=0o644)
        except OSError as err:
            _say(f"gsm-symbolic: cannot write the cache in {self.folder} ({err}); instances will be generated again")


def _key(template: int, *, n: int, seed: int) -> dict[str, Any]:
    return {"format": CACHE_FORMAT, "package": f"{PACKAGE}=={VERSION}", "template": template, "n": n, "seed": seed}


def _say(message: str) -> None:
    print(f"[flywheel] {message}", file=sys.stderr, flush=True)
