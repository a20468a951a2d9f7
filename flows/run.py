"""The `flywheel_run` flow: one pass over a problem set, every token accounted for in the catalog.

    >>> from flows import RunConfig, flywheel_run                     # doctest: +SKIP
    >>> summary = flywheel_run(RunConfig(problems="gen:linear?n=5&seed=1", budget=64))  # doctest: +SKIP
    >>> summary["results"][0]["route"]                                # doctest: +SKIP
    'none'

A pass decodes its attempts together on `slots` decode slots (`flywheel.decode`): a problem is
routed and prepared (graft + prefill, once for its K attempts) when a slot frees, its K attempts
fork that state, and each finished attempt is verified, deposited if new and verified, and
recorded at once. `task_runner="thread"` (the default) runs the pass in this process.
`task_runner="dask"` splits the problems into one shard per worker and runs each shard's batched
pass as one Prefect task on a Dask cluster (`prefect_dask.DaskTaskRunner`): worker processes each
load the model once (`flows.runtime`) and write to the same catalog and store, whose writes are
idempotent on unique keys and safe across processes. What follows from attempts side by side:

* `run_budget` is granted when an attempt takes its slot, counting every attempt still running
  as if it spends its whole grant, so the run never exceeds `run_budget`; tokens an attempt
  leaves unused go back to later attempts. On Dask, shards are granted up front in problem order.
* a solution deposited during the run grafts into another problem of the same run only if it
  landed before that problem was routed (problems are routed as they take a slot).
* all K attempts of a problem decode side by side; every one is recorded, and the first of them
  (in finishing order) that is verified is the one deposited.
"""

from __future__ import annotations

import contextvars
import gc
import queue
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from prefect import flow, task

from flows import publish as publish_run
from flows import runtime
from flows.starter import STARTER, seed_starter
from flows.tasks import (
    LOCAL,
    Env,
    attempt_record,
    deposit_own,
    finish_run,
    graft_records,
    load_problems,
    open_run,
    record,
    route_problem,
    verify,
)
from flywheel import config
from flywheel.attempt import SAMPLE_TEMPERATURE, AttemptJob, AttemptResult, PlannedAttempt, solve_many
from flywheel.decode import LATER, _Later
from flywheel.domain import Progress, RouteDecision
from flywheel.runconfig import RunConfig
from flywheel.sources import inbox
from flywheel.timing import PhaseClock
from verifiers import Answered

if TYPE_CHECKING:
    from prefect_dask import DaskTaskRunner

    from flywheel.library import Library
    from flywheel.problemsets import Problem, ProblemSet


def run_env(cfg: RunConfig) -> Env:
    """Where `cfg`'s work happens: its model, dtype, library, catalog URL and router settings."""
    return Env(model=cfg.model, library=cfg.library, dtype=cfg.dtype, router=cfg.router,
               db_url=config.database_url(config.library_root(cfg.library), cfg.db_url))


def take_inbox(env: Env, spec: str, run_id: str) -> ProblemSet:
    """The inbox problems run `run_id` works on (`flywheel.sources.inbox.take`), read against this catalog."""
    from flywheel import liveness

    catalog = env.open_library().catalog

    def outcome(other: str) -> inbox.RunOutcome | None:
        run = catalog.get_run(other)
        if run is None:
            return None
        rows = catalog.attempts_for_run(other)
        alive = run.status == "running" and not liveness.is_gone(run.owner)
        return inbox.RunOutcome(alive, frozenset(a.problem_id for a in rows),
                                frozenset(a.problem_id for a in rows if a.verified))

    return inbox.take(spec, run_id, outcome)


def new_run_id() -> str:
    return f"run-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


AttemptKey = tuple[str, int]   # (problem id, attempt index)


