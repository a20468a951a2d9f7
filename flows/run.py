"""The `flywheel_run` flow: one pass over a problem set, every token accounted for in the catalog.

    >>> from flows import RunConfig, flywheel_run                     # doctest: +SKIP
    >>> summary = flywheel_run(RunConfig(problems="gen:linear?n=5&seed=1", budget=64))  # doctest: +SKIP
    >>> summary["results"][0]["route"]                                # doctest: +SKIP
    'none'

`task_runner="thread"` (the default) works through the problems one after another in this
process. `task_runner="dask"` submits each problem's route -> attempt -> verify -> deposit ->
record as one Prefect task to a Dask cluster (`prefect_dask.DaskTaskRunner`): worker processes
each load the model once (`flows.runtime`) and write to the same catalog and store, whose
writes are idempotent on unique keys and safe across processes. Two differences follow from
running problems side by side:

* `run_budget` is granted up front: attempts receive their budget in problem order as if each
  spent all of it, so the run never exceeds `run_budget`, but tokens an attempt leaves unused
  are not passed on (the sequential pass passes them on).
* a solution deposited during the run grafts into another problem of the same run only if it
  landed before that problem was routed; the sequential pass always routes after it.
"""

from __future__ import annotations

import gc
import secrets
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from prefect import flow, task
from pydantic import BaseModel, ConfigDict, Field, model_validator

from flows import runtime
from flows.tasks import (
    LOCAL,
    Env,
    Verified,
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
from flywheel.errors import InputError

if TYPE_CHECKING:
    from prefect_dask import DaskTaskRunner

    from flywheel.attempt import AttemptResult
    from flywheel.library import Library
    from flywheel.problemsets import Problem

#: Default per-problem decode budget: enough for a short worked solution from a 270M model.
DEFAULT_BUDGET = 160
#: Worker processes of the temporary local Dask cluster: one per core of a 2-core machine.
DEFAULT_DASK_WORKERS = 2

TaskRunnerKind = Literal["thread", "dask"]


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
    task_runner: TaskRunnerKind = Field("thread", description="thread: problems one after another in this "
                                        "process; dask: one Prefect task per problem on Dask worker processes")
    dask_address: str | None = Field(None, description="scheduler of an existing Dask cluster, e.g. "
                                     "tcp://dask-scheduler:8786 (default: a temporary local cluster)")
    dask_workers: int = Field(DEFAULT_DASK_WORKERS, ge=1,
                              description="worker processes of the temporary local Dask cluster")

    @model_validator(mode="after")
    def _dask_options_need_dask(self) -> RunConfig:
        if self.task_runner != "dask" and (self.dask_address is not None
                                           or self.dask_workers != DEFAULT_DASK_WORKERS):
            raise InputError(f"dask_address and dask_workers apply only to the dask task runner, "
                             f"not {self.task_runner!r}", hint="add --task-runner dask, or drop the --dask-* options")
        if self.dask_address is not None and self.dask_workers != DEFAULT_DASK_WORKERS:
            raise InputError(f"dask_workers sizes a temporary local cluster; the cluster at {self.dask_address} "
                             "has its own workers", hint="drop --dask-workers, or drop --dask-address")
        return self


def new_run_id() -> str:
    return f"run-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def attempt_once(env: Env, cfg: RunConfig, run_id: str, deposited_by: str, problem: Problem, k: int,
                 budget: int) -> tuple[AttemptResult, Verified]:
    """Attempt `k` at `problem`: route, decode under `budget`, verify, deposit if new and verified, record."""
    decision = route_problem(env, problem, cfg.no_graft)
    seed = cfg.seed + k if cfg.attempts > 1 else None
    result = attempt_problem(env, problem, decision, budget, seed, cfg.attempts > 1)
    verdict = verify(problem, result.answer)
    if verdict.ok and cfg.deposit and decision.kind != "exact":
        deposit_own(env, problem, result, deposited_by)
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
        energy_joules=result.energy_joules, energy_source=result.energy_source,
        logits_sha256=result.logits_sha256, seed=result.seed), grafts)
    return result, verdict


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
    deposited_by = flow_run_id or run_id
    if cfg.task_runner == "dask":
        model_seconds, workers = _solve_on_dask(env, cfg, run_id, deposited_by, pset.problems, done, solved, spent)
    else:
        model_seconds, workers = 0.0, []
        for n, problem in enumerate(pset.problems, start=1):
            for k in range(cfg.attempts):
                if (problem.id, k) in done or problem.id in solved:
                    continue
                budget = cfg.budget if cfg.run_budget is None else max(0, min(cfg.budget, cfg.run_budget - spent))
                result, verdict = attempt_once(env, cfg, run_id, deposited_by, problem, k, budget)
                model_seconds += result.wall_seconds
                spent += result.decode_tokens
                if verdict.ok:
                    solved.add(problem.id)
                    break
            if runtime.progress_hook is not None:
                runtime.progress_hook(n, len(pset.problems), problem.id)
    finish_run(env, run_id)
    summary = summarize(lib, run_id, flow_run_id, pset.spec, pset.hash, order=[p.id for p in pset.problems])
    summary["skipped_rows"] = pset.skipped
    summary["timing"] = {"wall_seconds": time.perf_counter() - started, "model_seconds": model_seconds,
                         "task_runner": cfg.task_runner, "workers": workers}
    return summary


