"""One definition of the factor: a pass's summary carries the report's named figures for that pass."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from flows import RunConfig, flywheel_run, runtime
from flywheel import config
from flywheel.cli import main
from flywheel.engine import Engine
from flywheel.library import Library
from flywheel.problemsets import load_problem_set
from flywheel.report import DEFINITIONS, build_report

PROBLEMS = [
    {"id": "lin-a", "problem": "Solve for x: 3x + 8 = 35.", "reference": "9",
     "solution": "Subtract 8: 3x = 27. Divide by 3: x = 9."},
    {"id": "lin-b", "problem": "Solve for x: 2x + 1 = 7.", "reference": "3",
     "solution": "Subtract 1: 2x = 6. Divide by 2: x = 3."},
]


def test_a_pass_and_the_report_give_the_same_named_figures(tiny_dirs: dict[str, Path], tiny_gemma: Engine,
                                                           lib_dir: Path, tmp_path: Path) -> None:
    model = str(tiny_dirs["gemma3"])
    runtime.register_engine(model, tiny_gemma)
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS))
    cfg = RunConfig(problems=str(path), model=model, library=str(lib_dir), budget=6, attempts=2)
    base = flywheel_run(cfg.model_copy(update={"no_graft": True}))
    assert base["savings"]["headline"]["grafted_problems"] == 0      # a baseline pass compares nothing
    lib: Library = runtime.library(str(lib_dir), config.database_url(lib_dir))
    for p in load_problem_set(str(path)).problems:
        lib.deposit(tiny_gemma, p, p.solution or "", p.reference or "", deposited_by="curator:test")
    grafted = flywheel_run(cfg)

    report = build_report(lib.catalog, grafted["run_id"])
    h = grafted["savings"]["headline"]
    assert h == report.headline(grafted["run_id"])
    assert h["compared_problems"] == 2
    assert h["decode_tokens_without"] == base["totals"]["decode_tokens"]      # both K attempts of the baseline pass
    assert h["decode_tokens_with"] == grafted["totals"]["decode_tokens"]
    assert h["computed_tokens_without"] == base["totals"]["computed_tokens"]
    assert h["decode_factor"] == h["decode_tokens_without"] / h["decode_tokens_with"]
    assert grafted["savings"]["lines"] == report.summary_lines[:len(grafted["savings"]["lines"])]
    assert grafted["savings"]["definitions"] == DEFINITIONS
    decode_line = next(line for line in grafted["savings"]["lines"] if "decode factor" in line)
    assert f"(decode factor {h['decode_factor']:,.0f}" in decode_line or \
        f"(decode factor {h['decode_factor']:,.1f}" in decode_line


def test_flywheel_run_json_carries_the_savings_and_their_definitions(tiny_dirs: dict[str, Path],
                                                                     tiny_gemma: Engine, lib_dir: Path) -> None:
    model = str(tiny_dirs["gemma3"])
    runtime.register_engine(model, tiny_gemma)
    result = CliRunner().invoke(main, ["--library", str(lib_dir), "--model", model, "run", "--problems",
                                       "gen:linear?n=1&seed=1", "--budget", "4", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(out["savings"]) == {"headline", "lines", "problems", "definitions"}
    assert "decode_factor" in out["savings"]["definitions"] and "computed_factor" in out["savings"]["definitions"]
    assert out["totals"]["computed_tokens"] == out["totals"]["prefill_tokens"] + out["totals"]["decode_tokens"]