class Grants(Protocol):
    """Where an attempt's decode budget comes from as it takes a slot, and where what it used goes."""

    def grant(self, key: AttemptKey) -> int:
        """Tokens attempt `key` may decode (0: it is recorded as exhausted without running)."""
        ...

    def settle(self, *, granted: int, used: int) -> None:
        """Attempt granted `granted` tokens finished having decoded `used` of them."""
        ...


class BudgetLedger:
    """Decode budget per attempt, granted as attempts take a slot, so the run never overspends.

    Every running attempt counts as spending its whole grant until it finishes; then what it
    really used is spent and the rest returns to the pool. Which attempt asks does not matter.

        >>> ledger = BudgetLedger(budget=4, run_budget=6, spent=0)
        >>> [ledger.grant(("a", 0)), ledger.grant(("b", 0)), ledger.grant(("c", 0))]
        [4, 2, 0]
        >>> ledger.settle(granted=4, used=1); ledger.grant(("c", 0))
        3
    """

    def __init__(self, budget: int, run_budget: int | None, spent: int) -> None:
        self.budget, self.run_budget, self.spent, self.outstanding = budget, run_budget, spent, 0

    def grant(self, key: AttemptKey) -> int:
        if self.run_budget is None:
            return self.budget
        granted = max(0, min(self.budget, self.run_budget - self.spent - self.outstanding))
        self.outstanding += granted
        return granted

    def settle(self, *, granted: int, used: int) -> None:
        if self.run_budget is not None:
            self.outstanding -= granted
        self.spent += used


class FixedGrants:
    """Grants decided up front (a Dask shard, `grant_budgets`): attempt `key` gets `grants[key]`, others 0.

        >>> FixedGrants({("a", 0): 5}).grant(("a", 0)), FixedGrants({("a", 0): 5}).grant(("b", 0))
        (5, 0)
    """

    def __init__(self, grants: dict[AttemptKey, int]) -> None:
        self.grants = grants

    def grant(self, key: AttemptKey) -> int:
        return self.grants.get(key, 0)

    def settle(self, *, granted: int, used: int) -> None:
        """Nothing returns to a pool: every grant was fixed before the shard started."""


def run_pass(env: Env, cfg: RunConfig, run_id: str, deposited_by: str, problems: Sequence[Problem],
             done: set[AttemptKey], solved: set[str], ledger: Grants,
             progress: Progress | None = None, clock: PhaseClock | None = None) -> float:
    """Route, attempt, verify, deposit and record the pending attempts of `problems` on decode slots.

    The phases, each a function of its own: `route_and_grant` (as a slot frees), the decode loop
    (`solve_many`), and `_Finisher` (verify and record on a thread of their own, off the decode
    loop's critical path; a deposit, which needs the model, back on this thread between steps).
    Returns the model seconds spent (graft, prefill and decode). `progress(done, len(problems),
    "problem-id · N decode tok/s")` follows each problem whose attempts are all finished (or that had
    nothing to do), with the decoder's last rate, and, `done` unchanged, each heartbeat of a decoder that
    has finished nothing for a while ("N decode tok/s, T tokens decoded"); `clock` collects where the time went.
    """
    eng, lib = env.engine(), env.open_library()
    clock = clock or PhaseClock()
    open_forks: dict[str, int] = {}
    note = [""]
    problems_done = [0]

    def problem_done(problem_id: str) -> None:
        problems_done[0] += 1
        if progress:
            progress(problems_done[0], len(problems), f"{problem_id} · {note[0]}" if note[0] else problem_id)

    def speed(finished: int, total: int | None, said: str) -> None:
        note[0] = said

    def beat(said: str) -> None:   # minutes without a finished attempt (a large model's first ones): not silence
        if progress:
            progress(problems_done[0], len(problems), said)

    jobs: Iterator[AttemptJob | _Later] = route_and_grant(env, cfg, problems, done, ledger, clock=clock,
                                                          skipped=problem_done, solved=solved)
    until = _UntilVerified(cfg, ledger, problem_done) if cfg.until_verified else None
    if until is not None:
        jobs = until.interleave(jobs)   # type: ignore[arg-type]
    else:
        jobs = _counting(jobs, open_forks)   # type: ignore[arg-type]
    model_seconds = 0.0
    finisher = _Finisher(env, cfg, run_id, deposited_by, solved, clock, settle=until.settle if until else None)
    try:
        for job, k, result in solve_many(eng, lib, jobs, slots=cfg.slots, schedule=cfg.schedule(eng.settings.weights),
                                         meter=runtime.energy_meter(cfg.energy), progress=speed, clock=clock,
                                         heartbeat=beat):
            model_seconds += result.wall_seconds
            ledger.settle(granted=result.budget, used=result.decode_tokens)
            finisher.submit(job, k, result)
            finisher.deposit_ready()
            if until is None:
                open_forks[job.problem.id] -= 1
                if open_forks[job.problem.id] == 0:
                    problem_done(job.problem.id)
    finally:
        finisher.close()
    return model_seconds


