"""`flywheel run`, `serve`, `eval` and `demo`: flywheel passes as Prefect flows."""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from flywheel import config, modelzoo
from flywheel.cli.common import echo_json, progress_display, settings_of
from flywheel.domain import ROUTE_KINDS, Progress
from flywheel.errors import FlywheelError, InputError, LibraryError

#: Options left unset take the flow's defaults (`flows.run.RunConfig`, which reads them from
#: `flywheel.config`); flows are imported lazily so `flywheel --help` stays fast.
_BUDGET_HELP = ("Decode-token budget per attempt (default: the model profile's; built in: "
                f"{modelzoo.budget_defaults()}).")


def _schedule_options(f: Any) -> Any:
    """--slots, --dtype, --calculator/--no-calculator and --grounding/--no-grounding, shared by the commands that run passes."""
    f = click.option("--grounding/--no-grounding", default=None,
                     help="Number-grounded decoding: a worked solution's operands must come from its problem or "
                          "earlier work, its final answer is its last result "
                          f"(default {'on' if config.DEFAULT_GROUNDING else 'off'}; recorded with the run).")(f)
    f = click.option("--calculator/--no-calculator", default=None,
                     help="Exact arithmetic in the decode schedule: after 'expression =' the engine feeds the "
                          f"result (default {'on' if config.DEFAULT_CALCULATOR else 'off'}; recorded with the run).")(f)
    f = click.option("--dtype", type=click.Choice(config.RUN_DTYPES), default=None,
                     help=f"Engine dtype (default {config.DEFAULT_DTYPE}; bfloat16 is opt-in and fingerprinted: "
                          "float32 artifacts are refused under it).")(f)
    return click.option("--slots", type=click.IntRange(1, config.MAX_SLOTS), default=None,
                        help="Decode slots: attempts decoded together, sharing each weight read "
                             "(default: RunConfig's, measured for this machine; a slot's bits do not depend on it).")(f)


def _quiet_prefect() -> None:
    """Prefect logs every task run at INFO, Dask every connection; a CLI user wants our progress bar and summary.

    Against a configured server (`PREFECT_API_URL`) the flow run's logs still go to its API: the
    flywheel's own lines (`flows.publish.run_logger`) are read there, in the UI and `prefect flow-run logs`.
    """
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    if not os.environ.get("PREFECT_API_URL"):   # Prefect's temporary server: nobody reads its logs
        os.environ.setdefault("PREFECT_LOGGING_TO_API_ENABLED", "false")
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")  # read when distributed is imported


class _UserErrorsUnlogged(logging.Filter):
    """Drops Prefect's log records of a `FlywheelError` raised in a flow or task (its traceback):
    the CLI prints that error as one `Error:` line; any other failure is still logged in full."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, FlywheelError):
            return False
        message = record.getMessage()
        return not any(f"exception {name}" in message for name in _user_error_names())


def _user_error_names() -> set[str]:
    names, todo = set(), [FlywheelError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return names


def _prefect_handlers() -> list[logging.Handler]:
    """The handlers Prefect's flow and task run records reach (Prefect configures them when imported:
    its console handler sits on the root logger)."""
    names = [n for n in logging.root.manager.loggerDict if n == "prefect" or n.startswith("prefect.")]
    loggers = [logging.root, *(logging.getLogger(n) for n in names)]
    return list({id(h): h for logger in loggers for h in logger.handlers}.values())


@contextmanager
def _progress() -> Iterator[Progress]:
    """The command's `Progress` callback: a bar on stderr (lines when piped, one at least every 30 s)."""
    quiet = _UserErrorsUnlogged()
    handlers = _prefect_handlers()
    for h in handlers:
        h.addFilter(quiet)
    try:
        with progress_display("solving", show_note=True) as progress:
            yield progress
    finally:
        for h in handlers:
            h.removeFilter(quiet)


def _check_sets(*specs: str | None) -> None:
    """Load each problem set once before Prefect starts: a bad spec or file is one `Error:` line, at once."""
    from flywheel.problemsets import load_problem_set

    for spec in specs:
        if spec is not None:
            load_problem_set(spec)


