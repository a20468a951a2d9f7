"""Shared fixtures: tiny seeded models (built once per session) and the real default model."""

from __future__ import annotations

from pathlib import Path

import pytest

from flywheel.engine import Engine
from flywheel.testing import build_tiny_model


@pytest.fixture(scope="session")
def tiny_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny-models")
    return {kind: build_tiny_model(kind, root / kind) for kind in ("gemma3", "llama", "qwen2")}  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def tiny_gemma(tiny_dirs: dict[str, Path]) -> Engine:
    return Engine.load(str(tiny_dirs["gemma3"]), progress=False)


@pytest.fixture(scope="session")
def tiny_llama(tiny_dirs: dict[str, Path]) -> Engine:
    return Engine.load(str(tiny_dirs["llama"]), progress=False)


@pytest.fixture(scope="session")
def tiny_qwen(tiny_dirs: dict[str, Path]) -> Engine:
    """A tiny qwen2 (q/k/v biases, 2 key-value heads, grouped queries) asked in its chat format."""
    return Engine.load(str(tiny_dirs["qwen2"]), progress=False, prompt_format="chat")


@pytest.fixture(scope="session")
def real_engine() -> Engine:
    """The real default model (prepared once per machine; first preparation ~1 min)."""
    return Engine.load("gemma3-270m")
