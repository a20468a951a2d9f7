"""The starter library (flows/starter.py): an empty library gets verified family solutions to route to."""

from __future__ import annotations

from pathlib import Path

from flows import RunConfig, flywheel_run, runtime
from flows.starter import STARTER, starter_set
from flywheel import config
from flywheel.problemsets import load_problem_set

PROBLEMS = "gen:ages?n=2&seed=3&split=heldout"   # an unseen template of a built-in family


def _solutions_by(lib_dir: Path) -> list[str]:
    lib = runtime.library(str(lib_dir), config.database_url(lib_dir))
    return sorted(s.deposited_by for a in lib.catalog.list_artifacts()
                  if (s := lib.catalog.get_solution(a.solution_id)) is not None)


def test_an_empty_library_is_seeded_once_and_its_first_pass_routes_to_the_starter(scripted: str,
                                                                                   lib_dir: Path) -> None:
    cfg = RunConfig(problems=PROBLEMS, model=scripted, library=str(lib_dir), budget=8, starter=True, deposit=False)
    first = flywheel_run(cfg)
    families = len(load_problem_set(starter_set()).problems)
    assert len(first["starter"]["deposited"]) == families and first["starter"]["deposited_by"] == STARTER
    assert _solutions_by(lib_dir) == [STARTER] * families          # the catalog marks them as starter
    assert {r["route"] for r in first["results"]} == {"near"}       # the pass had something to graft
    again = flywheel_run(cfg)
    assert again["starter"]["deposited"] == []                      # a library with knowledge is left alone
    assert len(_solutions_by(lib_dir)) == families


def test_no_starter_and_no_graft_leave_an_empty_library_empty(scripted: str, lib_dir: Path) -> None:
    for update in ({"starter": False}, {"starter": True, "no_graft": True}):
        cfg = RunConfig(problems=PROBLEMS, model=scripted, library=str(lib_dir), budget=8, deposit=False, **update)
        out = flywheel_run(cfg)
        assert out["starter"]["deposited"] == [] and {r["route"] for r in out["results"]} == {"none"}
        assert _solutions_by(lib_dir) == []
