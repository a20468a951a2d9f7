"""CLI tests run the real `flywheel` command against a temporary library and the tiny model."""

from __future__ import annotations

import os
import subprocess
import sys
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
