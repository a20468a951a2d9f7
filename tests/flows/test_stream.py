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


def test_the_stream_demo_says_what_the_library_did_from_slice_to_slice(scripted: str, tmp_path: Path) -> None:
    """`make run`'s stream: slices arrive, one run each, then the last slice without the library (control)."""
    from flows.demo import describe_stream, run_stream_demo
    from flywheel.report import build_report

    stream = tmp_path / "stream"
    stream.mkdir()
    ann = {"problem": "Ann has 4 pens and buys 5. How many pens?", "reference": "9"}
    rows = {"slice-1.jsonl": [{"id": "s1-ann", **ann},
                              {"id": "s1-di", "problem": "Di has 8 pens and buys 2. How many pens?", "reference": "10"}],
            "slice-2.jsonl": [{"id": "s2-ann-again", **ann},
                              {"id": "s2-bo", "problem": "Bo has 3 cups and buys 6. How many cups?", "reference": "9"}]}
    for name, slice_rows in rows.items():
        (stream / name).write_text("".join(json.dumps(r) + "\n" for r in slice_rows))
    out = run_stream_demo(tmp_path / "work", stream, model=scripted, budget=20, attempts=2)   # the model answers 9
    one, two = ({r["problem_id"]: r for r in run["results"]} for run in out["runs"])
    assert one["s1-ann"]["verified"] and one["s1-ann"]["attempts"] == 1       # greedy verified: nothing more
    assert not one["s1-di"]["verified"] and one["s1-di"]["attempts"] == 2     # failed: one sampled retry
    assert two["s2-ann-again"]["route"] == "exact" and two["s2-ann-again"]["verified"]
    assert two["s2-ann-again"]["decode_tokens"] < one["s1-ann"]["decode_tokens"]
    assert two["s2-bo"]["verified"]
    control = {r["problem_id"]: r for r in out["control"]["results"]}
    assert set(control) == set(two) and {r["route"] for r in control.values()} == {"none"}
    said = "\n".join(describe_stream(out))
    assert "slice 1: 2 new problems: 1/2 verified (1 by the first, greedy attempt)" in said
    assert "slice 2: 1 new problem and 1 asked before: 2/2 verified" in said
    assert (f"the 1 recurring problem: 1 answered from its own verified graft, {two['s2-ann-again']['decode_tokens']:,} "
            f"decode tokens (the first time: {one['s1-ann']['decode_tokens']:,})") in said
    assert "1 sampled retry decoded where the greedy attempt failed" in said
    assert f"control (slice 2 again, no library): {out['control']['totals']['verified']}/2 verified" in said
    catalog = runtime.library(out["library"], config.database_url(Path(out["library"]))).catalog
    assert build_report(catalog).curve["label"].tolist() == ["run 1 · slice1", "run 2 · slice2", "control (no graft)"]
