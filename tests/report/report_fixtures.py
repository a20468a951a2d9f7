"""Constants and row builders shared by the report tests (imported by conftest and the tests)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from flywheel.catalog import AttemptRecord, Catalog, GraftRecord, ProblemSpec
from flywheel.decode import DecodeRequest, decode_alone
from flywheel.energy import EnergyConfig, EnergyMeter
from flywheel.engine import Engine
from flywheel.kv.artifact import logits_sha256
from flywheel.library import Library
from flywheel.problemsets import Problem, set_hash
from flywheel.prompts import attempt_suffix, plain_prompt

PROBLEMS = [
    Problem(id="p-add", text="What is 2 + 3?", reference="5", source="demo"),
    Problem(id="p-mul", text="What is 4 * 6?", reference="24", source="demo"),
    Problem(id="p-new", text="What is 9 - 2?", reference="7", source="demo"),
]
SOLUTIONS = {"p-add": ("2 + 3 = 5.", "5"), "p-mul": ("4 * 6 = 24.", "24"), "p-new": ("9 - 2 = 7.", "7")}
BASELINE_BUDGET = 40
GRAFT_BUDGET = 6
WATTS = 12.0  # fixed, so the estimate is reproducible in kind


@dataclass(frozen=True)
class RealCatalog:
    catalog: Catalog
    library: Library
    baseline_run: str
    graft_run: str
    fingerprint: str


FP = "f" * 64
OTHER_FP = "e" * 64


def sha(tag: str) -> str:
    return hashlib.sha256(tag.encode()).hexdigest()


def _decode(engine: Engine, cache: object, logits: object, budget: int) -> list[int]:
    return decode_alone(engine, DecodeRequest(cache, logits, budget)).tokens  # type: ignore[arg-type]


def build_real_catalog(engine: Engine, root: Path, problems: list[Problem] = PROBLEMS,
                       baseline_budget: int = BASELINE_BUDGET, graft_budget: int = GRAFT_BUDGET) -> RealCatalog:
    """Run the no-graft pass over all problems but the last, deposit all, run the grafted pass."""
    lib = Library.open(root)
    cat = lib.catalog
    fp = engine.fingerprint.digest
    meter = EnergyMeter(EnergyConfig(cpu_watts=WATTS, source="estimate"), device="cpu")
    set_digest = set_hash(problems)
    common = dict(problem_set="demo", problem_set_hash=set_digest, attempts=1,
                  model_name=engine.fingerprint.model, model_fingerprint=fp)

    cat.create_run(run_id="r1-baseline", budget=baseline_budget, no_graft=True, **common)  # type: ignore[arg-type]
    cat.upsert_problems(ProblemSpec(text=p.text, id=p.id, reference=p.reference, source=p.source) for p in problems)
    for p in problems[:-1]:
        ids = engine.encode(plain_prompt(p.text))
        meter.start()
        cache, logits = engine.prefill(ids)
        out = _decode(engine, cache, logits[-1], baseline_budget)
        reading = meter.stop()
        answer = engine.decode_text(out)
        cat.record_attempt(AttemptRecord(
            run_id="r1-baseline", problem_id=p.id, attempt_index=0, route="none", budget=baseline_budget,
            prompt_tokens=len(ids), prefill_tokens=len(ids), decode_tokens=len(out),
            budget_exhausted=len(out) >= baseline_budget, answer=answer, verified=answer.strip() == p.reference,
            verdict_status="not_equivalent", wall_seconds=reading.seconds, energy_joules=reading.joules,
            energy_source=reading.source, logits_sha256=logits_sha256(logits[-1])))
    cat.finish_run("r1-baseline")

    shas = {}
    for p in problems:
        solution, answer = SOLUTIONS[p.id]
        shas[p.id] = lib.deposit(engine, p, solution, answer, index=False).artifact_sha256

    cat.create_run(run_id="r2-graft", budget=graft_budget, **common)  # type: ignore[arg-type]
    for p in problems:
        meter.start()
        graft = lib.load_graft(engine, shas[p.id])
        suffix = engine.encode(attempt_suffix(p.text, "answer"), bos=False)
        logits = engine.forward(suffix, graft.cache)
        out = _decode(engine, graft.cache, logits[-1], graft_budget)
        reading = meter.stop()
        answer = engine.decode_text(out)
        cat.record_attempt(AttemptRecord(
            run_id="r2-graft", problem_id=p.id, attempt_index=0, route="exact", budget=graft_budget,
            route_score=1.0, routed_artifact_sha=shas[p.id], grafted_artifact_sha=shas[p.id],
            prompt_tokens=len(suffix), prefill_tokens=len(suffix), restored_tokens=graft.token_count,
            decode_tokens=len(out), budget_exhausted=len(out) >= graft_budget, answer=answer,
            verified=answer.strip() == p.reference, verdict_status="not_equivalent",
            wall_seconds=reading.seconds, energy_joules=reading.joules, energy_source=reading.source,
            logits_sha256=logits_sha256(logits[-1])),
            grafts=[GraftRecord(artifact_sha256=shas[p.id], outcome="ok", restored_tokens=graft.token_count)])
    cat.finish_run("r2-graft")
    return RealCatalog(cat, lib, "r1-baseline", "r2-graft", fp)
