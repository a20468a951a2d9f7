"""K attempts that fork one graft restore and one prefill count that work once, in every total."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flows import RunConfig, flywheel_run, runtime
from flywheel import config, decode
from flywheel.engine import Engine
from flywheel.library import Library
from flywheel.problemsets import load_problem_set
from flywheel.report import build_report
from flywheel.router import RouterConfig

K = 4
CURATED = {"id": "lin-a", "problem": "Solve for x: 3x + 8 = 35.", "reference": "9",
           "solution": "Subtract 8: 3x = 27. Divide by 3: x = 9."}
FRESH = {"id": "lin-b", "problem": "Solve for x: 2x + 1 = 7.", "reference": "3"}


class CountingEngine(Engine):
    """The tiny model, counting the prompt tokens the decoder's steps feed it and the tokens it decodes
    (one pick per row per token)."""

    prefilled = 0
    decoded = 0

    def pick_tokens(self, logits: Any, temperatures: Any, generators: Any, produced: Any) -> list[int]:
        type(self).decoded += len(produced)
        return super().pick_tokens(logits, temperatures, generators, produced)


@pytest.fixture(scope="module")
def counting(tiny_gemma: Engine) -> str:
    eng = CountingEngine(tiny_gemma.model, tiny_gemma.tokenizer, tiny_gemma.fingerprint, tiny_gemma.settings)
    runtime.register_engine("counting-tiny", eng)
    return "counting-tiny"


@pytest.fixture(autouse=True)
def count_prompt_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Count what the steps prefill: here every prompt is one chunk of several tokens, and a decoding
    slot feeds one token per step, so the multi-token feeds are the prompts."""
    step = decode.decode_step

    def counted(engine: Engine, slots: Any, feeds: list[list[int]]) -> Any:
        if isinstance(engine, CountingEngine):
            CountingEngine.prefilled += sum(len(f) for f in feeds if len(f) > 1)
        return step(engine, slots, feeds)

    monkeypatch.setattr(decode, "decode_step", counted)


def _write(path: Path, rows: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_k_attempts_sharing_one_graft_and_prefill_count_it_once(counting: str, lib_dir: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    lib = runtime.library(str(lib_dir), config.database_url(lib_dir))
    curated = load_problem_set(str(_write(tmp_path / "curated.jsonl", [CURATED]))).problems[0]
    lib.deposit(runtime.engine(counting), curated, CURATED["solution"], "9", deposited_by="curator:test")
    restored: list[int] = []
    load_graft = Library.load_graft

    def counted(self: Library, engine: Engine, sha256: str) -> Any:
        g = load_graft(self, engine, sha256)
        restored.append(g.token_count)
        return g

    monkeypatch.setattr(Library, "load_graft", counted)
    CountingEngine.prefilled = CountingEngine.decoded = 0
    out = flywheel_run(RunConfig(problems=str(_write(tmp_path / "fresh.jsonl", [FRESH])), model=counting,
                                 library=str(lib_dir), budget=6, attempts=K, slots=K,
                                 router=RouterConfig(near_threshold=0.05, near_members=1)))
    prefilled, decoded = CountingEngine.prefilled, CountingEngine.decoded

    (result,) = out["results"]
    assert result["route"] == "near" and result["attempts"] == K
    assert len(restored) == 1 and prefilled > 0      # one restore and one prefill served all K attempts
    assert (result["restored_tokens"], result["prefill_tokens"], result["decode_tokens"]) == \
        (restored[0], prefilled, decoded)
    assert (out["totals"]["restored_tokens"], out["totals"]["prefill_tokens"]) == (restored[0], prefilled)

    rows = lib.catalog.attempts_for_run(out["run_id"])
    assert len(rows) == K
    assert {a.prompt_tokens for a in rows} == {prefilled}          # what each would prefill alone
    assert sorted(a.prefill_tokens for a in rows) == sorted(         # its share: 1/K each, whole tokens
        prefilled // K + (1 if i < prefilled % K else 0) for i in range(K))
    assert max(a.restored_tokens for a in rows) - min(a.restored_tokens for a in rows) <= 1
    assert sum(a.energy_joules or 0.0 for a in rows) > 0

    report = build_report(lib.catalog, out["run_id"])
    (run,) = report.runs.to_dict(orient="records")
    assert run["computed_tokens"] == prefilled + decoded
    assert run["restored_tokens"] == restored[0]
    (fit,) = report.energy_per_token.to_dict(orient="records")
    assert (fit["prefill_tokens"], fit["decode_tokens"]) == (prefilled, decoded)


def test_a_fork_granted_no_budget_shares_nothing(counting: str) -> None:
    from flywheel.attempt import AttemptJob, PlannedAttempt, solve_many
    from flywheel.energy import EnergyConfig, EnergyMeter
    from flywheel.problemsets import Problem

    eng = runtime.engine(counting)
    CountingEngine.prefilled = 0
    job = AttemptJob(Problem(id="p", text=FRESH["problem"], reference="3"), "none", None,
                     [PlannedAttempt(0, 5, 1), PlannedAttempt(1, 0, 2), PlannedAttempt(2, 5, 3)], temperature=0.7)   # the run budget ran dry for attempt 1
    meter = EnergyMeter(EnergyConfig(cpu_watts=10.0, source="estimate"), device="cpu")
    results = {k: r for _, k, r in solve_many(eng, None, [job], slots=3, meter=meter)}
    prefilled = CountingEngine.prefilled
    assert results[1].prefill_ran == results[1].restored_ran == 0 and results[1].decode_tokens == 0
    assert results[0].prefill_tokens == results[2].prefill_tokens == prefilled   # each alone: the whole prompt
    assert results[0].prefill_ran + results[2].prefill_ran == prefilled          # together: counted once
    assert (results[0].shared_by, results[2].shared_by) == (2, 2)