def route_and_grant(env: Env, cfg: RunConfig, problems: Sequence[Problem], done: set[AttemptKey],
                    ledger: Grants, *, clock: PhaseClock, skipped: Callable[[str], None],
                    solved: set[str] | frozenset[str] = frozenset()) -> Iterator[AttemptJob]:
    """The pass's jobs, lazily: each pending problem routed and its attempts granted budgets as a slot frees.

    A problem with nothing pending (every attempt in `done`) is `skipped`. One a resumed run had verified
    is not: its unrecorded samples are decoded, so maj@K and pass@K count K attempts (a run cut between a
    problem's samples once lost the rest). An exact recurrence is asked once, greedy (sampling it K times
    only adds wrong answers: BENCHMARKS.md, "Held-out transfer"). Under attempts until verified
    (`cfg.until_verified`) one attempt of a problem is planned at a time: the first unrecorded one, none if
    a recorded one verified (`solved`); `_UntilVerified` plans the next after a failed verdict.
    """
    sampled = cfg.attempts > 1 and not cfg.until_verified
    for problem in problems:
        pending = [k for k in range(cfg.attempts) if (problem.id, k) not in done]
        if cfg.until_verified:   # one attempt at a time: the first not recorded, unless one verified
            pending = [] if problem.id in solved else pending[:1]
        if not pending:
            skipped(problem.id)
            continue
        with clock.phase("route"):
            decision = route_problem(env, problem, cfg.no_graft, cfg.router.near_members)
        recurrence = decision.kind == "exact"
        if recurrence:
            pending = [k for k in pending if k == 0]
            if not pending:
                skipped(problem.id)
                continue
        seeded = (sampled or (cfg.until_verified and pending[0] > 0)) and not recurrence
        attempts = [PlannedAttempt(k, ledger.grant((problem.id, k)), cfg.seed + k if seeded else None)
                    for k in pending]
        yield AttemptJob(problem, decision.kind, decision.artifact_sha, attempts,
                         SAMPLE_TEMPERATURE if seeded else 0.0, decision=decision,
                         calculator=cfg.calculator, grounding=cfg.grounding)


