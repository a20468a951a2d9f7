"""Claim 2 on the real default model: recurring CHAMP problems, once deposited, cost a handful of tokens.

Pass 1 runs with an empty library under a decode budget and measures what the model spends;
the problems' curated solutions are deposited; pass 2 routes each problem to its own artifact
(`exact`), grafts it, and the verified reference answer comes out in a few decode tokens.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from flows import RunConfig, flywheel_run, runtime
from flows.demo import write_set
from flywheel import config
from flywheel.engine import Engine
from flywheel.problemsets import load_champ

pytestmark = pytest.mark.real_model

#: CHAMP problems with short answers (239, 76, 144); the base model reaches none within the budget.
RECURRING = ("P_Combinatorics_1", "P_Combinatorics_4", "P_Combinatorics_5")
BASELINE_BUDGET = 32
#: "A handful": the reference paper spent 61 decode tokens on 8 problems (7.6 per problem).
HANDFUL = 8


def test_recurring_problems_are_answered_from_exact_grafts_in_a_handful_of_tokens(real_engine: Engine,
                                                                                   tmp_path: Path) -> None:
    runtime.register_engine(real_engine.fingerprint.model, real_engine)
    problems = [p for p in load_champ() if p.id in RECURRING]
    spec = str(write_set(problems, tmp_path / "recurring.jsonl"))
    library = tmp_path / "library"
    cfg = RunConfig(problems=spec, budget=BASELINE_BUDGET, model=real_engine.fingerprint.model, library=str(library))
    try:
        before = flywheel_run(cfg.model_copy(update={"run_id": "pass-1"}))
        lib = runtime.library(str(library), config.database_url(library))
        for p in problems:
            lib.deposit(real_engine, p, p.solution or "", p.reference or "", deposited_by="curator:test")
        after = flywheel_run(cfg.model_copy(update={"run_id": "pass-2"}))
    finally:
        runtime.close_libraries()

    assert {r["route"] for r in before["results"]} == {"none"}
    assert before["totals"]["verified"] == 0
    assert before["totals"]["decode_tokens"] <= BASELINE_BUDGET * len(problems)
    by_id = {r["problem_id"]: r for r in after["results"]}
    assert set(by_id) == set(RECURRING)
    for pid, r in by_id.items():
        assert r["route"] == "exact" and r["grafted_artifact"], pid
        assert r["verified"], (pid, r["answer"])
        assert 1 <= r["decode_tokens"] <= HANDFUL, (pid, r["decode_tokens"])
        assert r["restored_tokens"] > 100 and not r["refused_grafts"]
    assert after["totals"]["decode_tokens"] * 4 < before["totals"]["decode_tokens"]
