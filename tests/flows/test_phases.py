"""The pass's phases called one by one, outside a flow run: `route_and_grant` (route, then grant each
attempt its budget, lazily), and `_Finisher` (verify each attempt once, deposit the first verified
one on the caller's thread, record every one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows import RunConfig
from flows.run import BudgetLedger, FixedGrants, _Finisher, route_and_grant, run_env, run_pass
from flows.tasks import open_run
from flywheel.attempt import PlannedAttempt, run_attempt
from flywheel.problemsets import Problem, ProblemSet
from flywheel.timing import PhaseClock

NINE = Problem(id="nine", text="Solve for x: 3x + 8 = 35.", reference="9")
TEN = Problem(id="ten", text="Solve for y: 2y = 20.", reference="10")
SEEN = Problem(id="seen", text="What is 4 + 5?", reference="9")
DONE = Problem(id="done", text="What is 3 * 3?", reference="9")


def _cfg(model: str, lib: Path, **kw: object) -> RunConfig:
    return RunConfig(problems="inline", model=model, library=str(lib), **kw)  # type: ignore[arg-type]


def test_route_and_grant_routes_lazily_and_grants_in_order(scripted: str, lib_dir: Path) -> None:
    cfg = _cfg(scripted, lib_dir, attempts=2, seed=40)
    env = run_env(cfg)
    eng, lib = env.engine(), env.open_library()
    lib.deposit(eng, SEEN, "4 + 5 = 9.", "9", deposited_by="curator:test")   # SEEN recurs exactly
    skipped: list[str] = []
    clock = PhaseClock()
    jobs = route_and_grant(env, cfg, [DONE, NINE, SEEN, TEN], done={("done", 0), ("done", 1)},
                           ledger=BudgetLedger(budget=5, run_budget=12, spent=0), clock=clock,
                           skipped=skipped.append)
    assert skipped == [] and "route" not in clock.snapshot()          # nothing runs before it is asked
    first = next(jobs)
    assert skipped == ["done"] and first.problem is NINE and first.route == "none"
    assert first.attempts == [PlannedAttempt(0, 5, 40), PlannedAttempt(1, 5, 41)] and first.temperature > 0
    second = next(jobs)   # a recurrence is asked once, greedy, under what the run budget has left
    assert second.problem is SEEN and second.route == "exact" and second.decision.kind == "exact"
    assert second.attempts == [PlannedAttempt(0, 2, None)] and second.temperature == 0.0
    third = next(jobs)
    assert third.attempts == [PlannedAttempt(0, 0, 40), PlannedAttempt(1, 0, 41)]   # the run budget is spent
    assert next(jobs, None) is None


def test_fixed_grants_give_each_attempt_its_own_and_nothing_else(scripted: str, lib_dir: Path) -> None:
    cfg = _cfg(scripted, lib_dir, no_graft=True)
    jobs = list(route_and_grant(run_env(cfg), cfg, [NINE, TEN], done=set(),
                                ledger=FixedGrants({("nine", 0): 7, ("ten", 0): 3}), clock=PhaseClock(),
                                skipped=lambda _: None))
    assert [(j.problem.id, j.attempts) for j in jobs] == [("nine", [PlannedAttempt(0, 7, None)]),
                                                          ("ten", [PlannedAttempt(0, 3, None)])]


def test_the_finisher_verifies_once_deposits_the_first_verified_and_records_all(scripted: str,
                                                                                lib_dir: Path) -> None:
    cfg = _cfg(scripted, lib_dir, attempts=2)
    env = run_env(cfg)
    eng, lib = env.engine(), env.open_library()
    pset = ProblemSet("inline", [NINE, TEN])
    open_run.fn(env, pset, run_id="phases", flow_run_id=None, budget=24, attempts=2, no_graft=False,
                run_budget=None, schedule={}, settings=cfg.settings())
    jobs = list(route_and_grant(env, cfg, [NINE, TEN], set(), BudgetLedger(24, None, 0),
                                clock=PhaseClock(), skipped=lambda _: None))
    solved: set[str] = set()
    finisher = _Finisher(env, cfg, "phases", "test-run", solved, PhaseClock())
    for job in jobs:
        for a in job.attempts:   # the script says 9: right for NINE, wrong for TEN
            finisher.submit(job, a.index, run_attempt(eng, None, job.problem, route="none",
                                                      artifact_sha=None, budget=a.budget))
    finisher.close()
    assert solved == {"nine"}
    rows = sorted((a.problem_id, a.attempt_index, a.answer, bool(a.verified))
                  for a in lib.catalog.attempts_for_run("phases"))
    assert rows == [("nine", 0, "9", True), ("nine", 1, "9", True), ("ten", 0, "9", False), ("ten", 1, "9", False)]
    assert [a.problem_id for a in lib.catalog.list_artifacts()] == ["nine"]   # deposited once


def test_a_pass_reports_its_decoder_between_finished_problems_and_counts_each_problem_once(
        scripted: str, lib_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import flywheel.decode as decode_module

    monkeypatch.setattr(decode_module, "PROGRESS_EVERY_S", 0.0)      # a heartbeat at every decode step
    cfg = _cfg(scripted, lib_dir, attempts=2, budget=24)
    env = run_env(cfg)
    pset = ProblemSet("inline", [NINE, TEN])
    open_run.fn(env, pset, run_id="beats", flow_run_id=None, budget=24, attempts=2, no_graft=False,
                run_budget=None, schedule={}, settings=cfg.settings())
    said: list[tuple[int, int | None, str]] = []
    run_pass(env, cfg, "beats", "test-run", pset.problems, done=set(), solved=set(),
             ledger=BudgetLedger(24, None, 0), progress=lambda *a: said.append(a))
    finished = [(done, note.split(" · ")[0]) for done, _, note in said if not note.endswith("tokens decoded")]
    assert finished == [(1, "nine"), (2, "ten")]                       # one call per problem, as before
    beats = [(done, total) for done, total, note in said if note.endswith("tokens decoded")]
    assert beats and beats[0] == (0, 2) and all(d <= 2 and t == 2 for d, t in beats)   # `done` as it stood
