"""Held-out transfer: accuracy on problems not in the library, with vs without `near` grafts.

Both passes see the same problems with the same seeds and budget, and neither deposits, so the
only difference is the graft. The interval is Wilson's 95% score interval.
"""

from __future__ import annotations

from typing import Any

from flows.run import RunConfig, flywheel_run, new_run_id, run_env
from flywheel.domain import ROUTE_KINDS, Progress
from flywheel.errors import DepositRefusedError, InputError
from flywheel.problemsets import load_problem_set
from flywheel.stats import wilson

__all__ = ["heldout_eval", "seed_library", "wilson"]


def seed_library(cfg: RunConfig, spec: str, deposited_by: str = "curator:eval") -> int:
    """Deposit the curated solutions of `spec` (each needs a solution and reference); returns how many."""
    eng = run_env(cfg).engine()
    lib = run_env(cfg).open_library()
    count = 0
    for p in load_problem_set(spec).problems:
        if not p.solution or not p.reference:
            raise InputError(f"library problem {p.id!r} has no curated solution and reference to deposit",
                             hint="use champ, a gen: family, or a file with solution and reference columns")
        try:
            lib.deposit(eng, p, p.solution, p.reference, deposited_by=deposited_by)
            count += 1
        except DepositRefusedError:
            continue
    return count


def heldout_eval(cfg: RunConfig, library_set: str | None, progress: Progress | None = None) -> dict[str, Any]:
    """Deposit `library_set` (if given), then run `cfg.problems` without and with grafts; accuracies and intervals.

    `progress` follows each run's problems (`flywheel_run`)."""
    deposited = seed_library(cfg, library_set) if library_set else 0
    tag = new_run_id()
    base = flywheel_run(cfg.model_copy(update={"no_graft": True, "deposit": False, "run_id": f"{tag}-base"}), progress)
    graft = flywheel_run(cfg.model_copy(update={"no_graft": False, "deposit": False, "run_id": f"{tag}-graft"}), progress)
    with_by = {r["problem_id"]: r for r in graft["results"]}
    rows = []
    for r in base["results"]:
        g = with_by[r["problem_id"]]
        rows.append({"problem_id": r["problem_id"], "without": r["verified"], "with": g["verified"],
                     "route": g["route"], "grafted_artifact": g["grafted_artifact"]})
    n = len(rows)

    def arm(key: str, summary: dict[str, Any]) -> dict[str, Any]:
        k = sum(row[key] for row in rows)
        lo, hi = wilson(k, n)
        return {"correct": k, "n": n, "accuracy": k / n if n else 0.0, "ci95": [lo, hi],
                "decode_tokens": summary["totals"]["decode_tokens"], "run_id": summary["run_id"]}

    return {"problems": cfg.problems, "library_set": library_set, "deposited": deposited,
            "budget": cfg.budget, "seed": cfg.seed, "attempts": cfg.attempts,
            "without_graft": arm("without", base), "with_graft": arm("with", graft),
            "routes": {k: sum(row["route"] == k for row in rows) for k in ROUTE_KINDS},
            "only_with": sum(row["with"] and not row["without"] for row in rows),
            "only_without": sum(row["without"] and not row["with"] for row in rows),
            "results": rows}
