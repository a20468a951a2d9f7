"""The flywheel's tasks: small, typed, one concern each. Only catalog writes retry."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prefect import task
from prefect.cache_policies import NONE

from flows import runtime
from flywheel import config
from flywheel.attempt import AttemptResult, solution_of
from flywheel.calculator import false_steps
from flywheel.catalog import AttemptRecord, GraftRecord
from flywheel.catalog.records import bounded_text, storable
from flywheel.decode import DecodeSchedule
from flywheel.domain import RouteDecision, canonical_json
from flywheel.errors import ArtifactNotFoundError, DepositRefusedError, InputError, VerifierUnavailableError
from flywheel.grounding import copied_numbers
from flywheel.problemsets import Problem, ProblemSet, load_problem_set
from flywheel.router import RouterConfig

if TYPE_CHECKING:
    from flywheel.engine import Engine
    from flywheel.library import Library
    from verifiers import Answered, VerifierConfig


def is_transient(err: BaseException) -> bool:
    """Whether a catalog write that raised `err` may succeed if tried again: a locked or dropped database, I/O."""
    from sqlalchemy.exc import DBAPIError, OperationalError

    if isinstance(err, OperationalError | OSError):
        return not isinstance(err, FileNotFoundError)
    if isinstance(err, DBAPIError):
        return bool(err.connection_invalidated)
    return False


def _transient(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect's retry condition for the catalog-write tasks: `is_transient` of what the run raised."""
    try:
        state.result()
    except BaseException as err:
        return is_transient(err)
    return False


#: Seconds between the tries of a catalog write that failed transiently (then the error stands).
WRITE_RETRY_DELAYS = (0.2, 1.0, 3.0)
CATALOG_WRITE: dict[str, Any] = dict(retries=len(WRITE_RETRY_DELAYS), retry_delay_seconds=list(WRITE_RETRY_DELAYS),
                                     retry_condition_fn=_transient, cache_policy=NONE)
LOCAL: dict[str, Any] = dict(cache_policy=NONE)  # inputs are live objects: never hash or cache them


@dataclass(frozen=True)
class Env:
    """Where a run's work happens: the model and library, by name (tasks look them up in `runtime`)."""

    model: str
    library: str
    db_url: str
    dtype: str = config.DEFAULT_DTYPE   # the engine's dtype (part of its fingerprint)
    router: RouterConfig = RouterConfig()  # the run's routing thresholds and index

    def open_library(self) -> Library:
        """This process's open library for the run's root and catalog, routing under the run's settings."""
        return runtime.library(self.library, self.db_url, self.router)

    def engine(self) -> Engine:
        """This process's engine for the run's model and dtype."""
        from flywheel.engine import EngineSettings

        return runtime.engine(self.model, EngineSettings(dtype=self.dtype))  # type: ignore[arg-type]


@task(name="load-problems", **LOCAL)
def load_problems(spec: str, limit: int | None = None) -> ProblemSet:
    """Resolve the problem set spec (champ, file, gen family)."""
    return load_problem_set(spec, limit=limit)


@task(name="open-run", **CATALOG_WRITE)
def open_run(env: Env, pset: ProblemSet, *, run_id: str, flow_run_id: str | None, budget: int, attempts: int,
             no_graft: bool, run_budget: int | None, schedule: dict[str, Any],
             settings: dict[str, Any], verifier: VerifierConfig | None = None) -> set[tuple[str, int]]:
    """Catalogue the problems and the run (a resumed run is reopened); returns the keys already done.

    A run is resumed only under what its recorded attempts mean: the same problem set, model
    fingerprint, budgets, decode kernel and dtype (the slot count does not change a slot's bits),
    and router, energy and verifier `settings` (`RunConfig.settings()`; the verifier's worker
    count does not change a verdict). A problem whose reference contradicts the catalogue (another
    reference, or a stored verified answer) refuses the run before anything is recorded.
    """
    import json

    from flywheel import liveness

    eng, lib = env.engine(), env.open_library()
    lib.catalog.interrupt_abandoned_runs(liveness.is_gone)   # runs whose process was killed outright
    existing = lib.catalog.get_run(run_id)
    if existing is not None:
        if (existing.status == "running" and liveness.owner_state(existing.owner) == "alive"
                and not liveness.is_mine(existing.owner)):
            raise InputError(f"run {run_id!r} is still running (process {str(existing.owner).rsplit(':', 1)[0]})",
                             hint="wait for it to finish, or stop it first; its recorded attempts are kept")
        _check_resumable(existing, pset, eng.fingerprint.digest, budget, run_budget, attempts, schedule, settings,
                         no_graft=no_graft)
    lib.catalog_problems(pset.problems, verifier)   # every reference checked against the catalogue
    lib.catalog.create_run(run_id=run_id, problem_set=pset.spec, problem_set_hash=pset.hash, budget=budget,
                           attempts=attempts, model_name=eng.fingerprint.model,
                           model_fingerprint=eng.fingerprint.digest, no_graft=no_graft, run_budget=run_budget,
                           flow_run_id=flow_run_id, decode_schedule=json.dumps(schedule, sort_keys=True),
                           settings=canonical_json(settings), owner=liveness.process_token())
    return lib.catalog.recorded_attempt_keys(run_id)