class _UntilVerified:
    """Attempts until verified: a problem's next (sampled) attempt is planned only once its last one failed.

    `interleave` passes the pass's jobs through, putting each follow-up first as its verdict comes in, and
    says `LATER` while verdicts are still out; `settle` (on the finisher's thread, as each verdict is known)
    queues the next attempt or says the problem is done. Budgets are granted on the decode loop's thread.
    A follow-up prepares its prompt again (the same tokens in the same schedule: the same bits).
    """

    def __init__(self, cfg: RunConfig, ledger: Grants, problem_done: Callable[[str], None]) -> None:
        self.cfg, self.ledger, self.problem_done = cfg, ledger, problem_done
        self.lock = threading.Lock()
        self.ready: list[tuple[AttemptJob, int]] = []   # (the job whose attempt failed, the next index)
        self.out = 0                                     # attempts whose verdict is not in yet

    def interleave(self, jobs: Iterator[AttemptJob]) -> Iterator[AttemptJob | _Later]:
        for job in jobs:
            yield from self._follow_ups()
            with self.lock:
                self.out += len(job.attempts)
            yield job
        while True:
            follow = self._follow_ups()
            if follow:
                yield from follow
                continue
            with self.lock:
                if self.out == 0:
                    return
            yield LATER

    def _follow_ups(self) -> list[AttemptJob]:
        with self.lock:
            ready, self.ready = self.ready, []
            self.out += len(ready)
        cfg = self.cfg
        return [replace(job, attempts=[PlannedAttempt(k, self.ledger.grant((job.problem.id, k)), cfg.seed + k)],
                        temperature=SAMPLE_TEMPERATURE) for job, k in ready]

    def settle(self, job: AttemptJob, k: int, verified: bool | None) -> None:
        """Attempt `k` of `job` has its verdict (None: verification failed; no further attempt)."""
        more = verified is False and k + 1 < self.cfg.attempts and job.route != "exact"
        with self.lock:
            self.out -= 1
            if more:
                self.ready.append((job, k + 1))
        if not more:
            self.problem_done(job.problem.id)


def _decision(job: AttemptJob) -> RouteDecision:
    """The route decision `route_and_grant` gave `job` (every job of a pass has one)."""
    assert job.decision is not None, "a pass's job carries its route decision"
    return job.decision


def _counting(jobs: Iterator[AttemptJob], open_forks: dict[str, int]) -> Iterator[AttemptJob]:
    for job in jobs:
        open_forks[job.problem.id] = len(job.attempts)
        yield job


class _Finisher:
    """Verify and record each finished attempt on a thread of its own; deposit on the caller's.

    Verification (a round trip to the verifier's worker process) and the catalog write (a Prefect
    task) no longer stop the decode loop. A deposit prefills the solution on the model, so the
    thread hands it back and the decode loop makes it between steps (`deposit_ready`), before
    that attempt is recorded: a run killed between the two has the solution and resumes the
    attempt, never the other way round. The first verified attempt of a problem (in finishing
    order) is the one deposited. A failed write is raised on the caller's thread.
    """

    def __init__(self, env: Env, cfg: RunConfig, run_id: str, deposited_by: str, solved: set[str],
                 clock: PhaseClock, settle: Callable[[AttemptJob, int, bool | None], None] | None = None) -> None:
        self.env, self.cfg, self.run_id, self.deposited_by, self.clock = env, cfg, run_id, deposited_by, clock
        self.settle = settle   # told each verdict as it is known (attempts until verified)
        self.solved = solved
        self.deposited: set[str] = set()
        self.lock = threading.Lock()
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="flywheel-finish")
        self.futures: list[Future[None]] = []
        self.deposits: queue.SimpleQueue[tuple[AttemptJob, int, AttemptResult, Answered]] = queue.SimpleQueue()

    def submit(self, job: AttemptJob, k: int, result: AttemptResult) -> None:
        self._raise_failures()
        ctx = contextvars.copy_context()   # Prefect's flow-run context follows the work onto the thread
        self.futures.append(self.pool.submit(ctx.run, self._verify, job, k, result))

    def _verify(self, job: AttemptJob, k: int, result: AttemptResult) -> None:
        problem = job.problem
        try:
            with self.clock.phase("verify"):
                answered = verify(problem, result, self.cfg.verifier)
        except BaseException:
            if self.settle is not None:
                self.settle(job, k, None)   # no verdict: no further attempt waits on it (the error is raised)
            raise
        verdict = answered.verdict
        if self.settle is not None:
            self.settle(job, k, verdict.equivalent)
        with self.lock:
            deposit = (verdict.equivalent and self.cfg.deposit and job.route != "exact"
                       and problem.id not in self.deposited and problem.id not in self.solved)
            if deposit:
                self.deposited.add(problem.id)
            if verdict.equivalent:
                self.solved.add(problem.id)
        if deposit:
            self.deposits.put((job, k, result, answered))
        else:
            self._record(job, k, result, answered)

    def _record(self, job: AttemptJob, k: int, result: AttemptResult, answered: Answered) -> None:
        with self.clock.phase("record"):
            record(self.env, attempt_record(result, answered, run_id=self.run_id, problem_id=job.problem.id,
                                            attempt_index=k, route=_decision(job)),
                   graft_records(result))

    def deposit_ready(self) -> None:
        """Deposit what the thread found verified (on this, the model's, thread), then record those attempts."""
        while True:
            try:
                job, k, result, answered = self.deposits.get_nowait()
            except queue.Empty:
                return
            with self.clock.phase("deposit"):
                deposit_own(self.env, job.problem, result, answered, self.deposited_by, self.cfg.verifier,
                            route=_decision(job))
            ctx = contextvars.copy_context()
            self.futures.append(self.pool.submit(ctx.run, self._record, job, k, result, answered))

    def close(self) -> None:
        """Wait for every verification and record (depositing as they ask); raise the first failure."""
        try:
            while True:
                self.deposit_ready()   # may add the records of what it deposits
                if not self.futures:
                    break
                finished, _ = wait(self.futures, timeout=0.05, return_when=FIRST_COMPLETED)
                self.futures = [f for f in self.futures if f not in finished]
                for f in finished:
                    f.result()
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def _raise_failures(self) -> None:
        still: list[Future[None]] = []
        for f in self.futures:
            if f.done():
                f.result()
            else:
                still.append(f)
        self.futures = still