def _preflight(cfg: Any, *specs: str | None) -> None:
    """Refuse, before Prefect starts, a damaged catalog, and a budget or a problem that does not fit
    the model's window, naming the problem (the pass would prefill past the window, or hang)."""
    from flows.run import run_env
    from flywheel.problemsets import load_problem_set, over_window

    env = run_env(cfg)
    eng = env.engine()   # the process's engine and library: the pass reuses them
    window = eng.context_window
    cfg.check_window(window)
    for spec in specs:
        if window and spec is not None:
            bad = over_window(load_problem_set(spec, limit=cfg.limit).problems,
                              lambda text: len(eng.encode(text)), window, cfg.budget)
            if bad:
                more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
                raise InputError(f"{bad[0]}{more}",
                                 hint="shorten or remove such problems, or give a smaller --budget")
    damage = env.open_library().catalog.damage()
    if damage:
        raise LibraryError(f"the catalog database is damaged: {damage[0]}",
                           hint="`flywheel library verify`; restore the catalog from a backup, or import an export "
                                "into a new library")


def _start_prefect() -> None:
    """Start Prefect's temporary server (if no server is configured) while this process loads its model."""
    _quiet_prefect()
    from flows import server

    server.start_early()


def _config(ctx: click.Context, **kw: Any) -> Any:
    _quiet_prefect()
    _check_sets(kw.get("problems"))
    from flywheel.runconfig import RunConfig

    s = settings_of(ctx)   # a budget not given is None: RunConfig applies the model profile's
    cfg = RunConfig(model=s.model, library=str(s.library), db_url=s.db_url,
                    **{k: v for k, v in kw.items() if v is not None})
    _start_prefect()   # the options are valid: the server boots while `_preflight` loads the model
    return cfg


def _summary_lines(summary: dict[str, Any]) -> list[str]:
    t = summary["totals"]
    routes = {k: sum(r["route"] == k for r in summary["results"]) for k in ROUTE_KINDS}
    exhausted = sum(r["budget_exhausted"] for r in summary["results"])
    refused = sum(len(r["refused_grafts"]) for r in summary["results"])
    weights = f" (weights {summary['weights']})" if summary.get("weights") else ""
    lines = [f"run {summary['run_id']}{weights}: {t['verified']}/{t['problems']} verified; routes exact {routes['exact']}, "
             f"near {routes['near']}, none {routes['none']}",
             f"this run's tokens: {t['decode_tokens']:,} decode, {t['prefill_tokens']:,} prefill, "
             f"{t['restored_tokens']:,} restored from grafts; {exhausted} budget-exhausted; {refused} grafts refused"]
    seeded = summary.get("starter", {}).get("deposited", [])
    if seeded:
        lines.insert(0, f"starter library: {len(seeded)} verified worked solutions of the built-in word families "
                        f"deposited into the empty library ({summary['starter']['deposited_by']}; --no-starter: none)")
    lines += summary.get("savings", {}).get("lines", [])[1:]   # the report's headline figures (its first line is above)
    for row in summary.get("skipped_rows", []):
        lines.append(f"skipped {row}")
    return lines


@click.command("run")
@click.option("--problems", "problems", required=True, help="champ, a .jsonl/.csv/.parquet file, gen:linear?n=50&seed=1, or "
                   "gsm-symbolic:?templates=train&n=2&seed=1 (a bare gen: or gsm-symbolic: lists what it offers).")
@click.option("--budget", type=click.IntRange(0, config.MAX_BUDGET), default=None, help=_BUDGET_HELP)
@click.option("--run-budget", type=click.IntRange(0, config.MAX_DB_INT), default=None, help="Decode-token budget for the whole run.")
@click.option("--attempts", type=click.IntRange(1, config.MAX_ATTEMPTS), default=config.DEFAULT_ATTEMPTS, show_default=True,
              help="Attempts per problem (more than 1 samples with seeds).")
