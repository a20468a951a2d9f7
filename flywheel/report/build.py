"""`build_report`: the catalog's attempts, folded per problem into named figures, a headline per run.

The figures and their definitions live in `flywheel.report.figures` (one definition of each factor,
written into every JSON report under `definitions`). Here the catalog is read (`queries`) and the
figures are shaped into pandas frames: `runs` (the headline per run), `problems` (one row per
problem grafted in a run, its K attempts folded), `attempts` (one row per attempt), the usable
context per model, and joules per token.
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
from flywheel.errors import InputError
from flywheel.report import queries
from flywheel.report.curve import CURVE_COLUMNS, CURVE_DEFINITIONS, curve_lines, learning_curve
from flywheel.report.figures import DEFINITIONS, PROBLEM_COLUMNS, fold_problems, headline, headline_lines

SCHEMA = "flywheel-report/2"

#: The per-attempt rows' columns (CSV, JSON, `--attempts`), in display order; hashes last.
ATTEMPT_COLUMNS = (
    "run_id", "problem_id", "attempt_index", "route", "grafted", "budget", "prompt_tokens", "prefill_tokens",
    "restored_tokens", "decode_tokens", "tool_tokens", "computed_tokens", "budget_exhausted", "answer", "reference",
    "verified",
    "verdict_status", "wall_seconds", "energy_joules", "energy_source", "error", "model_name",
    "attempt_id", "problem_set_hash", "model_fingerprint", "artifact_sha256", "artifact_logits_sha256",
    "logits_sha256", "artifact_tokens", "artifact_bytes",
)
#: Kept for callers of the first report schema: the folded rows' columns.
ROW_COLUMNS = PROBLEM_COLUMNS
_HEADLINE_KEYS = ("problems", "verified", "grafted_problems", "compared_problems", "no_baseline", "ungrafted_problems",
                  "verified_without", "verified_with", "decode_tokens_without", "decode_tokens_with",
                  "decode_factor", "computed_tokens_without", "computed_tokens_with", "computed_factor",
                  "restored_tokens_with", "energy_j_without", "energy_j_with", "energy_factor",
                  "energy_factor_low", "energy_factor_high", "energy_factor_attempts", "energy_source_compared")
_EMPTY_RUN_COLUMNS = ["run_id", *_HEADLINE_KEYS, "accuracy", "summary"]
_BOOL_COLUMNS = ("verified", "budget_exhausted", "no_graft")


@dataclass(frozen=True)
class Report:
    """A report over one run or all runs. Frames are pandas; `to_dict()` is the JSON form.

    - `runs`: one per run (flywheel pass): the headline figures (`figures.DEFINITIONS`), the run's own
      totals, and `summary`, the headline as lines;
    - `problems`: one per problem grafted in a run, its K attempts folded (PROBLEM_COLUMNS);
    - `attempts`: every attempt the figures rest on, with reference answers (enough to re-score);
    - `context`: per model fingerprint, library tokens vs the context window, resident bytes per graft;
    - `energy_per_token`: joules per prefilled and per decoded token, per energy source.
    """

    runs: pd.DataFrame
    problems: pd.DataFrame
    attempts: pd.DataFrame
    context: pd.DataFrame
    energy_per_token: pd.DataFrame
    curve: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(CURVE_COLUMNS)))
    run_id: str | None = None
    catalog_url: str = ""
    generated_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))

    @property
    def summary_lines(self) -> list[str]:
        """The headline of every run (its lines in order), then one line per model's usable context."""
        lines = [line for summary in self.runs["summary"].tolist() for line in summary.splitlines()]
        return [*lines, *curve_lines(self.curve), *self.context["summary"].tolist()]

    def headline(self, run_id: str) -> dict[str, Any]:
        """The named figures of `run_id` as plain JSON values (what `flywheel run --json` carries)."""
        row = self.runs.set_index("run_id").loc[run_id]
        return {k: _plain(row[k]) for k in _HEADLINE_KEYS}

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA, "generated_at": self.generated_at, "catalog": self.catalog_url,
            "run_id": self.run_id, "definitions": {**DEFINITIONS, "curve": CURVE_DEFINITIONS},
            "summary": self.summary_lines, "curve": records(self.curve), "runs": records(self.runs), "problems": records(self.problems), "attempts": records(self.attempts),
            "context": records(self.context), "energy_per_token": records(self.energy_per_token),
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


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def _bytes(n: int) -> str:
    size, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"


def _status(run: dict[str, Any]) -> str:
    """The run's status; `running` under an owner process that is gone reads `interrupted` (killed outright)."""
    from flywheel.liveness import is_gone

    return "interrupted" if run["status"] == "running" and is_gone(run.get("owner")) else str(run["status"])


