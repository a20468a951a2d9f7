"""The report's named figures, defined once: per problem (K attempts folded) and per run (the headline).

Every place that states a saving (the report's formats, `flywheel run --json`, the demo's summary)
takes these figures from here, under these names, and `DEFINITIONS` travels in every JSON:

- without: what ungrafted attempts spent on a problem in one pass (all its K attempts, budget-exhausted
  ones included), the mean over the ungrafted passes under the same model fingerprint;
- with: what the run's grafted attempts spent on it (all K);
- decode factor = decode tokens without / with (the paper's measure: budget tokens spent without over
  decode tokens with); computed factor = the same over prefill + decode tokens, beside it, never mixed;
- a problem grafted in a run but never measured without a graft has no baseline: it is counted, never
  compared (no factor is assumed for it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from flywheel.energy import is_measured

#: Name -> meaning of every figure in the report (written into the JSON under `definitions`).
DEFINITIONS = {
    "decode_tokens_without": "decode tokens ungrafted attempts spent on the problem in one pass (all K attempts, "
                             "budget-exhausted included), mean over ungrafted passes under the same model "
                             "fingerprint: the paper's 'budget tokens spent without'",
    "decode_tokens_with": "decode tokens the run's grafted attempts spent on the problem (all K attempts)",
    "decode_factor": "decode_tokens_without / decode_tokens_with, each summed over the problems with a measured "
                     "baseline: the paper's measure",
    "computed_tokens_without": "prefill + decode tokens the model actually ran for the problem without a graft "
                               "(same passes as decode_tokens_without)",
    "computed_tokens_with": "prefill + decode tokens actually run with the graft; a prefill shared by K attempts "
                            "counts once, restored tokens are not computed",
    "computed_factor": "computed_tokens_without / computed_tokens_with, each summed over the problems with a "
                       "measured baseline",
    "restored_tokens": "tokens restored from the graft instead of prefilled (a restore shared by K attempts "
                       "counts once); reported apart from both factors",
    "verified_without": "problems with a verified answer among their ungrafted attempts",
    "verified_with": "problems with a verified answer among the run's grafted attempts",
    "best_attempt": "attempt_index of the problem's first verified grafted attempt in the run (null: none verified)",
    "no_baseline": "problems grafted in the run with no ungrafted attempt under the same model: counted, "
                   "never compared",
    "energy_j_without": "joules of the ungrafted pass(es), as decode_tokens_without; only where every attempt "
                        "was metered",
    "energy_j_with": "joules of the grafted attempts (a shared graft and prefill apportioned per attempt)",
    "energy_factor": "energy_j_without / energy_j_with summed over problems whose both sides share one source",
    "energy_factor_range": "energy_factor_low..high = computed factor x (min..max joules per computed token of "
                           "the ungrafted attempts) / (max..min of the grafted ones) over the attempts it rests on",
    "estimate": "energy source 'estimate' = process CPU seconds x configured watts, not a measurement",
}

#: A folded problem row's columns, in display order; hashes last.
PROBLEM_COLUMNS = (
    "problem_id", "run_id", "route", "attempts", "verified", "best_attempt", "answer",
    "decode_tokens_without", "decode_tokens_with", "decode_factor",
    "computed_tokens_without", "computed_tokens_with", "computed_factor", "restored_tokens",
    "verified_without", "baseline_passes", "baseline_attempts", "budget_exhausted_without",
    "energy_j_without", "energy_j_with", "energy_source",
    "problem_set_hash", "model_fingerprint", "artifact_sha256", "logits_sha256",
)
Row = dict[str, Any]


def _sum(values: Iterable[Any]) -> int:
    return int(sum(int(v or 0) for v in values))


def _source(values: Iterable[Any]) -> str | None:
    found = sorted({v for v in values if v is not None})
    return None if not found else found[0] if len(found) == 1 else "mixed"


def _baseline(ungrafted: list[Row]) -> Row:
    """A problem's figures without a graft: per ungrafted pass summed, then the mean over passes."""
    passes: dict[str, list[Row]] = {}
    for a in ungrafted:
        passes.setdefault(a["run_id"], []).append(a)
    n = len(passes)
    metered = [p for p in passes.values() if all(a["energy_joules"] is not None for a in p)]
    return {
        "decode_tokens_without": sum(_sum(a["decode_tokens"] for a in p) for p in passes.values()) / n,
        "computed_tokens_without": sum(_sum(a["computed_tokens"] for a in p) for p in passes.values()) / n,
        "verified_without": any(bool(a["verified"]) for a in ungrafted),
        "baseline_passes": n, "baseline_attempts": len(ungrafted),
        "budget_exhausted_without": sum(bool(a["budget_exhausted"]) for a in ungrafted),
        "energy_j_without": (sum(sum(float(a["energy_joules"]) for a in p) for p in metered) / len(metered)
                             if metered else None),
        "_source_without": _source(a["energy_source"] for p in metered for a in p),
        "_attempts_without": [a for p in metered for a in p],
    }


