"""The `flywheel` command: one entry point, sub-commands grouped one module per concern.

Each sub-command module defines click commands; they are attached here. Errors meant for the
user are `FlywheelError`s and become a clean message plus exit code at this edge only.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import click

from flywheel import config
from flywheel.errors import FlywheelError


@dataclass
class Settings:
    """Global options every sub-command reads (`--library`, `--db`, `--model`)."""

    library: Path
    db_url: str
    model: str


class FlywheelGroup(click.Group):
    """A click group that turns `FlywheelError` into `Error: ...` and its exit code."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except FlywheelError as err:
            click.echo(f"Error: {err}", err=True)
            sys.exit(err.exit_code)


@click.group(cls=FlywheelGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--library", "library", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Library root (env FLYWHEEL_LIBRARY, default ./library).")
@click.option("--db", "db_url", default=None, help="Catalog SQLAlchemy URL (env FLYWHEEL_DB, default SQLite in the library).")
@click.option("--model", "model", default=None, help="Model name or local path (env FLYWHEEL_MODEL, default gemma3-270m).")
@click.version_option(package_name="kv-flywheel")
@click.pass_context
def main(ctx: click.Context, library: Path | None, db_url: str | None, model: str | None) -> None:
    """kv-flywheel: verified solutions deposited once as byte-exact KV artifacts, grafted on reuse.

    \b
    Examples:
      flywheel verify-graft --samples 5 --prefix-tokens 64 1200
      flywheel check '\\dfrac{9}{7}' '9/7'
      flywheel deposit --problem 'What is 2+3?' --solution '2+3=5' --answer 5
      flywheel run --problems 'gen:linear?n=5&seed=1' --budget 64
      flywheel report --format md
    """
    root = config.library_root(library)
    ctx.obj = Settings(library=root, db_url=config.database_url(root, db_url), model=config.model_name(model))


def _attach() -> None:
    from flywheel.cli.graft import graft_command, prepare_model, verify_graft

    main.add_command(verify_graft)
    main.add_command(prepare_model)
    main.add_command(graft_command)
    from flywheel.cli.library import deposit, library

    main.add_command(deposit)
    main.add_command(library)
    from flywheel.cli.check import check

    main.add_command(check)
    from flywheel.cli.run import demo, evaluate, run, serve

    main.add_command(run)
    main.add_command(serve)
    main.add_command(evaluate)
    main.add_command(demo)
    from flywheel.cli.report import report

    main.add_command(report)


_attach()