#: Recorded settings that do not change a result, so a run may resume under other values.
RESULT_NEUTRAL_SETTINGS = frozenset({"verifier.workers"})
#: Settings recorded since 2026-12-07 (the prompt format and its template hash, the sampling seed, a study's
#: shape): a run
#: started before has none, and resumes as before; one that has them is compared on them.
LATER_KEYS = frozenset({"prompt_format", "seed", "study"})


def _check_resumable(run: Any, pset: ProblemSet, fingerprint: str, budget: int, run_budget: int | None,
                     attempts: int, schedule: dict[str, Any], settings: dict[str, Any], *, no_graft: bool) -> None:
    """The one comparison a resume passes: everything the run recorded that shapes its attempts, each named
    when it differs (keys a run recorded later than it started, `LATER_KEYS`, only where it has them)."""
    hint = "resume with the run's own settings, or start a new run without --run-id"
    if bool(run.no_graft) != bool(no_graft):
        raise InputError(f"run {run.id!r} was started {'with' if run.no_graft else 'without'} --no-graft, "
                         f"not {'with' if no_graft else 'without'} it", hint=hint)
    if run.problem_set_hash != pset.hash:
        raise InputError(f"run {run.id!r} was over problem set {run.problem_set!r} "
                         f"(hash {run.problem_set_hash[:12]}), not {pset.spec!r} (hash {pset.hash[:12]})",
                         hint="resume with the same --problems, or start a new run without --run-id")
    if run.model_fingerprint != fingerprint:
        raise InputError(f"run {run.id!r} ran on model {run.model_name!r} (fingerprint {run.model_fingerprint[:12]}), "
                         f"not this engine (fingerprint {fingerprint[:12]})", hint=hint)
    for name, then, now in (("--budget", run.budget, budget), ("--run-budget", run.run_budget, run_budget),
                            ("--attempts", run.attempts, attempts)):
        if then != now:
            raise InputError(f"run {run.id!r} was started with {name} {then}, not {now}", hint=hint)
    recorded = run.recorded("decode_schedule")
    keys = DecodeSchedule.RESULT_KEYS
    if recorded is not None and {k: recorded.get(k) for k in keys} != {k: schedule.get(k) for k in keys}:
        raise InputError(f"run {run.id!r} decoded under {recorded}, not {schedule}", hint=hint)
    then = run.recorded("settings")
    if then is not None:   # NULL: a run started before settings were recorded
        then_flat, now_flat = _flatten(then), _flatten(settings)
        for name in sorted(then_flat.keys() | now_flat.keys()):
            if name.split(".")[0] in LATER_KEYS and name not in then_flat:
                continue   # recorded since a later version: a run from before could not record it
            if name not in RESULT_NEUTRAL_SETTINGS and then_flat.get(name) != now_flat.get(name):
                raise InputError(f"run {run.id!r} was started with {name} {then_flat.get(name)!r}, "
                                 f"not {now_flat.get(name)!r}", hint=hint)