# --- parallel passes on Dask -------------------------------------------------------------------------


@dataclass(frozen=True)
class Solved:
    """What one problem's unit of work reports back from its worker."""

    problem_id: str
    worker: str          # host:pid of the worker process
    engine_loads: int    # models that process has loaded so far (1 when the cache works)
    model_seconds: float


def grant_budgets(pending: Sequence[tuple[str, int]], budget: int, run_budget: int | None,
                  spent: int) -> dict[tuple[str, int], int]:
    """Decode budget per pending (problem id, attempt index), granted in order as if each spent it all.

    Without a run budget every attempt gets `budget`; with one, the grants add up to at most
    `run_budget - spent`, so attempts running side by side can never overspend it together.

        >>> grant_budgets([("a", 0), ("b", 0), ("c", 0)], budget=4, run_budget=6, spent=0)
        {('a', 0): 4, ('b', 0): 2, ('c', 0): 0}
    """
    if run_budget is None:
        return {key: budget for key in pending}
    left = max(0, run_budget - spent)
    grants: dict[tuple[str, int], int] = {}
    for key in pending:
        grants[key] = min(budget, left)
        left -= grants[key]
    return grants


@task(name="solve-problem", **LOCAL)
def solve_problem(env: Env, cfg: RunConfig, run_id: str, deposited_by: str, problem: Problem,
                  grants: list[tuple[int, int]]) -> Solved:
    """One problem's pending attempts, (attempt index, budget) in order, until one is verified (on a worker)."""
    model_seconds = 0.0
    for k, budget in grants:
        result, verdict = attempt_once(env, cfg, run_id, deposited_by, problem, k, budget)
        model_seconds += result.wall_seconds
        if verdict.ok:
            break
    return Solved(problem.id, runtime.worker_id(), runtime.engine_loads(), model_seconds)


def dask_task_runner(cfg: RunConfig) -> DaskTaskRunner:
    """The cluster at `cfg.dask_address`, or a temporary local one of `cfg.dask_workers` worker processes."""
    from prefect_dask import DaskTaskRunner

    if cfg.dask_address:
        return DaskTaskRunner(address=cfg.dask_address)
    # One thread per worker: a worker holds one model and drives it from one task at a time.
    return DaskTaskRunner(cluster_kwargs={"n_workers": cfg.dask_workers, "threads_per_worker": 1,
                                          "processes": True, "dashboard_address": ":0"})