def _run_row(run: dict[str, Any], own: list[dict[str, Any]], problems: list[dict[str, Any]]) -> dict[str, Any]:
    """One run's row: who and what it ran, its own totals, and its headline figures and lines."""
    h = headline(run, own, problems)
    energy = [a["energy_joules"] for a in own if a["energy_joules"] is not None]
    out: dict[str, Any] = {
        "run_id": run["id"], "started_at": run["started_at"], "status": _status(run),
        "problem_set": run["problem_set"], "problem_set_hash": run["problem_set_hash"],
        "model_name": run["model_name"], "model_fingerprint": run["model_fingerprint"],
        "no_graft": bool(run["no_graft"]), "budget": run["budget"], "attempts": len(own),
        **h, "accuracy": h["verified"] / h["problems"] if h["problems"] else None,
        "decode_tokens": sum(int(a["decode_tokens"]) for a in own),
        "tool_tokens": sum(int(a["tool_tokens"] or 0) for a in own),
        "computed_tokens": sum(int(a["computed_tokens"]) for a in own),
        "restored_tokens": sum(int(a["restored_tokens"]) for a in own),
        "budget_exhausted": sum(bool(a["budget_exhausted"]) for a in own),
        "energy_j": float(sum(energy)) if energy else None,
        "energy_source": _sources(pd.Series([a["energy_source"] for a in own], dtype=object)),
    }
    missing = [p["problem_id"] for p in problems if p["decode_tokens_without"] is None]
    out["summary"] = "\n".join(headline_lines(out, run_id=run["id"], status=out["status"], no_baseline_ids=missing))
    return out


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


def _schedule(text: str | None) -> dict[str, Any] | None:
    """A run's recorded decode schedule, or None where it is absent or unreadable (the curve then shows no
    weights for it; `flywheel library verify` names an unreadable row)."""
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def build_report(catalog: Any, run_id: str | None = None, *, context_window: int | None = None) -> Report:
    """Build the savings report from a catalog's views (no engine needed).

    Args:
        catalog: a `flywheel.catalog.Catalog` (anything with `.db`, a SQLAlchemy engine, and `.url`).
        run_id: only this run's attempts (baselines may still come from other runs); None = every run.
        context_window: the model's window for the usable-context figure; None reads it from the
            model's config.json when the model is prepared locally.
    Returns:
        the `Report`. Example: `build_report(cat, "r2").summary_lines[2]` ->
        "  decode tokens: 401,026 without -> 61 with (decode factor 6,574, the paper's measure)"
    Raises:
        InputError: `run_id` is not in the catalog.
    """
    with catalog.db.connect() as conn:
        run_rows = queries.runs(conn, run_id)
        if run_id is not None and not run_rows:
            raise InputError(f"no run {run_id!r} in the catalog {catalog.url}",
                             hint="`flywheel report` without --run lists every run")
        raw_attempts = queries.attempts(conn, run_id)
        raw_context = queries.library_context(conn)
        solutions = queries.solution_times(conn)
    attempts = _frame(raw_attempts, [*queries.ATTEMPT_COST_COLUMNS, "reference", "tool_tokens"])
    attempts["energy_joules"] = _float(attempts["energy_joules"])
    plain = records(attempts)
    run_ids = [r["id"] for r in run_rows]
    folded = fold_problems(plain, run_ids)
    summaries = [_run_row(r, [a for a in plain if a["run_id"] == r["id"]],
                          [p for p in folded if p["run_id"] == r["id"]]) for r in run_rows]
    runs = pd.DataFrame(summaries, columns=list(summaries[0]) if summaries else _EMPTY_RUN_COLUMNS)
    problems = pd.DataFrame([{k: p[k] for k in PROBLEM_COLUMNS} for p in folded], columns=list(PROBLEM_COLUMNS))
    for name in ("baseline_passes", "baseline_attempts", "budget_exhausted_without", "best_attempt"):
        problems[name] = pd.to_numeric(problems[name], errors="coerce").astype("Int64")
    for r in run_rows:
        r["decode_schedule_json"] = _schedule(r.get("decode_schedule"))
    curve = learning_curve(run_rows, [a for a in plain if a["run_id"] in run_ids], solutions)
    return Report(runs=runs, problems=problems, attempts=attempts[list(ATTEMPT_COLUMNS)].reset_index(drop=True),
                  curve=curve,
                  context=_shape_context(raw_context, context_window),
                  energy_per_token=_energy_per_token(attempts[attempts["run_id"].isin(run_ids)]),
                  run_id=run_id, catalog_url=str(catalog.url))