@click.option("--seed", type=click.IntRange(0, config.MAX_SEED), default=config.DEFAULT_SEED, show_default=True, help="Base sampling seed.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N problems.")
@click.option("--no-graft", is_flag=True, help="Never graft: solve every problem from the plain prompt.")
@click.option("--members", "near_members", type=click.IntRange(1, config.MAX_NEAR_MEMBERS), default=None,
              help="Related verified solutions grafted together on a near route "
                   f"(default: {config.DEFAULT_NEAR_MEMBERS}; recorded with the run).")
@click.option("--no-deposit", is_flag=True, help="Do not deposit the model's own verified solutions.")
@click.option("--until-verified", is_flag=True, default=None,
              help="Attempts until verified: the first attempt is greedy, each further one (sampled) is decoded only "
                   "after the last failed, up to --attempts (recorded with the run).")
@click.option("--starter/--no-starter", default=config.DEFAULT_STARTER, show_default=True,
              help="Seed an empty library with the starter library: one verified worked solution per built-in "
                   "word family, marked starter in the catalog, so a first pass has near grafts to route to.")
@click.option("--run-id", default=None, help="Resume this run: attempts already recorded are skipped.")
@click.option("--task-runner", type=click.Choice(config.TASK_RUNNERS), default=None,
              help="thread: the pass in this process, its attempts batched on --slots (default); dask: one "
                   "shard of the problems per Dask worker process, each loading the model once.")
@click.option("--dask-address", default=None, metavar="URL",
              help="With --task-runner dask: an existing cluster's scheduler, e.g. tcp://dask-scheduler:8786 "
                   "(its workers need this library, catalog and PREFECT_API_URL). Default: a temporary local cluster.")
@click.option("--dask-workers", type=click.IntRange(min=1), default=None,
              help="With --task-runner dask: worker processes of the temporary local cluster "
                   f"(default {config.DEFAULT_DASK_WORKERS}).")
@_schedule_options
@click.option("--json", "as_json", is_flag=True, help="End with one JSON object on the last line.")
@click.pass_context
def run(ctx: click.Context, problems: str, budget: int | None, run_budget: int | None, attempts: int, seed: int,
        limit: int | None, no_graft: bool, near_members: int | None, no_deposit: bool, until_verified: bool | None,
        starter: bool,
        run_id: str | None,
        task_runner: str | None,
        dask_address: str | None, dask_workers: int | None, slots: int | None, dtype: str | None,
        calculator: bool | None, grounding: bool | None, as_json: bool) -> None:
    """One flywheel pass: route, attempt under budget, verify, deposit, record.

    Attempts are decoded together on --slots decode slots; the K attempts of a problem
    (--attempts K) share one graft restore and one prefill. With --task-runner dask, each worker
    process runs a shard of the problems this way; --run-budget is then granted up front in
    problem order (never overspent, unused tokens not passed on).

    \b
    Examples:
      flywheel run --problems 'gen:linear?n=5&seed=1' --budget 64 --json
      flywheel run --problems 'gen:ages?n=40&seed=1&split=train' --attempts 4 --slots 16
      flywheel run --problems 'gen:arith?n=20&seed=3' --task-runner dask --dask-workers 2
    """
    cfg = _config(ctx, problems=problems, budget=budget, run_budget=run_budget, attempts=attempts, seed=seed,
                  limit=limit, no_graft=no_graft, near_members=near_members, deposit=not no_deposit,
                  starter=starter, run_id=run_id, until_verified=until_verified,
                  task_runner=task_runner,
                  dask_address=dask_address, dask_workers=dask_workers, slots=slots, dtype=dtype,
                  calculator=calculator, grounding=grounding)
    _preflight(cfg, problems)
    from flows.run import flywheel_run

    with _progress() as progress:
        summary = flywheel_run(cfg, progress)
    for line in _summary_lines(summary):
        click.echo(line, err=as_json)
    if as_json:
        echo_json(summary)


@click.command("serve")
@click.option("--problems", "problems", required=True, help="The problem set each scheduled run works through.")
@click.option("--cron", required=True, help="Cron schedule, e.g. '0 3 * * *'.")
@click.option("--budget", type=click.IntRange(0, config.MAX_BUDGET), default=None, help=_BUDGET_HELP)
@click.option("--attempts", type=click.IntRange(1, config.MAX_ATTEMPTS), default=config.DEFAULT_ATTEMPTS, show_default=True)
@click.option("--until-verified", is_flag=True, default=None,
              help="Attempts until verified (see `flywheel run --help`).")
