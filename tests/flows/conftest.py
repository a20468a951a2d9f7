"""Flow tests run against Prefect's temporary local server under a throwaway PREFECT_HOME.

The environment is set at import, before Prefect is imported anywhere in the session, so no
test touches the user's ~/.prefect or a configured server. One temporary server starts per
session (~15-40 s on 2 busy cores) and every flow run in the suite reuses it.
"""

from __future__ import annotations

import os
import tempfile

os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="flywheel-prefect-")
os.environ.pop("PREFECT_API_URL", None)
os.environ["PREFECT_LOGGING_LEVEL"] = "WARNING"
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from flows import runtime  # noqa: E402
from flywheel.engine import Engine  # noqa: E402


@pytest.fixture
def lib_dir(tmp_path: Path) -> Iterator[Path]:
    """A fresh library root with a real SQLite catalog; closed after the test."""
    root = tmp_path / "library"
    yield root
    runtime.close_libraries()


class ScriptedEngine(Engine):
    """The tiny model, except that decoding emits a fixed script (a model that "knows" an answer)."""

    script = "9\nFinal answer: 9\n"

    def pick_tokens(self, logits, temperatures, generators, produced):  # type: ignore[no-untyped-def,override]
        script = self.encode(self.script, bos=False)
        return [script[len(p)] if len(p) < len(script) else next(iter(self.eos_ids)) for p in produced]


@pytest.fixture(scope="session")
def scripted(tiny_dirs: dict[str, Path], tiny_gemma: Engine) -> str:
    """Register the scripted engine under a model name of its own; returns that name."""
    eng = ScriptedEngine(tiny_gemma.model, tiny_gemma.tokenizer, tiny_gemma.fingerprint, tiny_gemma.settings)
    runtime.register_engine("scripted-tiny", eng)
    return "scripted-tiny"