@flow(name="flywheel-run", log_prints=False, persist_result=False, validate_parameters=True)
def flywheel_run(cfg: RunConfig, progress: Progress | None = None) -> dict[str, Any]:
    """Route, attempt, verify, deposit and record every problem of `cfg.problems`; returns the summary.

    `progress(done, total, note)` follows each finished problem (`note`: its id, and the decode
    rate where it was decoded here); each is also logged to the flow run.
    """
    from prefect.runtime import flow_run

    started = time.perf_counter()
    clock = PhaseClock()
    run_id = cfg.run_id or new_run_id()
    flow_run_id = str(flow_run.id) if flow_run.id else None
    env = run_env(cfg)
    pset = take_inbox(env, cfg.problems, run_id) if inbox.is_inbox(cfg.problems) else load_problems(cfg.problems, cfg.limit)
    if progress:   # what the first seconds are spent on, before any problem can finish
        progress(0, len(pset.problems), f"{len(pset.problems)} problems; loading {cfg.model}")
    cfg.check_window(env.engine().context_window)
    schedule = cfg.schedule(env.engine().settings.weights)
    done = open_run(env, pset, run_id=run_id, flow_run_id=flow_run_id, budget=cfg.budget,
                    attempts=cfg.attempts, no_graft=cfg.no_graft, run_budget=cfg.run_budget, schedule=schedule.to_dict(),
                    settings=cfg.settings(env.engine().prompt_format.tag), verifier=cfg.verifier)
    lib = env.open_library()
    starter = seed_starter(env) if cfg.starter and not cfg.no_graft else []
    prior = lib.catalog.attempts_for_run(run_id)
    spent = sum(a.decode_tokens for a in prior)
    # Verified before a cut: not deposited again. Their unrecorded attempts are still decoded (`done` says
    # which): a resumed run decodes what the uninterrupted one would have, all K samples of every problem.
    solved = {a.problem_id for a in prior if a.verified}
    # A recurrence already asked as one is settled: it is asked once, greedy (`route_and_grant`).
    done |= {(a.problem_id, k) for a in prior if a.route == "exact" for k in range(cfg.attempts)}
    deposited_by = flow_run_id or run_id
    try:
        if cfg.task_runner == "dask":
            model_seconds, workers = _solve_on_dask(env, cfg, run_id, deposited_by, pset.problems, done, solved,
                                                    spent, _logged(progress))
        else:
            model_seconds = run_pass(env, cfg, run_id, deposited_by, pset.problems, done, solved,
                                     BudgetLedger(cfg.budget, cfg.run_budget, spent), progress=_logged(progress),
                                     clock=clock)
            workers = []
    except BaseException as err:
        # Not `running` forever: what was recorded stays, and `--run-id` resumes the rest.
        # A signal is an interruption (Ctrl-C, or SIGTERM: Prefect's TerminationSignal, the CLI's
        # KeyboardInterrupt); only an error (an Exception) fails the run.
        lib.catalog.finish_run(run_id, "failed" if isinstance(err, Exception) else "interrupted")
        raise
    finish_run(env, run_id)
    summary = summarize(lib, run_id, flow_run_id, pset.spec, pset.hash, order=[p.id for p in pset.problems])
    summary["skipped_rows"] = pset.skipped
    summary["weights"] = schedule.weights
    summary["starter"] = {"deposited": starter, "deposited_by": STARTER}
    # `wall_seconds` is this call's: attempts recorded before it (a resumed run) were read back, not decoded.
    summary["timing"] = {"wall_seconds": time.perf_counter() - started, "resumed_attempts": len(prior),
                         "model_seconds": model_seconds,
                         "task_runner": cfg.task_runner, "workers": workers,
                         "schedule": schedule.to_dict(), "breakdown": clock.snapshot()}
    summary["savings"] = publish_run.savings_of(lib, run_id)   # the report's named figures for this run
    publish_run.publish(summary)
    return summary


