"""`build_report`: the catalog's views, shaped with pandas into savings rows and per-run summaries.

Definitions (also written into every JSON report under `definitions`):
- computed tokens = prefill + decode tokens the model actually ran (restored tokens are not computed);
- baseline = mean computed tokens (and joules) over the problem's recorded ungrafted attempts under
  the same model fingerprint, budget-exhausted ones included; none recorded -> "no baseline", null saving;
- tokens_saved = baseline tokens - graft tokens; ratio = baseline / graft tokens;
- restored_tokens = prefill avoided by restoring the artifact, reported apart from the saving;
- an energy factor from the `estimate` source comes with a range (`_energy_factor_range`) and is
  worded as an estimate: CPU seconds x watts varies about 3x over the same tokens.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from flywheel import config
from flywheel.energy import is_measured
from flywheel.errors import InputError
from flywheel.report import queries

SCHEMA = "flywheel-report/1"

#: The savings table's columns, in display order; hashes last.
ROW_COLUMNS = (
    "problem_id", "run_id", "attempt_index", "route", "baseline", "baseline_tokens", "graft_tokens",
    "tokens_saved", "ratio", "restored_tokens", "graft_prefill_tokens", "graft_decode_tokens",
    "baseline_attempts", "budget_exhausted_attempts", "energy_j_baseline", "energy_j_graft",
    "energy_saved_j", "energy_source", "verified", "answer",
    "problem_set_hash", "artifact_sha256", "artifact_logits_sha256", "logits_sha256", "model_fingerprint",
)
DEFINITIONS = {
    "computed_tokens": "prefill_tokens + decode_tokens actually run by the model",
    "baseline_tokens": "mean computed tokens over the problem's recorded ungrafted attempts "
                       "(same model fingerprint, budget-exhausted included); null = no baseline",
    "graft_tokens": "computed tokens of the grafted attempt (restored tokens excluded)",
    "tokens_saved": "baseline_tokens - graft_tokens",
    "ratio": "baseline_tokens / graft_tokens",
    "restored_tokens": "prefill avoided by restoring the artifact instead of recomputing it",
    "energy_saved_j": "energy_j_baseline - energy_j_graft, only when both share one energy source",
    "estimate": "energy source 'estimate' = process CPU seconds x configured watts, not a measurement",
    "energy_factor": "energy_j_baseline / energy_j_graft summed over a run's rows with a shared energy source",
    "energy_factor_range": "energy_factor_low..high = token factor x (min..max baseline joules per computed token) "
                           "/ (max..min graft joules per computed token) over the attempts the factor rests on",
}
_EMPTY_RUN_COLUMNS = ["run_id", "problems", "solved", "accuracy", "tokens_saved", "summary"]
_BOOL_COLUMNS = ("verified", "budget_exhausted", "no_graft")


@dataclass(frozen=True)
class Report:
    """A report over one run or all runs. Frames are pandas; `to_dict()` is the JSON form.

    - `rows`: one per grafted attempt (ROW_COLUMNS), baseline columns null where none was measured;
    - `runs`: one per run (flywheel pass) with totals, accuracy and a `summary` sentence;
    - `attempts`: every attempt the rows rest on, with reference answers (enough to re-score);
    - `context`: per model fingerprint, library tokens vs the context window, resident bytes per graft;
    - `energy_per_token`: joules per prefilled and per decoded token, per energy source.
    """

    rows: pd.DataFrame
    runs: pd.DataFrame
    attempts: pd.DataFrame
    context: pd.DataFrame
    energy_per_token: pd.DataFrame
    run_id: str | None = None
    catalog_url: str = ""
    generated_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))

    @property
    def summary_lines(self) -> list[str]:
        """One sentence per run, then one per model's usable context."""
        return [*self.runs["summary"].tolist(), *self.context["summary"].tolist()]

    @property
    def cumulative_tokens_saved(self) -> pd.DataFrame:
        """run_id, tokens_saved (measured rows only) and its running total, in run order."""
        out = self.runs[["run_id", "tokens_saved"]].copy()
        out["tokens_saved"] = out["tokens_saved"].fillna(0.0)
        out["cumulative_tokens_saved"] = out["tokens_saved"].cumsum()
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA, "generated_at": self.generated_at, "catalog": self.catalog_url,
            "run_id": self.run_id, "definitions": DEFINITIONS, "summary": self.summary_lines,
            "rows": records(self.rows), "runs": records(self.runs), "context": records(self.context),
            "energy_per_token": records(self.energy_per_token), "attempts": records(self.attempts),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=False, allow_nan=False)


