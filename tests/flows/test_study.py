"""`flywheel study` end to end on the scripted tiny engine: self-deposits, recurrences, paired held-out."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from flows import RunConfig, flywheel_run, runtime
from flows.study import CURATOR, plot, report_lines, run_study
from flywheel import config
from flywheel.engine import Engine
from flywheel.errors import InputError
from tests.flows.conftest import ScriptedEngine

#: Three "nine" train problems (the first with its curated solution) and one "ten".
TRAIN = [
    {"id": "gen-nine-train-0", "problem": "Ann has 4 pens and buys 5. How many pens?", "reference": "9",
     "solution": "4 + 5 = 9."},
    {"id": "gen-nine-train-1", "problem": "Bo has 3 cups and buys 6. How many cups?", "reference": "9"},
    {"id": "gen-nine-train-2", "problem": "Cy has 2 hats and buys 7. How many hats?", "reference": "9"},
    {"id": "gen-ten-train-0", "problem": "Di has 8 pens and buys 2. How many pens?", "reference": "10"},
]


def _write(path: Path, rows: list[dict[str, str]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_study_turns_on_the_models_own_solutions_and_pairs_the_heldout_arms(scripted: str, lib_dir: Path,
                                                                            tmp_path: Path) -> None:
    # The scripted model always answers 9: right for the "nine" problems, wrong for the others.
    train = _write(tmp_path / "train.jsonl", TRAIN)
    heldout = _write(tmp_path / "heldout.jsonl", [
        {"id": "gen-nine-heldout-0", "problem": "Ed has 1 cap and buys 8. How many caps?", "reference": "9"},
        {"id": "gen-ten-heldout-0", "problem": "Flo has 6 mugs and buys 4. How many mugs?", "reference": "10"},
    ])
    cfg = RunConfig(problems=train, model=scripted, library=str(lib_dir), budget=20, attempts=2)
    calls: list[tuple[int, int | None, str]] = []
    out = run_study(cfg, train=train, heldout=heldout, passes=1_000_000, curated=1,   # stops when nothing changes
                    progress=lambda done, total, note: calls.append((done, total, note)))

    assert out["inputs"]["curated"] == ["gen-nine-train-0"]       # one curated solution per family that has one
    train_ids = ["gen-nine-train-0", "gen-nine-train-1", "gen-nine-train-2", "gen-ten-train-0"]
    assert calls[:4] == [(i, 4, f"depositing curated solution {pid}") for i, pid in enumerate(train_ids, 1)]
    assert not any(note.startswith("depositing") for _, _, note in calls[4:])   # then the passes' own progress
    p1, p2 = out["passes"]                                         # pass 2 changed nothing: no pass 3
    assert p1["verified"] == 3 and p1["self_deposits"] == 2       # the curated one recurs; two are the model's own
    assert p2["verified"] == 3 and p2["self_deposits"] == 0       # recurrences now: nothing new to deposit
    assert p2["decode_tokens"] < p1["decode_tokens"]
    lib = runtime.library(str(lib_dir), config.database_url(lib_dir))
    by = sorted(s.deposited_by == CURATOR for a in lib.catalog.list_artifacts()
                if (s := lib.catalog.get_solution(a.solution_id)) is not None)
    assert by == [False, False, True]                              # the catalog says which is which
    assert [g["artifacts"] for g in out["library_growth"]] == [1, 3, 3]

    h = out["heldout"]
    assert h["n"] == 2 and h["without_graft"]["correct"] == h["with_graft"]["correct"] == 1
    assert h["only_with"] == h["only_without"] == 0 and h["mcnemar_p"] == 1.0 and h["power_3to1"] == 0.0
    assert set(out["families"]) == {"nine", "ten"} and out["families"]["nine"]["n"] == 1
    assert out["inputs"]["train_heldout_overlap"] == 0 and len(out["inputs"]["artifacts"]) == 3
    assert plot(out, tmp_path / "study.png").stat().st_size > 0


class _BySeed(ScriptedEngine):
    """Greedy answers 9; a sampled attempt answers 9 when its seed is even, 10 when odd."""

    def pick_tokens(self, logits, temperatures, generators, produced):  # type: ignore[no-untyped-def,override]
        out = []
        for g, p in zip(generators, produced, strict=True):
            answer = "9" if g is None or g.initial_seed() % 2 == 0 else "10"
            script = self.encode(f"{answer}\nFinal answer: {answer}\n", bos=False)
            out.append(script[len(p)] if len(p) < len(script) else next(iter(self.eos_ids)))
        return out


def _by_seed_train(tiny_gemma: Engine, tmp_path: Path) -> str:
    """Register the by-seed engine; returns a one-problem train set with its curated solution."""
    runtime.register_engine("by-seed-tiny", _BySeed(tiny_gemma.model, tiny_gemma.tokenizer, tiny_gemma.fingerprint,
                                                    tiny_gemma.settings))
    return _write(tmp_path / "train.jsonl", [
        {"id": "gen-nine-train-0", "problem": "Ann has 4 pens and buys 5. How many pens?", "reference": "9",
         "solution": "4 + 5 = 9."}])


def test_study_arms_report_pass_at_1_majority_and_pass_at_k_paired(tiny_gemma: Engine, lib_dir: Path,
                                                                   tmp_path: Path) -> None:
    train = _by_seed_train(tiny_gemma, tmp_path)
    heldout = _write(tmp_path / "heldout.jsonl", [
        {"id": "gen-nine-heldout-0", "problem": "Ed has 1 cap and buys 8. How many caps?", "reference": "9"},
        {"id": "gen-ten-heldout-0", "problem": "Flo has 6 mugs and buys 4. How many mugs?", "reference": "10"},
        {"id": "gen-ten-heldout-1", "problem": "Gus has 7 jars and buys 3. How many jars?", "reference": "10"},
    ])
    cfg = RunConfig(problems=train, model="by-seed-tiny", library=str(lib_dir), budget=20, attempts=1, seed=0)
    out = run_study(cfg, train=train, heldout=heldout, passes=1, curated=1, arms=["none", "graft", "graft+calc+ground"],
                    samples=3)   # seeds 0, 1, 2: answers 9, 10, 9

    acc = out["arms"]["accuracy"]
    assert set(acc) == {"none", "graft", "graft+calc+ground"} and out["inputs"]["samples"] == 3
    for arm in acc.values():
        assert (arm["pass@1"]["correct"], arm["maj@3"]["correct"], arm["pass@3"]["correct"]) == (1, 1, 3)
        assert arm["pass@3"]["n"] == 3 and len(arm["run_ids"]) == 2
    runs = {s for arm in acc.values() for s in arm["run_ids"]}
    assert len(runs) == 6                                             # each arm's own greedy and sampled run
    lib = runtime.library(str(lib_dir), config.database_url(lib_dir))

    def levers(run_id: str) -> tuple[object, object]:
        row = lib.catalog.get_run(run_id)
        assert row is not None and row.decode_schedule is not None
        schedule = json.loads(row.decode_schedule)
        return schedule["calculator"], schedule["grounding"]

    assert all(all(levers(rid)) for rid in acc["graft+calc+ground"]["run_ids"])   # the arm's schedule says so
    assert not any(any(levers(rid)) for rid in acc["graft"]["run_ids"] + acc["none"]["run_ids"])
    schedules = out["inputs"]["heldout_schedules"]                     # the JSON names each run's schedule too
    assert set(schedules) == runs and all(
        json.loads(lib.catalog.get_run(rid).decode_schedule) == schedules[rid] for rid in runs)
    assert schedules[acc["graft+calc+ground"]["run_ids"][0]]["calculator"] == "calc-v2"
    comparisons = {(c["arm"], c["against"], c["measure"]) for c in out["arms"]["comparisons"]}
    assert ("graft", "none", "pass@3") in comparisons and ("graft+calc+ground", "graft", "maj@3") in comparisons
    assert ("none", "graft", "pass@1") not in comparisons              # the baseline pair is compared once
    c = next(c for c in out["arms"]["comparisons"] if (c["arm"], c["against"], c["measure"]) == ("graft", "none", "pass@1"))
    assert c["only_with"] == c["only_without"] == 0 and c["mcnemar_p"] == 1.0 and set(c["families"]) == {"nine", "ten"}
    assert out["heldout"]["without_graft"]["arm"] == "none" and out["heldout"]["with_graft"]["arm"] == "graft"
    assert out["heldout"]["paired"]
    lines = report_lines(out)                                          # what `flywheel study` prints
    assert lines[:3] == ["held-out without graft (arm none): 1/3 = 33.3% (95% CI 6.1%-79.2%)",
                         "held-out with graft (arm graft): 1/3 = 33.3% (95% CI 6.1%-79.2%)",
                         "paired: only with graft 0, only without 0; exact McNemar p = 1 (power to see a 3:1 split: 0%)"]
    assert "arm graft+calc+ground: pass@1 1/3 (6%-79%), maj@3 1/3 (6%-79%), pass@3 3/3 (44%-100%)" in lines


def test_a_study_of_one_arm_says_nothing_was_paired(tiny_gemma: Engine, lib_dir: Path, tmp_path: Path) -> None:
    """An arm run as its own study (a long study split across sessions) must not print itself as a graft vs none pair."""
    train = _by_seed_train(tiny_gemma, tmp_path)
    heldout = _write(tmp_path / "heldout.jsonl", [
        {"id": "gen-nine-heldout-0", "problem": "Ed has 1 cap and buys 8. How many caps?", "reference": "9"}])
    cfg = RunConfig(problems=train, model="by-seed-tiny", library=str(lib_dir), budget=20, attempts=1, seed=0)
    out = run_study(cfg, train=train, heldout=heldout, passes=0, curated=0, arms=["none"])
    assert out["heldout"]["paired"] is False and out["heldout"]["with_graft"]["arm"] == "none"
    lines = report_lines(out)
    assert lines[0] == ("held-out, arm none (one arm: nothing paired; pair two studies' exported attempts with "
                        "bench/paired_runs.py): 1/1 = 100.0% (95% CI 20.7%-100.0%)")
    assert not any("graft" in line or "McNemar" in line for line in lines)
    assert plot(out, tmp_path / "one-arm.png").stat().st_size > 0


def test_majority_vote_needs_no_reference() -> None:
    from flows.study import majority

    assert majority(["12", None, " 7", "7", "12"]) == 0     # tie: the answer given first
    assert majority([None, "3 ", "3", "4"]) == 1
    assert majority([None, "  "]) is None


def test_unknown_study_arm_is_refused_before_anything_runs(lib_dir: Path, tmp_path: Path) -> None:
    import pytest

    from flywheel.errors import InputError

    cfg = RunConfig(problems="gen:linear?n=1&seed=1", library=str(lib_dir), budget=8)
    with pytest.raises(InputError, match="unknown study arm"):
        run_study(cfg, train="gen:linear?n=1&seed=1", heldout="gen:linear?n=1&seed=2", arms=["graft", "calc"])


def test_only_the_sampled_arms_run_sampled(tiny_gemma: Engine, lib_dir: Path, tmp_path: Path) -> None:
    train = _by_seed_train(tiny_gemma, tmp_path)
    heldout = _write(tmp_path / "heldout.jsonl", [
        {"id": "gen-ten-heldout-0", "problem": "Flo has 6 mugs and buys 4. How many mugs?", "reference": "10"}])
    cfg = RunConfig(problems=train, model="by-seed-tiny", library=str(lib_dir), budget=20, attempts=1, seed=0)
    with pytest.raises(InputError, match="sampled-arms"):
        run_study(cfg, train=train, heldout=heldout, passes=0, arms=["none"], samples=2, sampled_arms=["graft"])
    out = run_study(cfg, train=train, heldout=heldout, passes=0, arms=["none", "graft"], samples=2,
                    sampled_arms=["graft"])   # seeds 0, 1: answers 9, 10
    acc = out["arms"]["accuracy"]
    assert set(acc["none"]) == {"pass@1", "decode_tokens", "run_ids"} and len(acc["none"]["run_ids"]) == 1
    assert acc["graft"]["pass@2"]["correct"] == 1 and out["inputs"]["sampled_arms"] == ["graft"]
    assert {(c["arm"], c["against"], c["measure"]) for c in out["arms"]["comparisons"]} == {("graft", "none", "pass@1")}


def test_transfer_splits_heldout_by_template_split_into_near_and_far() -> None:
    from flows.study import transfer_report

    def summary(verified: dict[str, bool], tokens: dict[str, int], route: str) -> dict[str, object]:
        return {"totals": {"decode_tokens": sum(tokens.values())}, "run_id": route,
                "results": [{"problem_id": p, "verified": v, "decode_tokens": tokens[p], "route": route}
                            for p, v in verified.items()]}

    order = ["a", "b", "c", "d"]
    meta = {"a": {"split": "train"}, "b": {"split": "train"}, "c": {"split": "heldout"}, "d": {}}
    none = {"a": False, "b": False, "c": True, "d": True}
    graft = {"a": True, "b": True, "c": True, "d": False}
    results = {"none": {"outcomes": {"pass@1": none}, "summaries": [summary(none, dict.fromkeys(order, 100), "none")]},
               "graft": {"outcomes": {"pass@1": graft},
                         "summaries": [summary(graft, {"a": 5, "b": 7, "c": 90, "d": 80}, "near")]}}
    out = transfer_report(results, order, meta)

    assert set(out) == {"near", "far"}                       # `d` names no split: in neither part
    near, far = out["near"], out["far"]
    assert near["accuracy"]["none"]["pass@1"]["correct"] == 0 and near["accuracy"]["graft"]["pass@1"]["correct"] == 2
    assert near["accuracy"]["graft"]["decode_tokens"] == 12 and near["accuracy"]["none"]["decode_tokens"] == 200
    assert near["accuracy"]["graft"]["routes"]["near"] == 2
    (c,) = near["comparisons"]
    assert (c["arm"], c["only_with"], c["only_without"], c["n"]) == ("graft", 2, 0, 2)
    assert far["accuracy"]["graft"]["pass@1"]["n"] == 1 and far["accuracy"]["graft"]["decode_tokens"] == 90
    assert transfer_report(results, order, {}) == {}         # sets without a split: no transfer part


def test_the_study_split_reads_coverage_and_what_each_heldout_problem_was_grafted_with(
        scripted: str, lib_dir: Path, tmp_path: Path) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_study_split",
                                                  Path(__file__).resolve().parents[2] / "bench" / "study_split.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    # The scripted model answers 9: it solves template 0's train instance (a self-deposit), not template 1's.
    train = _write(tmp_path / "train.jsonl", [
        {"id": "gsm-symbolic-t0-s1-0", "problem": "Ann has 4 pens and buys 5. How many pens?", "reference": "9"},
        {"id": "gsm-symbolic-t1-s1-0", "problem": "Di has 8 pens and buys 2. How many pens?", "reference": "10"},
    ])
    heldout = _write(tmp_path / "heldout.jsonl", [
        {"id": "gsm-symbolic-t0-s11-0", "problem": "Ed has 1 pen and buys 8. How many pens?", "reference": "9"},
        {"id": "gsm-symbolic-t1-s11-0", "problem": "Flo has 6 pens and buys 4. How many pens?", "reference": "10"},
        {"id": "gsm-symbolic-t2-s11-0", "problem": "Gus has 3 pens and buys 6. How many pens?", "reference": "9"},
    ])
    cfg = RunConfig(problems=train, model=scripted, library=str(lib_dir), budget=20, attempts=2)
    study = run_study(cfg, train=train, heldout=heldout, passes=1, curated=0, arms=["none", "graft"])
    out = bench.split(study, runtime.library(str(lib_dir), config.database_url(lib_dir)))

    assert out["library"]["artifacts"] == {"own": 1}
    assert out["library"]["own_train_templates"] == [0] and out["library"]["coverage"]["of"] == 75
    groups = {(g["part"], g["group"]): g for g in out["groups"]}
    assert sum(g["n"] for g in groups.values()) == 3 and {p for p, _ in groups} == {"near", "far"}
    sibling = groups[("near", "sibling")]                 # template 0's held-out instance met its own sibling
    assert sibling["n"] == 1 and sibling["none"]["correct"] == sibling["graft"]["correct"] == 1
    assert all(g != "sibling" for p, g in groups if p == "far")   # no far template has a deposit
    assert bench.template_of("gsm-symbolic-t17-original") == 17 and bench.template_of("gen-nine-0") is None
    # The same split with the `none` arm given from an exported attempts file (a study run with --arms graft).
    anchor = tmp_path / "anchor.jsonl"
    lib = runtime.library(str(lib_dir), config.database_url(lib_dir))
    anchor.write_text("".join(json.dumps({"run_id": "run-a-heldout-none", "problem_id": a.problem_id, "attempt": 0,
                                          "verified": bool(a.verified), "decode_tokens": a.decode_tokens}) + "\n"
                              for a in lib.catalog.attempts_for_run(study["arms"]["accuracy"]["none"]["run_ids"][0])))
    graft_only = {**study, "arms": {"accuracy": {"graft": study["arms"]["accuracy"]["graft"]}}}
    given = bench.split(graft_only, lib, bench.anchor_outcomes(anchor))
    assert given["groups"] == out["groups"] and given["library"] == out["library"]
    with pytest.raises(SystemExit, match="--none-attempts"):
        bench.split(graft_only, lib)
    # Other arms of one study play `none` and `graft` by name (a study run with --arms none+calc,graft+calc).
    acc = study["arms"]["accuracy"]
    renamed = {**study, "arms": {"accuracy": {"none+calc": acc["none"], "graft+calc": acc["graft"]}}}
    named = bench.split(renamed, lib, arms=("none+calc", "graft+calc"))
    assert named["groups"] == out["groups"] and named["arms"] == {"none": "none+calc", "graft": "graft+calc"}
    with pytest.raises(SystemExit, match="no `graft` arm; it has graft[+]calc, none[+]calc"):
        bench.split(renamed, lib, arms=("none+calc", "graft"))


class _Stop:
    """A progress callback that interrupts the study (as Ctrl-C would) at the `at`-th problem whose note
    holds `word`, once."""

    def __init__(self, word: str, at: int) -> None:
        self.word, self.at, self.seen = word, at, 0

    def __call__(self, done: int, total: int | None, note: str) -> None:
        self.seen += self.word in note and not note.startswith("depositing")
        if self.seen == self.at:
            raise KeyboardInterrupt


def test_a_run_cut_between_a_problems_samples_decodes_the_rest_on_resume(tiny_gemma: Engine, tmp_path: Path) -> None:
    """A cut lands between a problem's K samples (slots finish them in any order): the resumed run decodes
    the unrecorded ones even though a recorded one verified, so maj@K and pass@K count K attempts, the
    uninterrupted run's bytes. (Once it skipped a problem with any verified attempt: 2 of 4 samples lost.)"""
    _by_seed_train(tiny_gemma, tmp_path)
    heldout = _write(tmp_path / "heldout.jsonl", [
        {"id": "gen-nine-heldout-0", "problem": "Ed has 1 cap and buys 8. How many caps?", "reference": "9"},
        {"id": "gen-ten-heldout-0", "problem": "Flo has 6 mugs and buys 4. How many mugs?", "reference": "10"}])
    cfg = RunConfig(problems=heldout, model="by-seed-tiny", library=str(tmp_path / "lib"), budget=20, attempts=4,
                    seed=0, deposit=False, run_id="run-k4")
    try:
        flywheel_run(cfg)
        lib = runtime.library(str(tmp_path / "lib"), config.database_url(tmp_path / "lib"))

        def recorded() -> dict[tuple[str, int], tuple[str | None, bool, str | None]]:
            return {(a.problem_id, a.attempt_index): (a.answer, a.verified, a.text)
                    for a in lib.catalog.attempts_for_run("run-k4")}

        whole = recorded()
        assert len(whole) == 8 and [whole["gen-nine-heldout-0", k][1] for k in range(4)] == [True, False, True, False]
        # What a SIGTERM between samples left on 2026-12-06: samples 0 and 2 recorded (both verified), 1 and 3 not.
        with sqlite3.connect(tmp_path / "lib" / "catalog.db") as db:
            db.execute("PRAGMA foreign_keys = ON")
            db.execute("DELETE FROM attempts WHERE run_id = 'run-k4' AND problem_id = 'gen-nine-heldout-0' "
                       "AND attempt_index IN (1, 3)")
        lib.catalog.finish_run("run-k4", "interrupted")
        assert len(recorded()) == 6
        out = flywheel_run(cfg)
        assert recorded() == whole and out["timing"]["resumed_attempts"] == 6
    finally:
        runtime.close_libraries()


