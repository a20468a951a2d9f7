"""CLI tests run the real `flywheel` command against a temporary library and the tiny model."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

FLYWHEEL = str(Path(sys.executable).with_name("flywheel"))

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def flywheel(tmp_path: Path, tiny_dirs: dict[str, Path]) -> Run:
    """`flywheel(*args)` runs the command with a fresh library in tmp_path and the tiny Gemma-style model."""
    env = {**os.environ, "FLYWHEEL_LIBRARY": str(tmp_path / "lib"), "FLYWHEEL_MODEL": str(tiny_dirs["gemma3"])}
    env.pop("FLYWHEEL_DB", None)

    def run(*args: str, library: Path | None = None, check: bool = False, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        e = dict(env)
        if library is not None:
            e["FLYWHEEL_LIBRARY"] = str(library)
        proc = subprocess.run([FLYWHEEL, *args], env=e, cwd=tmp_path, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"flywheel {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    return run


def catalog_rows(lib: Path, sql: str) -> list[tuple[object, ...]]:
    """Rows of `sql` on the SQLite catalog of the library at `lib`."""
    with sqlite3.connect(lib / "catalog.db") as db:
        return db.execute(sql).fetchall()


def wait_for_a_recorded_attempt(proc: subprocess.Popen[str], lib: Path, timeout: float = 240) -> None:
    """Poll until the running `flywheel run` has recorded an attempt in `lib` (or ended, or `timeout`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if catalog_rows(lib, "SELECT count(*) FROM attempts")[0][0] > 0:
                return
        except sqlite3.OperationalError:   # not created (or migrated) yet
            pass
        time.sleep(0.5)
