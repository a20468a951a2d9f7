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


def test_attempts_until_verified_stop_at_the_first_verified_and_report_the_tokens_saved(
        scripted: str, tiny_dirs: dict[str, Path], tiny_gemma: Engine, tmp_path: Path) -> None:
    """A problem its greedy attempt verifies decodes no more; one it does not gets its sampled attempts, one
    at a time, each only after the last failed."""
    box, lib = tmp_path / "inbox", tmp_path / "lib"
    box.mkdir()
    (box / "p.jsonl").write_text(json.dumps({"id": "right", "problem": "What is 4+5?", "reference": "9"}) + "\n"
                                 + json.dumps({"id": "wrong", "problem": "What is 4+4?", "reference": "8"}) + "\n")
    # the scripted model (tests/flows/conftest.py) always answers 9

    def run(until: bool, library: Path) -> dict:
        return flywheel_run(RunConfig(problems=f"inbox:{box}", model=scripted, library=str(library), budget=40,
                                      attempts=3, until_verified=until, starter=False))

    until = run(True, lib)
    rows = runtime.library(str(lib), config.database_url(lib)).catalog.attempts_for_run(until["run_id"])
    by_problem = {p: sorted((a.attempt_index, a.seed, a.verified) for a in rows if a.problem_id == p)
                  for p in ("right", "wrong")}
    assert by_problem["right"] == [(0, None, True)]                          # greedy verified: nothing more
    assert by_problem["wrong"] == [(0, None, False), (1, 1, False), (2, 2, False)]   # then sampled, seed + k
    every = run(False, tmp_path / "lib2")                                      # all 3 attempts, every problem
    assert until["totals"]["decode_tokens"] < every["totals"]["decode_tokens"]
    assert len(runtime.library(str(tmp_path / "lib2"), config.database_url(tmp_path / "lib2"))
               .catalog.attempts_for_run(every["run_id"])) == 6
    resumed = flywheel_run(RunConfig(problems=f"inbox:{box}", model=scripted, library=str(lib), budget=40,
                                     attempts=3, until_verified=True, starter=False, run_id=until["run_id"]))
    assert resumed["totals"]["decode_tokens"] == until["totals"]["decode_tokens"]
    runtime.close_libraries()


def test_the_report_draws_the_learning_curve_in_run_order_and_names_the_control(
        scripted: str, tmp_path: Path) -> None:
    from flywheel.report import build_report, plot, render

    box, lib = tmp_path / "inbox", tmp_path / "lib"
    _drop(box, "a.jsonl", ["a1", "a2"])
    flywheel_run(RunConfig(problems=f"inbox:{box}", model=scripted, library=str(lib), budget=40, starter=False))
    _drop(box, "b.jsonl", ["b1"])
    flywheel_run(RunConfig(problems=f"inbox:{box}", model=scripted, library=str(lib), budget=40, starter=False,
                           no_graft=True))
    _drop(box, "c.jsonl", ["c1", "c2"])
    flywheel_run(RunConfig(problems=f"inbox:{box}", model=scripted, library=str(lib), budget=40, starter=False,
                           attempts=3, until_verified=True))
    catalog = runtime.library(str(lib), config.database_url(lib)).catalog
    report = build_report(catalog)
    curve = report.curve
    assert curve["label"].tolist() == ["run 1", "control (no graft)", "run 2"]
    assert curve["problems"].tolist() == [2, 1, 2]
    # the scripted model answers 9: "x + n = n + 4" problems are wrong for it, every attempt
    assert curve["first_verified"].tolist() == [0, 0, 0]
    assert curve.iloc[2]["attempts_per_problem"] == 3 and curve.iloc[2]["attempts_not_decoded"] == 0
    assert all(0 <= lo <= hi <= 1 for lo, hi in zip(curve["first_low"], curve["first_high"], strict=True))
    text = render(report, "curve-csv")
    assert text.splitlines()[0].startswith("run_id,label,") and len(text.splitlines()) == 4
    assert report.to_dict()["curve"][1]["label"] == "control (no graft)"
    assert any("learning curve" in line for line in report.summary_lines)
    assert plot(report, tmp_path / "curve.png").stat().st_size > 10_000
    runtime.close_libraries()