@click.option("--name", default="flywheel", show_default=True, help="Deployment name.")
@click.pass_context
def serve(ctx: click.Context, problems: str, cron: str, budget: int | None, attempts: int,
          until_verified: bool | None, name: str) -> None:
    """Serve a scheduled deployment of the flywheel (Prefect `serve` on a cron schedule).

    \b
    Example:
      flywheel serve --problems champ --cron '0 3 * * *' --attempts 2
      flywheel serve --problems 'inbox:./inbox?take=50' --cron '*/10 * * * *' --attempts 4 --until-verified

    Over an inbox (`inbox:DIR`), each tick takes the problems that arrived since (none twice; a killed
    tick's untouched problems go to the next).
    """
    cfg = _config(ctx, problems=problems, budget=budget, attempts=attempts, until_verified=until_verified)
    from flows.deploy import serve as serve_deployment

    serve_deployment(cfg, cron, name=name)


@click.command("eval")
@click.option("--problems", "library_set", default=None,
              help="Set whose curated solutions are deposited first (e.g. gen:linear?n=20&seed=1).")
@click.option("--heldout", required=True, help="Held-out set evaluated with and without near grafts.")
@click.option("--budget", type=click.IntRange(0, config.MAX_BUDGET), default=None, help=_BUDGET_HELP)
@click.option("--attempts", type=click.IntRange(1, config.MAX_ATTEMPTS), default=config.DEFAULT_ATTEMPTS, show_default=True)
@click.option("--seed", type=click.IntRange(0, config.MAX_SEED), default=config.DEFAULT_SEED, show_default=True)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N held-out problems.")
@_schedule_options
@click.option("--json", "as_json", is_flag=True, help="End with one JSON object on the last line.")
@click.pass_context
def evaluate(ctx: click.Context, library_set: str | None, heldout: str, budget: int | None, attempts: int, seed: int,
             limit: int | None, slots: int | None, dtype: str | None, calculator: bool | None,
             grounding: bool | None, as_json: bool) -> None:
    """Held-out transfer: accuracy with vs without near grafts, same problems and seeds, 95% Wilson interval.

    \b
    Example:
      flywheel eval --problems 'gen:linear?n=10&seed=1' --heldout 'gen:linear?n=10&seed=2' --budget 96
    """
    _check_sets(library_set)
    cfg = _config(ctx, problems=heldout, budget=budget, attempts=attempts, seed=seed, limit=limit, slots=slots,
                  dtype=dtype, calculator=calculator, grounding=grounding)
    _preflight(cfg, heldout, library_set)
    from flows.evaluate import heldout_eval

    with _progress() as progress:
        out = heldout_eval(cfg, library_set, progress)
    for arm in ("without_graft", "with_graft"):
        a = out[arm]
        click.echo(f"{arm.replace('_', ' ')}: {a['correct']}/{a['n']} = {a['accuracy']:.1%} "
                   f"(95% CI {a['ci95'][0]:.1%}-{a['ci95'][1]:.1%}), {a['decode_tokens']:,} decode tokens",
                   err=as_json)
    click.echo(f"routes {out['routes']}; solved only with graft {out['only_with']}, only without {out['only_without']}",
               err=as_json)
    if as_json:
        echo_json(out)


@click.command("study")
@click.option("--problems", "train", required=True,
              help="Train set: passes sample, verify and deposit here (e.g. 'gen:all?n=20&seed=1&split=train').")
@click.option("--heldout", required=True, help="Held-out set, run with and without near grafts "
                                               "(e.g. 'gen:all?n=20&seed=2&split=heldout').")
@click.option("--passes", type=click.IntRange(0, config.MAX_STUDY_PASSES), default=config.STUDY_PASSES,
              show_default=True, help="Train passes (they stop early once a pass deposits nothing new).")
