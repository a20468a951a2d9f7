"""Scheduled runs over a stream: each run takes what arrived since, a killed run's problems go to the next."""

from __future__ import annotations

import json
from pathlib import Path

from flows import RunConfig, flywheel_run, runtime
from flywheel import config
from flywheel.engine import Engine


def _drop(folder: Path, name: str, ids: list[str]) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text("".join(json.dumps({"id": i, "problem": f"Solve for x: x + {n} = {n + 4}.",
                                                   "reference": "4"}) + "\n" for n, i in enumerate(ids)))


def test_runs_over_an_inbox_take_each_problem_once_and_resume_their_own(tiny_dirs: dict[str, Path],
                                                                        tiny_gemma: Engine, tmp_path: Path) -> None:
    model = str(tiny_dirs["gemma3"])
    runtime.register_engine(model, tiny_gemma)
    box, lib = tmp_path / "inbox", tmp_path / "lib"
    _drop(box, "monday.jsonl", ["m1", "m2", "m3"])

    def run(**kw: object) -> dict:
        return flywheel_run(RunConfig(problems=f"inbox:{box}?take=2", model=model, library=str(lib), budget=4,
                                      starter=False, **kw))  # type: ignore[arg-type]

    first = run()
    second = run()
    assert [r["problem_id"] for r in first["results"]] == ["m1", "m2"]
    assert [r["problem_id"] for r in second["results"]] == ["m3"]
    assert run()["results"] == []                                   # nothing new: an empty run, not an error
    _drop(box, "tuesday.jsonl", ["t1"])
    assert [r["problem_id"] for r in run()["results"]] == ["t1"]
    again = run(run_id=first["run_id"])                              # a resume takes what it took
    assert [r["problem_id"] for r in again["results"]] == ["m1", "m2"]
    catalog = runtime.library(str(lib), config.database_url(lib)).catalog
    assert len(catalog.attempts_for_run(first["run_id"])) == 2
    runtime.close_libraries()
