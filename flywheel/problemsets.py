"""Problem sets: CHAMP from its PyPI package, user files, and seeded generated families.

A set resolves to a list of `Problem`s plus a hash of their content, so every report can say
exactly which problems it scored.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from flywheel.engine import canonical_json
from flywheel.errors import InputError


@dataclass(frozen=True)
class Problem:
    """One problem; `solution` and `answer` are known for curated sets (CHAMP), else empty."""

    id: str
    text: str
    reference: str | None = None
    solution: str | None = None
    source: str = ""
    meta: dict[str, str] = field(default_factory=dict)


def set_hash(problems: list[Problem]) -> str:
    """SHA-256 over (id, text, reference) of every problem in order."""
    rows = [[p.id, p.text, p.reference] for p in problems]
    return hashlib.sha256(canonical_json(rows).encode()).hexdigest()


@lru_cache(maxsize=1)
def _champ_raw() -> dict[str, Any]:
    from importlib.resources import files

    try:
        path = files("champ_dataset").joinpath("dataset_files/v0.json")
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (ModuleNotFoundError, FileNotFoundError) as err:
        raise InputError("the CHAMP data set is not installed", hint="pip install champ-dataset==1.0.0") from err
    return data


def load_champ() -> list[Problem]:
    """The 270 CHAMP problems with their worked solutions and reference answers."""
    out = []
    for pid, raw in _champ_raw()["problems"].items():
        steps = [s["_text"] for s in raw["solution"]["steps"]]
        out.append(Problem(id=pid, text=raw["_text"], reference=raw["_answer"], solution=" ".join(steps),
                           source="champ", meta={"category": raw.get("category", "")}))
    return out


def champ_corpus() -> Iterator[str]:
    """Real mathematical prose (problem then solution), used wherever a test needs long text."""
    for p in load_champ():
        yield f"Problem: {p.text}\nSolution: {p.solution}\nFinal answer: {p.reference}"


# --- resolving a set spec --------------------------------------------------------------------------


@dataclass(frozen=True)
class ProblemSet:
    """A resolved set: its spec as given, its problems, their hash, and rows skipped as bad."""

    spec: str
    problems: list[Problem]
    skipped: list[str] = field(default_factory=list)  # "file.jsonl line 7: no 'problem' field"

    @property
    def hash(self) -> str:
        return set_hash(self.problems)


def load_problem_set(spec: str, *, limit: int | None = None) -> ProblemSet:
    """Resolve `champ`, `champ?n=6`, a JSONL/CSV/Parquet path, or a generated family `gen:NAME?n=50&seed=1`.

    Args:
        spec: the set as a user types it.
        limit: keep only the first `limit` problems.
    Returns:
        the `ProblemSet`; bad file rows are listed in `skipped`, never silently dropped.
    Raises:
        InputError: unknown family, missing or unreadable file, bad query string.

    Example: `load_problem_set("gen:linear?n=3&seed=1").problems[0].reference` -> `"9"`.
    """
    base, query = _split_query(spec)
    if base.startswith("gen:"):
        problems = generate(base[4:], n=_int_param(query, "n", 50, spec), seed=_int_param(query, "seed", 0, spec))
        skipped: list[str] = []
    elif base == "champ":
        problems, skipped = load_champ(), []
        if "n" in query:
            problems = problems[:_int_param(query, "n", len(problems), spec)]
    else:
        problems, skipped = load_file(Path(spec))
        if not problems:
            raise InputError(f"{spec}: no usable problems ({len(skipped)} bad rows)",
                             hint="; ".join(skipped[:3]) or "each row needs an id and a problem")
    if limit is not None:
        problems = problems[:limit]
    return ProblemSet(spec, problems, skipped)


def _split_query(spec: str) -> tuple[str, dict[str, str]]:
    from urllib.parse import parse_qsl

    if "?" not in spec or not (spec.startswith("gen:") or spec.startswith("champ")):
        return spec, {}
    base, _, qs = spec.partition("?")
    return base, dict(parse_qsl(qs, keep_blank_values=True))


def _int_param(query: dict[str, str], key: str, default: int, spec: str) -> int:
    raw = query.get(key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InputError(f"{spec}: {key}={raw!r} is not an integer") from None
    if value < 0 or (key == "n" and value == 0):
        raise InputError(f"{spec}: {key}={value} must be positive")
    return value


# --- files ---------------------------------------------------------------------------------------


def load_file(path: Path) -> tuple[list[Problem], list[str]]:
    """Problems from JSONL, CSV or Parquet (columns: id, problem, reference optional, solution optional).

    Returns (problems, skipped) where each skipped entry names the file, the line and why.
    """
    if not path.exists():
        raise InputError(f"problem set {str(path)!r} is neither `champ`, a `gen:` family, nor an existing file",
                         hint="give a .jsonl, .csv or .parquet path, `champ`, or e.g. 'gen:linear?n=20&seed=1'")
    suffix = path.suffix.lower()
    try:
        if suffix in (".jsonl", ".ndjson", ".json"):
            rows = list(_jsonl_rows(path))
        elif suffix == ".csv":
            rows = list(_csv_rows(path))
        elif suffix in (".parquet", ".pq"):
            rows = list(_parquet_rows(path))
        else:
            raise InputError(f"{path}: unknown problem file type {suffix!r}", hint="use .jsonl, .csv or .parquet")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"cannot read problem file {path}: {err}") from err
    problems: list[Problem] = []
    skipped: list[str] = []
    seen: set[str] = set()
    for line, row in rows:
        try:
            problem = _row_problem(row, path)
            if problem.id in seen:
                raise ValueError(f"duplicate id {problem.id!r}")
        except ValueError as err:
            skipped.append(f"{path.name} line {line}: {err}")
            continue
        seen.add(problem.id)
        problems.append(problem)
    return problems, skipped


Row = dict[str, Any] | str  # a parsed row, or the reason it could not be parsed


def _jsonl_rows(path: Path) -> Iterator[tuple[int, Row]]:
    with path.open(encoding="utf-8") as f:
        for n, text in enumerate(f, start=1):
            if not text.strip():
                continue
            try:
                value = json.loads(text)
            except json.JSONDecodeError as err:
                yield n, f"invalid JSON ({err.msg})"
                continue
            yield n, value if isinstance(value, dict) else f"expected a JSON object, got {type(value).__name__}"


def _csv_rows(path: Path) -> Iterator[tuple[int, Row]]:
    import csv

    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        for row in reader:
            line = reader.line_num  # the physical line the row ended on (header is line 1)
            if None in row:
                yield line, "more fields than the header has"
                continue
            yield line, {k: v for k, v in row.items() if v not in (None, "")}


def _parquet_rows(path: Path) -> Iterator[tuple[int, Row]]:
    try:
        import pyarrow.parquet as pq
    except ModuleNotFoundError as err:
        raise InputError("reading Parquet needs pyarrow", hint="pip install pyarrow") from err
    try:
        table = pq.read_table(path)
    except Exception as err:  # pyarrow raises its own hierarchy for corrupt files
        raise InputError(f"cannot read Parquet file {path}: {err}") from err
    for n, row in enumerate(table.to_pylist(), start=1):  # "line" = 1-based row number
        yield n, {k: v for k, v in row.items() if v is not None}


def _row_problem(row: Row, path: Path) -> Problem:
    if isinstance(row, str):
        raise ValueError(row)
    missing = [k for k in ("id", "problem") if not str(row.get(k, "")).strip()]
    if missing:
        raise ValueError(f"missing {' and '.join(repr(k) for k in missing)}")
    for key in ("id", "problem", "reference", "solution"):
        if key in row and not isinstance(row[key], str | int | float):
            raise ValueError(f"{key!r} must be text, got {type(row[key]).__name__}")
    ref = row.get("reference", row.get("answer"))
    return Problem(id=str(row["id"]).strip(), text=str(row["problem"]).strip(),
                   reference=None if ref is None or str(ref).strip() == "" else str(ref).strip(),
                   solution=str(row["solution"]) if row.get("solution") else None, source=path.name)


# --- generated families --------------------------------------------------------------------------


def generate(family: str, *, n: int, seed: int) -> list[Problem]:
    """`n` problems of one template with fresh numbers from `seed`; each has reference and worked solution."""
    import random

    maker = _FAMILIES.get(family)
    if maker is None:
        raise InputError(f"unknown generated family gen:{family}", hint=f"known: {', '.join(sorted(_FAMILIES))}")
    rng = random.Random(f"{family}:{seed}")  # str seeds hash stably (sha512), unlike hash()
    out: list[Problem] = []
    seen: set[str] = set()
    while len(out) < n:
        text, solution, answer = maker(rng)
        if text in seen:
            continue
        seen.add(text)
        out.append(Problem(id=f"gen-{family}-s{seed}-{len(out)}", text=text, reference=answer, solution=solution,
                           source=f"gen:{family}", meta={"seed": str(seed)}))
    return out


def _gen_arith(rng: Any) -> tuple[str, str, str]:
    a, b, c = rng.randint(11, 99), rng.randint(3, 19), rng.randint(2, 99)
    product = a * b
    return (f"Compute {a} * {b} + {c}.",
            f"First {a} * {b} = {product}. Then {product} + {c} = {product + c}.", str(product + c))


def _gen_linear(rng: Any) -> tuple[str, str, str]:
    a, x, b = rng.randint(2, 12), rng.randint(-15, 15), rng.randint(1, 40)
    c = a * x + b
    return (f"Solve for x: {a}x + {b} = {c}.",
            f"Subtract {b} from both sides: {a}x = {c - b}. Divide both sides by {a}: x = {x}.", str(x))


_FAMILIES = {"arith": _gen_arith, "linear": _gen_linear}