@click.option("--attempts", type=click.IntRange(1, config.MAX_ATTEMPTS), default=config.STUDY_ATTEMPTS, show_default=True,
              help="Sampled attempts per unsolved train problem, sharing one prefill.")
@click.option("--budget", type=click.IntRange(0, config.MAX_BUDGET), default=None, help=_BUDGET_HELP)
@click.option("--curated", type=click.IntRange(min=0), default=config.STUDY_CURATED, show_default=True,
              help="Curated worked solutions seeded per family (0 = the model's own only).")
@click.option("--seed", type=click.IntRange(0, config.MAX_SEED), default=config.DEFAULT_SEED, show_default=True)
@click.option("--members", "near_members", type=click.IntRange(1, config.MAX_NEAR_MEMBERS), default=None,
              help="Related verified solutions grafted together on a near route "
                   f"(default: {config.DEFAULT_NEAR_MEMBERS}).")
@click.option("--arms", default=",".join(config.STUDY_DEFAULT_ARMS), show_default=True,
              help=f"Held-out arms, comma-separated, from: {', '.join(config.STUDY_ARMS)} (calc: exact "
                   "arithmetic, ground: number-grounded decoding; --calculator/--grounding apply to the train passes).")
@click.option("--samples", type=click.IntRange(1, config.MAX_ATTEMPTS), default=1, show_default=True,
              help="Held-out sampled attempts K per arm, beside its greedy one: adds maj@K and pass@K.")
@click.option("--sampled-arms", default=None, metavar="ARMS",
              help="With --samples K: only these arms (comma-separated, among --arms) also run sampled; the "
                   "others give pass@1 only (default: every arm).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write accuracy per pass and held-out with/without grafts to this PNG.")
@click.option("--resume", default=None, metavar="TAG",
              help="Finish the interrupted study TAG (its first line names it), with its library and arguments: "
                   "each of its runs goes on where it stopped.")
@_schedule_options
@click.option("--json", "as_json", is_flag=True, help="End with one JSON object on the last line.")
@click.pass_context
def study(ctx: click.Context, train: str, heldout: str, passes: int, attempts: int,
          budget: int | None, curated: int, seed: int, near_members: int | None, arms: str, samples: int,
          sampled_arms: str | None,
          plot_path: Path | None, resume: str | None,
          slots: int | None,
          dtype: str | None, calculator: bool | None, grounding: bool | None, as_json: bool) -> None:
    """The capability measurement: train passes on the model's own verified solutions, then held-out
    accuracy with vs without near grafts, paired (Wilson intervals, exact McNemar test).

    \b
    Examples:
      flywheel --library /tmp/study study --problems 'gen:all?n=10&seed=1&split=train' \\
          --heldout 'gen:all?n=20&seed=2&split=heldout' --passes 2 --attempts 4 --budget 96 --json
      flywheel --library /tmp/study study --problems 'gen:all?n=10&seed=1&split=train' \\
          --heldout 'gen:all?n=20&seed=2&split=heldout' --arms none,graft,graft+calc,none+calc --samples 4
      # interrupted? the same command, with the tag its first line printed:
      flywheel --library /tmp/study study ... --resume run-20261206T051500Z-3fa2c1
    """
    chosen = [a.strip() for a in arms.split(",") if a.strip()]
    unknown = [a for a in chosen if a not in config.STUDY_ARMS]
    if unknown or not chosen:
        raise InputError(f"unknown --arms value(s): {', '.join(unknown) or '(none given)'}",
                         hint=f"arms are {', '.join(config.STUDY_ARMS)}, e.g. --arms none,graft,graft+calc")
    _quiet_prefect()   # before Prefect is imported
    _check_sets(heldout)
    cfg = _config(ctx, problems=train, budget=budget, seed=seed, slots=slots, dtype=dtype,
                  attempts=attempts, near_members=near_members, calculator=calculator, grounding=grounding)
    from flows import study as st

    _preflight(cfg, train, heldout)
    with _progress() as progress:
        out = st.run_study(cfg, train=train, heldout=heldout, passes=passes, curated=curated, arms=chosen,
                           samples=samples, resume=resume, progress=progress,
                           stages=lambda done, total, line: click.echo(line, err=True),
                           sampled_arms=None if sampled_arms is None else
                           [a.strip() for a in sampled_arms.split(",") if a.strip()])
    for line in st.report_lines(out):
        click.echo(line, err=as_json)
    if plot_path is not None:
        st.plot(out, plot_path)
        click.echo(f"plot: {plot_path}", err=as_json)
    if as_json:
        echo_json(out)


