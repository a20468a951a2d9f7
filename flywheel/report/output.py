"""A `Report` rendered as a terminal table (rich), CSV, JSON or Markdown.

CSV is one row per attempt (full hashes, empty cells for nulls); JSON is the whole report
(`Report.to_dict()`). Table and Markdown read as a person would: each run's headline first, then
one row per problem with a measured baseline (its K attempts folded; those with none are one line
of the headline), runs, energy per token, and with `attempts=True` one row per attempt.

The table fits a width (the terminal's, `COLUMNS`, or `PIPED_WIDTH` off a terminal): sentences
wrap at words; each table shows whole columns in order of importance, never a folded cell, and
names the columns it left out; long cells (problem-set paths, ids) are shortened in the middle.
"""

from __future__ import annotations

import io
from typing import Any

import pandas as pd

from flywheel.report.build import Report, records
from flywheel.report.formats import FORMATS, Format

#: What the human-facing formats show of each folded problem row (the rest stays in JSON).
PROBLEM_DISPLAY = ("problem_id", "run_id", "route", "attempts", "verified", "best_attempt",
                   "decode_tokens_without", "decode_tokens_with", "decode_factor", "computed_tokens_without",
                   "computed_tokens_with", "computed_factor", "restored_tokens", "energy_j_without", "energy_j_with",
                   "energy_source", "artifact_sha256")
RUN_COLUMNS = ("run_id", "status", "problem_set", "problems", "verified", "accuracy", "decode_tokens", "computed_tokens",
               "restored_tokens", "energy_j", "energy_source", "problem_set_hash", "model_fingerprint")
ATTEMPT_DISPLAY = ("run_id", "problem_id", "attempt_index", "route", "grafted", "prompt_tokens", "prefill_tokens",
                   "restored_tokens", "decode_tokens", "budget_exhausted", "verified", "answer", "energy_joules",
                   "energy_source", "logits_sha256")
HASH_CHARS = 12  # enough to tell artifacts apart on screen; CSV/JSON carry all 64
PIPED_WIDTH = 100  # the table's width off a terminal (`| cat`, `> file`) unless COLUMNS says otherwise
CELL_CHARS = 32    # a longer table cell (a problem-set path, an id) keeps its start and end around "…"

#: Each table's columns by importance, as units shown whole or not at all: an energy figure never
#: appears without its source. Columns not named here come last.
PROBLEM_PRIORITY = (("problem_id",), ("decode_tokens_without",), ("decode_tokens_with",), ("decode_factor",),
                    ("verified",), ("computed_tokens_without",), ("computed_tokens_with",), ("computed_factor",),
                    ("attempts",), ("run_id",), ("route",), ("best_attempt",), ("restored_tokens",),
                    ("energy_j_without", "energy_j_with", "energy_source"), ("artifact_sha256",))
ATTEMPT_PRIORITY = (("problem_id",), ("attempt_index",), ("decode_tokens",), ("prefill_tokens",), ("verified",),
                    ("run_id",), ("grafted",), ("restored_tokens",), ("prompt_tokens",), ("budget_exhausted",),
                    ("energy_joules", "energy_source"), ("answer",), ("route",), ("logits_sha256",))
RUN_PRIORITY = (("run_id",), ("problems",), ("verified",), ("accuracy",), ("decode_tokens",), ("computed_tokens",),
                ("energy_j", "energy_source"), ("status",), ("restored_tokens",), ("problem_set",), ("problem_set_hash",),
                ("model_fingerprint",))
ENERGY_PRIORITY = (("energy_source",), ("j_per_token",), ("j_per_prefill_token",), ("j_per_decode_token",),
                   ("attempts",))