# --- parallel passes on Dask -------------------------------------------------------------------------


@dataclass(frozen=True)
class Solved:
    """What one shard's task reports back from its worker: the problems it finished and its model time."""

    problem_ids: tuple[str, ...]
    worker: str          # host:pid of the worker process
    engine_loads: int    # models that process has loaded so far (1 when the cache works)
    model_seconds: float


def grant_budgets(pending: Sequence[AttemptKey], budget: int, run_budget: int | None,
                  spent: int) -> dict[AttemptKey, int]:
    """Decode budget per pending (problem id, attempt index), granted in order as if each spent it all.

    Without a run budget every attempt gets `budget`; with one, the grants add up to at most
    `run_budget - spent`, so attempts running side by side can never overspend it together.

        >>> grant_budgets([("a", 0), ("b", 0), ("c", 0)], budget=4, run_budget=6, spent=0)
        {('a', 0): 4, ('b', 0): 2, ('c', 0): 0}
    """
    if run_budget is None:
        return {key: budget for key in pending}
    left = max(0, run_budget - spent)
    grants: dict[AttemptKey, int] = {}
    for key in pending:
        grants[key] = min(budget, left)
        left -= grants[key]
    return grants


@task(name="solve-shard", **LOCAL)
def solve_shard(env: Env, cfg: RunConfig, run_id: str, deposited_by: str, problems: list[Problem],
                grants: dict[AttemptKey, int], solved: Sequence[str] = ()) -> Solved:
    """One shard's pending attempts, batched on this worker's decode slots, with budgets granted up front.

    `solved`: its problems verified before a resumed run's cut (not deposited again). Every problem of the
    shard is finished when it returns (solved, attempted, or nothing to do)."""
    done = {key for p in problems for key in ((p.id, k) for k in range(cfg.attempts)) if key not in grants}
    seconds = run_pass(env, cfg, run_id, deposited_by, problems, done, set(solved), FixedGrants(grants))
    return Solved(tuple(p.id for p in problems), runtime.worker_id(), runtime.engine_loads(), seconds)


