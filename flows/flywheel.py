"""The `flywheel_run` flow: one pass over a problem set, every token accounted for in the catalog.

    >>> from flows import RunConfig, flywheel_run                     # doctest: +SKIP
    >>> summary = flywheel_run(RunConfig(problems="gen:linear?n=5&seed=1", budget=64))  # doctest: +SKIP
    >>> summary["results"][0]["route"]                                # doctest: +SKIP
    'none'
"""

from __future__ import annotations

import secrets
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from prefect import flow
from pydantic import BaseModel, ConfigDict, Field

from flows import runtime
from flows.tasks import (
    Env,
    attempt_problem,
    deposit_own,
    finish_run,
    load_problems,
    open_run,
    record,
    route_problem,
    verify,
)
from flywheel import config
from flywheel.catalog import AttemptRecord, GraftRecord

if TYPE_CHECKING:
    from flywheel.library import Library

#: Default per-problem decode budget: enough for a short worked solution from a 270M model.
DEFAULT_BUDGET = 160


class RunConfig(BaseModel):
    """The inputs of one flywheel pass; frozen, so it can be recorded and compared."""

    model_config = ConfigDict(frozen=True)

    problems: str = Field(description="champ, a .jsonl/.csv/.parquet path, or gen:FAMILY?n=N&seed=S")
    budget: int = Field(DEFAULT_BUDGET, ge=0, description="decode-token budget per attempt")
    attempts: int = Field(1, ge=1, description="attempts per problem; >1 samples with seeds")
    run_budget: int | None = Field(None, ge=0, description="decode-token budget for the whole run")
    no_graft: bool = False
    run_id: str | None = Field(None, description="resume this run (attempts already recorded are skipped)")
    seed: int = 0
    limit: int | None = Field(None, ge=1, description="only the first N problems of the set")
    deposit: bool = Field(True, description="deposit the model's own verified solutions of new problems")
    model: str = Field(default_factory=lambda: config.model_name())
    library: str = Field(default_factory=lambda: str(config.library_root()))
    db_url: str | None = None


def new_run_id() -> str:
    return f"run-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


@flow(name="flywheel-run", log_prints=False, persist_result=False, validate_parameters=True)
def flywheel_run(cfg: RunConfig) -> dict[str, Any]:
    """Route, attempt, verify, deposit and record every problem of `cfg.problems`; returns the summary."""
    from prefect.runtime import flow_run

    started = time.perf_counter()
    run_id = cfg.run_id or new_run_id()
    flow_run_id = str(flow_run.id) if flow_run.id else None
    env = Env(model=cfg.model, library=cfg.library, db_url=config.database_url(config.library_root(cfg.library),
                                                                                cfg.db_url))
    pset = load_problems(cfg.problems, cfg.limit)
    done = open_run(env, pset, run_id=run_id, flow_run_id=flow_run_id, budget=cfg.budget,
                    attempts=cfg.attempts, no_graft=cfg.no_graft, run_budget=cfg.run_budget)
    lib = runtime.library(env.library, env.db_url)
    prior = lib.catalog.attempts_for_run(run_id)
    spent = sum(a.decode_tokens for a in prior)
    solved = {a.problem_id for a in prior if a.verified}
    model_seconds = 0.0
    for n, problem in enumerate(pset.problems, start=1):
        for k in range(cfg.attempts):
            if (problem.id, k) in done or problem.id in solved:
                continue
            budget = cfg.budget if cfg.run_budget is None else max(0, min(cfg.budget, cfg.run_budget - spent))
            decision = route_problem(env, problem, cfg.no_graft)
            seed = cfg.seed + k if cfg.attempts > 1 else None
            result = attempt_problem(env, problem, decision, budget, seed, cfg.attempts > 1)
            model_seconds += result.wall_seconds
            verdict = verify(problem, result.answer)
            if verdict.ok and cfg.deposit and decision.kind != "exact":
                deposit_own(env, problem, result, flow_run_id or run_id)
            grafts = [GraftRecord(r.artifact, "refused", r.reason) for r in result.refused]
            if result.grafted_artifact:
                grafts.append(GraftRecord(result.grafted_artifact, "ok", None, result.restored_tokens))
            record(env, AttemptRecord(
                run_id=run_id, problem_id=problem.id, attempt_index=k, route=decision.kind, budget=budget,
                route_score=decision.score, routed_artifact_sha=decision.artifact_sha,
                grafted_artifact_sha=result.grafted_artifact,
                prompt_tokens=result.prefill_tokens, prefill_tokens=result.prefill_tokens,
                restored_tokens=result.restored_tokens, decode_tokens=result.decode_tokens,
                budget_exhausted=result.budget_exhausted, answer=result.answer, verified=verdict.ok,
                verdict_status=verdict.status, wall_seconds=result.wall_seconds,
                logits_sha256=result.logits_sha256, seed=result.seed), grafts)
            spent += result.decode_tokens
            if verdict.ok:
                solved.add(problem.id)
                break
        if runtime.progress_hook is not None:
            runtime.progress_hook(n, len(pset.problems), problem.id)
    finish_run(env, run_id)
    summary = summarize(lib, run_id, flow_run_id, pset.spec, pset.hash)
    summary["skipped_rows"] = pset.skipped
    summary["timing"] = {"wall_seconds": time.perf_counter() - started, "model_seconds": model_seconds}
    return summary


def summarize(lib: Library, run_id: str, flow_run_id: str | None, spec: str, set_hash: str) -> dict[str, Any]:
    """The run's results per problem, read back from the catalog (so a resumed run reports everything)."""
    by_problem: dict[str, list[Any]] = {}
    for a in lib.catalog.attempts_for_run(run_id):
        by_problem.setdefault(a.problem_id, []).append(a)
    results = []
    for pid, attempts in by_problem.items():
        best = next((a for a in attempts if a.verified), attempts[-1])
        refused = [{"artifact": g.artifact_sha256, "reason": g.reason}
                   for a in attempts for g in lib.catalog.grafts_for_attempt(a.id) if g.outcome == "refused"]
        results.append({
            "problem_id": pid, "answer": best.answer, "verified": bool(best.verified), "route": best.route,
            "grafted_artifact": best.grafted_artifact_sha, "attempts": len(attempts),
            "decode_tokens": sum(a.decode_tokens for a in attempts),
            "prefill_tokens": sum(a.prefill_tokens for a in attempts),
            "restored_tokens": sum(a.restored_tokens for a in attempts),
            "budget_exhausted": bool(best.budget_exhausted), "refused_grafts": refused,
            "verdict": best.verdict_status, "wall_seconds": sum(a.wall_seconds or 0.0 for a in attempts),
        })
    totals = {k: sum(r[k] for r in results) for k in ("decode_tokens", "prefill_tokens", "restored_tokens")}
    totals["verified"] = sum(r["verified"] for r in results)
    totals["problems"] = len(results)
    return {"run_id": run_id, "flow_run_id": flow_run_id, "problem_set": spec, "problem_set_hash": set_hash,
            "results": results, "totals": totals}
