"""`flywheel_run` with the dask task runner: a real local cluster of 2 worker processes.

The workers load the tiny model by path (each once), route, graft, decode and record into the
same SQLite catalog and artifact store as the flow process; the results must equal a sequential
pass over the same problems on a separate library (greedy and seeded decoding are deterministic).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flows import RunConfig, flywheel_run, runtime
from flows.run import grant_budgets
from flywheel import config
from flywheel.errors import InputError
from flywheel.library import Library
from flywheel.problemsets import load_problem_set

PROBLEMS = "gen:arith?n=6&seed=3"
SAME = ("problem_id", "answer", "verified", "route", "grafted_artifact", "attempts", "decode_tokens",
        "prefill_tokens", "restored_tokens", "budget_exhausted", "refused_grafts", "verdict")


class Interrupted(Exception):
    """Raised by the test to stop a run part-way (the resume test picks it up)."""


@pytest.fixture(autouse=True)
def _close_libraries() -> Iterator[None]:
    yield
    runtime.close_libraries()


def open_lib(root: Path) -> Library:
    return runtime.library(str(root), config.database_url(root))


def curate(model: str, root: Path) -> list[str]:
    """Deposit the worked solutions of the set's first two problems: the rest route near to them."""
    lib, eng = open_lib(root), runtime.engine(model)
    return [lib.deposit(eng, p, p.solution or "", p.reference or "", deposited_by="curator:test").artifact_sha256
            for p in load_problem_set(PROBLEMS).problems[:2]]


def same_fields(summary: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: r[k] for k in SAME} for r in summary["results"]]


def test_dask_pass_on_two_worker_processes_equals_the_sequential_pass_and_resumes(
        tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    model = str(tiny_dirs["gemma3"])
    seq_root, par_root = tmp_path / "sequential", tmp_path / "dask"
    kw: dict[str, Any] = dict(problems=PROBLEMS, model=model, budget=6, attempts=2, seed=5)
    assert curate(model, seq_root) == curate(model, par_root)   # byte-identical deposits
    sequential = flywheel_run(RunConfig(library=str(seq_root), **kw))

    # Interrupt a pass on 2 decode slots (a slot's bits do not depend on the slot count) after two
    # problems, then finish it on the Dask cluster.
    def stop_after_two(done: int, total: int, problem_id: str) -> None:
        if done == 2:
            raise Interrupted(problem_id)

    with pytest.raises(Interrupted):
        flywheel_run(RunConfig(library=str(par_root), run_id="run-dask", slots=2, **kw), stop_after_two)
    lib = open_lib(par_root)
    recorded = {a.problem_id for a in lib.catalog.attempts_for_run("run-dask")}
    assert 2 <= len(recorded) < len(load_problem_set(PROBLEMS).problems)

    par = flywheel_run(RunConfig(library=str(par_root), run_id="run-dask", task_runner="dask",
                                 dask_workers=2, **kw))

    # The same answers, routes, grafts and token counts as the sequential pass.
    assert same_fields(par) == same_fields(sequential)
    routes = [r["route"] for r in par["results"]]
    assert routes[:2] == ["exact", "exact"] and "near" in routes[2:]
    assert all(r["restored_tokens"] > 0 for r in par["results"] if r["route"] != "none")

    # Every problem has exactly one row per attempt index; nothing was written twice.
    rows = lib.catalog.attempts_for_run("run-dask")
    keys = [(a.problem_id, a.attempt_index) for a in rows]
    assert len(keys) == len(set(keys))
    per_problem = {r["problem_id"]: r["attempts"] for r in par["results"]}
    assert sorted(keys) == sorted((pid, k) for pid, n in per_problem.items() for k in range(n))
    assert len(per_problem) == 6
    for a in rows:
        grafts = lib.catalog.grafts_for_attempt(a.id)
        assert len({g.artifact_sha256 for g in grafts}) == len(grafts)
    arts = lib.catalog.list_artifacts(include_unverified=True)
    assert len(arts) == len({a.sha256 for a in arts}) == len(open_lib(seq_root).catalog.list_artifacts())
    assert sorted(lib.store.iter_ids()) == sorted(a.sha256 for a in arts)     # no orphan, no missing file
    assert all(lib.store.get(a.sha256) is not None for a in arts)            # re-hashed on read

    # The problems the interrupted pass left unfinished ran in two worker processes (a shard also
    # reports a problem whose only pending attempt its route made moot), each loading the model once.
    workers = par["timing"]["workers"]
    assert par["timing"]["task_runner"] == "dask"
    assert len(workers) == 2 and 6 - len(recorded) <= sum(w["problems"] for w in workers) <= 6
    assert all(w["engine_loads"] == 1 for w in workers)
    assert runtime.worker_id() not in {w["worker"] for w in workers}

    # Resuming the finished run does no work (no cluster is even started) and reports the same.
    again = flywheel_run(RunConfig(library=str(par_root), run_id="run-dask", task_runner="dask", **kw))
    assert again["results"] == par["results"] and again["timing"]["workers"] == []
    assert len(lib.catalog.attempts_for_run("run-dask")) == len(rows)


def test_run_budget_is_granted_up_front_in_problem_order() -> None:
    pending = [("a", 0), ("a", 1), ("b", 0), ("c", 0)]
    assert grant_budgets(pending, budget=4, run_budget=None, spent=0) == dict.fromkeys(pending, 4)
    assert grant_budgets(pending, budget=4, run_budget=10, spent=0) == {
        ("a", 0): 4, ("a", 1): 4, ("b", 0): 2, ("c", 0): 0}
    assert grant_budgets(pending, budget=4, run_budget=10, spent=12) == dict.fromkeys(pending, 0)


def test_dask_options_without_the_dask_runner_are_refused() -> None:
    with pytest.raises(InputError, match="only to the dask task runner"):
        RunConfig(problems=PROBLEMS, dask_address="tcp://127.0.0.1:8786")
    with pytest.raises(InputError, match="only to the dask task runner"):   # given at its default value too
        RunConfig(problems=PROBLEMS, dask_workers=config.DEFAULT_DASK_WORKERS)
    assert RunConfig(problems=PROBLEMS, task_runner="dask").local_workers == config.DEFAULT_DASK_WORKERS
    with pytest.raises(InputError, match="has its own workers"):
        RunConfig(problems=PROBLEMS, task_runner="dask", dask_address="tcp://127.0.0.1:8786", dask_workers=4)


def test_cli_refuses_dask_options_without_the_dask_runner(tmp_path: Path) -> None:
    flywheel = str(Path(sys.executable).with_name("flywheel"))
    proc = subprocess.run([flywheel, "--library", str(tmp_path / "lib"), "run", "--problems", PROBLEMS,
                           "--dask-workers", "3"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "--task-runner dask" in proc.stderr and "Traceback" not in proc.stderr
