"""User files: JSONL, CSV or Parquet, one problem a row (the fallback source: any spec no prefix claims).

Columns: `id`, `problem`, `reference` (or `answer`) optional, `solution` optional; others are ignored.
Bad rows are skipped and named with their line, never silently dropped.
"""

from __future__ import annotations

import re
from pathlib import Path

from flywheel.errors import InputError
from flywheel.sources.problem import Problem
from flywheel.sources.registry import Loaded, describe_sources, source
from flywheel.sources.spec import Spec


@source("file", prefix="", keys=(), example="problems.jsonl",
        description="a .jsonl/.csv/.parquet file with id, problem, reference and solution columns")
def _load(spec: Spec) -> Loaded:
    prefix = re.match(r"[a-z][a-z0-9-]*:", spec.text)
    if prefix and not Path(spec.text).exists():   # `gms-symbolic:...`: a source's name mistyped
        raise InputError(f"problem set {spec.text!r}: no problem source is called {prefix.group(0)!r}; "
                         "the sources are:", listing=describe_sources().splitlines())
    problems, skipped = load_file(Path(spec.text))
    if not problems:
        raise InputError(f"{spec.text}: no usable problems ({len(skipped)} bad rows)",
                         hint="; ".join(skipped[:3]) or "each row needs an id and a problem")
    return problems, skipped


def load_file(path: Path) -> tuple[list[Problem], list[str]]:
    """Problems from JSONL, CSV or Parquet (columns: id, problem, reference optional, solution optional).

    Rows are read by `flywheel.tables.read_table`, the reader curated deposits use too.
    Returns (problems, skipped) where each skipped entry names the file, the line and why.
    """
    from flywheel.tables import BadRow, read_table

    if not path.exists():
        raise InputError(f"problem set {str(path)!r} is no existing file and names no problem source; the sources are:",
                         listing=describe_sources().splitlines())
    try:
        rows = list(read_table(path, fields=PROBLEM_FIELDS))
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"cannot read problem file {path}: {err}") from err
    problems: list[Problem] = []
    skipped: list[str] = []
    seen: set[str] = set()
    for row in rows:
        if isinstance(row, BadRow):
            skipped.append(f"{path.name} line {row.line}: {row.reason}")
            continue
        line, values = row
        try:
            problem = _row_problem(values, path)
            if problem.id in seen:
                raise ValueError(f"duplicate id {problem.id!r}")
        except ValueError as err:
            skipped.append(f"{path.name} line {line}: {err}")
            continue
        seen.add(problem.id)
        problems.append(problem)
    return problems, skipped


#: The columns a problem file may carry (`answer` is read when there is no `reference`); others are ignored.
PROBLEM_FIELDS = ("id", "problem", "reference", "answer", "solution")


def _row_problem(row: dict[str, str], path: Path) -> Problem:
    row = {k: v for k, v in row.items() if v.strip()}  # a blank cell is an absent one
    missing = [k for k in ("id", "problem") if k not in row]
    if missing:
        raise ValueError(f"missing {' and '.join(repr(k) for k in missing)}")
    ref = row.get("reference", row.get("answer"))
    return Problem(id=row["id"].strip(), text=row["problem"].strip(),
                   reference=None if ref is None else ref.strip(), solution=row.get("solution"), source=path.name)
