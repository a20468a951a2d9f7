"""The savings report: named figures, K attempts folded per problem, estimate labels, re-scorable JSON."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from report_fixtures import FP, GRAFT_BUDGET, PROBLEMS, RealCatalog, build_real_catalog, sha
from sqlalchemy import text

from flywheel.catalog import AttemptRecord, Catalog
from flywheel.engine import Engine
from flywheel.errors import InputError
from flywheel.report import ATTEMPT_COLUMNS, PROBLEM_COLUMNS, build_report, plot, render
from flywheel.report.output import PIPED_WIDTH, abbreviate, fit_columns, printable, to_table, wrap_header

PROBLEM_REQUIRED = {"problem_id", "run_id", "route", "attempts", "verified", "best_attempt",
                    "decode_tokens_without", "decode_tokens_with", "decode_factor", "computed_tokens_without",
                    "computed_tokens_with", "computed_factor", "restored_tokens", "energy_j_without", "energy_j_with",
                    "energy_source", "problem_set_hash", "artifact_sha256", "logits_sha256", "model_fingerprint"}


# --- exact arithmetic on a hand-made catalog ------------------------------------------------------


def test_a_problem_is_folded_against_what_its_ungrafted_pass_spent(exact_catalog: Catalog) -> None:
    a = build_report(exact_catalog).problems.set_index("problem_id").loc["a"]
    # without: the base pass's two attempts together (budget-exhausted included): 900 + 2,900 decoded,
    # 1,000 + 3,000 computed; with: the one grafted attempt, 8 decoded, 12 + 8 computed
    assert (a["decode_tokens_without"], a["decode_tokens_with"], a["decode_factor"]) == (3800.0, 8, 475.0)
    assert (a["computed_tokens_without"], a["computed_tokens_with"], a["computed_factor"]) == (4000.0, 20, 200.0)
    assert a["restored_tokens"] == 500              # the prefill avoided, reported apart from both factors
    assert (a["baseline_passes"], a["baseline_attempts"], a["budget_exhausted_without"]) == (1, 2, 1)
    assert a["energy_j_without"] == 40.0 and a["energy_j_with"] == 0.5 and a["energy_source"] == "estimate"
    assert bool(a["verified"]) and a["best_attempt"] == 0 and not a["verified_without"]


def test_a_problem_without_a_measured_baseline_is_counted_not_compared(exact_catalog: Catalog) -> None:
    # b's only ungrafted attempt ran under another model: it is not a baseline for this one.
    report = build_report(exact_catalog, "graft")
    b = report.problems.set_index("problem_id").loc["b"]
    for col in ("decode_tokens_without", "computed_tokens_without", "decode_factor", "computed_factor",
                "energy_j_without"):
        assert pd.isna(b[col]), col
    assert b["decode_tokens_with"] == 8
    run = report.runs.iloc[0]
    assert run["grafted_problems"] == 2 and run["compared_problems"] == 1 and run["no_baseline"] == 1
    table = render(report, "table")
    assert "│ a " in table and "│ b " not in table        # one line says it, no row lists it
    assert "no baseline: 1 grafted problem never measured without a graft (b)" in " ".join(table.split())


def test_the_headline_names_each_figure(exact_catalog: Catalog) -> None:
    report = build_report(exact_catalog, run_id="graft")
    run = report.runs.set_index("run_id").loc["graft"]
    assert (run["decode_tokens_without"], run["decode_tokens_with"], run["decode_factor"]) == (3800.0, 8, 475.0)
    assert (run["computed_tokens_without"], run["computed_tokens_with"], run["computed_factor"]) == (4000.0, 20, 200.0)
    assert (run["verified_without"], run["verified_with"]) == (0, 1)
    assert run["energy_factor"] == 80.0 and run["problems"] == 2 and run["verified"] == 1 and run["accuracy"] == 0.5
    assert report.summary_lines[:5] == [
        "run graft (running): 2 problems, 1 verified",
        "  with a measured baseline: 1 problem, verified 0 without -> 1 with the graft",
        "  decode tokens: 3,800 without -> 8 with (decode factor 475, the paper's measure)",
        "  computed tokens (prefill + decode): 4,000 without -> 20 with (computed factor 200); "
        "500 restored from grafts",
        "  energy: about 80 times less (estimate from CPU seconds x watts, not a measurement; joules per token "
        "did not vary over its 3 attempts)",
    ]
    data = json.loads(report.to_json())
    assert {"decode_factor", "computed_factor", "decode_tokens_without", "computed_tokens_with"} <= set(
        data["definitions"])
    assert "paper" in data["definitions"]["decode_factor"]


def test_k_attempts_fold_into_one_row_with_the_best_verified_attempt(exact_catalog: Catalog) -> None:
    exact_catalog.create_run(run_id="k4", problem_set="demo", problem_set_hash="d" * 64, budget=50, attempts=4,
                             model_name="tiny", model_fingerprint=FP)
    for k, (decoded, verified) in enumerate([(50, False), (7, True), (9, True), (50, False)]):
        exact_catalog.record_attempt(AttemptRecord(
            run_id="k4", problem_id="a", attempt_index=k, route="near", budget=50, grafted_artifact_sha=sha("a"),
            prompt_tokens=12, prefill_tokens=3, restored_tokens=125, decode_tokens=decoded, verified=verified,
            answer=str(k), energy_joules=0.25, energy_source="estimate"))
    report = build_report(exact_catalog, "k4")
    (row,) = report.problems.to_dict(orient="records")
    assert row["attempts"] == 4 and row["best_attempt"] == 1 and row["answer"] == "1" and row["verified"]
    assert row["decode_tokens_with"] == 116 and row["computed_tokens_with"] == 116 + 12
    assert row["restored_tokens"] == 500 and row["decode_factor"] == 3800 / 116
    assert len(report.attempts[report.attempts["run_id"] == "k4"]) == 4   # every attempt is still there
    assert len(list(csv.DictReader(io.StringIO(render(report, "csv"))))) == len(report.attempts)
    head = to_table(report, width=400).split("runs (flywheel passes)")[0]
    assert "best_attempt" in head and "│ a " in head   # one row, its best attempt shown


def test_two_ungrafted_passes_average_to_one_baseline(exact_catalog: Catalog) -> None:
    exact_catalog.create_run(run_id="base2", problem_set="demo", problem_set_hash="d" * 64, budget=2900,
                             attempts=1, no_graft=True, model_name="tiny", model_fingerprint=FP)
    exact_catalog.record_attempt(AttemptRecord(run_id="base2", problem_id="a", attempt_index=0, route="none",
                                               budget=2900, prefill_tokens=100, decode_tokens=200,
                                               energy_joules=2.0, energy_source="estimate"))
    a = build_report(exact_catalog, "graft").problems.set_index("problem_id").loc["a"]
    assert a["baseline_passes"] == 2 and a["decode_tokens_without"] == (3800 + 200) / 2


def test_a_run_whose_process_is_gone_reads_interrupted(exact_catalog: Catalog) -> None:
    import subprocess
    import sys

    from flywheel.liveness import process_token

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    exact_catalog.create_run(run_id="graft", problem_set="x", problem_set_hash="0" * 64, budget=50, attempts=1,
                             model_name="m", model_fingerprint="0" * 64, owner=process_token(child.pid))
    report = build_report(exact_catalog, run_id="graft")
    assert report.runs.set_index("run_id").loc["graft"]["status"] == "interrupted"
    assert report.summary_lines[0].startswith("run graft (interrupted):")
    exact_catalog.create_run(run_id="graft", problem_set="x", problem_set_hash="0" * 64, budget=50, attempts=1,
                             model_name="m", model_fingerprint="0" * 64, owner=process_token())   # alive: as is
    assert build_report(exact_catalog, run_id="graft").runs.iloc[0]["status"] == "running"


def test_an_estimated_energy_factor_comes_with_its_range(noisy_catalog: Callable[..., Catalog]) -> None:
    report = build_report(noisy_catalog("estimate"), run_id="graft")
    run = report.runs.set_index("run_id").loc["graft"]
    assert run["computed_factor"] == 100.0 and run["energy_factor"] == pytest.approx(80 / 1.5)
    assert run["energy_factor_low"] == pytest.approx(20.0) and run["energy_factor_high"] == pytest.approx(120.0)
    assert run["energy_factor_attempts"] == 5
    line = next(line for line in report.summary_lines if "energy:" in line)
    assert line == ("  energy: 20 to 120 times less (estimate from CPU seconds x watts, not a measurement: "
                    "the range of joules per token over its 5 attempts; 53 pooled)")
    data = json.loads(report.to_json())
    assert data["runs"][0]["energy_factor_low"] == pytest.approx(20.0) and "energy_factor_range" in data["definitions"]
    for fmt in ("table", "md"):
        assert "energy: 20 to 120 times less (estimate" in " ".join(render(report, fmt).split())


def test_an_estimate_from_one_attempt_each_way_says_its_spread_is_unknown(
        noisy_catalog: Callable[..., Catalog]) -> None:
    lines = build_report(noisy_catalog("estimate", problems=("c",)), run_id="graft").summary_lines
    assert ("  energy: about 40 times less (estimate from CPU seconds x watts, not a measurement; "
            "one attempt each way, spread unknown)") in lines


@pytest.mark.parametrize("source", ["rapl", "nvml"])
def test_a_measured_energy_factor_keeps_its_plain_form(noisy_catalog: Callable[..., Catalog], source: str) -> None:
    lines = build_report(noisy_catalog(source), run_id="graft").summary_lines
    assert f"  energy: 53 times less (source: {source})" in lines
    assert not any("pooled" in line or "estimate" in line for line in lines)


def test_long_cells_keep_both_ends_and_control_characters_are_escaped() -> None:
    path = "/home/someone/datasets/competition-math/problems.jsonl"
    assert abbreviate(path, 24) == "/home/someo…oblems.jsonl" and len(abbreviate(path, 24)) == 24
    assert abbreviate("short", 24) == "short"
    assert printable("p\x1b]0;title\x07-1") == "p\\x1b]0;title\\x07-1"


def test_columns_are_taken_whole_by_importance_and_headers_break_at_underscores() -> None:
    cols = ["problem_id", "energy_saved_j", "energy_source", "baseline_tokens"]
    body = [["p-1", "19.500", "estimate", "2,000.0"]]
    priority = (("problem_id",), ("baseline_tokens",), ("energy_saved_j", "energy_source"))
    assert list(fit_columns(cols, body, priority, 200)) == cols  # everything fits on one header line
    narrow = fit_columns(cols, body, priority, 30)
    assert list(narrow) == ["problem_id", "baseline_tokens"]  # the energy figure never without its source
    assert narrow["baseline_tokens"] == "baseline_\ntokens"
    assert wrap_header("j_per_prefill_token", 9) == "j_per_\nprefill_\ntoken"


def test_a_long_problem_set_is_shortened_in_the_table(noisy_catalog: Callable[..., Catalog]) -> None:
    path = "/home/someone/datasets/competition-math/" + "x" * 80 + "/problems.jsonl"
    report = build_report(noisy_catalog("estimate", problem_set=path))
    table = to_table(report, width=200)
    assert "problems.jsonl" in table and path not in table and "…" in table
    assert json.loads(report.to_json())["runs"][0]["problem_set"] == path  # JSON keeps it whole


def test_views_are_queryable_directly(exact_catalog: Catalog) -> None:
    with exact_catalog.db.connect() as conn:
        saved = conn.execute(text("SELECT problem_id, tokens_saved FROM tokens_saved ORDER BY problem_id")).all()
        base = conn.execute(text("SELECT problem_id, model_fingerprint, baseline_tokens FROM baselines "
                                 "ORDER BY problem_id")).all()
    assert saved == [("a", 1980.0), ("b", None)]
    assert base == [("a", FP, 2000.0), ("b", "e" * 64, 3000.0)]


def test_usable_context_against_the_window(exact_catalog: Catalog) -> None:
    ctx = build_report(exact_catalog, context_window=250).context.iloc[0]
    assert ctx["stored_tokens"] == 1000 and ctx["artifacts"] == 2 and ctx["widening"] == 4.0
    assert ctx["largest_artifact_bytes"] == 500 * 1024
    assert "1,000 tokens stored in 2 artifacts = 4.0x the model's 250-token window" in ctx["summary"]
    assert "one graft needs at most 500.0 KiB resident" in ctx["summary"]
    assert "zero extra accelerator memory" in ctx["summary"]


def test_unknown_run_is_a_user_error(exact_catalog: Catalog) -> None:
    with pytest.raises(InputError, match="no run 'nope'"):
        build_report(exact_catalog, run_id="nope")


# --- a catalog built by real attempts on the tiny model -------------------------------------------


def test_real_runs_problems_rest_on_measured_attempts(real_catalog: RealCatalog) -> None:
    report = build_report(real_catalog.catalog)
    rows = report.problems.set_index("problem_id")
    assert PROBLEM_REQUIRED <= set(report.problems.columns) and list(report.problems.columns) == list(PROBLEM_COLUMNS)
    assert sorted(rows.index) == sorted(p.id for p in PROBLEMS) and set(rows["run_id"]) == {real_catalog.graft_run}
    att = report.attempts
    for pid in ("p-add", "p-mul"):
        base = att[(att["problem_id"] == pid) & (att["grafted"] == 0)].iloc[0]
        graft = att[(att["problem_id"] == pid) & (att["grafted"] == 1)].iloc[0]
        row = rows.loc[pid]
        assert row["decode_tokens_without"] == base["decode_tokens"]
        assert row["computed_tokens_without"] == base["prefill_tokens"] + base["decode_tokens"]
        assert row["decode_tokens_with"] == graft["decode_tokens"] <= GRAFT_BUDGET
        assert row["computed_tokens_with"] == graft["prefill_tokens"] + graft["decode_tokens"]
        assert row["restored_tokens"] == graft["artifact_tokens"] > 0
        assert row["artifact_sha256"] == graft["artifact_sha256"] and len(row["logits_sha256"]) == 64
        assert row["model_fingerprint"] == real_catalog.fingerprint and len(row["problem_set_hash"]) == 64
    assert pd.isna(rows.loc["p-new", "decode_tokens_without"]) and pd.isna(rows.loc["p-new", "decode_factor"])
    assert set(att["energy_source"]) == {"estimate"}


def test_real_runs_headlines_and_energy_per_token(real_catalog: RealCatalog) -> None:
    report = build_report(real_catalog.catalog, context_window=4096)
    lines = report.summary_lines
    assert lines[0].startswith(f"run {real_catalog.baseline_run}: 2 problems, 0 verified; without a graft: ")
    assert lines[1] == f"run {real_catalog.graft_run}: 3 problems, 0 verified"
    assert lines[2] == "  with a measured baseline: 2 problems, verified 0 without -> 0 with the graft"
    assert lines[3].startswith("  decode tokens: ") and "decode factor" in lines[3]
    assert lines[4].startswith("  computed tokens (prefill + decode): ") and "computed factor" in lines[4]
    assert "times less (estimate from CPU seconds x watts, not a measurement" in lines[5]
    assert lines[6].startswith("  no baseline: 1 grafted problem never measured without a graft (p-new)")
    assert lines[7] == "learning curve (runs in the order they started):"
    assert lines[8].lstrip().startswith("control (no graft)") and lines[9].lstrip().startswith("run 1")
    assert "4,096-token window" in lines[10]
    ept = report.energy_per_token
    assert list(ept["energy_source"]) == ["estimate"] and ept.iloc[0]["attempts"] == 5
    assert ept.iloc[0]["j_per_token"] > 0


def test_every_format_parses(real_catalog: RealCatalog) -> None:
    report = build_report(real_catalog.catalog)
    data = json.loads(render(report, "json"))
    assert data["schema"] == "flywheel-report/2" and len(data["problems"]) == 3 and len(data["attempts"]) == 5
    parsed = list(csv.DictReader(io.StringIO(render(report, "csv"))))   # one row per attempt
    assert [(r["run_id"], r["problem_id"]) for r in parsed] == list(zip(report.attempts["run_id"],
                                                                        report.attempts["problem_id"], strict=True))
    assert set(ATTEMPT_COLUMNS) == set(parsed[0]) and all(r["energy_source"] == "estimate" for r in parsed)
    md = render(report, "md").splitlines()
    header = next(i for i, line in enumerate(md) if line.startswith("| problem_id"))
    assert md[header + 1].startswith("|---") and md[header].count("|") == md[header + 2].count("|")
    assert not any(line.startswith("| p-new") for line in md)        # no baseline: one headline line, no row
    table = render(report, "table")
    assert "problems with a measured baseline" in table and "estimate" in table
    assert max(len(line) for line in table.splitlines()) <= PIPED_WIDTH  # the width off a terminal
    wide = to_table(report, width=400)
    header = next(line for line in wide.splitlines() if "problem_id" in line)
    assert "decode_tokens_without" in header and "computed_factor" in header  # headers whole when there is room
    assert "│ attempt_index" not in wide and "attempt_index" in to_table(report, width=400, attempts=True)


def test_json_is_enough_to_rescore_without_the_engine(real_catalog: RealCatalog) -> None:
    data = json.loads(build_report(real_catalog.catalog, run_id=real_catalog.graft_run).to_json())
    attempts = data["attempts"]
    assert {a["run_id"] for a in attempts} == {real_catalog.baseline_run, real_catalog.graft_run}
    for row in data["problems"]:
        base = [a for a in attempts if a["problem_id"] == row["problem_id"] and a["grafted"] == 0
                and a["model_fingerprint"] == row["model_fingerprint"]]
        graft = [a for a in attempts if a["grafted"] == 1 and a["problem_id"] == row["problem_id"]
                 and a["run_id"] == row["run_id"]]
        assert all(a["reference"] is not None for a in graft) and graft[0]["answer"] == row["answer"]
        assert row["decode_tokens_with"] == sum(a["decode_tokens"] for a in graft)
        if not base:
            assert row["decode_tokens_without"] is None and row["decode_factor"] is None
            continue
        assert row["decode_tokens_without"] == sum(a["decode_tokens"] for a in base)   # one pass
        assert row["decode_factor"] == row["decode_tokens_without"] / row["decode_tokens_with"]


def test_plot_writes_a_png(real_catalog: RealCatalog, tmp_path: Path) -> None:
    out = plot(build_report(real_catalog.catalog), tmp_path / "plots" / "report.png")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1100, 450)


def test_plot_shows_tokens_per_problem_on_a_log_axis_and_the_learning_curve_labelled_by_run(
        real_catalog: RealCatalog) -> None:
    from flywheel.report.plots import figure

    report = build_report(real_catalog.catalog)
    ax_tok, ax_acc, *_ = figure(report).axes
    assert ax_tok.get_yscale() == "log"
    measured = report.problems[report.problems["decode_tokens_without"].notna()]
    assert [t.get_text() for t in ax_tok.get_xticklabels()] == list(measured["problem_id"])   # p-new: no baseline
    assert "1 grafted problem with no baseline" in ax_tok.get_title()
    # the baseline run is a control (--no-graft): named so, not "pass 1" (issue 55)
    assert [t.get_text() for t in ax_acc.get_xticklabels()] == ["control (no graft)", "run 1"]
    assert [t.get_text() for t in ax_acc.texts] == [f"{s}/{p}" for s, p in zip(report.curve["first_verified"],
                                                                               report.curve["problems"], strict=True)]


@pytest.mark.real_model
def test_real_default_model_report(real_engine: Engine, tmp_path: Path) -> None:
    # One problem measured without a graft, then grafted: the claim-2 shape on the real model.
    built = build_real_catalog(real_engine, tmp_path / "lib", problems=PROBLEMS[:2], baseline_budget=24,
                               graft_budget=4)
    try:
        report = build_report(built.catalog)
        row = report.problems.set_index("problem_id").loc["p-add"]
        assert row["decode_tokens_with"] <= 4 and row["restored_tokens"] > row["computed_tokens_with"]
        assert row["decode_factor"] > 1 and row["computed_factor"] > 1
        assert row["energy_source"] == "estimate" and row["energy_j_with"] < row["energy_j_without"]
        assert "32,768-token window" in report.context.iloc[0]["summary"]  # read from the prepared config
        assert pd.isna(report.problems.set_index("problem_id").loc["p-mul", "decode_tokens_without"])
    finally:
        built.library.close()


def test_the_problem_savings_view_states_the_reports_figures_in_sql(exact_catalog: Catalog) -> None:
    exact_catalog.create_run(run_id="k2", problem_set="demo", problem_set_hash="d" * 64, budget=50, attempts=2,
                             model_name="tiny", model_fingerprint=FP)
    for k in range(2):
        exact_catalog.record_attempt(AttemptRecord(
            run_id="k2", problem_id="a", attempt_index=k, route="near", budget=50, grafted_artifact_sha=sha("a"),
            prompt_tokens=12, prefill_tokens=6, restored_tokens=250, decode_tokens=10 + k, verified=k == 1))
    report = build_report(exact_catalog)
    cols = ("run_id", "problem_id", "attempts", "decode_tokens_without", "decode_tokens_with", "decode_factor",
            "computed_tokens_without", "computed_tokens_with", "computed_factor", "restored_tokens")
    with exact_catalog.db.connect() as conn:
        sql = conn.execute(text(f"SELECT {', '.join(cols)} FROM problem_savings ORDER BY run_id, problem_id")).all()
    folded = report.problems.sort_values(["run_id", "problem_id"])
    assert [tuple(r) for r in sql] == [tuple(None if pd.isna(v) else v for v in row)
                                       for row in folded[list(cols)].itertuples(index=False)]
    assert ("k2", "a", 2, 3800.0, 21, 3800 / 21, 4000.0, 33, 4000 / 33, 500) in [tuple(r) for r in sql]