def _plain(value: Any) -> Any:
    """A JSON-clean Python value: NaN/NA -> None, numpy scalars -> int/float/bool, datetimes -> ISO."""
    if value is None or (not isinstance(value, str | bytes) and pd.api.types.is_scalar(value) and pd.isna(value)):
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, pd.Timestamp | datetime):
        return value.isoformat()
    return value


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """DataFrame rows as plain, JSON-serializable dicts (nulls as None)."""
    return [{k: _plain(v) for k, v in row.items()} for row in df.to_dict(orient="records")]


def _frame(rows: list[dict[str, Any]], columns: tuple[str, ...] | list[str]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=list(columns))
    for name in _BOOL_COLUMNS:  # SQLite hands back 0/1
        if name in df.columns:
            df[name] = df[name].map(lambda v: None if v is None or pd.isna(v) else bool(v)).astype(object)
    return df


def _float(series: pd.Series) -> pd.Series:
    return pd.to_numeric(series, errors="coerce").astype("float64")  # PostgreSQL AVG may be Decimal


def _sources(series: pd.Series) -> str | None:
    found = sorted({s for s in series.dropna().tolist()})
    return None if not found else found[0] if len(found) == 1 else "mixed"


def _shape_rows(raw: list[dict[str, Any]]) -> pd.DataFrame:
    df = _frame(raw, queries.TOKENS_SAVED_COLUMNS)
    for name in ("baseline_tokens", "tokens_saved", "ratio", "energy_j_baseline", "energy_j_graft",
                 "energy_saved_j"):
        df[name] = _float(df[name])
    for name in ("baseline_attempts", "budget_exhausted_attempts"):  # null where there is no baseline
        df[name] = pd.to_numeric(df[name], errors="coerce").astype("Int64")
    df["baseline"] = np.where(df["baseline_tokens"].isna(), "no baseline", "measured")
    return df[list(ROW_COLUMNS)].reset_index(drop=True)


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def _bytes(n: int) -> str:
    size, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 10 else f"{x:,.1f}"


def _status(run: dict[str, Any]) -> str:
    """The run's status; `running` under an owner process that is gone reads `interrupted` (killed outright)."""
    from flywheel.liveness import is_gone

    return "interrupted" if run["status"] == "running" and is_gone(run.get("owner")) else str(run["status"])