def dask_task_runner(cfg: RunConfig) -> DaskTaskRunner:
    """The cluster at `cfg.dask_address`, or a temporary local one of `cfg.dask_workers` worker processes."""
    from prefect_dask import DaskTaskRunner

    if cfg.dask_address:
        return DaskTaskRunner(address=cfg.dask_address)
    # One thread per worker: a worker holds one model and drives it from one task at a time.
    return DaskTaskRunner(cluster_kwargs={"n_workers": cfg.local_workers, "threads_per_worker": 1,
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
                   done: set[AttemptKey], solved: set[str], spent: int,
                   progress: Progress) -> tuple[float, list[dict[str, Any]]]:
    """Split the problems with pending attempts into one shard per worker, submit each as a task, gather them.

    Returns (model seconds, per-worker counts); `progress` follows each problem as its shard returns."""
    from prefect.futures import as_completed

    pending = [(p.id, k) for p in problems for k in range(cfg.attempts) if (p.id, k) not in done]
    grants = grant_budgets(pending, cfg.budget, cfg.run_budget, spent)
    todo = [p for p in problems if any((p.id, k) in grants for k in range(cfg.attempts))]
    n = cfg.local_workers   # with a cluster's address: as many shards as a local cluster would have workers
    shards = [todo[i::n] for i in range(n) if todo[i::n]]
    finished = 0

    def problem_done(problem_id: str) -> None:
        nonlocal finished
        finished += 1
        progress(finished, len(problems), problem_id)

    for p in problems:
        if p not in todo:
            problem_done(p.id)
    results: list[Solved] = []
    errors: list[BaseException] = []
    with _workers_see_this_api(), dask_task_runner(cfg) as runner:
        futures = [runner.submit(solve_shard, {
            "env": env, "cfg": cfg, "run_id": run_id, "deposited_by": deposited_by, "problems": shard,
            "grants": {key: g for key, g in grants.items() if key[0] in {p.id for p in shard}},
            "solved": sorted(solved & {p.id for p in shard})})
            for shard in shards]
        for future in as_completed(futures):
            try:
                out = future.result()
            except Exception as err:  # gather the rest first: their attempts are recorded, a resume skips them
                errors.append(err)
                continue
            results.append(out)
            for pid in out.problem_ids:
                problem_done(pid)
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
        w["problems"] += len(r.problem_ids)
        w["engine_loads"] = max(w["engine_loads"], r.engine_loads)
    return sum(r.model_seconds for r in results), sorted(workers.values(), key=lambda w: w["worker"])


def _logged(progress: Progress | None) -> Progress:
    """`progress`, with each finished problem also logged to the flow run (a rate report, `done`
    unchanged, is not logged)."""
    logger = publish_run.run_logger()
    logged = [0]

    def report(done: int, total: int | None, note: str) -> None:
        if logger is not None and done > logged[0]:
            logged[0] = done
            logger.info("problem %d/%s finished: %s", done, total, note)
        if progress is not None:
            progress(done, total, note)

    return report


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
            "tool_tokens": sum(a.tool_tokens for a in attempts),
            "prefill_tokens": sum(a.prefill_tokens for a in attempts),
            "restored_tokens": sum(a.restored_tokens for a in attempts),
            "budget_exhausted": bool(best.budget_exhausted), "refused_grafts": refused,
            "verdict": best.verdict_status, "wall_seconds": sum(a.wall_seconds or 0.0 for a in attempts),
        })
    # exact: K attempts that shared one graft restore and prefill carry shares of it (flywheel.attempt.apportion)
    totals = {k: sum(r[k] for r in results) for k in ("decode_tokens", "tool_tokens", "prefill_tokens", "restored_tokens")}
    totals["computed_tokens"] = totals["prefill_tokens"] + totals["decode_tokens"]
    totals["verified"] = sum(r["verified"] for r in results)
    totals["problems"] = len(results)
    return {"run_id": run_id, "flow_run_id": flow_run_id, "problem_set": spec, "problem_set_hash": set_hash,
            "results": results, "totals": totals}