def _none_baseline() -> Row:
    return {"decode_tokens_without": None, "computed_tokens_without": None, "verified_without": None,
            "baseline_passes": 0, "baseline_attempts": 0, "budget_exhausted_without": None,
            "energy_j_without": None, "_source_without": None, "_attempts_without": []}


def _ratio(top: float | None, bottom: float | None) -> float | None:
    return top / bottom if top is not None and bottom else None


def fold_problems(attempts: list[Row], run_ids: list[str]) -> list[Row]:
    """One row per (run, problem) grafted in that run: its K attempts folded, against its baseline.

    `attempts` are attempt-cost rows (the `attempt_costs` view): the runs' own and every ungrafted
    attempt a baseline rests on. Rows come in run order, then in the order problems were first attempted.
    Keys starting with `_` are private to the headline (dropped from the report's frames).
    """
    ungrafted: dict[tuple[str, str], list[Row]] = {}
    for a in attempts:
        if not a["grafted"]:
            ungrafted.setdefault((a["problem_id"], a["model_fingerprint"]), []).append(a)
    out = []
    for run_id in run_ids:
        grafted: dict[str, list[Row]] = {}
        for a in sorted((a for a in attempts if a["run_id"] == run_id and a["grafted"]),
                        key=lambda a: a["attempt_id"]):
            grafted.setdefault(a["problem_id"], []).append(a)
        for pid, mine in grafted.items():
            mine.sort(key=lambda a: a["attempt_index"])
            verified = [a for a in mine if a["verified"]]
            best = verified[0] if verified else mine[-1]
            base_rows = ungrafted.get((pid, best["model_fingerprint"]), [])
            base = _baseline(base_rows) if base_rows else _none_baseline()
            with_source = _source(a["energy_source"] for a in mine)
            energy_with = (sum(float(a["energy_joules"]) for a in mine)
                           if all(a["energy_joules"] is not None for a in mine) else None)
            decode_with, computed_with = _sum(a["decode_tokens"] for a in mine), _sum(a["computed_tokens"] for a in mine)
            comparable = base["energy_j_without"] is not None and energy_with is not None \
                and base["_source_without"] == with_source and with_source not in (None, "mixed")
            out.append({
                "problem_id": pid, "run_id": run_id, "route": best["route"], "attempts": len(mine),
                "verified": bool(verified), "best_attempt": best["attempt_index"] if verified else None,
                "answer": best["answer"],
                "decode_tokens_without": base["decode_tokens_without"], "decode_tokens_with": decode_with,
                "decode_factor": _ratio(base["decode_tokens_without"], decode_with),
                "computed_tokens_without": base["computed_tokens_without"], "computed_tokens_with": computed_with,
                "computed_factor": _ratio(base["computed_tokens_without"], computed_with),
                "restored_tokens": _sum(a["restored_tokens"] for a in mine),
                "verified_without": base["verified_without"], "baseline_passes": base["baseline_passes"],
                "baseline_attempts": base["baseline_attempts"],
                "budget_exhausted_without": base["budget_exhausted_without"],
                "energy_j_without": base["energy_j_without"], "energy_j_with": energy_with,
                "energy_source": with_source if base["_source_without"] in (None, with_source) else "mixed",
                "problem_set_hash": best["problem_set_hash"], "model_fingerprint": best["model_fingerprint"],
                "artifact_sha256": best["artifact_sha256"], "logits_sha256": best["logits_sha256"],
                "_energy_comparable": comparable, "_attempts_with": mine,
                "_attempts_without": base["_attempts_without"],
            })
    return out