def _run_summary(run: dict[str, Any], att: pd.DataFrame, rows: pd.DataFrame) -> dict[str, Any]:
    mine = att[att["run_id"] == run["id"]]
    graft = rows[rows["run_id"] == run["id"]]
    measured = graft[graft["baseline"] == "measured"]
    problems = int(mine["problem_id"].nunique())
    solved = int(mine.loc[mine["verified"].astype(bool), "problem_id"].nunique()) if len(mine) else 0
    e_rows = measured[measured["energy_saved_j"].notna()]
    base_tokens = float(measured["baseline_tokens"].sum())
    graft_tokens = float(measured["graft_tokens"].sum())
    e_base, e_graft = float(e_rows["energy_j_baseline"].sum()), float(e_rows["energy_j_graft"].sum())
    out: dict[str, Any] = {
        "run_id": run["id"], "started_at": run["started_at"], "problem_set": run["problem_set"],
        "problem_set_hash": run["problem_set_hash"], "model_name": run["model_name"],
        "model_fingerprint": run["model_fingerprint"], "no_graft": bool(run["no_graft"]),
        "budget": run["budget"], "status": _status(run),
        "problems": problems, "attempts": len(mine), "solved": solved,
        "accuracy": solved / problems if problems else None,
        "computed_tokens": int(mine["computed_tokens"].sum()), "restored_tokens": int(mine["restored_tokens"].sum()),
        "budget_exhausted": int(mine["budget_exhausted"].astype(bool).sum()),
        "energy_j": float(_float(mine["energy_joules"]).sum()) if mine["energy_joules"].notna().any() else None,
        "energy_source": _sources(mine["energy_source"]),
        "grafted_attempts": len(graft), "no_baseline": int((graft["baseline"] == "no baseline").sum()),
        "baseline_tokens": base_tokens if len(measured) else None,
        "graft_tokens": graft_tokens if len(measured) else None,
        "graft_decode_tokens": int(measured["graft_decode_tokens"].sum()) if len(measured) else None,
        "tokens_saved": float(measured["tokens_saved"].sum()) if len(measured) else None,
        "factor": base_tokens / graft_tokens if len(measured) and graft_tokens > 0 else None,
        "energy_j_baseline": e_base if len(e_rows) else None,
        "energy_j_graft": e_graft if len(e_rows) else None,
        "energy_factor": e_base / e_graft if len(e_rows) and e_graft > 0 else None,
        "savings_energy_source": _sources(e_rows["energy_source"]),
        "energy_factor_low": None, "energy_factor_high": None, "energy_factor_attempts": None,
    }
    if out["energy_factor"] is not None:
        low, high, n_attempts = _energy_factor_range(e_rows, att, out["energy_factor"])
        out.update(energy_factor_low=low, energy_factor_high=high, energy_factor_attempts=n_attempts)
    out["summary"] = _sentence(out, measured)
    return out


def _sentence(s: dict[str, Any], measured: pd.DataFrame) -> str:
    # a run that stopped before its end says so first: its figures cover only what it recorded
    head = f"run {s['run_id']}" + (f" ({s['status']})" if s["status"] in ("interrupted", "failed") else "") + ":"
    acc = f"accuracy {s['solved']}/{s['problems']}"
    if s["grafted_attempts"] == 0:
        energy = "" if s["energy_j"] is None else f", {_fmt(s['energy_j'])} J (source: {s['energy_source']})"
        return (f"{head} {_n(s['problems'], 'problem')} without graft, {s['computed_tokens']:,} tokens computed "
                f"({_n(s['budget_exhausted'], 'attempt')} hit the budget){energy}; {acc} — the measured baseline")
    if len(measured) == 0:
        return (f"{head} {_n(s['grafted_attempts'], 'grafted attempt')}, no baseline measured for any of them "
                f"(run the same problems with --no-graft first); {acc}")
    n = int(measured["problem_id"].nunique())
    text = (f"{head} {_n(n, 'problem')}, {_fmt(s['baseline_tokens'])} baseline tokens "
            f"({_n(int(measured['budget_exhausted_attempts'].sum()), 'budget-exhausted attempt')}), "
            f"{_fmt(s['graft_tokens'])} graft tokens ({s['graft_decode_tokens']:,} decoded), "
            f"a factor of {_fmt(s['factor']) if s['factor'] is not None else 'n/a'}")
    if s["energy_factor"] is not None and is_measured(s["savings_energy_source"]):
        text += f"; {_fmt(s['energy_factor'])} times less energy (source: {s['savings_energy_source']})"
    elif s["energy_factor"] is not None:
        text += _estimated_energy(s)
    else:
        text += "; energy not comparable (no shared energy source)"
    if s["no_baseline"]:
        text += f"; {_n(s['no_baseline'], 'grafted attempt')} with no baseline"
    return f"{text}; {acc}"


