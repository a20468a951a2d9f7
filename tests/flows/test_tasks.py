"""flows/tasks.py: an attempt's record is a plain call that still retries what can pass, and a pass
leaves no Prefect task run per problem or per attempt (issue 19: that bookkeeping took the decode
steps' cores), while the run's own tasks stay visible in Prefect."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
from sqlalchemy.exc import IntegrityError, OperationalError

from flows import RunConfig, flywheel_run, runtime, tasks
from flows.run import run_env
from flywheel.catalog import AttemptRecord, ProblemSpec
from flywheel.catalog.api import Catalog
from flywheel.engine import Engine

PROBLEMS = "gen:linear?n=3&seed=5"


@pytest.fixture(scope="module")
def tiny(tiny_dirs: dict[str, Path], tiny_gemma: Engine) -> str:
    name = str(tiny_dirs["gemma3"])
    runtime.register_engine(name, tiny_gemma)
    return name


def _attempt(env: tasks.Env, run_id: str) -> AttemptRecord:
    lib = env.open_library()
    problem = lib.catalog.upsert_problem(ProblemSpec(text="Solve for x: 2x = 8.", reference="4", source="test"))
    lib.catalog.create_run(run_id=run_id, problem_set="inline", problem_set_hash="set-hash", budget=4, attempts=1,
                           model_name="tiny", model_fingerprint="fingerprint")
    return AttemptRecord(run_id=run_id, problem_id=problem.id, attempt_index=0, route="none", budget=4,
                         prompt_tokens=3, prefill_tokens=3, decode_tokens=2, answer="4", verified=True,
                         text="4\n")


def _faulty(monkeypatch: pytest.MonkeyPatch, error: Exception, times: int) -> list[float]:
    """Make the catalog's write raise `error` `times` times (a fault SQLite cannot be made to give on
    demand: a dropped connection), then write for real; returns the delays slept between tries."""
    real = Catalog.record_attempt
    calls = {"n": 0}

    def flaky(self: Catalog, *args: object, **kw: object) -> object:
        calls["n"] += 1
        if calls["n"] <= times:
            raise error
        return real(self, *args, **kw)   # type: ignore[arg-type]

    slept: list[float] = []
    monkeypatch.setattr(Catalog, "record_attempt", flaky)
    monkeypatch.setattr(tasks.time, "sleep", slept.append)
    return slept


def test_a_record_retries_a_dropped_connection_and_lands_once(tiny: str, lib_dir: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    env = run_env(RunConfig(problems=PROBLEMS, model=tiny, library=str(lib_dir)))
    rec = _attempt(env, "run-retry")
    dropped = OperationalError("INSERT INTO attempts", {}, ConnectionError("server closed the connection"),
                               connection_invalidated=True)
    slept = _faulty(monkeypatch, dropped, times=2)
    assert tasks.record(env, rec, []) is True
    assert slept == list(tasks.WRITE_RETRY_DELAYS[:2])
    assert [a.attempt_index for a in env.open_library().catalog.attempts_for_run("run-retry")] == [0]
    assert tasks.record(env, rec, []) is False   # recorded once: a retry after a lost reply is harmless


def test_a_record_gives_up_after_its_retries_and_never_retries_a_real_error(tiny: str, lib_dir: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    env = run_env(RunConfig(problems=PROBLEMS, model=tiny, library=str(lib_dir)))
    rec = _attempt(env, "run-fail")
    locked = OperationalError("INSERT INTO attempts", {}, Exception("database is locked"))
    slept = _faulty(monkeypatch, locked, times=10)
    with pytest.raises(OperationalError, match="locked"):
        tasks.record(env, rec, [])
    assert slept == list(tasks.WRITE_RETRY_DELAYS)
    broken = IntegrityError("INSERT INTO attempts", {}, Exception("FOREIGN KEY constraint failed"))
    slept = _faulty(monkeypatch, broken, times=1)
    with pytest.raises(IntegrityError):
        tasks.record(env, rec, [])
    assert slept == []
    assert env.open_library().catalog.attempts_for_run("run-fail") == []


def _task_names(flow_run_id: str, expect: set[str], timeout_s: float = 30.0) -> list[str]:
    """The names of a flow run's task runs, once `expect` are all there (the server writes them from
    events, a moment after the flow returns)."""
    names: list[str] = []
    deadline = time.monotonic() + timeout_s
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            runs = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])))
            names = sorted(r.name.rsplit("-", 1)[0] for r in runs)
            if expect <= set(names):
                break
            time.sleep(0.5)
    return names


def test_a_pass_has_no_task_run_per_problem_or_attempt(tiny: str, lib_dir: Path) -> None:
    out = flywheel_run(RunConfig(problems=PROBLEMS, model=tiny, library=str(lib_dir), attempts=2, budget=3))
    assert len(out["results"]) == 3 and sum(r["attempts"] for r in out["results"]) == 6
    names = _task_names(out["flow_run_id"], {"open-run", "finish-run", "load-problems"})
    assert names == ["finish-run", "load-problems", "open-run"], names
