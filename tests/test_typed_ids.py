"""Ids that cross modules have types of their own (`flywheel.domain`): a swapped or mixed id is a
type error, found by mypy before anything runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CALLERS = '''
from flywheel.catalog import Catalog
from flywheel.domain import ArtifactSha, FingerprintDigest, ShaPrefix
from flywheel.engine import Engine
from flywheel.router import Router


def right(router: Router, catalog: Catalog, engine: Engine, text: str, typed: str) -> None:
    decision = router.route(text, engine.fingerprint.digest)
    if decision.artifact_sha is not None:
        catalog.get_artifact(decision.artifact_sha)
    catalog.get_artifact(ShaPrefix(typed))                 # what a person typed, named as a prefix


def swapped(router: Router, catalog: Catalog, text: str, fp: FingerprintDigest, sha: ArtifactSha) -> None:
    router.route(fp, text)                                 # LINE-swapped
    catalog.get_artifact(text)                             # LINE-plain
    catalog.get_artifact(fp)                               # LINE-digest
'''


def test_swapped_or_mixed_ids_are_type_errors(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    probe = tmp_path / "callers.py"
    probe.write_text(CALLERS)
    out = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", "--no-error-summary", str(probe)],
                         capture_output=True, text=True, cwd=ROOT)
    lines = CALLERS.splitlines()
    flagged = {int(line.split(":")[1]) for line in out.stdout.splitlines() if ": error:" in line}
    expected = {n for n, text in enumerate(lines, start=1) if "# LINE-" in text}
    assert flagged == expected, out.stdout