def _energy_factor_range(e_rows: pd.DataFrame, att: pd.DataFrame, point: float) -> tuple[float, float, int]:
    """(low, high, attempts): how far the energy factor could move with the per-token energy's spread.

    Token counts are exact; the energy per computed token is what the `estimate` source gets wrong
    (CPU seconds x watts varies about 3x over the same tokens). So the range is the token factor of
    the rows times the extreme ratios of joules per computed token: the cheapest baseline attempt
    over the dearest grafted one, and the dearest over the cheapest. It is the range the per-attempt
    energies allow, not a confidence interval, and conservative for a sum over many attempts.
    Widened to hold the pooled figure (a baseline attempt without energy can push it outside).
    """
    keys = set(zip(e_rows["problem_id"], e_rows["model_fingerprint"], strict=True))
    base = att[(att["grafted"] == 0) & att["energy_joules"].notna() & (att["computed_tokens"] > 0)]
    base = base[[k in keys for k in zip(base["problem_id"], base["model_fingerprint"], strict=True)]]
    graft = e_rows[e_rows["graft_tokens"] > 0]
    if base.empty or graft.empty:
        return point, point, len(base) + len(graft)
    base_jpt = base["energy_joules"].to_numpy(dtype="float64") / base["computed_tokens"].to_numpy(dtype="float64")
    graft_jpt = (graft["energy_j_graft"].to_numpy(dtype="float64")
                 / graft["graft_tokens"].to_numpy(dtype="float64"))
    tokens = float(e_rows["baseline_tokens"].sum()) / float(e_rows["graft_tokens"].sum())
    if graft_jpt.min() <= 0:  # a graft metered at 0 J: no upper bound to give
        return min(tokens * base_jpt.min() / graft_jpt.max(), point), math.inf, len(base) + len(graft)
    low = tokens * base_jpt.min() / graft_jpt.max()
    high = tokens * base_jpt.max() / graft_jpt.min()
    return min(low, point), max(high, point), len(base) + len(graft)


def _estimated_energy(s: dict[str, Any]) -> str:
    """The energy factor of a source that is not a measurement: its range first, worded as an estimate."""
    source = s["savings_energy_source"]
    what = ("estimate from CPU seconds x watts, not a measurement" if source == "estimate"
            else f"{source} sources, not one measurement")
    low, high, n = s["energy_factor_low"], s["energy_factor_high"], s["energy_factor_attempts"]
    if n is not None and n <= 2:
        return f"; energy about {_fmt(s['energy_factor'])} times less ({what}; one attempt each way, spread unknown)"
    if _fmt(low) == _fmt(high):
        return (f"; energy about {_fmt(s['energy_factor'])} times less ({what}; joules per token "
                f"did not vary over its {n} attempts)")
    top = "unbounded" if math.isinf(high) else _fmt(high)
    return (f"; energy {_fmt(low)} to {top} times less ({what}: the range of joules per token over its "
            f"{n} attempts; {_fmt(s['energy_factor'])} pooled)")


