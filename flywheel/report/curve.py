"""The learning curve: per run, in the order the runs started, what the flywheel did for the problems that came.

One row per run (`CURVE_COLUMNS`): a label that says what the run was (`control (no graft)` for a run that
never grafts; the others numbered `run 1, 2, ...` in time order), first-attempt verified rate with its
Wilson 95% interval, verified within the run's attempts, decode tokens per verified answer, the share of
problems routed exact / near / none, the library's verified solutions when the run ended, and, for runs
that decode attempts until verified, the attempts not decoded and the decode tokens that saved (estimated
at the run's own mean tokens per sampled attempt). Definitions: `CURVE_DEFINITIONS`, written into the JSON.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pandas as pd

from flywheel.stats import wilson

CURVE_COLUMNS = (
    "run_id", "label", "started_at", "problem_set", "weights", "problems", "first_verified", "first_rate",
    "first_low", "first_high", "verified", "verified_rate", "attempts_per_problem", "decode_tokens",
    "decode_tokens_per_verified", "route_exact", "route_near", "route_none", "library_solutions",
    "attempts_not_decoded", "decode_tokens_saved_estimate",
)

CURVE_DEFINITIONS = {
    "first_rate": "problems whose first attempt (index 0, greedy) verified / problems the run attempted",
    "first_low/first_high": "Wilson 95% interval of first_rate",
    "verified_rate": "problems with any verified attempt in the run / problems the run attempted",
    "decode_tokens_per_verified": "every decode token of the run's attempts / problems verified in the run",
    "route_exact/near/none": "share of the run's problems whose first attempt took that route",
    "library_solutions": "verified solutions in the catalog deposited up to the run's end (its last attempt)",
    "attempts_not_decoded": "attempts per problem x problems - attempts recorded (attempts until verified stops "
                            "at the first verified one)",
    "decode_tokens_saved_estimate": "attempts_not_decoded x the run's mean decode tokens per sampled attempt "
                                    "(an estimate: those attempts never ran)",
}


def _when(value: Any) -> datetime | None:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return None
    return pd.Timestamp(value).to_pydatetime()


def _deposited_by(solution: dict[str, Any], ended: datetime | None) -> bool:
    made = _when(solution["created_at"])
    return ended is None or made is None or made <= ended


def learning_curve(runs: Sequence[dict[str, Any]], attempts: Sequence[dict[str, Any]],
                   solutions: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """The curve over `runs` (catalog rows, in start order) from their `attempts` (report rows, each with
    `started_at` of its attempt absent: the run's own last attempt time is read from `solutions`' clock).

    `solutions`: rows with `created_at` and `verified` (bool) of every deposited solution.
    """
    rows = []
    number = 0
    for run in runs:
        own = [a for a in attempts if a["run_id"] == run["id"]]
        ids = list(dict.fromkeys(a["problem_id"] for a in own))
        n = len(ids)
        first = {a["problem_id"]: a for a in own if a["attempt_index"] == 0}
        first_ok = sum(bool(a["verified"]) for a in first.values())
        verified = len({a["problem_id"] for a in own if a["verified"]})
        decode = sum(int(a["decode_tokens"]) for a in own)
        routes = [str(first[p]["route"]) if p in first else "none" for p in ids]
        low, high = wilson(first_ok, n) if n else (None, None)
        control = bool(run["no_graft"])
        if not control:
            number += 1
        ended = _when(run.get("finished_at")) or _when(run.get("started_at"))
        library = sum(1 for s in solutions if s["verified"] and _deposited_by(s, ended))
        sampled = [int(a["decode_tokens"]) for a in own if a["attempt_index"] > 0]
        planned = int(run["attempts"]) * n
        not_decoded = max(0, planned - len(own))
        per_sampled = sum(sampled) / len(sampled) if sampled else (decode / len(own) if own else 0.0)
        schedule = run.get("decode_schedule_json") or {}
        rows.append({
            "run_id": run["id"], "label": "control (no graft)" if control else _label(number, run["id"]),
            "started_at": run["started_at"], "problem_set": run["problem_set"],
            "weights": schedule.get("weights", "fp32") if schedule else None, "problems": n,
            "first_verified": first_ok, "first_rate": first_ok / n if n else None, "first_low": low,
            "first_high": high, "verified": verified, "verified_rate": verified / n if n else None,
            "attempts_per_problem": int(run["attempts"]), "decode_tokens": decode,
            "decode_tokens_per_verified": decode / verified if verified else None,
            "route_exact": routes.count("exact") / n if n else None,
            "route_near": routes.count("near") / n if n else None,
            "route_none": routes.count("none") / n if n else None,
            "library_solutions": library, "attempts_not_decoded": not_decoded,
            "decode_tokens_saved_estimate": round(not_decoded * per_sampled) if not_decoded else 0,
        })
    return pd.DataFrame(rows, columns=list(CURVE_COLUMNS))


def curve_lines(curve: pd.DataFrame) -> list[str]:
    """The curve as text lines, one per run (what `flywheel report` prints under the headlines)."""
    if curve.empty:
        return []
    out = ["learning curve (runs in the order they started):"]
    for r in curve.to_dict(orient="records"):
        if not r["problems"]:
            out.append(f"  {r['label']:<20} {r['run_id']}: no problems")
            continue
        per = "-" if r["decode_tokens_per_verified"] is None else f"{r['decode_tokens_per_verified']:,.0f}"
        saved = (f", {r['attempts_not_decoded']} attempts not decoded (~{r['decode_tokens_saved_estimate']:,} "
                 "decode tokens saved)" if r["attempts_not_decoded"] else "")
        out.append(f"  {r['label']:<20} {r['problems']:>4} problems: first attempt {r['first_verified']}/"
                   f"{r['problems']} = {r['first_rate']:.0%} ({r['first_low']:.0%}-{r['first_high']:.0%}), within "
                   f"{r['attempts_per_problem']} {r['verified_rate']:.0%}; {per} decode tokens per verified; routes "
                   f"exact {r['route_exact']:.0%} near {r['route_near']:.0%} none {r['route_none']:.0%}; library "
                   f"{r['library_solutions']} solutions{saved}")
    return out


#: A run id `new_run_id()` made, with a name a command appended (`-slice2`, `-pass1`): the name goes in the label.
_NAMED = re.compile(r"^run-\d{8}T\d{6}Z-[0-9a-f]{6}-(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]{0,15})$")


def _label(number: int, run_id: str) -> str:
    """`run 2`, or `run 2 · slice2` when the run's id names it."""
    m = _NAMED.match(run_id)
    return f"run {number} · {m['name']}" if m else f"run {number}"
