"""The `flywheel` command: one entry point, sub-commands grouped one module per concern.

Each sub-command module defines click commands; they are attached here. Errors meant for the
user are `FlywheelError`s and become a clean message plus exit code at this edge only.

The global options `--library`, `--db` and `--model` are accepted before the sub-command
(`flywheel --model M verify-graft`) and after it (`flywheel verify-graft --model M`): every
sub-command carries them too, and a value given there overrides the one given before it.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from flywheel import config
from flywheel.errors import FlywheelError, VerifierUnavailableError
from flywheel.terminal import printable

#: OS errors that are the environment's doing (permissions, a full or read-only disk), not a bug.
#: Errors of the machine or of a path the user gave, said in one line with the path and a hint, never a traceback.
_ENVIRONMENT_ERRNOS = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENAMETOOLONG,
                       errno.ENOTDIR, errno.ELOOP, errno.ENOENT, errno.EISDIR}
_PATH_HINTS = {errno.ENAMETOOLONG: "a shorter path (a name is at most 255 bytes here)",
               errno.ENOTDIR: "a part of the path is a file, not a folder",
               errno.ELOOP: "the path's symbolic links loop",
               errno.ENOENT: "check that the path's folders exist or can be made there (temporary files too: TMPDIR)",
               errno.EISDIR: "the path names a folder where a file is expected"}
#: What a database says when its disk is full (SQLite; PostgreSQL).
_DISK_FULL = ("database or disk is full", "No space left on device", "could not extend file")


@dataclass
class Settings:
    """Global options every sub-command reads (`--library`, `--db`, `--model`)."""

    library: Path
    db_url: str
    model: str
    #: Whether `db_url` came from `--db`/`FLYWHEEL_DB` (else it follows `library`).
    db_explicit: bool = False
    #: Password strings seen in any database URL, scrubbed from every message printed.
    secrets: list[str] = field(default_factory=list)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every whole secret replaced by `***` (`config.mask_secrets`: never part of a word)."""
    return config.mask_secrets(text, secrets)


def error_text(err: FlywheelError, secrets: Iterable[str] = ()) -> str:
    """`Error: <message>`, its listing's lines, then its hint, one line each: secrets hidden, control
    characters (a newline too) escaped within each line."""
    lines = [f"Error: {err.message}", *err.listing, *([f"  hint: {err.hint}"] if err.hint else [])]
    return "\n".join(printable(scrub(line, secrets)) for line in lines)


def _secrets_of(ctx: click.Context) -> list[str]:
    found = config.url_secrets(os.environ.get(config.ENV_DB, ""))
    obj = ctx.find_root().obj
    if isinstance(obj, Settings):
        found += obj.secrets
    return found


def _terminate(signum: int, _frame: Any) -> None:
    """SIGTERM and SIGHUP unwind like Ctrl-C, so `finally` blocks and context managers clean up
    (a run is marked interrupted, not left `running` until the next run finds its owner gone)."""
    raise KeyboardInterrupt(f"signal {signum}")


#: Signals that end a command the way Ctrl-C does (a closed terminal sends SIGHUP).
_UNWINDING = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None)


class FlywheelGroup(click.Group):
    """A click group that turns `FlywheelError` into `Error: ...` and its exit code."""

    def invoke(self, ctx: click.Context) -> object:
        for sig in _UNWINDING if ctx.parent is None else ():
            if signal.getsignal(sig) is signal.SIG_DFL:   # not when the caller chose (e.g. nohup ignores SIGHUP)
                signal.signal(sig, _terminate)
        try:
            return super().invoke(ctx)
        except FlywheelError as err:
            click.echo(error_text(err, _secrets_of(ctx)), err=True)
            sys.exit(err.exit_code)
        except OSError as err:
            if err.errno not in _ENVIRONMENT_ERRNOS:
                raise
            where = f": {printable(str(err.filename), 160)}" if err.filename else ""
            hint = _PATH_HINTS.get(err.errno or 0, "check the folder's permissions and free space, or point "
                                                   "--library at another folder")
            click.echo(f"Error: {err.strerror or err}{where}\n  hint: {hint}", err=True)
            sys.exit(1)
        except Exception as err:
            if _verifier_unavailable(err):   # raised outside a flow (a deposit, an import, a scan)
                unavailable = VerifierUnavailableError(f"{err}: nothing was judged",
                                                       hint=VerifierUnavailableError.HINT)
                click.echo(error_text(unavailable, _secrets_of(ctx)), err=True)
                sys.exit(unavailable.exit_code)
            if _disk_full(err):   # the transaction was rolled back: the catalog is as it was before it
                click.echo("Error: the catalog's disk is full; nothing of the failed step was committed\n  hint: free "
                           "space where the catalog lives (or point --db at another database) and run the command "
                           "again: it resumes", err=True)
                sys.exit(1)
            damage = _damaged_catalog(err)
            if damage is None:
                raise
            click.echo(f"Error: the catalog database is damaged ({printable(damage, 120)})\n  hint: `flywheel library "
                       "verify` says more; restore the catalog from a backup, or import an export into a new library",
                       err=True)
            sys.exit(1)
        except KeyboardInterrupt:
            click.echo("Error: interrupted; what was committed is kept, and re-running the same command resumes",
                       err=True)
            sys.exit(130)


#: SQLite's words for a catalog file it cannot read as a database (overwritten pages, not SQLite).
_DAMAGE_MESSAGES = ("database disk image is malformed", "file is not a database")


