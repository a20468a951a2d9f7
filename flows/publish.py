"""Where Prefect users look: a pass's log lines, its headline as a markdown artifact, its problems as a table.

`flywheel_run` calls these outside the pass itself: `run_logger()` for progress as problems finish,
then `savings_of` (the report's named figures for the run, one definition everywhere) and `publish`
(routes and refusals logged, artifacts created on the flow run). Outside a flow run each is a no-op.

Log lines go to the flow run's logs through Prefect's API log handler (the Prefect UI,
`prefect flow-run logs ID`), not to the console, where the CLI shows its own progress bar.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flywheel.library import Library

#: The flywheel's logger under Prefect's flow-run logger (its records carry the flow run's id).
LOGGER = "prefect.flow_runs.flywheel"
SUMMARY_KEY = "flywheel-summary"     # artifact keys: lowercase letters, digits and dashes
PROBLEMS_KEY = "flywheel-problems"
#: Per-problem columns of the table artifact: the run's result, then the report's folded figures.
TABLE_COLUMNS = ("problem_id", "route", "verified", "answer", "attempts", "decode_tokens", "prefill_tokens",
                 "restored_tokens", "decode_tokens_without", "decode_factor", "computed_tokens_without",
                 "computed_tokens_with", "computed_factor", "refused_grafts", "grafted_artifact")


def run_logger() -> logging.LoggerAdapter[logging.Logger] | None:
    """The current flow run's logger for flywheel progress (INFO, to the API only); None outside a flow run."""
    from prefect.context import FlowRunContext
    from prefect.logging import get_run_logger
    from prefect.logging.handlers import APILogHandler

    ctx = FlowRunContext.get()
    if ctx is None or ctx.flow_run is None:
        return None
    logger = logging.getLogger(LOGGER)
    if not any(isinstance(h, APILogHandler) for h in logger.handlers):
        logger.addHandler(APILogHandler())
        logger.setLevel(logging.INFO)   # Prefect's own loggers may be quieted to WARNING; ours stays INFO
        logger.propagate = False        # not the console: the CLI draws its own progress bar there
    base = get_run_logger()
    extra = base.extra if isinstance(base, logging.LoggerAdapter) else None
    return logging.LoggerAdapter(logger, dict(extra or {}))


def savings_of(lib: Library, run_id: str) -> dict[str, Any]:
    """The run's named figures from the report (`flywheel.report.figures`): headline, lines, problems, definitions."""
    from flywheel.report import DEFINITIONS, build_report
    from flywheel.report.build import records

    report = build_report(lib.catalog, run_id)
    row = report.runs.set_index("run_id").loc[run_id]
    return {"headline": report.headline(run_id), "lines": str(row["summary"]).splitlines(),
            "problems": records(report.problems), "definitions": DEFINITIONS}


def problem_table(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per problem of the run: its result, beside the report's figures where it was grafted."""
    folded = {p["problem_id"]: p for p in summary["savings"]["problems"]}
    rows = []
    for r in summary["results"]:
        f = folded.get(r["problem_id"], {})
        row = {**r, **{k: f.get(k) for k in ("decode_tokens_without", "decode_factor", "computed_tokens_without",
                                             "computed_tokens_with", "computed_factor")}}
        row["refused_grafts"] = len(r["refused_grafts"])
        rows.append({k: row.get(k) for k in TABLE_COLUMNS})
    return rows


def markdown(summary: dict[str, Any]) -> str:
    """The run's headline as markdown: the report's lines, then the run's own token totals."""
    t = summary["totals"]
    out = [f"# flywheel run `{summary['run_id']}`", "", f"problem set `{summary['problem_set']}` "
           f"(sha256 `{summary['problem_set_hash'][:12]}`)", ""]
    for line in summary["savings"]["lines"]:
        out.append(f"  - {line.strip()}" if line.startswith("  ") else f"- {line}")
    out += ["", f"This run: {t['verified']}/{t['problems']} verified; {t['decode_tokens']:,} decode, "
            f"{t['prefill_tokens']:,} prefill, {t['restored_tokens']:,} restored tokens (a graft and prefill "
            "shared by K attempts counted once).", "",
            "Definitions: " + "; ".join(f"**{k}**: {v}" for k, v in summary["savings"]["definitions"].items()
                                        if k in ("decode_factor", "computed_factor", "decode_tokens_without"))]
    return "\n".join(out)


def publish(summary: dict[str, Any], logger: logging.LoggerAdapter[logging.Logger] | None = None) -> None:
    """Log each problem's route, verdict and refusals and the headline; create the two artifacts on the flow run."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact
    from prefect.context import FlowRunContext

    logger = logger or run_logger()
    if logger is not None:
        for r in summary["results"]:
            logger.info("%s: route %s, %s after %d attempt(s), %d decode tokens", r["problem_id"], r["route"],
                        "verified" if r["verified"] else "not verified", r["attempts"], r["decode_tokens"])
            for g in r["refused_grafts"]:
                logger.warning("%s: graft %s refused: %s", r["problem_id"], g["artifact"][:12], g["reason"])
        for line in summary["savings"]["lines"]:
            logger.info("%s", line)
    if FlowRunContext.get() is None:
        return
    run_id = summary["run_id"]
    create_markdown_artifact(markdown(summary), key=SUMMARY_KEY, description=f"headline of flywheel run {run_id}")
    create_table_artifact(problem_table(summary), key=PROBLEMS_KEY, description=f"problems of flywheel run {run_id}")
