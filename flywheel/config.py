"""Defaults and the environment variables that override them — one source of truth for each."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_MODEL = "gemma3-270m"
DEFAULT_LIBRARY = Path("library")
#: Fixed intra-op thread count: reductions split differently across thread counts, so logits
#: are only reproducible byte for byte under the same count.
DEFAULT_THREADS = 2


def library_root(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The library root: the `--library` value, else `FLYWHEEL_LIBRARY`, else `./library`."""
    value = explicit or os.environ.get("FLYWHEEL_LIBRARY") or DEFAULT_LIBRARY
    return Path(value)


def model_name(explicit: str | None = None) -> str:
    """The model: `--model`, else `FLYWHEEL_MODEL`, else the default `gemma3-270m`."""
    return explicit or os.environ.get("FLYWHEEL_MODEL") or DEFAULT_MODEL


def database_url(library: Path, explicit: str | None = None) -> str:
    """The catalog URL: `--db`, else `FLYWHEEL_DB`, else SQLite inside the library."""
    value = explicit or os.environ.get("FLYWHEEL_DB")
    if value:
        return value
    return f"sqlite:///{(library / 'catalog.db').resolve()}"


def model_cache_dir() -> Path:
    """Where prepared (dequantized) models live, shared by every library on this machine."""
    value = os.environ.get("FLYWHEEL_MODEL_CACHE")
    if value:
        return Path(value)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kv-flywheel" / "models"
