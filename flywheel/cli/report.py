"""`flywheel report`: tokens and energy saved against measured baselines, from the catalog alone."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import click

from flywheel.cli.common import settings_of
from flywheel.errors import InputError, LibraryError
from flywheel.report.formats import FORMATS
from flywheel.terminal import printable


def table_width() -> int:
    """`COLUMNS` when set; else the terminal's width on a terminal; else `PIPED_WIDTH` (piped, redirected)."""
    from flywheel.report.output import PIPED_WIDTH

    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if sys.stdout.isatty():
        return shutil.get_terminal_size((PIPED_WIDTH, 24)).columns
    return PIPED_WIDTH


def _require_catalog(db_url: str) -> None:
    """Refuse to report on a SQLite catalog that does not exist (opening it would create one)."""
    from sqlalchemy.engine import make_url

    url = make_url(db_url)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:" \
            and not Path(url.database).is_file():
        raise LibraryError(f"no catalog at {url.database}",
                           hint="run `flywheel run --problems ...` first, or point --library/--db at a library")


@click.command("report")
@click.option("--run", "run_id", default=None, help="Only this run (default: every run).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
              help="table (terminal), csv (one row per attempt), json (everything, re-scorable), md, "
                   "curve-csv (the learning curve: one row per run, in the order they ran).")
@click.option("--attempts", "show_attempts", is_flag=True,
              help="Also list every attempt in table and md (csv and json always have them).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write a PNG: decode tokens without vs with the graft per problem, and the learning curve.")
@click.option("--recheck", type=click.IntRange(min=1), default=None, metavar="N",
              help="With --run: replay its first N attempts (same artifact, prompt, seed, schedule) and check "
                   "logits SHA-256, tokens and verdicts against the catalog; a mismatch exits non-zero.")
@click.option("--context-window", type=click.IntRange(min=1), default=None,
              help="The model's window for the usable-context figure (default: from its config.json).")
@click.pass_context
def report(ctx: click.Context, run_id: str | None, fmt: str, show_attempts: bool, plot_path: Path | None,
           recheck: int | None, context_window: int | None) -> None:
    """Tokens and energy the library saved, against measured ungrafted baselines.

    Each run's headline comes first (decode factor: the paper's measure; computed factor beside it),
    then one row per problem, its K attempts folded.

    \b
    Examples:
      flywheel report
      flywheel report --run r-20260101 --format json > report.json
      flywheel report --format csv --plot savings.png
      flywheel report --format curve-csv > curve.csv
      flywheel report --run r-20260101 --recheck 8
    """
    from flywheel.library import open_catalog_read_only
    from flywheel.report import build_report, plot, render
    from flywheel.report.output import to_table

    settings = settings_of(ctx)
    if plot_path is not None:
        _check_plot_path(plot_path)
    _require_catalog(settings.db_url)
    if recheck is not None:
        if run_id is None:
            raise click.UsageError("--recheck replays attempts of one run: add --run ID")
        _recheck(settings.library, settings.db_url, run_id, recheck)
        return
    catalog = open_catalog_read_only(settings.db_url)  # a report writes nothing: read-only libraries too
    try:
        result = build_report(catalog, run_id, context_window=context_window)
    finally:
        catalog.close()
    if fmt == "table":
        click.echo(to_table(result, width=table_width(), attempts=show_attempts), nl=False)
    else:
        click.echo(render(result, fmt, attempts=show_attempts))  # type: ignore[arg-type]
    if plot_path is not None:
        try:
            plot(result, plot_path)
        except OSError as err:
            raise InputError(f"cannot write the plot to {printable(str(plot_path), 120)}: {err.strerror or err}",
                             hint="give --plot a path in a writable folder") from None
        click.echo(f"plot written to {plot_path}", err=True)


def _recheck(library: Path, db_url: str, run_id: str, n: int) -> None:
    """Replay `n` attempts of `run_id`; one line per attempt, and a non-zero exit naming any mismatch."""
    from flywheel.library import Library
    from flywheel.replay import ReplayMismatchError, engine_for_run, recheck

    with Library.open(library, db_url, read_only=True) as lib:
        checks = recheck(lib, engine_for_run(lib, run_id), run_id, n)
    for c in checks:
        click.echo(f"{c.name}: " + ("reproduced (logits SHA-256, tokens, text, answer, verdict)" if c.ok
                                    else "MISMATCH: " + "; ".join(c.differences)))
    bad = [c.name for c in checks if not c.ok]
    if bad:
        raise ReplayMismatchError(f"{len(bad)} of {len(checks)} replayed attempts differ from the catalog: "
                                  f"{', '.join(bad)}", hint="the lines above say which recorded figure differs")
    click.echo(f"all {len(checks)} replayed attempts of {run_id} match the catalog")


def _check_plot_path(path: Path) -> None:
    """Refuse, before the report is built, a plot path that is not a .png in a folder that takes files."""
    import tempfile

    if path.suffix.lower() != ".png":
        raise InputError(f"--plot writes a PNG image, not {path.suffix or 'a file without a suffix'}: "
                         f"{printable(str(path), 120)}", hint="give --plot a path ending in .png")
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".plot-probe-"):
            pass
    except OSError as err:
        raise InputError(f"cannot write the plot to {printable(str(path), 120)}: {err.strerror or err}",
                         hint="give --plot a path in a writable folder") from None