def _figures(out: dict[str, object]) -> dict[str, object]:
    """What a resume must reproduce: every held-out figure (no arm deposits, so a resumed arm decodes the
    same attempts), and each train pass's verified count and self-deposits. Not a cut pass's decode
    tokens: its remaining problems are routed through the deposits made before the cut, which an
    uninterrupted pass's concurrent attempts did not see yet."""
    passes = [{k: p[k] for k in ("pass", "problems", "verified", "self_deposits")} for p in out["passes"]]
    arms = {arm: {m: a for m, a in acc.items() if m != "run_ids"} for arm, acc in out["arms"]["accuracy"].items()}
    return {"passes": passes, "arms": arms, "heldout": {k: v for k, v in out["heldout"].items()
                                                        if k not in ("without_graft", "with_graft")},
            "growth": out["library_growth"], "artifacts": len(out["inputs"]["artifacts"])}


def _move_by_catalog(src: Path, dst: Path) -> None:
    """What moving a cut study to a host that kept nothing else takes: a consistent copy of the catalog
    (SQLite's backup, the write-ahead log included) and the folder's `library.id`."""
    import shutil

    dst.mkdir()
    with sqlite3.connect(src / "catalog.db") as a, sqlite3.connect(dst / "catalog.db") as b:
        a.backup(b)
    shutil.copy2(src / "library.id", dst / "library.id")