@contextmanager
def _workers_see_this_api() -> Iterator[None]:
    """Make the task runs' serialized settings carry this flow run's API URL.

    Without a configured `PREFECT_API_URL` this process runs Prefect's temporary server; a
    worker given no URL would start (and wait ~20 s for) a temporary server of its own.
    """
    from prefect.context import FlowRunContext
    from prefect.settings import PREFECT_API_URL, temporary_settings

    ctx = FlowRunContext.get()
    if PREFECT_API_URL.value() or ctx is None or ctx.client is None:
        yield
        return
    with temporary_settings(updates={PREFECT_API_URL: str(ctx.client.api_url)}):
        yield


def _solve_on_dask(env: Env, cfg: RunConfig, run_id: str, deposited_by: str, problems: Sequence[Problem],
                   done: set[tuple[str, int]], solved: set[str], spent: int) -> tuple[float, list[dict[str, Any]]]:
    """Submit each unsolved problem as one task, gather them all; returns (model seconds, per-worker counts)."""
    from prefect.futures import as_completed

    pending = [(p.id, k) for p in problems if p.id not in solved
               for k in range(cfg.attempts) if (p.id, k) not in done]
    grants = grant_budgets(pending, cfg.budget, cfg.run_budget, spent)
    units = {p.id: [(k, grants[(p.id, k)]) for k in range(cfg.attempts) if (p.id, k) in grants]
             for p in problems}
    progress = _Progress(len(problems))
    results: list[Solved] = []
    errors: list[BaseException] = []
    with _workers_see_this_api(), dask_task_runner(cfg) as runner:
        futures = []
        for p in problems:
            if units[p.id]:
                futures.append(runner.submit(solve_problem, {
                    "env": env, "cfg": cfg, "run_id": run_id, "deposited_by": deposited_by, "problem": p,
                    "grants": units[p.id]}))
            else:
                progress(p.id)
        for future in as_completed(futures):
            try:
                out = future.result()
            except Exception as err:  # gather the rest first: their attempts are recorded, a resume skips them
                errors.append(err)
                continue
            results.append(out)
            progress(out.problem_id)
        if futures and not cfg.dask_address:
            # The temporary workers exit next. Python's final garbage collection of their heap (Prefect
            # alone leaves ~370k objects) can outlast the nanny's 4 s grace, and it then SIGKILLs them;
            # frozen objects are skipped. Nothing is lost either way: every write above is committed.
            runner.client.run(gc.freeze)
    if errors:
        raise errors[0]
    workers: dict[str, dict[str, Any]] = {}
    for r in results:
        w = workers.setdefault(r.worker, {"worker": r.worker, "problems": 0, "engine_loads": 0})
        w["problems"] += 1
        w["engine_loads"] = max(w["engine_loads"], r.engine_loads)
    return sum(r.model_seconds for r in results), sorted(workers.values(), key=lambda w: w["worker"])


class _Progress:
    """Drives `runtime.progress_hook` as problems finish, in whatever order they do."""

    def __init__(self, total: int) -> None:
        self.total, self.done = total, 0

    def __call__(self, problem_id: str) -> None:
        self.done += 1
        if runtime.progress_hook is not None:
            runtime.progress_hook(self.done, self.total, problem_id)


def summarize(lib: Library, run_id: str, flow_run_id: str | None, spec: str, set_hash: str,
              order: Sequence[str] = ()) -> dict[str, Any]:
    """The run's results per problem, read back from the catalog (so a resumed run reports everything).

    Problems come in `order` (the problem set's), then any others in the order they were recorded.
    """
    by_problem: dict[str, list[Any]] = {}
    for a in lib.catalog.attempts_for_run(run_id):
        by_problem.setdefault(a.problem_id, []).append(a)
    rank = {pid: i for i, pid in enumerate(order)}
    by_problem = dict(sorted(by_problem.items(), key=lambda kv: rank.get(kv[0], len(rank))))
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
