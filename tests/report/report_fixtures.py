"""Constants and row builders shared by the report tests (imported by conftest and the tests)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from flywheel.catalog import Catalog
from flywheel.library import Library
from flywheel.problemsets import Problem

PROBLEMS = [
    Problem(id="p-add", text="What is 2 + 3?", reference="5", source="demo"),
    Problem(id="p-mul", text="What is 4 * 6?", reference="24", source="demo"),
    Problem(id="p-new", text="What is 9 - 2?", reference="7", source="demo"),
]
SOLUTIONS = {"p-add": ("2 + 3 = 5.", "5"), "p-mul": ("4 * 6 = 24.", "24"), "p-new": ("9 - 2 = 7.", "7")}
BASELINE_BUDGET = 40
GRAFT_BUDGET = 6
WATTS = 12.0  # fixed, so the estimate is reproducible in kind


@dataclass(frozen=True)
class RealCatalog:
    catalog: Catalog
    library: Library
    baseline_run: str
    graft_run: str
    fingerprint: str


FP = "f" * 64
OTHER_FP = "e" * 64


def sha(tag: str) -> str:
    return hashlib.sha256(tag.encode()).hexdigest()
