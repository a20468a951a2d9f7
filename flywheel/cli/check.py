"""`flywheel check`: is a model's answer equivalent to the reference? Exit 0 / 1 / 2."""

from __future__ import annotations

import json
import sys

import click

from verifiers.types import MODES, VerifierConfig, timeout_problem, tolerance_problem

_EXIT = {"equivalent": 0, "not_equivalent": 1, "unparseable": 2, "timeout": 2}
_DEFAULT = VerifierConfig()


def _tolerance(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    why = tolerance_problem(value)
    if why:
        raise click.BadParameter(why)
    return value


def _timeout(ctx: click.Context, param: click.Parameter, value: float) -> float:
    why = timeout_problem(value)
    if why:
        raise click.BadParameter(why)
    return value


@click.command("check")
@click.argument("candidate")
@click.argument("reference")
@click.option("--mode", type=click.Choice(MODES), default="auto", show_default=True,
              help="Kind of answer; auto infers it.")
@click.option("--tolerance", type=float, default=_DEFAULT.tolerance, callback=_tolerance,
              help="Relative tolerance for numbers, 0 to 0.01 (default: exact, so 0.333 is not 1/3).")
@click.option("--timeout", "timeout_s", type=float, default=_DEFAULT.timeout_s, show_default=True,
              callback=_timeout, help="Wall-clock seconds for the check (above 0, at most 600).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: status, equivalent, reason, mode.")
def check(candidate: str, reference: str, mode: str, tolerance: float | None, timeout_s: float,
          as_json: bool) -> None:
    """Check CANDIDATE (model text or a bare answer) against REFERENCE.

    Exit status: 0 equivalent, 1 not equivalent, 2 unparseable, timed out or refused.

    \b
    Examples:
      flywheel check '\\dfrac{9}{7}' '9/7'                 # exit 0
      flywheel check 'so the answer is \\boxed{(0, 1]}' '(0,1)' --mode interval   # exit 1
      flywheel check '0.333' '1/3' --tolerance 1e-2 --json
    """
    from verifiers import check as run_check

    cfg = VerifierConfig(tolerance=tolerance, timeout_s=timeout_s)
    verdict = run_check(candidate=candidate, reference=reference, mode=mode, config=cfg)  # type: ignore[arg-type]
    if as_json:
        click.echo(json.dumps({"status": verdict.status, "equivalent": verdict.equivalent,
                               "reason": verdict.reason, "mode": mode,
                               "candidate": verdict.candidate, "reference": verdict.reference}))
    else:
        click.echo(f"{verdict.status}: {verdict.reason}")
    sys.exit(_EXIT[verdict.status])