def test_an_interrupted_study_resumes_to_the_uninterrupted_figures_here_or_moved_by_its_catalog(tiny_gemma: Engine, tmp_path: Path) -> None:
    train = _write(tmp_path / "train.jsonl", TRAIN)
    runtime.register_engine("by-seed-tiny", _BySeed(tiny_gemma.model, tiny_gemma.tokenizer, tiny_gemma.fingerprint,
                                                    tiny_gemma.settings))
    heldout = _write(tmp_path / "heldout.jsonl", [
        {"id": "gen-nine-heldout-0", "problem": "Ed has 1 cap and buys 8. How many caps?", "reference": "9"},
        {"id": "gen-ten-heldout-0", "problem": "Flo has 6 mugs and buys 4. How many mugs?", "reference": "10"},
    ])
    args = {"train": train, "heldout": heldout, "passes": 2, "curated": 1, "arms": ["none", "graft"], "samples": 3}

    def cfg(name: str) -> RunConfig:
        return RunConfig(problems=train, model="by-seed-tiny", library=str(tmp_path / name), budget=20,
                         attempts=2, seed=0)

    try:
        whole = run_study(cfg("whole"), **args)
        lines: list[str] = []
        say = lambda n, total, line: lines.append(line)   # noqa: E731
        with pytest.raises(KeyboardInterrupt):            # inside train pass 1, after two problems
            run_study(cfg("cut"), **args, progress=_Stop("train", 2), stages=say)
        tag = lines[0].split()[1].rstrip(":")
        assert lines[0] == f"study {tag}: started (if interrupted, the same command with --resume {tag} finishes it)"
        lib = runtime.library(str(tmp_path / "cut"), config.database_url(tmp_path / "cut"))
        assert lib.catalog.get_run(f"{tag}-train1").status == "interrupted"
        with pytest.raises(KeyboardInterrupt):            # again, inside arm none's sampled run
            run_study(cfg("cut"), **args, resume=tag, progress=_Stop("heldout", 3))
        assert lib.catalog.get_run(f"{tag}-train2").status == "finished"
        assert lib.catalog.get_run(f"{tag}-heldout-none-k3").status == "interrupted"
        assert lib.catalog.get_run(f"{tag}-heldout-graft") is None
        # Another host: the catalog and the folder's id alone; the artifacts are prefilled again from it.
        _move_by_catalog(tmp_path / "cut", tmp_path / "moved")
        assert runtime.library(str(tmp_path / "moved"), config.database_url(tmp_path / "moved")).rebuild(
            runtime.engine("by-seed-tiny")) == len(lib.catalog.list_artifacts())
        assert sorted(p.name for p in (tmp_path / "moved" / "artifacts").rglob("*") if p.is_file()) == \
            sorted(p.name for p in (tmp_path / "cut" / "artifacts").rglob("*") if p.is_file())   # the same bytes' names
        resumed = run_study(cfg("moved"), **args, resume=tag)
        assert resumed["inputs"]["study"] == tag and resumed["passes"][0]["run_id"] == f"{tag}-train1"
        assert _figures(resumed) == _figures(whole)
        # A resumed pass says its attempts were read back (its wall_seconds is the read-back's), a whole one not.
        assert [p["resumed_attempts"] for p in whole["passes"]] == [0, 0]
        assert all(p["resumed_attempts"] > 0 for p in resumed["passes"])
        own = {s.deposited_by for a in lib.catalog.list_artifacts()
               if (s := lib.catalog.get_solution(a.solution_id)) is not None and s.deposited_by != CURATOR}
        assert resumed["passes"][0]["self_deposits"] == 3 and len(own) == 2   # pass 1's, by its two segments
        with pytest.raises(InputError, match="no run of study 'run-x'"):
            run_study(cfg("moved"), **args, resume="run-x")
    finally:
        runtime.close_libraries()
