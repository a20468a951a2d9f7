"""Outside material: Math-Verify's public test cases (tests/verifiers/data/math_verify_cases.json).
Zero false accepts on all of them, and at least 85% agreement with the expected verdict on the cases
that are not documented convention differences (bench/verifier_agreement.py prints the full table)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from verifiers import VerifierConfig, check

DATA = json.loads((Path(__file__).parent / "data" / "math_verify_cases.json").read_text())
CASES = DATA["cases"]


def _ours(case: dict[str, object]) -> bool:
    opts = case.get("mv_options") or {}
    precision = opts.get("precision") if isinstance(opts, dict) else None
    cfg = VerifierConfig() if precision is None else replace(VerifierConfig(), tolerance=10.0 ** -int(precision))
    return check(candidate=str(case["pred"]), reference=str(case["gold"]), config=cfg).equivalent


@pytest.mark.parametrize("case", [c for c in CASES if not c.get("truth", c["expected"])], ids=lambda c: c["id"])
def test_no_false_accept(case: dict[str, object]) -> None:
    assert not _ours(case), case


def test_agreement_outside_conventions() -> None:
    kept = [c for c in CASES if "convention" not in c]
    agree = sum(_ours(c) == bool(c.get("truth", c["expected"])) for c in kept)
    assert agree / len(kept) >= 0.85, (agree, len(kept))


def test_every_convention_is_documented() -> None:
    used = {c["convention"] for c in CASES if "convention" in c}
    assert used <= set(DATA["conventions"])
    assert len(CASES) == 268 and "MIT" in DATA["license"]
