"""A `Report` rendered as a terminal table (rich), CSV, JSON or Markdown.

CSV is the savings rows only, full hashes, empty cells for nulls; JSON is the whole report
(`Report.to_dict()`); table and Markdown add the summary sentences and shorten hashes.
"""

from __future__ import annotations

import io
from typing import Any

import pandas as pd

from flywheel.report.build import Report, records
from flywheel.report.formats import FORMATS, Format

#: What the human-facing formats show of each savings row (the rest stays in CSV/JSON).
DISPLAY_COLUMNS = ("problem_id", "run_id", "route", "baseline_tokens", "graft_tokens", "tokens_saved",
                   "ratio", "restored_tokens", "energy_j_baseline", "energy_j_graft", "energy_saved_j",
                   "energy_source", "verified", "artifact_sha256", "logits_sha256")
TABLE_COLUMNS = tuple(c for c in DISPLAY_COLUMNS if c != "logits_sha256")  # the terminal is narrower
RUN_COLUMNS = ("run_id", "problem_set", "problems", "solved", "accuracy", "computed_tokens", "restored_tokens",
               "energy_j", "energy_source", "problem_set_hash", "model_fingerprint")
HASH_CHARS = 12  # enough to tell artifacts apart on screen; CSV/JSON carry all 64


def _cell(column: str, value: Any) -> str:
    if value is None:
        return "no baseline" if column in ("baseline_tokens", "tokens_saved", "ratio") else "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if column in ("ratio", "accuracy", "widening"):
            return f"{value:,.2f}"
        return f"{value:,.3f}" if column.startswith("energy") or column.startswith("j_per") else f"{value:,.1f}"
    if isinstance(value, int | float) and column in ("baseline_attempts", "budget_exhausted_attempts"):
        return f"{int(value):,}"
    if isinstance(value, int):
        return f"{value:,}"
    text = str(value)
    if column.endswith(("sha256", "_hash", "fingerprint")) and len(text) == 64:
        return text[:HASH_CHARS]
    return text


def _display(df: pd.DataFrame, columns: tuple[str, ...]) -> tuple[list[str], list[list[str]]]:
    cols = [c for c in columns if c in df.columns]
    return cols, [[_cell(c, row[c]) for c in cols] for row in records(df[cols])]


def to_csv(report: Report) -> str:
    return report.rows.to_csv(index=False, lineterminator="\n")


def to_markdown(report: Report) -> str:
    out = ["# kv-flywheel report", ""]
    out += [f"- {line}" for line in report.summary_lines] + [""]
    for title, df, columns in (("Savings", report.rows, DISPLAY_COLUMNS), ("Runs", report.runs, RUN_COLUMNS),
                               ("Energy per token", report.energy_per_token, tuple(report.energy_per_token.columns))):
        cols, body = _display(df, columns)
        out += [f"## {title}", ""]
        if not body:
            out += ["(none)", ""]
            continue
        out.append("| " + " | ".join(cols) + " |")
        out.append("|" + "|".join("---" for _ in cols) + "|")
        out += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in body]
        out.append("")
    return "\n".join(out)


def to_table(report: Report, width: int | None = None) -> str:
    """The report as rich tables, rendered to text (colour only when printed to a terminal)."""
    from rich.console import Console
    from rich.table import Table

    buf = io.StringIO()
    # Off a terminal nothing constrains the width: let each table be as wide as its content.
    console = Console(file=buf, width=width or 10_000, force_terminal=False, color_system=None)
    for line in report.summary_lines:
        console.print(line, highlight=False, soft_wrap=True)
    for title, df, columns in (("tokens and energy saved per grafted attempt", report.rows, TABLE_COLUMNS),
                               ("runs (flywheel passes)", report.runs, RUN_COLUMNS),
                               ("energy per token", report.energy_per_token, tuple(report.energy_per_token.columns))):
        cols, body = _display(df, columns)
        table = Table(title=title, show_lines=False)
        for c in cols:
            table.add_column(c, justify="right" if df[c].dtype.kind in "iuf" else "left", overflow="fold")
        for row in body:
            table.add_row(*row)
        console.print(table)
    return buf.getvalue()


def render(report: Report, fmt: Format = "table") -> str:
    """The report as text in `fmt` (table | csv | json | md)."""
    if fmt == "json":
        return report.to_json()
    if fmt == "csv":
        return to_csv(report)
    if fmt == "md":
        return to_markdown(report)
    if fmt == "table":
        return to_table(report)
    raise ValueError(f"unknown report format {fmt!r}; use one of {', '.join(FORMATS)}")
