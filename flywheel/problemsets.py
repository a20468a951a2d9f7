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