def context_window_of(model_name: str) -> int | None:
    """The model's window from its config.json (local dir or prepared cache), without loading it."""
    for candidate in (Path(model_name).expanduser(), config.model_cache_dir() / model_name):
        cfg = candidate / "config.json"
        try:
            data = json.loads(cfg.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        data = data.get("text_config", data)
        window = data.get("max_position_embeddings")
        if isinstance(window, int) and window > 0:
            return window
    return None


def _shape_context(raw: list[dict[str, Any]], window: int | None) -> pd.DataFrame:
    cols = ["model_name", "fingerprint_digest", "artifacts", "stored_tokens", "stored_bytes",
            "largest_artifact_tokens", "largest_artifact_bytes", "context_window", "widening", "summary"]
    out = []
    for r in raw:
        w = window if window is not None else context_window_of(r["model_name"])
        stored = int(r["stored_tokens"] or 0)
        largest = int(r["largest_artifact_bytes"] or 0)
        widening = stored / w if w else None
        against = (f"{widening:,.1f}x the model's {w:,}-token window" if widening is not None
                   else "context window unknown (pass --context-window)")
        out.append({**r, "stored_tokens": stored, "stored_bytes": int(r["stored_bytes"] or 0),
                    "largest_artifact_bytes": largest, "context_window": w, "widening": widening,
                    "summary": (f"library ({r['model_name']}): {stored:,} tokens stored in "
                                f"{_n(int(r['artifacts']), 'artifact')} = {against}; one graft needs at most {_bytes(largest)} "
                                "resident, since only the graft in use is loaded: context widened at zero "
                                "extra accelerator memory")})
    return pd.DataFrame(out, columns=cols)


def _energy_per_token(att: pd.DataFrame) -> pd.DataFrame:
    """Least squares of joules on (prefill, decode) tokens per source, no intercept.

    One reading covers a whole attempt, so the split between prefill and decode is fitted; a
    split that is underdetermined or negative is left null rather than guessed.
    """
    out = []
    metered = att[att["energy_joules"].notna() & att["energy_source"].notna()]
    for source, grp in metered.groupby("energy_source", sort=True):
        x = grp[["prefill_tokens", "decode_tokens"]].to_numpy(dtype="float64")
        y = _float(grp["energy_joules"]).to_numpy()
        per_prefill = per_decode = None
        if len(grp) >= 2 and np.linalg.matrix_rank(x) == 2:
            coef, *_ = np.linalg.lstsq(x, y, rcond=None)
            if (coef >= 0).all():
                per_prefill, per_decode = float(coef[0]), float(coef[1])
        computed = float(x.sum())
        out.append({"energy_source": source, "attempts": len(grp), "joules": float(y.sum()),
                    "prefill_tokens": int(x[:, 0].sum()), "decode_tokens": int(x[:, 1].sum()),
                    "j_per_token": float(y.sum()) / computed if computed else None,
                    "j_per_prefill_token": per_prefill, "j_per_decode_token": per_decode})
    return pd.DataFrame(out, columns=["energy_source", "attempts", "joules", "prefill_tokens", "decode_tokens",
                                      "j_per_token", "j_per_prefill_token", "j_per_decode_token"])


def build_report(catalog: Any, run_id: str | None = None, *, context_window: int | None = None) -> Report:
    """Build the savings report from a catalog's views (no engine needed).

    Args:
        catalog: a `flywheel.catalog.Catalog` (anything with `.db`, a SQLAlchemy engine, and `.url`).
        run_id: only this run's attempts (baselines may still come from other runs); None = every run.
        context_window: the model's window for the usable-context figure; None reads it from the
            model's config.json when the model is prepared locally.
    Returns:
        the `Report`. Example: `build_report(cat).summary_lines[0]` ->
        "run r2: 8 problems, 401,026 baseline tokens (...), 61 graft tokens (...), a factor of 6,574; ..."
    Raises:
        InputError: `run_id` is not in the catalog.
    """
    with catalog.db.connect() as conn:
        run_rows = queries.runs(conn, run_id)
        if run_id is not None and not run_rows:
            raise InputError(f"no run {run_id!r} in the catalog {catalog.url}",
                             hint="`flywheel report` without --run lists every run")
        raw_rows = queries.savings(conn, run_id)
        raw_attempts = queries.attempts(conn, run_id)
        raw_context = queries.library_context(conn)
    rows = _shape_rows(raw_rows)
    attempts = _frame(raw_attempts, [*queries.ATTEMPT_COST_COLUMNS, "reference"])
    attempts["energy_joules"] = _float(attempts["energy_joules"])
    summaries = [_run_summary(r, attempts, rows) for r in run_rows]
    runs = pd.DataFrame(summaries, columns=list(summaries[0]) if summaries else _EMPTY_RUN_COLUMNS)
    return Report(rows=rows, runs=runs, attempts=attempts, context=_shape_context(raw_context, context_window),
                  energy_per_token=_energy_per_token(attempts[attempts["run_id"].isin(runs["run_id"])]),
                  run_id=run_id, catalog_url=str(catalog.url))