def headline(run: Row, own: list[Row], problems: list[Row]) -> Row:
    """A run's named figures: `own` are its attempts, `problems` its folded rows (from `fold_problems`)."""
    measured = [p for p in problems if p["decode_tokens_without"] is not None]
    e_rows = [p for p in measured if p["_energy_comparable"]]
    out: Row = {
        "problems": len({a["problem_id"] for a in own}),
        "verified": len({a["problem_id"] for a in own if a["verified"]}),
        "grafted_problems": len(problems), "compared_problems": len(measured),
        "ungrafted_problems": len({a["problem_id"] for a in own} - {p["problem_id"] for p in problems}),
        "no_baseline": len(problems) - len(measured),
        "verified_without": sum(bool(p["verified_without"]) for p in measured) if measured else None,
        "verified_with": sum(bool(p["verified"]) for p in measured) if measured else None,
        "decode_tokens_without": sum(p["decode_tokens_without"] for p in measured) if measured else None,
        "decode_tokens_with": sum(p["decode_tokens_with"] for p in measured) if measured else None,
        "computed_tokens_without": sum(p["computed_tokens_without"] for p in measured) if measured else None,
        "computed_tokens_with": sum(p["computed_tokens_with"] for p in measured) if measured else None,
        "restored_tokens_with": sum(p["restored_tokens"] for p in measured) if measured else None,
        "energy_j_without": sum(p["energy_j_without"] for p in e_rows) if e_rows else None,
        "energy_j_with": sum(p["energy_j_with"] for p in e_rows) if e_rows else None,
        "energy_source_compared": _source(p["energy_source"] for p in e_rows),
        "energy_factor_low": None, "energy_factor_high": None, "energy_factor_attempts": None,
    }
    out["decode_factor"] = _ratio(out["decode_tokens_without"], out["decode_tokens_with"])
    out["computed_factor"] = _ratio(out["computed_tokens_without"], out["computed_tokens_with"])
    out["energy_factor"] = _ratio(out["energy_j_without"], out["energy_j_with"])
    if out["energy_factor"] is not None:
        low, high, n = _energy_range(e_rows, out["energy_factor"])
        out.update(energy_factor_low=low, energy_factor_high=high, energy_factor_attempts=n)
    return out


def _energy_range(e_rows: list[Row], point: float) -> tuple[float, float, int]:
    """(low, high, attempts): how far the energy factor could move with the joules per token's spread.

    Token counts are exact; joules per computed token is what the `estimate` source gets wrong (CPU
    seconds x watts varies about 3x over the same tokens). So the range is the computed factor times
    the extreme ratios of joules per computed token: the cheapest ungrafted attempt over the dearest
    grafted one, and the dearest over the cheapest. It is the range the per-attempt energies allow,
    not a confidence interval. Widened to hold the pooled figure.
    """
    def jpt(rows: list[Row]) -> list[float]:
        return [float(a["energy_joules"]) / a["computed_tokens"] for a in rows
                if a["energy_joules"] is not None and a["computed_tokens"]]

    base = jpt([a for p in e_rows for a in p["_attempts_without"]])
    graft = jpt([a for p in e_rows for a in p["_attempts_with"]])
    n = len(base) + len(graft)
    tokens = sum(p["computed_tokens_without"] for p in e_rows) / max(1, sum(p["computed_tokens_with"] for p in e_rows))
    if not base or not graft:
        return point, point, n
    if min(graft) <= 0:  # a graft metered at 0 J: no upper bound to give
        return min(tokens * min(base) / max(graft), point), math.inf, n
    return min(tokens * min(base) / max(graft), point), max(tokens * max(base) / min(graft), point), n


