"""Report fixtures: a catalog built by real attempts on the tiny Gemma model, and a hand-made one.

The real catalog mirrors a flywheel's life: a `--no-graft` pass over two problems (budget-bound),
verified deposits of three problems, then a grafted pass over all three. Problem `p-new` was never
attempted without a graft, so it must show "no baseline".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from report_fixtures import (
    BASELINE_BUDGET,
    FP,
    GRAFT_BUDGET,
    OTHER_FP,
    PROBLEMS,
    SOLUTIONS,
    WATTS,
    RealCatalog,
    sha,
)

from flywheel import config
from flywheel.catalog import (
    ArtifactSpec,
    AttemptRecord,
    Catalog,
    GraftRecord,
    ProblemSpec,
    SolutionSpec,
    open_catalog,
)
from flywheel.energy import EnergyConfig, EnergyMeter
from flywheel.engine import Engine
from flywheel.kv.artifact import logits_sha256
from flywheel.library import Library
from flywheel.problemsets import set_hash
from flywheel.prompts import attempt_suffix, plain_prompt


def _decode(engine: Engine, cache: object, logits: object, budget: int) -> list[int]:
    return list(engine.decode_n_tokens(cache, logits, budget))  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def real_catalog(tiny_gemma: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCatalog]:
    engine = tiny_gemma
    root = tmp_path_factory.mktemp("report-library")
    lib = Library.open(root)
    cat = lib.catalog
    fp = engine.fingerprint.digest
    meter = EnergyMeter(EnergyConfig(cpu_watts=WATTS, source="estimate"), device="cpu")
    set_digest = set_hash(PROBLEMS)
    common = dict(problem_set="demo", problem_set_hash=set_digest, attempts=1,
                  model_name=engine.fingerprint.model, model_fingerprint=fp)

    cat.create_run(run_id="r1-baseline", budget=BASELINE_BUDGET, no_graft=True, **common)  # type: ignore[arg-type]
    cat.upsert_problems(ProblemSpec(text=p.text, id=p.id, reference=p.reference, source=p.source) for p in PROBLEMS)
    for p in PROBLEMS[:2]:
        ids = engine.encode(plain_prompt(p.text))
        meter.start()
        cache, logits = engine.prefill(ids)
        out = _decode(engine, cache, logits[-1], BASELINE_BUDGET)
        reading = meter.stop()
        answer = engine.decode_text(out)
        cat.record_attempt(AttemptRecord(
            run_id="r1-baseline", problem_id=p.id, attempt_index=0, route="none", budget=BASELINE_BUDGET,
            prompt_tokens=len(ids), prefill_tokens=len(ids), decode_tokens=len(out),
            budget_exhausted=len(out) >= BASELINE_BUDGET, answer=answer, verified=answer.strip() == p.reference,
            verdict_status="not_equivalent", wall_seconds=reading.seconds, energy_joules=reading.joules,
            energy_source=reading.source, logits_sha256=logits_sha256(logits[-1])))
    cat.finish_run("r1-baseline")

    shas = {}
    for p in PROBLEMS:
        solution, answer = SOLUTIONS[p.id]
        shas[p.id] = lib.deposit(engine, p, solution, answer, index=False).artifact_sha256

    cat.create_run(run_id="r2-graft", budget=GRAFT_BUDGET, **common)  # type: ignore[arg-type]
    for p in PROBLEMS:
        meter.start()
        graft = lib.load_graft(engine, shas[p.id])
        suffix = engine.encode(attempt_suffix(p.text, "answer"), bos=False)
        logits = engine.forward(suffix, graft.cache)
        out = _decode(engine, graft.cache, logits[-1], GRAFT_BUDGET)
        reading = meter.stop()
        answer = engine.decode_text(out)
        cat.record_attempt(AttemptRecord(
            run_id="r2-graft", problem_id=p.id, attempt_index=0, route="exact", budget=GRAFT_BUDGET,
            route_score=1.0, routed_artifact_sha=shas[p.id], grafted_artifact_sha=shas[p.id],
            prompt_tokens=len(suffix), prefill_tokens=len(suffix), restored_tokens=graft.token_count,
            decode_tokens=len(out), budget_exhausted=len(out) >= GRAFT_BUDGET, answer=answer,
            verified=answer.strip() == p.reference, verdict_status="not_equivalent",
            wall_seconds=reading.seconds, energy_joules=reading.joules, energy_source=reading.source,
            logits_sha256=logits_sha256(logits[-1])),
            grafts=[GraftRecord(artifact_sha256=shas[p.id], outcome="ok", restored_tokens=graft.token_count)])
    cat.finish_run("r2-graft")
    yield RealCatalog(cat, lib, "r1-baseline", "r2-graft", fp)
    lib.close()


# --- a hand-made catalog with round numbers, for exact arithmetic ---------------------------------

@pytest.fixture
def exact_catalog(tmp_path: Path) -> Iterator[Catalog]:
    """Problem a: two baseline attempts (1,000 and 3,000 tokens; 10 J and 30 J, one budget-exhausted)
    and a graft of 20 tokens (0.5 J). Problem b: only a baseline under another model, then a graft
    (so: no baseline for this model). Energy is `estimate` throughout."""
    cat = open_catalog(config.database_url(tmp_path / "lib"))
    for pid in ("a", "b"):
        cat.deposit(ProblemSpec(text=f"problem {pid}", id=pid, reference="1"),
                    SolutionSpec(text="s", answer="1", verdict_status="equivalent", deposited_by="test"),
                    ArtifactSpec(sha256=sha(pid), fingerprint_digest=FP, fingerprint_json="{}",
                                 model_name="tiny", token_count=500, size_bytes=500 * 1024,
                                 logits_sha256=sha("logits" + pid)))
    run = dict(problem_set="demo", problem_set_hash="d" * 64, attempts=2, model_name="tiny")
    cat.create_run(run_id="base", budget=2900, no_graft=True, model_fingerprint=FP, **run)  # type: ignore[arg-type]
    cat.create_run(run_id="other-model", budget=2900, no_graft=True, model_fingerprint=OTHER_FP, **run)  # type: ignore[arg-type]
    cat.create_run(run_id="graft", budget=50, model_fingerprint=FP, **run)  # type: ignore[arg-type]
    e = dict(energy_source="estimate")
    cat.record_attempt(AttemptRecord(run_id="base", problem_id="a", attempt_index=0, route="none", budget=2900,
                                     prefill_tokens=100, decode_tokens=900, energy_joules=10.0, **e))  # type: ignore[arg-type]
    cat.record_attempt(AttemptRecord(run_id="base", problem_id="a", attempt_index=1, route="none", budget=2900,
                                     prefill_tokens=100, decode_tokens=2900, budget_exhausted=True,
                                     energy_joules=30.0, **e))  # type: ignore[arg-type]
    cat.record_attempt(AttemptRecord(run_id="other-model", problem_id="b", attempt_index=0, route="none",
                                     budget=2900, prefill_tokens=100, decode_tokens=2900, energy_joules=30.0, **e))  # type: ignore[arg-type]
    for pid, verified in (("a", True), ("b", False)):
        cat.record_attempt(AttemptRecord(run_id="graft", problem_id=pid, attempt_index=0, route="exact", budget=50,
                                         grafted_artifact_sha=sha(pid), prefill_tokens=12, restored_tokens=500,
                                         decode_tokens=8, verified=verified, answer="1", energy_joules=0.5,
                                         logits_sha256=sha("first" + pid), **e))  # type: ignore[arg-type]
    yield cat
    cat.close()
