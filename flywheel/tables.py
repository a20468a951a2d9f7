"""Read user tables (JSONL, CSV, Parquet) row by row, keeping each row's line number.

A bad row never stops a batch: it comes back as a `BadRow` with its line and the reason, so
the caller can process the good rows and report each bad one. Both readers of user files use
it: curated deposits (`flywheel deposit --file`) and problem sets (`flywheel.problemsets`).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flywheel.errors import InputError
from flywheel.terminal import printable

#: A cell longer than this is refused (a pasted book is not a problem statement).
MAX_CELL_CHARS = 200_000


@dataclass(frozen=True)
class BadRow:
    line: int
    reason: str


def read_table(path: Path, required: Sequence[str] = (), *,
               fields: Sequence[str] | None = None) -> Iterator[tuple[int, dict[str, str]] | BadRow]:
    """Yield `(line, row)` for good rows and `BadRow` for bad ones; `line` is 1-based (data rows for Parquet).

    Args:
        path: a .jsonl/.ndjson/.json (one object per line), .csv (header row) or .parquet/.pq file.
        required: fields every good row has, non-blank.
        fields: keep (and check) only these fields; None keeps every field.
    Returns:
        an iterator over the rows: values are text (numbers as `str(value)`), absent and null
        values left out, CSV's empty cells kept as "".

    Raises:
        InputError: the file is missing, its format is not JSONL, CSV or Parquet, or a Parquet
            file cannot be read at all.

    Example:
        >>> [row for row in read_table(Path("set.jsonl"), ("id",))]      # doctest: +SKIP
        [(1, {'id': 'a', 'problem': '1+1?'}), BadRow(line=2, reason='invalid JSON (Expecting value)')]
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no such file: {path}", hint="give a .jsonl, .csv or .parquet file")
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        rows: Iterator[tuple[int, Any]] = _jsonl(path)
    elif suffix == ".csv":
        rows = _csv(path)
    elif suffix in (".parquet", ".pq"):
        rows = _parquet(path)
    else:
        raise InputError(f"unsupported file type {suffix!r} for {path}", hint="use .jsonl, .csv or .parquet")
    for line, raw in rows:
        if isinstance(raw, BadRow):
            yield raw
            continue
        problem = _clean(raw, required, fields)
        yield BadRow(line, problem) if isinstance(problem, str) else (line, problem)


def _clean(raw: Any, required: Sequence[str], fields: Sequence[str] | None) -> dict[str, str] | str:
    if not isinstance(raw, dict):
        return f"expected an object with named fields, got {type(raw).__name__}"
    out: dict[str, str] = {}
    for key, value in raw.items():
        if fields is not None and key not in fields:
            continue
        if value is None or (isinstance(value, float) and value != value):  # NaN from pandas
            continue
        if not isinstance(value, (str, int, float)):
            return f"field {key!r} is not text"
        text = str(value)
        if len(text) > MAX_CELL_CHARS:
            return f"field {key!r} is {len(text):,} characters (limit {MAX_CELL_CHARS:,})"
        if "\x00" in text or "\x00" in str(key):   # PostgreSQL stores no NUL in text; no problem needs one
            return f"field {printable(str(key), 40)!r} contains a NUL character"
        out[str(key)] = text
    missing = [f for f in required if not out.get(f, "").strip()]
    if missing:
        return f"missing required field(s): {', '.join(missing)}"
    return out


def _jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    with path.open(encoding="utf-8", errors="replace") as fh:
        for line, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            try:
                yield line, json.loads(text)
            except json.JSONDecodeError as err:
                yield line, BadRow(line, f"invalid JSON ({err.msg})")


#: The csv module's own field limit while reading: above MAX_CELL_CHARS, so an over-long cell is
#: read whole and refused with its row (csv's default, 131,072, is below the documented limit).
CSV_FIELD_LIMIT = 4 * MAX_CELL_CHARS


def _csv(path: Path) -> Iterator[tuple[int, Any]]:
    if csv.field_size_limit() < CSV_FIELD_LIMIT:
        csv.field_size_limit(CSV_FIELD_LIMIT)
    with path.open(encoding="utf-8", errors="replace", newline="") as fh:
        reader = csv.DictReader(fh)
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as err:   # past this point csv cannot find where the next row begins
                yield reader.line_num + 1, BadRow(reader.line_num + 1, f"unreadable CSV ({err}); the rest "
                                                  f"of the file from line {reader.line_num + 1} was not read")
                return
            if None in row:
                yield reader.line_num, BadRow(reader.line_num, "more fields than the header has")
                continue
            yield reader.line_num, row


def _parquet(path: Path) -> Iterator[tuple[int, Any]]:
    # pyarrow, not pandas: an integer column with nulls stays integer (pandas makes 7 into "7.0").
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as err:  # pyarrow raises several types for a damaged file
        raise InputError(f"{path} is not a readable Parquet file: {err}") from err
    yield from enumerate(table.to_pylist(), start=1)
