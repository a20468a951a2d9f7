"""Problem sets: CHAMP from its PyPI package, user files, and seeded generated families.

A set resolves to a list of `Problem`s plus a hash of their content, so every report can say
exactly which problems it scored.

Spec grammar (anything else is refused at once with what is allowed):

    champ | champ?n=N                        the first N of the 270 CHAMP problems
    PATH.jsonl | PATH.csv | PATH.parquet     a user file
    gen:FAMILIES?n=N&seed=S&split=SPLIT      generated; keys optional (n=50, seed=0, no split)
    gen:                                     refused with the list of families (name, size, description)

FAMILIES is one registered name (`gen:ages`), `all` (every word-problem family, N each, in
name order), or names joined by `+` (`gen:ages+rates+linear`). N is problems *per family* and
must be 1..size, where size is the family's (or split's) exact number of distinct problems.

Splits: every family is cut once, by a keyed permutation fixed per family and independent of
the seed, into `heldout` (one problem in five) and `train` (the rest). `split=train` and
`split=heldout` therefore never share a problem text for any seeds; ids then read
`gen-<family>-<split>-s<seed>-<i>`. Without `split` a set draws from the whole family (ids
`gen-<family>-s<seed>-<i>`, byte-identical to the pre-registry `arith`/`linear` sets). Either
way `Problem.meta` records family, seed, index, the problem's number in its family, the split
it belongs to, and its parameters (JSON).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flywheel.domain import canonical_json, json_sha256
from flywheel.errors import InputError
from flywheel.families import FAMILIES, SPLITS, Family, Split, word_families

if TYPE_CHECKING:
    from verifiers import Answered, OutputForm, Verdict, VerifierConfig
    from verifiers.types import AnswerMarkers


@dataclass(frozen=True)
class Problem:
    """One problem; its `reference` answer when known (else it is checked by substitution), and a worked
    `solution` for curated sets (CHAMP)."""

    id: str
    text: str
    reference: str | None = None
    solution: str | None = None
    source: str = ""
    meta: dict[str, str] = field(default_factory=dict)

    def check(self, answer: str | None, *, config: VerifierConfig | None = None) -> Verdict:
        """The verifier's verdict on `answer`: against `reference` when there is one, else by substitution.

        No answer at all (None or blank) is `unparseable`. `config` bounds the check (the verifier's
        defaults when None).

        Example: `Problem("p1", "What is 2+2?", reference="4").check("4").equivalent` -> True.
        """
        import verifiers

        if answer is None or not answer.strip():
            return verifiers.Verdict("unparseable", "no answer in the output")
        if self.reference is not None and self.reference.strip():
            return verifiers.check(candidate=answer, reference=self.reference, config=config)
        return verifiers.check_by_substitution(self.text, answer, config=config)

    def check_output(self, text: str, form: OutputForm, *, config: VerifierConfig | None = None,
                     markers: AnswerMarkers = "final-line") -> Answered:
        """The answer a model's output `text` states and the verdict on it, as `check` gives it: one
        bounded request to the verifier's worker, which extracts the answer (`form`: `answer` or
        `solve`, the attempt's mode) and checks it; the untrusted text is never parsed here.

        Example: `Problem("p1", "What is 2+2?", reference="4").check_output("4\\n", "answer").answer` -> "4".
        """
        import verifiers

        return verifiers.check_output(text, form=form, reference=self.reference, problem_text=self.text,
                                      config=config, markers=markers)


def set_hash(problems: list[Problem]) -> str:
    """SHA-256 over (id, text, reference) of every problem in order."""
    rows = [[p.id, p.text, p.reference] for p in problems]
    return json_sha256(rows)


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
    """Resolve `champ`, `champ?n=6`, a JSONL/CSV/Parquet path, or generated families `gen:FAMILIES?n=&seed=&split=`.

    Args:
        spec: the set as a user types it (see the module docstring for the `gen:` grammar).
        limit: keep only the first `limit` problems.
    Returns:
        the `ProblemSet`; bad file rows are listed in `skipped`, never silently dropped.
    Raises:
        InputError: unknown family (`gen:` alone lists them), missing or unreadable file, unknown query
            key, or an `n` that is not a positive integer within what the family can produce.

    Example: `load_problem_set("gen:linear?n=3&seed=1").problems[0].reference` -> `"9"`.
    """
    base, query = _split_query(spec)
    if base.startswith("gen:"):
        _check_keys(query, GEN_KEYS, spec)
        problems = _generate(base[4:], n=_int_param(query, "n", DEFAULT_N, spec),
                             seed=_int_param(query, "seed", 0, spec), split=_split_param(query, spec), label=spec)
        skipped: list[str] = []
    elif base == "champ":
        _check_keys(query, CHAMP_KEYS, spec)
        problems, skipped = load_champ(), []
        n = _int_param(query, "n", len(problems), spec)
        if n > len(problems):
            raise InputError(f"{spec}: n={n:,} but champ has only {len(problems):,} problems",
                             hint=f"ask for n <= {len(problems):,}")
        problems = problems[:n]
    else:
        problems, skipped = load_file(Path(spec))
        if not problems:
            raise InputError(f"{spec}: no usable problems ({len(skipped)} bad rows)",
                             hint="; ".join(skipped[:3]) or "each row needs an id and a problem")
    if limit is not None:
        problems = problems[:limit]
    return ProblemSet(spec, problems, skipped)


def over_window(problems: list[Problem], count_tokens: Callable[[str], int], window: int,
                budget: int) -> list[str]:
    """Each problem whose plain prompt plus `budget` decode tokens exceeds a `window`-token model,
    named with its id and numbers (a run refuses such a set before it starts).

    Example: `over_window([Problem("p", "x " * 9000)], eng_count, 4096, 160)` ->
    `["problem 'p' is 18,003 prompt tokens; with the 160-token budget it exceeds ..."]`.
    """
    from flywheel.prompts import plain_prompt
    from flywheel.terminal import printable

    out = []
    for p in problems:
        n = count_tokens(plain_prompt(p.text))
        if n + budget > window:
            out.append(f"problem {printable(p.id, 60)!r} is {n:,} prompt tokens; with the {budget:,}-token "
                       f"budget it exceeds the model's {window:,}-token window")
    return out


GEN_KEYS = ("n", "seed", "split")
CHAMP_KEYS = ("n",)
DEFAULT_N = 50  # problems per family when a `gen:` spec gives no n


def _split_query(spec: str) -> tuple[str, dict[str, str]]:
    from urllib.parse import parse_qsl

    if "?" not in spec or not (spec.startswith("gen:") or spec.startswith("champ")):
        return spec, {}
    base, _, qs = spec.partition("?")
    pairs = parse_qsl(qs, keep_blank_values=True)
    query = dict(pairs)
    if len(query) != len(pairs):
        twice = sorted({k for k, _ in pairs if sum(k == j for j, _ in pairs) > 1})
        raise InputError(f"{spec}: {', '.join(twice)} given more than once", hint="give each key once")
    return base, query


def _check_keys(query: dict[str, str], allowed: tuple[str, ...], spec: str) -> None:
    unknown = [k for k in query if k not in allowed]
    if unknown:
        raise InputError(f"{spec}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                         f"allowed: {', '.join(allowed)}",
                         hint="e.g. 'gen:ages?n=20&seed=1&split=train' or 'champ?n=6'")


def _int_param(query: dict[str, str], key: str, default: int, spec: str) -> int:
    """`query[key]` as a plain decimal integer (n >= 1, anything else >= 0), or `default`."""
    raw = query.get(key)
    if raw is None:
        return default
    if not re.fullmatch(r"[+-]?[0-9]+", raw.strip()):
        raise InputError(f"{spec}: {key}={raw!r} is not an integer", hint=f"e.g. {key}=10")
    if len(raw.strip()) > 40:
        raise InputError(f"{spec}: {key} has {len(raw.strip())} digits; that is not a usable {key}")
    value = int(raw)
    if key == "n" and value < 1:
        raise InputError(f"{spec}: n={value} must be a positive integer", hint="e.g. n=10")
    if value < 0:
        raise InputError(f"{spec}: {key}={value} must be 0 or more")
    return value


def _split_param(query: dict[str, str], spec: str) -> Split | None:
    raw = query.get("split")
    if raw is None:
        return None
    for split in SPLITS:
        if raw == split:
            return split
    raise InputError(f"{spec}: split={raw!r} is not one of {', '.join(SPLITS)}",
                     hint="leave split out to draw from the whole family")


# --- files ---------------------------------------------------------------------------------------


def load_file(path: Path) -> tuple[list[Problem], list[str]]:
    """Problems from JSONL, CSV or Parquet (columns: id, problem, reference optional, solution optional).

    Rows are read by `flywheel.tables.read_table`, the reader curated deposits use too.
    Returns (problems, skipped) where each skipped entry names the file, the line and why.
    """
    from flywheel.tables import BadRow, read_table

    if not path.exists():
        raise InputError(f"problem set {str(path)!r} is neither `champ`, a `gen:` family, nor an existing file",
                         hint="give a .jsonl, .csv or .parquet path, `champ`, or e.g. 'gen:linear?n=20&seed=1'")
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


# --- generated families --------------------------------------------------------------------------


def generate(family: str, *, n: int, seed: int, split: Split | None = None) -> list[Problem]:
    """`n` problems per family with fresh names and numbers from `seed`, each with reference and worked solution.

    Args:
        family: a registered name (`linear`), `all` (every word family), or names joined by `+` (`ages+rates`).
        n: problems per family; at most the family's (split's) number of distinct problems.
        seed: any integer >= 0; the same (family, n, seed, split) always gives the same problems.
        split: `train` or `heldout` to draw only from that part of each family, None for the whole family.
    Returns:
        the problems, family by family, ids `gen-<family>[-<split>]-s<seed>-<i>`.
    Raises:
        InputError: unknown family (an empty name lists them all) or n outside 1..size.

    Example: `generate("ages", n=2, seed=1, split="heldout")[0].meta["split"]` -> `"heldout"`.
    """
    split_part = f"&split={split}" if split else ""
    return _generate(family, n=n, seed=seed, split=split, label=f"gen:{family}?n={n}&seed={seed}{split_part}")


def _generate(expr: str, *, n: int, seed: int, split: Split | None, label: str) -> list[Problem]:
    fams = _resolve_families(expr)
    if n < 1 or seed < 0:
        raise InputError(f"{label}: n must be >= 1 and seed >= 0, got n={n}, seed={seed}")
    smallest = min(fams, key=lambda f: f.split_size(split))
    have = smallest.split_size(split)
    if n > have:  # refused before generating anything: sizes are exact, no loop can run dry
        where = f"in its {split} split" if split else "in all"
        raise InputError(f"{label}: n={n:,} but gen:{smallest.name} has only {have:,} distinct problems {where}",
                         hint=f"ask for n <= {have:,}" + (" per family" if len(fams) > 1 else ""))
    out: list[Problem] = []
    for fam in fams:
        tag = f"-{split}" if split else ""
        for i, inst in enumerate(fam.sample(n, seed, split)):
            meta = {"family": fam.name, "seed": str(seed), "index": str(i), "number": str(inst.index),
                    "split": fam.split_of(inst.index), "params": canonical_json(inst.params)}
            out.append(Problem(id=f"gen-{fam.name}{tag}-s{seed}-{i}", text=inst.text, reference=inst.answer,
                               solution=inst.solution, source=f"gen:{fam.name}", meta=meta))
    return out


def _resolve_families(expr: str) -> list[Family]:
    """`linear` -> [linear]; `all` -> every word family; `ages+rates` -> [ages, rates]."""
    if not expr.strip():
        raise InputError("gen: needs a family name; the families are:\n" + describe_families(),
                         hint="e.g. gen:ages?n=20&seed=1&split=train, gen:all?n=10&seed=1&split=heldout, "
                              "gen:ages+rates?n=5")
    fams: list[Family] = []
    for name in expr.split("+"):
        if name == "all":
            fams.extend(word_families())
        elif name in FAMILIES:
            fams.append(FAMILIES[name])
        else:
            raise InputError(f"unknown generated family gen:{name}",
                             hint=f"known: {', '.join(sorted(FAMILIES))}, or all; `gen:` alone describes them")
    names = [f.name for f in fams]
    twice = sorted({x for x in names if names.count(x) > 1})
    if twice:
        raise InputError(f"gen:{expr} lists {', '.join(twice)} more than once")
    return fams


def describe_families() -> str:
    """One line per registered family: name, number of distinct problems, description."""
    width = max(len(name) for name in FAMILIES)
    lines = [f"  {f.name:<{width}}  {f.size:>13,}  {f.description}" for _, f in sorted(FAMILIES.items())]
    lines.append(f"  {'all':<{width}}  {'':>13}  every word-problem family above (n problems each)")
    return "\n".join(lines)
