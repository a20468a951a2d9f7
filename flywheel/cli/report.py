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
              help="table (terminal), csv (savings rows), json (everything, re-scorable), md.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write a PNG: cumulative tokens saved across runs, accuracy per pass.")
@click.option("--context-window", type=click.IntRange(min=1), default=None,
              help="The model's window for the usable-context figure (default: from its config.json).")
@click.pass_context
def report(ctx: click.Context, run_id: str | None, fmt: str, plot_path: Path | None,
           context_window: int | None) -> None:
    """Tokens and energy the library saved, against measured ungrafted baselines.

    \b
    Examples:
      flywheel report
      flywheel report --run r-20260101 --format json > report.json
      flywheel report --format csv --plot savings.png
    """
    from flywheel.library import open_catalog_read_only
    from flywheel.report import build_report, plot, render
    from flywheel.report.output import to_table

    settings = settings_of(ctx)
    if plot_path is not None:
        _check_plot_path(plot_path)
    _require_catalog(settings.db_url)
    catalog = open_catalog_read_only(settings.db_url)  # a report writes nothing: read-only libraries too
    try:
        result = build_report(catalog, run_id, context_window=context_window)
    finally:
        catalog.close()
    if fmt == "table":
        click.echo(to_table(result, width=table_width()), nl=False)
    else:
        click.echo(render(result, fmt))  # type: ignore[arg-type]
    if plot_path is not None:
        try:
            plot(result, plot_path)
        except OSError as err:
            raise InputError(f"cannot write the plot to {printable(str(plot_path), 120)}: {err.strerror or err}",
                             hint="give --plot a path in a writable folder") from None
        click.echo(f"plot written to {plot_path}", err=True)


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
