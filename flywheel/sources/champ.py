"""CHAMP (package `champ-dataset`): 270 competition problems with worked solutions and answers.

    champ | champ?n=N      the first N of the 270 problems, in the data set's order
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from flywheel.errors import InputError
from flywheel.sources.problem import Problem
from flywheel.sources.registry import Loaded, source
from flywheel.sources.spec import Spec


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


@source("champ", prefix="champ", keys=("n",), example="champ?n=6",
        description="the 270 CHAMP competition problems with worked solutions; n: the first n")
def _load(spec: Spec) -> Loaded:
    problems = load_champ()
    n = spec.int_param("n", len(problems))
    if n > len(problems):
        raise InputError(f"{spec.text}: n={n:,} but champ has only {len(problems):,} problems",
                         hint=f"ask for n <= {len(problems):,}")
    return problems[:n], []
