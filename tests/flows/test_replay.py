"""`flywheel report --run ID --recheck N`: recorded attempts replayed and checked against the catalog."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from flows import RunConfig, flywheel_run, runtime
from flywheel import config
from flywheel.cli import main
from flywheel.engine import Engine
from flywheel.errors import InputError
from flywheel.library import Library
from flywheel.problemsets import load_problem_set
from flywheel.replay import recheck

PROBLEMS = [
    {"id": "lin-a", "problem": "Solve for x: 3x + 8 = 35.", "reference": "9",
     "solution": "Subtract 8: 3x = 27. Divide by 3: x = 9."},
    {"id": "lin-b", "problem": "Solve for x: 2x + 1 = 7.", "reference": "3",
     "solution": "Subtract 1: 2x = 6. Divide by 2: x = 3."},
]


@pytest.fixture
def runs(tiny_dirs: dict[str, Path], tiny_gemma: Engine, lib_dir: Path, tmp_path: Path) -> dict[str, str]:
    """A sampled pass (K = 2, seeds, decoded side by side on 4 slots), then a grafted pass over curated deposits."""
    model = str(tiny_dirs["gemma3"])
    runtime.register_engine(model, tiny_gemma)
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS))
    cfg = RunConfig(problems=str(path), model=model, library=str(lib_dir), budget=8, attempts=2, slots=4,
                    deposit=False)
    sampled = flywheel_run(cfg)["run_id"]
    lib = _lib(lib_dir)
    for p in load_problem_set(str(path)).problems:
        lib.deposit(tiny_gemma, p, p.solution or "", p.reference or "", deposited_by="curator:test")
    grafted = flywheel_run(cfg)["run_id"]
    return {"sampled": sampled, "grafted": grafted}


def _lib(root: Path) -> Library:
    return runtime.library(str(root), config.database_url(root))


def test_recorded_attempts_replay_exactly(runs: dict[str, str], lib_dir: Path, tiny_gemma: Engine) -> None:
    lib = _lib(lib_dir)
    sampled = recheck(lib, tiny_gemma, runs["sampled"], 4)
    assert [(c.problem_id, c.attempt_index) for c in sampled] == [
        (a.problem_id, a.attempt_index) for a in lib.catalog.attempts_for_run(runs["sampled"])]
    assert len(sampled) == 4 and all(c.ok for c in sampled), [c.differences for c in sampled]
    grafted = recheck(lib, tiny_gemma, runs["grafted"], 10)   # exact routes: one greedy attempt each
    assert len(grafted) == 2 and all(c.ok for c in grafted), [c.differences for c in grafted]


def test_a_tampered_row_is_named_and_the_command_exits_non_zero(runs: dict[str, str], lib_dir: Path,
                                                               tiny_gemma: Engine) -> None:
    lib = _lib(lib_dir)
    victim = lib.catalog.attempts_for_run(runs["sampled"])[1]
    with lib.catalog.db.begin() as conn:
        conn.execute(text("UPDATE attempts SET logits_sha256 = :x, decode_tokens = decode_tokens + 1 WHERE id = :id"),
                     {"x": "0" * 64, "id": victim.id})
    checks = recheck(lib, tiny_gemma, runs["sampled"], 4)
    bad = [c for c in checks if not c.ok]
    assert [(c.problem_id, c.attempt_index) for c in bad] == [(victim.problem_id, victim.attempt_index)]
    assert {d.split(":")[0] for d in bad[0].differences} == {"logits_sha256", "decode_tokens"}

    run = CliRunner().invoke(main, ["--library", str(lib_dir), "report", "--run", runs["sampled"], "--recheck", "4"])
    assert run.exit_code == 4 and "Traceback" not in run.output
    name = f"{runs['sampled']}/{victim.problem_id}#{victim.attempt_index}"
    assert f"{name}: MISMATCH: logits_sha256: recorded '{'0' * 64}'" in run.stdout
    assert f"1 of 4 replayed attempts differ from the catalog: {name}" in run.stderr
    ok = CliRunner().invoke(main, ["--library", str(lib_dir), "report", "--run", runs["grafted"], "--recheck", "2"])
    assert ok.exit_code == 0, ok.output
    assert f"all 2 replayed attempts of {runs['grafted']} match the catalog" in ok.stdout


def test_a_run_decoded_under_another_kernel_is_refused_not_compared(runs: dict[str, str], lib_dir: Path,
                                                                    tiny_gemma: Engine) -> None:
    lib = _lib(lib_dir)
    run = lib.catalog.get_run(runs["sampled"])
    assert run is not None and run.decode_schedule is not None
    old = {**json.loads(run.decode_schedule), "kernel": "slots-v2:onednn-linear+per-slot-sdpa-folded-heads"}
    with lib.catalog.db.begin() as conn:
        conn.execute(text("UPDATE runs SET decode_schedule = :s WHERE id = :id"),
                     {"s": json.dumps(old), "id": runs["sampled"]})
    with pytest.raises(InputError, match="decoded under kernel 'slots-v2"):
        recheck(lib, tiny_gemma, runs["sampled"], 4)


@pytest.mark.parametrize("where", ["attempt", "run"])
def test_a_tampered_budget_is_refused_before_anything_is_decoded(where: str, runs: dict[str, str], lib_dir: Path,
                                                                 tiny_gemma: Engine, monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    """Issue 34 item 7: a recorded budget is checked against the run's --budget and the model's window."""
    from flywheel import replay

    lib = _lib(lib_dir)
    victim = lib.catalog.attempts_for_run(runs["sampled"])[1]
    huge = 10 ** 9
    with lib.catalog.db.begin() as conn:
        conn.execute(text("UPDATE attempts SET budget = :b WHERE id = :id"), {"b": huge, "id": victim.id})
        if where == "run":   # the run's own budget edited too: the model's window still bounds it
            conn.execute(text("UPDATE runs SET budget = :b WHERE id = :id"), {"b": huge, "id": runs["sampled"]})
    solved: list[object] = []
    monkeypatch.setattr(replay, "solve_many", lambda *a, **k: solved.append(a) or iter(()))
    window = f"{tiny_gemma.context_window:,}-token window"
    with pytest.raises(InputError, match=f"decode budget of {huge:,} tokens for attempt "
                                         f"{victim.problem_id}#{victim.attempt_index}.*{window}"):
        recheck(lib, tiny_gemma, runs["sampled"], 4)
    assert solved == []   # refused before the first attempt ran
    out = CliRunner().invoke(main, ["--library", str(lib_dir), "report", "--run", runs["sampled"], "--recheck", "4"])
    assert out.exit_code != 0 and "Traceback" not in out.output and "decode budget of 1,000,000,000" in out.output


def test_a_calculator_run_replays_under_its_recorded_version_and_an_unknown_one_is_refused(
        tiny_dirs: dict[str, Path], tiny_gemma: Engine, lib_dir: Path, tmp_path: Path) -> None:
    model = str(tiny_dirs["gemma3"])
    runtime.register_engine(model, tiny_gemma)
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS))
    run_id = flywheel_run(RunConfig(problems=str(path), model=model, library=str(lib_dir), budget=8, slots=2,
                                    deposit=False, calculator=True))["run_id"]
    lib = _lib(lib_dir)
    run = lib.catalog.get_run(run_id)
    assert run is not None and run.decode_schedule is not None
    assert json.loads(run.decode_schedule)["calculator"] == "calc-v2"
    checks = recheck(lib, tiny_gemma, run_id, 2)
    assert len(checks) == 2 and all(c.ok for c in checks), [c.differences for c in checks]
    with lib.catalog.db.begin() as conn:
        conn.execute(text("UPDATE runs SET decode_schedule = :s WHERE id = :id"),
                     {"s": json.dumps({**json.loads(run.decode_schedule), "calculator": "calc-v9"}), "id": run_id})
    with pytest.raises(InputError, match="calculator 'calc-v9'; this version runs calc-v1, calc-v2"):
        recheck(lib, tiny_gemma, run_id, 2)
