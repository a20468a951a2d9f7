"""Replay recorded attempts and check they come out as the catalog says: the scoring, re-checked.

Each attempt is run again from what its row records: the same problem text and prompt mode (its
route, and whether its graft loaded), the same grafted artifact (read and hash-checked from the
store), the same decode budget, seed and temperature, under the run's model fingerprint and dtype.
The decoder's bits do not depend on how many slots run side by side (`flywheel.decode`), so one
slot reproduces an attempt decoded among many. Compared: the SHA-256 of the first decode step's
logits, the decode-token count, the decoded text (where it was stored whole), the answer, the
verdict (re-verified under the run's verifier settings) and why decoding stopped.

    >>> checks = recheck(lib, engine, "run-20261203T101010Z-abc123", 4)     # doctest: +SKIP
    >>> [c.ok for c in checks]                                               # doctest: +SKIP
    [True, True, True, True]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast, get_args

from flywheel.attempt import SAMPLE_TEMPERATURE, AttemptJob, PlannedAttempt, solve_many
from flywheel.calculator import VERSIONS
from flywheel.catalog.records import bounded_text
from flywheel.decode import KERNEL_PATH, DecodeSchedule
from flywheel.errors import FlywheelError, InputError, LibraryError
from flywheel.grounding import GROUNDING
from flywheel.problemsets import Problem
from flywheel.sampling import SAMPLER
from flywheel.terminal import printable

if TYPE_CHECKING:
    from flywheel.catalog.models import AttemptRow, RunRow
    from flywheel.engine import Engine
    from flywheel.library import Library


class ReplayMismatchError(FlywheelError):
    """A replayed attempt did not reproduce what the catalog recorded."""

    exit_code = 4


@dataclass(frozen=True)
class Recheck:
    """One replayed attempt: which it was, and each recorded figure that came out otherwise."""

    run_id: str
    problem_id: str
    attempt_index: int
    differences: list[str] = field(default_factory=list)   # "field: recorded X, replayed Y"

    @property
    def ok(self) -> bool:
        return not self.differences

    @property
    def name(self) -> str:
        return f"{self.run_id}/{self.problem_id}#{self.attempt_index}"


def _verifier(run: RunRow) -> Any:
    from verifiers import VerifierConfig

    recorded = (run.recorded("settings") or {}).get("verifier")
    try:
        return VerifierConfig(**recorded) if recorded else VerifierConfig()
    except (TypeError, ValueError) as err:
        raise LibraryError(f"run {run.id!r} has unreadable verifier settings ({printable(str(err), 120)})",
                           hint="the catalog row was damaged or edited; restore it from a backup") from None


def _check_budget(run_id: str, row: AttemptRow, run_budget: int, window: int) -> None:
    """Refuse an attempt whose recorded budget its run could not have granted (over the run's `--budget`
    or the model's window): replaying it would decode, and hold keys and values for, what no run asked."""
    limit = min(run_budget, window) if window else run_budget
    if not 0 < row.budget <= limit:
        raise InputError(f"run {run_id} records a decode budget of {row.budget:,} tokens for attempt "
                         f"{row.problem_id}#{row.attempt_index}, over the run's --budget {run_budget:,}"
                         + (f" or the model's {window:,}-token window" if window else ""),
                         hint="the catalog row was edited or damaged: replay another run, or restore the catalog")


def replayable(library: Library, run_id: str, n: int) -> list[AttemptRow]:
    """The first `n` attempts of `run_id` that ran the model (budget > 0), in recorded order."""
    run = library.catalog.get_run(run_id)
    if run is None:
        raise InputError(f"no run {run_id!r} in the catalog", hint="`flywheel report` lists every run")
    return [a for a in library.catalog.attempts_for_run(run_id) if a.budget > 0][:n]


def recheck(library: Library, engine: Engine, run_id: str, n: int) -> list[Recheck]:
    """Replay the first `n` model-running attempts of `run_id` and compare each with its catalog row.

    Args:
        library: the library the run recorded into (catalog rows and artifact bytes).
        engine: the run's model, loaded under the run's dtype (its fingerprint must be the run's).
        run_id: the run to re-check.
        n: how many attempts, in recorded order.
    Returns:
        one `Recheck` per replayed attempt; `ok` when every recorded figure was reproduced.
    Raises:
        InputError: no such run, or `engine` is not the model the run used.
    """
    run = library.catalog.get_run(run_id)
    if run is None:
        raise InputError(f"no run {run_id!r} in the catalog", hint="`flywheel report` lists every run")
    if engine.fingerprint.digest != run.model_fingerprint:
        raise InputError(f"run {run_id} ran under model fingerprint {run.model_fingerprint[:12]}, this engine is "
                         f"{engine.fingerprint.digest[:12]}",
                         hint=f"load {run.model_name} with the run's dtype ({run.decode_schedule or 'float32'})")
    verifier = _verifier(run)
    schedule = run.recorded("decode_schedule") or {}
    tool = schedule.get("calculator")
    if tool is not None and tool not in VERSIONS:
        raise InputError(f"run {run_id} handed arithmetic to calculator {tool!r}; this version runs "
                         f"{', '.join(VERSIONS)}",
                         hint="replay it with the version of kv-flywheel that ran it")
    rules = schedule.get("grounding")
    if rules not in (None, GROUNDING):
        raise InputError(f"run {run_id} grounded its numbers under {rules!r}; this version has {GROUNDING!r}",
                         hint="replay it with the version of kv-flywheel that ran it")
    kernel = schedule.get("kernel")
    if kernel not in (None, KERNEL_PATH):
        raise InputError(f"run {run_id} decoded under kernel {kernel!r}; this version decodes with {KERNEL_PATH!r}, "
                         f"so its attempts' bits cannot be reproduced",
                         hint="replay it with the version of kv-flywheel that ran it")
    rows = replayable(library, run_id, n)
    for row in rows:   # before anything is allocated: a budget comes from the catalog, which may be edited
        _check_budget(run_id, row, run.budget, engine.context_window)
    out = []
    for row in rows:
        if row.seed is not None and schedule.get("sampler") != SAMPLER:
            raise InputError(f"run {run_id} sampled under {schedule.get('sampler') or 'the previous sampler'}; "
                             f"this version samples with {SAMPLER}, so its sampled attempts cannot be replayed",
                             hint="replay its greedy runs, or use the version of kv-flywheel that ran it")
        prob = library.catalog.get_problem(row.problem_id)
        assert prob is not None   # a foreign key
        problem = Problem(id=prob.id, text=prob.text, reference=prob.reference, source=prob.source or "")
        temperature = SAMPLE_TEMPERATURE if row.seed is not None else 0.0
        job = AttemptJob(problem, row.route, row.grafted_artifact_sha,  # type: ignore[arg-type]
                         [PlannedAttempt(row.attempt_index, row.budget, row.seed)], temperature,
                         calculator=tool is not None, grounding=rules is not None)
        _, _, result = next(solve_many(engine, library, [job], slots=1, schedule=DecodeSchedule.of_run(
            1, engine.settings.dtype, calculator=tool or False, grounding=rules is not None,
            weights=engine.settings.weights)))
        answered = problem.check_output(result.text, result.mode, config=verifier, markers=result.markers)
        verdict = answered.verdict
        replayed = {"logits_sha256": result.logits_sha256, "decode_tokens": result.decode_tokens,
                    "tool_tokens": result.tool_tokens,
                    "answer": answered.answer, "verified": verdict.equivalent, "verdict_status": verdict.status,
                    "stop_reason": result.stop_reason, "grafted_artifact_sha": result.grafted_artifact_sha}
        if row.text is not None:   # rows before 0003 kept no text (and no stop reason): not compared
            replayed["text"] = bounded_text(result.text)
        differences = [f"{key}: recorded {getattr(row, key)!r}, replayed {value!r}"
                       for key, value in replayed.items()
                       if getattr(row, key) != value and not (key == "stop_reason" and row.stop_reason is None)]
        out.append(Recheck(run_id, row.problem_id, row.attempt_index, differences))
    return out


def engine_for_run(library: Library, run_id: str) -> Engine:
    """The run's model loaded under the run's dtype (from its recorded decode schedule)."""
    from flywheel.engine import DType, Engine, EngineSettings

    run = library.catalog.get_run(run_id)
    if run is None:
        raise InputError(f"no run {run_id!r} in the catalog", hint="`flywheel report` lists every run")
    dtype = (run.recorded("decode_schedule") or {}).get("dtype", "float32")
    if dtype not in get_args(DType):
        raise InputError(f"run {run_id} records an unknown dtype {dtype!r}", hint=f"one of {get_args(DType)}")
    return Engine.load(run.model_name, EngineSettings(dtype=cast(DType, dtype)))
