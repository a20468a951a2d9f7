"""The savings report: measured baselines only, exact arithmetic, estimate labels, re-scorable JSON."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from report_fixtures import FP, GRAFT_BUDGET, PROBLEMS, RealCatalog, build_real_catalog
from sqlalchemy import text

from flywheel.catalog import Catalog
from flywheel.engine import Engine
from flywheel.errors import InputError
from flywheel.report import ROW_COLUMNS, build_report, plot, render
from flywheel.report.output import PIPED_WIDTH, abbreviate, fit_columns, printable, to_table, wrap_header

REQUIRED = {"problem_id", "run_id", "route", "baseline_tokens", "graft_tokens", "tokens_saved", "ratio",
            "energy_j_baseline", "energy_j_graft", "energy_saved_j", "energy_source", "verified",
            "problem_set_hash", "artifact_sha256", "logits_sha256", "model_fingerprint", "restored_tokens"}


# --- exact arithmetic on a hand-made catalog ------------------------------------------------------


def test_baseline_is_the_mean_of_measured_ungrafted_attempts(exact_catalog: Catalog) -> None:
    rows = build_report(exact_catalog).rows.set_index("problem_id")
    a = rows.loc["a"]
    assert a["baseline"] == "measured" and a["baseline_attempts"] == 2 and a["budget_exhausted_attempts"] == 1
    assert a["baseline_tokens"] == 2000.0           # mean of 1,000 and 3,000 (budget-exhausted included)
    assert a["graft_tokens"] == 20                  # 12 prefilled + 8 decoded; restored tokens not computed
    assert a["tokens_saved"] == 1980.0 and a["ratio"] == 100.0
    assert a["restored_tokens"] == 500              # the prefill avoided, reported apart
    assert a["energy_j_baseline"] == 20.0 and a["energy_j_graft"] == 0.5 and a["energy_saved_j"] == 19.5
    assert a["energy_source"] == "estimate" and bool(a["verified"]) is True


def test_a_problem_without_a_measured_baseline_shows_no_baseline(exact_catalog: Catalog) -> None:
    # b's only ungrafted attempt ran under another model: it is not a baseline for this one.
    b = build_report(exact_catalog).rows.set_index("problem_id").loc["b"]
    assert b["baseline"] == "no baseline"
    for col in ("baseline_tokens", "tokens_saved", "ratio", "energy_j_baseline", "energy_saved_j"):
        assert pd.isna(b[col]), col
    assert b["graft_tokens"] == 20 and b["energy_source"] == "estimate"
    table = render(build_report(exact_catalog, "graft"), "table")
    assert "no baseline" in table


def test_run_summary_counts_only_measured_savings(exact_catalog: Catalog) -> None:
    report = build_report(exact_catalog, run_id="graft")
    run = report.runs.set_index("run_id").loc["graft"]
    assert run["baseline_tokens"] == 2000.0 and run["graft_tokens"] == 20.0 and run["factor"] == 100.0
    assert run["energy_factor"] == 40.0 and run["no_baseline"] == 1
    assert run["problems"] == 2 and run["solved"] == 1 and run["accuracy"] == 0.5
    line = report.summary_lines[0]
    assert line.startswith("run graft: 1 problem, 2,000 baseline tokens (1 budget-exhausted attempt), "
                           "20 graft tokens (8 decoded), a factor of 100; energy about 40 times less (estimate from "
                           "CPU seconds x watts, not a measurement; joules per token did not vary over its 3 attempts)")
    assert "1 grafted attempt with no baseline" in line


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
    assert run["factor"] == 75.0 and run["energy_factor"] == 40.0
    assert run["energy_factor_low"] == pytest.approx(15.0) and run["energy_factor_high"] == pytest.approx(90.0)
    assert run["energy_factor_attempts"] == 5
    line = report.summary_lines[0]
    assert ("a factor of 75; energy 15 to 90 times less (estimate from CPU seconds x watts, not a measurement: "
            "the range of joules per token over its 5 attempts; 40 pooled); accuracy 2/2") in line
    assert "40 times less energy" not in line
    data = json.loads(report.to_json())
    assert data["runs"][0]["energy_factor_low"] == pytest.approx(15.0) and "energy_factor_range" in data["definitions"]
    for fmt in ("table", "md"):
        assert "energy 15 to 90 times less (estimate" in render(report, fmt)


def test_an_estimate_from_one_attempt_each_way_says_its_spread_is_unknown(
        noisy_catalog: Callable[..., Catalog]) -> None:
    line = build_report(noisy_catalog("estimate", problems=("c",)), run_id="graft").summary_lines[0]
    assert ("a factor of 100; energy about 40 times less (estimate from CPU seconds x watts, not a measurement; "
            "one attempt each way, spread unknown)") in line


@pytest.mark.parametrize("source", ["rapl", "nvml"])
def test_a_measured_energy_factor_keeps_its_plain_form(noisy_catalog: Callable[..., Catalog], source: str) -> None:
    report = build_report(noisy_catalog(source), run_id="graft")
    line = report.summary_lines[0]
    assert f"a factor of 75; 40 times less energy (source: {source}); accuracy 2/2" in line
    assert "pooled" not in line and "estimate" not in line


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


def test_real_runs_rows_rest_on_measured_attempts(real_catalog: RealCatalog) -> None:
    report = build_report(real_catalog.catalog)
    rows = report.rows.set_index("problem_id")
    assert REQUIRED <= set(report.rows.columns) and list(report.rows.columns) == list(ROW_COLUMNS)
    assert sorted(rows.index) == sorted(p.id for p in PROBLEMS) and set(rows["run_id"]) == {real_catalog.graft_run}
    att = report.attempts
    for pid in ("p-add", "p-mul"):
        base = att[(att["problem_id"] == pid) & (att["grafted"] == 0)].iloc[0]
        graft = att[(att["problem_id"] == pid) & (att["grafted"] == 1)].iloc[0]
        row = rows.loc[pid]
        assert row["baseline_tokens"] == base["prefill_tokens"] + base["decode_tokens"]
        assert row["graft_tokens"] == graft["prefill_tokens"] + graft["decode_tokens"] <= 30 + GRAFT_BUDGET
        assert row["tokens_saved"] == row["baseline_tokens"] - row["graft_tokens"]
        assert row["restored_tokens"] == graft["artifact_tokens"] > 0
        assert row["energy_saved_j"] == pytest.approx(row["energy_j_baseline"] - row["energy_j_graft"])
        assert row["artifact_sha256"] == graft["artifact_sha256"] and len(row["artifact_logits_sha256"]) == 64
        assert row["model_fingerprint"] == real_catalog.fingerprint and len(row["problem_set_hash"]) == 64
    assert rows.loc["p-new", "baseline"] == "no baseline" and pd.isna(rows.loc["p-new", "tokens_saved"])
    assert (report.rows["energy_source"] == "estimate").all()
    assert set(att["energy_source"]) == {"estimate"}


def test_real_runs_summaries_and_energy_per_token(real_catalog: RealCatalog) -> None:
    report = build_report(real_catalog.catalog, context_window=4096)
    lines = report.summary_lines
    assert lines[0].startswith(f"run {real_catalog.baseline_run}: 2 problems without graft")
    assert lines[1].startswith(f"run {real_catalog.graft_run}: 2 problems, ")
    assert "times less (estimate from CPU seconds x watts, not a measurement" in lines[1]
    assert "times less energy" not in lines[1]  # an estimate's factor never stands bare
    assert "4,096-token window" in lines[2]
    ept = report.energy_per_token
    assert list(ept["energy_source"]) == ["estimate"] and ept.iloc[0]["attempts"] == 5
    assert ept.iloc[0]["j_per_token"] > 0


def test_every_format_parses(real_catalog: RealCatalog) -> None:
    report = build_report(real_catalog.catalog)
    data = json.loads(render(report, "json"))
    assert data["schema"] == "flywheel-report/1" and len(data["rows"]) == 3
    assert all(r["energy_source"] == "estimate" for r in data["rows"])
    parsed = list(csv.DictReader(io.StringIO(render(report, "csv"))))
    assert [r["problem_id"] for r in parsed] == list(report.rows["problem_id"])
    assert set(ROW_COLUMNS) == set(parsed[0]) and all(r["energy_source"] == "estimate" for r in parsed)
    new = next(r for r in parsed if r["problem_id"] == "p-new")
    assert new["tokens_saved"] == "" and new["baseline_attempts"] == "" and new["baseline"] == "no baseline"
    assert next(r for r in parsed if r["problem_id"] == "p-add")["baseline_attempts"] == "1"
    md = render(report, "md").splitlines()
    header = next(i for i, line in enumerate(md) if line.startswith("| problem_id"))
    assert md[header + 1].startswith("|---") and md[header].count("|") == md[header + 2].count("|")
    table = render(report, "table")
    assert "tokens and energy saved" in table and "estimate" in table
    assert max(len(line) for line in table.splitlines()) <= PIPED_WIDTH  # the width off a terminal
    wide = to_table(report, width=400)
    header = next(line for line in wide.splitlines() if "problem_id" in line)
    assert "baseline_tokens" in header and "energy_saved_j" in header  # headers whole when there is room
    assert "not shown" not in wide.split("runs (flywheel passes)")[0]


def test_json_is_enough_to_rescore_without_the_engine(real_catalog: RealCatalog) -> None:
    data = json.loads(build_report(real_catalog.catalog, run_id=real_catalog.graft_run).to_json())
    attempts = data["attempts"]
    assert {a["run_id"] for a in attempts} == {real_catalog.baseline_run, real_catalog.graft_run}
    for row in data["rows"]:
        base = [a["prefill_tokens"] + a["decode_tokens"] for a in attempts
                if a["problem_id"] == row["problem_id"] and a["grafted"] == 0
                and a["model_fingerprint"] == row["model_fingerprint"]]
        graft = next(a for a in attempts if a["attempt_id"] and a["grafted"] == 1
                     and a["problem_id"] == row["problem_id"] and a["run_id"] == row["run_id"])
        assert graft["reference"] is not None and graft["answer"] == row["answer"]
        if not base:
            assert row["baseline_tokens"] is None and row["tokens_saved"] is None
            continue
        assert row["baseline_tokens"] == sum(base) / len(base)
        assert row["tokens_saved"] == row["baseline_tokens"] - row["graft_tokens"]


def test_plot_writes_a_png(real_catalog: RealCatalog, tmp_path: Path) -> None:
    out = plot(build_report(real_catalog.catalog), tmp_path / "plots" / "report.png")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1000, 400)


def test_plot_labels_accuracy_bars_and_never_draws_a_missing_baseline_as_zero(real_catalog: RealCatalog) -> None:
    import numpy as np

    from flywheel.report.plots import figure

    report = build_report(real_catalog.catalog)
    ax_saved, ax_acc = figure(report).axes
    bar_labels = [t.get_text() for t in ax_acc.texts]
    assert bar_labels == [f"{s}/{p}" for s, p in zip(report.runs["solved"], report.runs["problems"], strict=True)]
    no_baseline = report.runs["tokens_saved"].isna().tolist()
    assert any(no_baseline)  # the --no-graft pass has nothing to save against
    assert [t.get_text() for t in ax_saved.texts] == ["no baseline"] * sum(no_baseline)
    (points,) = ax_saved.lines
    assert points.get_linestyle() == "None"
    assert np.asarray(points.get_xdata()).size == len(no_baseline) - sum(no_baseline)
    assert all(float(y).is_integer() for y in ax_saved.get_yticks())


@pytest.mark.real_model
def test_real_default_model_report(real_engine: Engine, tmp_path: Path) -> None:
    # One problem measured without a graft, then grafted: the claim-2 shape on the real model.
    built = build_real_catalog(real_engine, tmp_path / "lib", problems=PROBLEMS[:2], baseline_budget=24,
                               graft_budget=4)
    try:
        report = build_report(built.catalog)
        row = report.rows.set_index("problem_id").loc["p-add"]
        assert row["graft_decode_tokens"] <= 4 and row["restored_tokens"] > row["graft_prefill_tokens"]
        assert row["tokens_saved"] == row["baseline_tokens"] - row["graft_tokens"] > 0
        assert row["energy_source"] == "estimate" and row["energy_j_graft"] < row["energy_j_baseline"]
        assert "32,768-token window" in report.context.iloc[0]["summary"]  # read from the prepared config
        assert report.rows.set_index("problem_id").loc["p-mul", "baseline"] == "no baseline"
    finally:
        built.library.close()