def _verifier_unavailable(err: BaseException) -> bool:
    """Whether `err` says the answer verifier could not run (imported only then: sympy is slow to load)."""
    if not type(err).__module__.startswith("verifiers"):
        return False
    from verifiers import VerifierUnavailable

    return isinstance(err, VerifierUnavailable)


def _disk_full(err: BaseException) -> bool:
    """Whether `err` is the catalog database saying its disk is full."""
    text = str(getattr(err, "orig", None) or err)
    return type(err).__module__.startswith(("sqlalchemy", "sqlite3", "psycopg")) and any(m in text for m in _DISK_FULL)


def _damaged_catalog(err: BaseException) -> str | None:
    """SQLite's message when `err` says the catalog file itself is damaged; None for anything else."""
    orig = getattr(err, "orig", None)
    text = str(orig if orig is not None else err)
    return next((m for m in _DAMAGE_MESSAGES if m in text), None) if type(err).__module__.startswith(
        "sqlalchemy") else None


def _set_library(ctx: click.Context, _param: click.Parameter, value: Path | None) -> None:
    settings = _settings(ctx)
    if value is None or settings is None:
        return
    settings.library = config.library_root(value)
    if not settings.db_explicit:
        settings.db_url = config.database_url(settings.library)


def _set_db(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    settings = _settings(ctx)
    if value is None or settings is None:
        return
    settings.secrets += config.url_secrets(value)
    settings.db_url = config.validate_db_url(value, source="--db")
    settings.db_explicit = True


def _set_model(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    settings = _settings(ctx)
    if value is not None and settings is not None:
        settings.model = value


def _set_weights(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    """`--weights NAME`: checked, then handed to every engine this command loads through FLYWHEEL_WEIGHTS
    (the one place `EngineSettings` reads it; worker processes inherit it)."""
    if value is not None:
        os.environ[config.ENV_WEIGHTS] = config.weights_name(value)


_WEIGHTS_HELP = (f"Weights the linears run: default, {', '.join(config.WEIGHTS)} (env {config.ENV_WEIGHTS}; default is "
                 f"{config.DEFAULT_WEIGHTS} where the kernel and the model's GGUF blocks are, else fp32).")


def _settings(ctx: click.Context) -> Settings | None:
    obj = ctx.find_root().obj
    return obj if isinstance(obj, Settings) else None


def _global_options() -> list[click.Option]:
    """The global options as a sub-command carries them: they update the root `Settings`."""
    return [
        click.Option(["--library"], type=click.Path(file_okay=False, path_type=Path), default=None,
                     expose_value=False, callback=_set_library, help="Library root (global option; see `flywheel -h`)."),
        click.Option(["--db"], default=None, expose_value=False, callback=_set_db,
                     help="Catalog SQLAlchemy URL (global option)."),
        click.Option(["--model"], default=None, expose_value=False, callback=_set_model,
                     help="Model name or local path (global option)."),
        click.Option(["--weights"], default=None, expose_value=False, callback=_set_weights, help=_WEIGHTS_HELP),
    ]


def _carry_global_options(command: click.Command) -> None:
    """Give `command` (and, for a group, each sub-command) the global options it lacks."""
    taken = {opt for p in command.params for opt in p.opts}
    command.params.extend(o for o in _global_options() if not taken & set(o.opts))
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _carry_global_options(sub)


@click.group(cls=FlywheelGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--library", "library", type=click.Path(file_okay=False, path_type=Path), default=None,
              help=f"Library root (env {config.ENV_LIBRARY}, default ./{config.DEFAULT_LIBRARY}).")
@click.option("--db", "db_url", default=None,
              help=f"Catalog SQLAlchemy URL (env {config.ENV_DB}, default SQLite in the library).")
@click.option("--model", "model", default=None,
              help=f"Model name or local path (env {config.ENV_MODEL}, default {config.DEFAULT_MODEL}).")
@click.option("--weights", default=None, expose_value=False, callback=_set_weights, help=_WEIGHTS_HELP)
@click.version_option(package_name="kv-flywheel")
@click.pass_context
def main(ctx: click.Context, library: Path | None, db_url: str | None, model: str | None) -> None:
    """kv-flywheel: verified solutions deposited once as byte-exact KV artifacts, grafted on reuse.

    --library, --db, --model and --weights may also follow the sub-command.

    \b
    Examples:
      flywheel verify-graft --samples 5 --prefix-tokens 64 1200
      flywheel check '\\dfrac{9}{7}' '9/7'
      flywheel deposit --problem 'What is 2+3?' --solution '2+3=5' --answer 5
      flywheel run --problems 'gen:linear?n=5&seed=1' --budget 64
      flywheel report --format md
    """
    secrets = config.url_secrets(db_url or "") + config.url_secrets(os.environ.get(config.ENV_DB, ""))
    root = config.library_root(library)
    ctx.obj = Settings(library=root, db_url=config.database_url(root, db_url), model=config.model_name(model),
                       db_explicit=bool(db_url or os.environ.get(config.ENV_DB)), secrets=secrets)


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
    from flywheel.cli.run import demo, evaluate, run, serve, study

    main.add_command(run)
    main.add_command(serve)
    main.add_command(evaluate)
    main.add_command(demo)
    main.add_command(study)
    from flywheel.cli.report import report

    main.add_command(report)
    for command in main.commands.values():
        _carry_global_options(command)


_attach()