def _cell(column: str, value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if column in ("decode_factor", "computed_factor", "accuracy", "widening"):
            return f"{value:,.2f}"
        if "tokens" in column and value.is_integer():   # a mean over one pass is a whole count
            return f"{value:,.0f}"
        return f"{value:,.3f}" if column.startswith("energy") or column.startswith("j_per") else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    text = printable(str(value))
    if column.endswith(("sha256", "_hash", "fingerprint")) and len(text) == 64:
        return text[:HASH_CHARS]
    return text


def printable(text: str) -> str:
    """`text` with control characters written as escapes (`\\x1b`), so none reaches the terminal."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def abbreviate(text: str, chars: int = CELL_CHARS) -> str:
    """`text` cut to `chars` by dropping its middle: both ends of a path or id say the most."""
    if len(text) <= chars:
        return text
    head = (chars - 1) // 2
    return text[:head] + "…" + text[len(text) - (chars - 1 - head):]


def wrap_header(name: str, width: int) -> str:
    """`name` broken after underscores into lines of at most `width` (a longer part stays whole)."""
    lines = [""]
    for part in name.replace("_", "_\n").split("\n"):
        if lines[-1] and len(lines[-1]) + len(part) > width:
            lines.append("")
        lines[-1] += part
    return "\n".join(lines)


def fit_columns(cols: list[str], body: list[list[str]], priority: tuple[tuple[str, ...], ...],
                width: int) -> dict[str, str]:
    """The columns of `cols` that fit `width` (in their order), each mapped to its header.

    Whole units are taken by `priority`. A column costs its widest cell or header plus 3 (a space
    either side and a border), the table 1 more (its left border). When not every column fits
    with one-line headers, headers break after underscores, so columns are as wide as their values.
    The first unit is always kept, however narrow the width.
    """
    cells = {c: max([0, *(len(row[i]) for row in body)]) for i, c in enumerate(cols)}
    units = [*priority, *((c,) for c in cols if not any(c in unit for unit in priority))]

    def take(size: dict[str, int]) -> list[str]:
        chosen: list[str] = []
        used = 1
        for unit in units:
            present = [c for c in unit if c in size and c not in chosen]
            need = sum(size[c] + 3 for c in present)
            if present and (not chosen or used + need <= width):
                chosen += present
                used += need
        return [c for c in cols if c in chosen]

    shown = take({c: max(len(c), cells[c]) for c in cols})
    if len(shown) == len(cols):
        return {c: c for c in shown}
    compact = {c: max(cells[c], *(len(part) for part in wrap_header(c, 1).splitlines())) for c in cols}
    return {c: wrap_header(c, compact[c]) for c in take(compact)}


def _display(df: pd.DataFrame, columns: tuple[str, ...]) -> tuple[list[str], list[list[str]]]:
    cols = [c for c in columns if c in df.columns]
    return cols, [[_cell(c, row[c]) for c in cols] for row in records(df[cols])]


def _sections(report: Report, attempts: bool) -> list[tuple[str, pd.DataFrame, tuple[str, ...], Any]]:
    """(title, frame, columns, priority) of each table a person reads, in order."""
    measured = report.problems[report.problems["decode_tokens_without"].notna()]
    out: list[tuple[str, pd.DataFrame, tuple[str, ...], Any]] = [
        ("problems with a measured baseline (K attempts folded)", measured, PROBLEM_DISPLAY, PROBLEM_PRIORITY),
        ("runs (flywheel passes)", report.runs, RUN_COLUMNS, RUN_PRIORITY),
        ("energy per token", report.energy_per_token, tuple(report.energy_per_token.columns), ENERGY_PRIORITY)]
    if attempts:
        out.append(("attempts", report.attempts, ATTEMPT_DISPLAY, ATTEMPT_PRIORITY))
    return out


def to_csv(report: Report) -> str:
    """One row per attempt the figures rest on (ATTEMPT_COLUMNS), full hashes, empty cells for nulls."""
    return report.attempts.to_csv(index=False, lineterminator="\n")


def to_markdown(report: Report, attempts: bool = False) -> str:
    out = ["# kv-flywheel report", ""]
    for line in report.summary_lines:   # a headline's figure lines are indented under their run
        out.append(f"  - {line.strip()}" if line.startswith("  ") else f"- {line}")
    out.append("")
    for title, df, columns, _ in _sections(report, attempts):
        cols, body = _display(df, columns)
        out += [f"## {title[0].upper()}{title[1:]}", ""]
        if not body:
            out += ["(none)", ""]
            continue
        out.append("| " + " | ".join(cols) + " |")
        out.append("|" + "|".join("---" for _ in cols) + "|")
        out += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in body]
        out.append("")
    return "\n".join(out)


def to_table(report: Report, width: int | None = None, attempts: bool = False) -> str:
    """The report as rich tables, rendered to text `width` columns wide (default `PIPED_WIDTH`), no colour."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    width = width or PIPED_WIDTH
    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=False, color_system=None, highlight=False)
    for line in report.summary_lines:
        console.print(Text(printable(line)))  # wrapped at words to the width
    for title, df, columns, priority in _sections(report, attempts):
        cols, body = _display(df, columns)
        if not body:   # an empty table is one line, not a frame of headers
            console.print(Text(f"{title}: none"))
            continue
        body = [[abbreviate(cell, min(CELL_CHARS, max(12, width // 4))) for cell in row] for row in body]
        shown = fit_columns(cols, body, priority, width)
        left_out = [c for c in cols if c not in shown]
        caption = (f"not shown at {width} columns: {', '.join(left_out)} (--format csv or json has every column)"
                   if left_out else None)
        table = Table(title=title, caption=caption, caption_justify="left")
        for c, header in shown.items():
            table.add_column(header, justify="right" if df[c].dtype.kind in "iuf" else "left", no_wrap=True,
                             overflow="ellipsis")
        for row in body:
            table.add_row(*(Text(cell) for c, cell in zip(cols, row, strict=True) if c in shown))
        console.print(table)
    return "".join(line.rstrip() + "\n" for line in buf.getvalue().splitlines())  # rich pads to the width


def render(report: Report, fmt: Format = "table", *, attempts: bool = False) -> str:
    """The report as text in `fmt` (table | csv | json | md); `attempts` adds per-attempt rows to table and md."""
    if fmt == "json":
        return report.to_json()
    if fmt == "csv":
        return to_csv(report)
    if fmt == "md":
        return to_markdown(report, attempts)
    if fmt == "curve-csv":   # the learning curve, one row per run (`flywheel.report.curve`)
        return report.curve.to_csv(index=False, lineterminator="\n")
    if fmt == "table":
        return to_table(report, attempts=attempts)
    raise ValueError(f"unknown report format {fmt!r}; use one of {', '.join(FORMATS)}")