def _flatten(settings: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"router": {"near_threshold": 0.5}} -> {"router.near_threshold": 0.5}."""
    flat: dict[str, Any] = {}
    for key, value in settings.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def route_problem(env: Env, problem: Problem, no_graft: bool, near_members: int) -> RouteDecision:
    """Exact recurrence, up to `near_members` near neighbours (the run's router setting), or none
    (forced by --no-graft).

    A plain call, not a Prefect task: a pass makes one per problem on the decode loop's thread,
    and a task run's bookkeeping (client threads and the API server) took the cores the decode
    steps need (BENCHMARKS.md, "Prefect's bookkeeping off the decode loop"). The route is
    recorded with each attempt.
    """
    if no_graft:
        return RouteDecision("none", None, 0.0, None)
    eng, lib = env.engine(), env.open_library()
    return lib.route(eng, problem.text, members=near_members)


def verify(problem: Problem, result: AttemptResult, config: VerifierConfig | None = None) -> Answered:
    """The answer the attempt's text states and its verdict (against the reference, or by substitution
    when there is none), under `config`: one bounded request to the verifier's worker, which does the
    extraction too (the text is never parsed in this process), once per attempt.

    A plain call, not a Prefect task: it has no side effect to track or retry, and a pass makes one
    per attempt (the attempt's record carries the verdict).

    Raises:
        VerifierUnavailableError: the verifier could not run; there is no verdict to record.
    """
    from verifiers import VerifierUnavailable

    try:
        return problem.check_output(result.text, result.mode, config=config, markers=result.markers)
    except VerifierUnavailable as err:   # no verdict: the attempt is not recorded, the pass stops
        raise VerifierUnavailableError(f"{err}: attempts of problem {problem.id!r} and after were not judged "
                                       "and are not recorded", hint=VerifierUnavailableError.HINT) from None


@task(name="deposit", **CATALOG_WRITE)
def deposit_own(env: Env, problem: Problem, result: AttemptResult, answered: Answered, deposited_by: str,
                verifier: VerifierConfig | None = None, route: RouteDecision | None = None) -> str | None:
    """Deposit the model's own verified solution if new; `answered` is the pass's own answer and verdict
    on it (under the run's `verifier` settings), so the answer is not checked twice (`Library.deposit`
    says when it is).

    A right answer is not enough: a solution whose working states a false step (`20 / 24 = 2`,
    `flywheel.calculator.false_steps`) or runs on the grafted sibling's numbers (`route`'s artifacts:
    operands that are neither this problem's nor computed in it, but the sibling's) is not
    deposited, since it would be grafted as a worked example of wrong working.
    """
    eng, lib = env.engine(), env.open_library()
    if answered.answer is None or lib.catalog.exact_match(problem.text, eng.fingerprint.digest) is not None:
        return None
    solution = solution_of(result, eng.prompt_format) or result.text
    if false_steps(solution) or (route is not None and
                                 copied_numbers(problem.text, solution, grafted_texts(lib, route))):
        return None
    try:
        dep = lib.deposit(eng, problem, solution, answered.answer,
                          deposited_by=deposited_by, verifier=verifier, verdict=answered.verdict)
    except DepositRefusedError:
        return None
    return dep.artifact_sha256


def grafted_texts(lib: Library, route: RouteDecision) -> list[str]:
    """The problem and solution texts behind a route's artifacts (its members, or its one artifact)."""
    texts = []
    for sha in route.members or ((route.artifact_sha,) if route.artifact_sha else ()):
        try:
            solution = lib.catalog.get_solution(lib.catalog.get_artifact(sha).solution_id)
        except ArtifactNotFoundError:   # removed since it was routed: nothing to compare with
            continue
        problem = lib.catalog.get_problem(solution.problem_id) if solution else None
        texts += [solution.text] if solution else []
        texts += [problem.text] if problem else []
    return texts


def graft_records(result: AttemptResult) -> list[GraftRecord]:
    """The grafts an attempt tried, as catalog records: each refused one with its reason, then the one that loaded."""
    grafts = [GraftRecord(r.artifact, "refused", r.reason) for r in result.refused]
    if result.grafted_artifact_sha:
        grafts.append(GraftRecord(result.grafted_artifact_sha, "ok", None, result.restored_tokens))
    return grafts


def attempt_record(result: AttemptResult, answered: Answered, *, run_id: str, problem_id: str,
                   attempt_index: int, route: RouteDecision) -> AttemptRecord:
    """The catalog record of one finished attempt: its route, exact token accounting, energy, and the
    answer and verdict the verifier's worker found in its text."""
    verdict = answered.verdict
    return AttemptRecord(
        run_id=run_id, problem_id=problem_id, attempt_index=attempt_index, route=route.kind,
        budget=result.budget, route_score=route.score, routed_artifact_sha=route.artifact_sha,
        grafted_artifact_sha=result.grafted_artifact_sha, prompt_tokens=result.prefill_tokens,
        prefill_tokens=result.prefill_ran, restored_tokens=result.restored_ran,
        decode_tokens=result.decode_tokens, tool_tokens=result.tool_tokens,
        budget_exhausted=result.budget_exhausted, answer=storable(answered.answer),
        verified=verdict.equivalent, verdict_status=verdict.status, wall_seconds=result.wall_seconds,
        energy_joules=result.energy_joules, energy_source=result.energy_source,
        logits_sha256=result.logits_sha256, seed=result.seed, text=bounded_text(result.text),
        stop_reason=result.stop_reason)


def record(env: Env, rec: AttemptRecord, grafts: list[GraftRecord]) -> bool:
    """Record the attempt and its grafts in one transaction; False if it was already recorded.

    Retried on a transient error as the catalog-write tasks are (`WRITE_RETRY_DELAYS`), but a plain
    call, not a Prefect task: a pass records every attempt, and a task run per attempt cost the
    decode steps ~15% of their speed (its client threads and the API server share the two cores;
    BENCHMARKS.md, "Prefect's bookkeeping off the decode loop"). The run's flow, its open/finish
    and deposit tasks, and its progress logs stay in Prefect.
    """
    lib = env.open_library()
    for delay in (*WRITE_RETRY_DELAYS, None):
        try:
            return lib.catalog.record_attempt(rec, grafts).created
        except Exception as err:
            if delay is None or not is_transient(err):
                raise
            time.sleep(delay)
    raise AssertionError("unreachable")


@task(name="finish-run", **CATALOG_WRITE)
def finish_run(env: Env, run_id: str, status: str = "finished") -> None:
    """Mark the run finished."""
    env.open_library().catalog.finish_run(run_id, status)