@click.command("demo")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the demo library goes (default: a fresh temporary directory).")
@click.option("--stream", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="A folder of .jsonl slices (id, problem, reference) that arrive one by one in an inbox, each "
                   f"taken by one run (e.g. {config.DEMO_STREAM}, what `make run` shows on "
                   f"{config.DEMO_STREAM_MODEL}); without it, the CHAMP + families demo.")
@click.option("--budget", type=click.IntRange(1, config.MAX_BUDGET), default=None,
              help=f"Decode-token budget per attempt (default {config.DEMO_BUDGET}; with --stream "
                   f"{config.DEMO_STREAM_BUDGET}).")
@click.option("--champ", "n_champ", type=click.IntRange(min=1), default=config.DEMO_CHAMP, show_default=True,
              help="CHAMP problems.")
@click.option("--families", "per_family", type=click.IntRange(min=0), default=config.DEMO_PER_FAMILY,
              show_default=True, help="Generated problems per word-problem family (10 families).")
@click.option("--attempts", type=click.IntRange(1, config.MAX_ATTEMPTS), default=None,
              help=f"Sampled attempts per problem in each pass, sharing one prefill (default {config.DEMO_ATTEMPTS}; "
                   f"with --stream {config.DEMO_STREAM_ATTEMPTS}, until verified).")
@_schedule_options
@click.option("--json", "as_json", is_flag=True, help="End with one JSON object on the last line.")
@click.pass_context
def demo(ctx: click.Context, workdir: Path | None, stream: Path | None, budget: int | None, n_champ: int,
         per_family: int, attempts: int | None, slots: int | None, dtype: str | None, calculator: bool | None,
         grounding: bool | None, as_json: bool) -> None:
    """The flywheel end to end: sibling-seeded pass 1 with self-deposits, curated CHAMP deposits, pass 2 from grafts;
    or, with --stream, slices of new problems arriving, one run each, and a control without the library.

    \b
    Examples:
      flywheel demo            # a few minutes on 2 CPU cores with the default model
      flywheel --model qwen2.5-coder-0.5b demo --stream library/stream
    """
    s = settings_of(ctx)

    def say(line: str) -> None:
        click.echo(line, err=True)

    if stream is not None:
        from flows.demo import stream_slices

        stream_slices(stream)   # a bad folder is one line before anything starts
    say(f"starting Prefect's local server and loading {s.model}")
    _start_prefect()
    from flows.demo import describe, describe_stream, run_demo, run_stream_demo

    workdir = workdir or Path(tempfile.mkdtemp(prefix="flywheel-demo-"))
    if stream is not None:
        with _progress() as progress:
            out = run_stream_demo(workdir, stream, model=s.model, progress=progress, stages=say, slots=slots,
                                  budget=budget or config.DEMO_STREAM_BUDGET,
                                  attempts=attempts or config.DEMO_STREAM_ATTEMPTS)
        lines = describe_stream(out)
    else:
        with _progress() as progress:
            given: dict[str, Any] = {"budget": budget, "champ": n_champ, "per_family": per_family,
                                     "attempts": attempts, "slots": slots, "dtype": dtype, "calculator": calculator,
                                     "grounding": grounding}
            out = run_demo(workdir, model=s.model, progress=progress,
                           **{k: v for k, v in given.items() if v is not None})
        lines = describe(out)
    for line in lines:
        click.echo(line, err=as_json)
    report = ctx.find_root().command.commands.get("report")  # type: ignore[attr-defined]
    if report is not None and not as_json:
        click.echo("")
        ctx.find_root().command.main(["--library", out["library"], "report"],  # type: ignore[attr-defined]
                                     standalone_mode=False)
    if as_json:
        echo_json({k: v for k, v in out.items()})