# --- wording: every figure named as it is defined ------------------------------------------------------

def fmt(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 10 else f"{x:,.1f}"


def plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def headline_lines(h: Row, *, run_id: str, status: str = "finished",
                   no_baseline_ids: list[str] | None = None) -> list[str]:
    """The headline of one run as a few lines: first the run, then each named figure on its own line."""
    head = f"run {run_id}" + (f" ({status})" if status in ("interrupted", "failed", "running") else "")
    lines = [f"{head}: {plural(h['problems'], 'problem')}, {h['verified']:,} verified"]
    tool = [f"  exact arithmetic: the calculator forced {plural(h['tool_tokens'], 'token')} "
            "(counted apart from decode tokens)"] if h.get("tool_tokens") else []
    if h["grafted_problems"] == 0:
        if "decode_tokens" in h:   # a run's row carries its own totals
            lines[0] += (f"; without a graft: {h['decode_tokens']:,} decode tokens, {h['computed_tokens']:,} computed "
                         f"tokens (prefill + decode), {plural(h['budget_exhausted'], 'attempt')} hit the budget")
        lines[0] += " — a measured baseline"
        return lines + tool
    if h["ungrafted_problems"]:
        lines.append(f"  without a graft: {plural(h['ungrafted_problems'], 'problem')} (measured: a baseline for "
                     "later passes)")
    if h["compared_problems"]:
        lines += [
            f"  with a measured baseline: {plural(h['compared_problems'], 'problem')}, verified "
            f"{h['verified_without']:,} without -> {h['verified_with']:,} with the graft",
            f"  decode tokens: {fmt(h['decode_tokens_without'])} without -> {h['decode_tokens_with']:,} with "
            f"(decode factor {_factor(h['decode_factor'])}, the paper's measure)",
            f"  computed tokens (prefill + decode): {fmt(h['computed_tokens_without'])} without -> "
            f"{h['computed_tokens_with']:,} with (computed factor {_factor(h['computed_factor'])}); "
            f"{h['restored_tokens_with']:,} restored from grafts",
            f"  {_energy(h)}",
        ]
    if h["no_baseline"]:
        ids = no_baseline_ids or []
        shown = ", ".join(ids[:5]) + (", …" if len(ids) > 5 else "")
        lines.append(f"  no baseline: {plural(h['no_baseline'], 'grafted problem')} never measured without a graft "
                     f"({shown}); run them with --no-graft to compare")
    return lines + tool


def _factor(x: float | None) -> str:
    return "n/a" if x is None else fmt(x)


def _energy(h: Row) -> str:
    """The energy factor: a measurement plainly, an estimate with its range and the word estimate."""
    if h["energy_factor"] is None:
        return "energy: not comparable (no shared energy source)"
    source, point = h["energy_source_compared"], h["energy_factor"]
    if is_measured(source):
        return f"energy: {fmt(point)} times less (source: {source})"
    what = ("estimate from CPU seconds x watts, not a measurement" if source == "estimate"
            else f"{source} sources, not one measurement")
    low, high, n = h["energy_factor_low"], h["energy_factor_high"], h["energy_factor_attempts"]
    if n is not None and n <= 2:
        return f"energy: about {fmt(point)} times less ({what}; one attempt each way, spread unknown)"
    if fmt(low) == fmt(high):
        return f"energy: about {fmt(point)} times less ({what}; joules per token did not vary over its {n} attempts)"
    top = "unbounded" if math.isinf(high) else fmt(high)
    return (f"energy: {fmt(low)} to {top} times less ({what}: the range of joules per token over its "
            f"{n} attempts; {fmt(point)} pooled)")
