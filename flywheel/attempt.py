"""One attempt: graft the routed artifact (or not), feed the problem, decode under a token budget.

Token accounting is exact and split three ways: `restored_tokens` came from the graft (no
compute), `prefill_tokens` were run through the model before decoding, `decode_tokens` were
generated. The first two are what the attempt would cost alone; when K attempts fork one graft
restore and one prefill, `prefill_ran` and `restored_ran` are this fork's whole-token share of
what actually ran (`apportion`), so the shares of the K forks add up to it exactly. An exhausted
budget is an outcome (`budget_exhausted=True`), not an error; a refused
graft is an outcome too: its reason is kept and the attempt runs ungrafted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

import torch

from flywheel.decode import (
    DEFAULT_SLOTS,
    LATER,
    BatchDecoder,
    DecodeOutcome,
    DecodeRequest,
    DecodeSchedule,
    Prompt,
    StopReason,
    _Later,
)
from flywheel.domain import Progress, RouteDecision, RouteKind
from flywheel.engine import StopRule
from flywheel.errors import ArtifactError
from flywheel.grounding import allowed_numbers
from flywheel.kv.artifact import logits_sha256
from flywheel.prompts import PLAIN, AttemptMode, PromptFormat
from verifiers.types import AnswerMarkers

if TYPE_CHECKING:
    from flywheel.energy import EnergyMeter
    from flywheel.engine import Engine
    from flywheel.kv.graft import GraftSource
    from flywheel.problemsets import Problem
    from flywheel.timing import PhaseClock

_T = TypeVar("_T")
#: Sampling temperature when attempts > 1 (attempt 0 of a single-attempt run is greedy).
SAMPLE_TEMPERATURE = 0.7


@dataclass(frozen=True)
class FormatStop(StopRule):
    """Stop where the prompt format says an attempt of `mode` is complete (`PromptFormat.finished`):
    the plain format at its answer line (`answer`) or a complete `Final answer: ...` line or a new
    problem (`solve`); the chat format once a `\\boxed{...}` has closed. The last 64 tokens are read."""

    newline: bool = False
    prompt_format: PromptFormat = PLAIN
    mode: AttemptMode = "solve"

    def should_stop(self, engine: Engine, produced: list[int]) -> bool:
        text = engine.decode_text(produced[-64:]) if len(produced) > 64 else engine.decode_text(produced)
        return self.prompt_format.finished(text, self.mode)


#: The plain format's solve rule (kept by name: benches and tests stop on it).
SolveStop = FormatStop


@dataclass(frozen=True)
class RefusedGraft:
    """A graft the library refused, with the reason (hash mismatch, fingerprint mismatch, missing file)."""

    artifact: str
    reason: str


@dataclass(frozen=True)
class AttemptResult:
    """What one attempt produced and cost; `text` is the raw decoded continuation.

    It holds no answer: the answer `text` states is extracted inside the verifier's bounded worker,
    with the verdict on it (`Problem.check_output`), never from untrusted text in this process.
    """

    text: str
    mode: AttemptMode
    grafted_artifact_sha: str | None   # the artifact that loaded (None: ungrafted), as the catalog names it
    restored_tokens: int
    prefill_tokens: int
    decode_tokens: int
    budget: int
    budget_exhausted: bool
    wall_seconds: float
    logits_sha256: str | None
    seed: int | None
    refused: list[RefusedGraft] = field(default_factory=list)
    energy_joules: float | None = None   # set by the caller that metered the attempt
    energy_source: str | None = None     # nvml | rapl | estimate
    stop_reason: StopReason | None = None  # stop rule, eos, or budget (None: never decoded)
    tool_tokens: int = 0   # tokens the calculator forced (in `text`, not in `decode_tokens`)
    shared_by: int = 1  # forks that shared this attempt's graft restore and prefill (1: it ran alone)
    fork: int = 0       # this attempt's place among them (0-based), which decides its share's rounding
    markers: AnswerMarkers = "final-line"   # what marks the answer in `text` (the asking format's)

    @property
    def prefill_ran(self) -> int:
        """This attempt's share of the prefill tokens the model actually ran (alone: `prefill_tokens`)."""
        return apportion(self.prefill_tokens, self.shared_by, self.fork)

    @property
    def restored_ran(self) -> int:
        """This attempt's share of the tokens actually restored from the graft (alone: `restored_tokens`)."""
        return apportion(self.restored_tokens, self.shared_by, self.fork)


def apportion(total: int, forks: int, fork: int) -> int:
    """Fork `fork`'s whole-token share of `total` split over `forks`; the shares add up to `total` exactly.

        >>> [apportion(10, 4, k) for k in range(4)]
        [3, 3, 2, 2]
    """
    if forks <= 1:
        return total
    return total // forks + (1 if fork < total % forks else 0)


@dataclass
class PreparedAttempt:
    """An attempt ready to decode: the graft restored (or refused) and its prompt's tokens.

    The prompt is prefilled in the decoder's batched step, beside the other slots' decode tokens
    (`flywheel.decode.Prompt`), not here: admission does not stop the batch for a prefill. The K
    sampled attempts of one problem share `prompt`: one graft restore and one prefill (fed by the
    first of them to take a slot), then K decodes.
    """

    problem: Problem
    mode: AttemptMode
    prompt: Prompt | None            # None when the budget is 0 (no model work at all)
    grafted_artifact_sha: str | None
    restored_tokens: int
    prefill_tokens: int
    refused: list[RefusedGraft]
    seconds: float                   # graft restore wall time (the prefill's is `prompt.seconds`)

    @property
    def logits(self) -> torch.Tensor | None:
        """(vocab,) next-token logits after the prompt, once the decoder has prefilled it."""
        return None if self.prompt is None else self.prompt.logits

    prompt_format: PromptFormat = PLAIN

    def stop_rule(self) -> StopRule:
        if self.prompt_format is PLAIN and self.mode == "answer":
            return StopRule()
        return FormatStop(prompt_format=self.prompt_format, mode=self.mode)


def prepare_attempt(engine: Engine, library: GraftSource | None, problem: Problem, *, route: RouteKind,
                    artifact_sha: str | None, prefill: bool = True) -> PreparedAttempt:
    """Graft the routed artifact (a refusal is kept and the attempt runs ungrafted) and tokenize the prompt
    the decoder will prefill on top of it.

    With `prefill=False` (a zero budget) nothing runs on the model: the attempt is recorded as exhausted.
    """
    start = time.perf_counter()
    refused: list[RefusedGraft] = []
    cache = None
    restored = 0
    grafted: str | None = None
    if artifact_sha is not None and library is not None and prefill:
        try:
            g = library.load_graft(engine, artifact_sha)
            cache, restored, grafted = g.cache, g.token_count, g.artifact_sha256
        except ArtifactError as err:
            refused.append(RefusedGraft(artifact_sha, f"{type(err).__name__}: {err}"))
    # Only a recurrence whose graft actually loaded is asked for the answer at once.
    mode: AttemptMode = "answer" if route == "exact" and grafted else "solve"
    fmt = engine.prompt_format
    if not prefill:
        return PreparedAttempt(problem, mode, None, None, 0, 0, refused, time.perf_counter() - start, fmt)
    # A graft already starts with BOS.
    ids = engine.encode_prompt(fmt.attempt(problem.text, mode, grafted=grafted is not None), bos=not grafted)
    prompt = Prompt(cache if cache is not None else engine.new_cache(), ids)
    return PreparedAttempt(problem, mode, prompt, grafted, restored, len(ids), refused,
                           time.perf_counter() - start, fmt)


def decode_request(prepared: PreparedAttempt, budget: int, *, seed: int | None, temperature: float,
                   tag: Any = None, calculator: bool = False, grounding: bool = False) -> DecodeRequest:
    """The decoder's request for one attempt of `prepared` (budget 0: finished at admission)."""
    if prepared.prompt is None:
        return DecodeRequest(None, None, 0, tag=tag)
    return DecodeRequest(None, None, budget, prompt=prepared.prompt, stop=prepared.stop_rule(),
                         temperature=temperature, seed=seed, tag=tag,
                         calculator=calculator and prepared.mode == "solve",   # a recurrence copies its answer
                         grounding=allowed_numbers(prepared.problem.text) if grounding and prepared.mode == "solve"
                         else None)


def finish_attempt(engine: Engine, prepared: PreparedAttempt, outcome: DecodeOutcome, *, budget: int,
                   seed: int | None, temperature: float, wall_seconds: float, shared_by: int = 1,
                   fork: int = 0) -> AttemptResult:
    """The `AttemptResult` of one decoded attempt: its text and mode, exact token accounting.

    `shared_by` forks (this one at place `fork`) shared `prepared`; a zero-budget attempt shares nothing.
    """
    text = engine.decode_text(outcome.tokens)
    return AttemptResult(
        text=text, mode=prepared.mode,
        grafted_artifact_sha=prepared.grafted_artifact_sha, restored_tokens=prepared.restored_tokens if budget > 0 else 0,
        prefill_tokens=prepared.prefill_tokens if budget > 0 else 0,
        decode_tokens=len(outcome.tokens) - outcome.tool_tokens, tool_tokens=outcome.tool_tokens, budget=budget,
        budget_exhausted=outcome.stop_reason == "budget", wall_seconds=wall_seconds,
        logits_sha256=logits_sha256(prepared.logits) if prepared.logits is not None else None,
        seed=seed if temperature > 0 and seed is not None else None, refused=list(prepared.refused),
        stop_reason=outcome.stop_reason, shared_by=shared_by if budget > 0 else 1, fork=fork if budget > 0 else 0,
        markers=prepared.prompt_format.markers)


def run_attempt(engine: Engine, library: GraftSource | None, problem: Problem, *, route: RouteKind,
                artifact_sha: str | None, budget: int, seed: int | None = None,
                temperature: float = 0.0) -> AttemptResult:
    """Attempt `problem` once under a decode budget of `budget` tokens (one slot of the batched decoder).

    Args:
        engine: the loaded model (its calls are serialized by the caller).
        library: where the routed artifact lives (None when no graft is asked).
        problem: the problem to answer.
        route: the router's kind; `exact` asks for the answer at once, else a worked solution.
        artifact_sha: the routed artifact, or None for an ungrafted attempt.
        budget: most tokens to decode; 0 records an exhausted attempt without running the model.
        seed: sampling seed (used when `temperature > 0`).
    Returns:
        the `AttemptResult`, including any refused graft and why.

    Example: `run_attempt(engine, lib, p, route="exact", artifact_sha=sha, budget=160).text` -> `"239\n"`.
    """
    results = solve_many(engine, library, [AttemptJob(problem, route, artifact_sha,
                                                      [PlannedAttempt(0, budget, seed)], temperature)], slots=1)
    return next(results)[2]


@dataclass(frozen=True)
class PlannedAttempt:
    """One attempt of a job, before it runs: its index among the problem's attempts, its granted
    decode budget (0: recorded as exhausted without running the model), and its sampling seed
    (None: greedy)."""

    index: int
    budget: int
    seed: int | None = None


@dataclass
class AttemptJob:
    """One problem's attempts for `solve_many`: its route, and a `PlannedAttempt` per attempt."""

    problem: Problem
    route: RouteKind
    artifact_sha: str | None
    attempts: list[PlannedAttempt]
    temperature: float = 0.0
    decision: RouteDecision | None = None   # the router's whole decision (score, members), for its record
    calculator: bool = False   # hand `expression =` arithmetic to flywheel.calculator
    grounding: bool = False    # a solution's numbers come from its problem or earlier work (flywheel.grounding)


def solve_many(engine: Engine, library: GraftSource | None, jobs: Iterable[AttemptJob | _Later], *,
               slots: int = DEFAULT_SLOTS, schedule: DecodeSchedule | None = None,
               meter: EnergyMeter | None = None, progress: Progress | None = None,
               clock: PhaseClock | None = None, heartbeat: Callable[[str], None] | None = None
               ) -> Iterator[tuple[AttemptJob, int, AttemptResult]]:
    """Attempt every job's attempts on `slots` decode slots; yields (job, attempt index, result) as each ends.

    A job is prepared (graft restore) once, when its first attempt takes a slot; its prompt is
    prefilled in the decoder's steps by that attempt, and its other attempts fork that state.
    `jobs` is read lazily (`decode.LATER` in it: nothing to admit yet, ask again at the next step),
    so the caller may route the next problem after seeing earlier results
    (a solution deposited mid-pass can seed a later problem). With `meter`, each attempt carries
    its share of the energy: its graft and prefill split over its forks, each decode step split
    over the rows the slots fed. With `clock`, the seconds spent restoring grafts (`prepare`),
    prefilling prompts in the steps (`prefill`), in the rest of the decoder's steps, token picks
    and slot admissions are added to it as the run ends. `schedule` (`DecodeSchedule.of_run`) names
    the tools the jobs may use; without it, none (a job asking for the calculator or grounding is refused).
    `progress` and `heartbeat` are the decoder's (`BatchDecoder.run`).
    """
    decoder = BatchDecoder(engine, slots, schedule=schedule)
    source: list[str] = []

    def metered(fn: Callable[[], _T]) -> tuple[_T, float]:
        if meter is None:
            return fn(), 0.0
        meter.start()
        out = fn()
        reading = meter.stop()
        source[:] = [reading.source]
        return out, reading.joules

    def requests() -> Iterator[DecodeRequest | _Later]:
        for job in jobs:
            if isinstance(job, _Later):   # the caller has nothing to admit yet (attempts until verified)
                yield LATER
                continue
            live = any(a.budget > 0 for a in job.attempts)
            prepared, joules = metered(lambda job=job, live=live: prepare_attempt(  # type: ignore[misc]
                engine, library, job.problem, route=job.route, artifact_sha=job.artifact_sha, prefill=live))
            if clock is not None:
                clock.add("prepare", prepared.seconds)
            share = max(1, sum(a.budget > 0 for a in job.attempts))  # forks that use the prefill
            forks = iter(range(share))
            for a in job.attempts:
                fork, part = (next(forks), 1 / share) if a.budget > 0 else (0, 0.0)
                ticket = _Ticket(job, prepared, a.index, a.budget, a.seed, time.perf_counter(), joules * part,
                                 prepared.seconds * part, share, fork)
                yield decode_request(prepared, a.budget, seed=a.seed, temperature=job.temperature, tag=ticket,
                                     calculator=job.calculator, grounding=job.grounding)

    try:
        for outcome in decoder.run(requests(), progress=progress, step_meter=metered if meter else None,
                                   heartbeat=heartbeat):
            t: _Ticket = outcome.tag
            result = finish_attempt(engine, t.prepared, outcome, budget=t.budget, seed=t.seed,
                                    temperature=t.job.temperature,
                                    wall_seconds=t.prepare_seconds + time.perf_counter() - t.admitted,
                                    shared_by=t.shared_by, fork=t.fork)
            if meter is not None:
                prompt = t.prepared.prompt
                prefill_joules = prompt.joules / t.shared_by if prompt is not None and t.budget > 0 else 0.0
                result = replace(result, energy_joules=t.prepare_joules + prefill_joules + outcome.joules,
                                 energy_source=source[0] if source else None)
            yield t.job, t.k, result
    finally:
        if clock is not None:
            clock.add("prefill", decoder.prefill_seconds)
            clock.add("decode_step", decoder.model_seconds - decoder.prefill_seconds)
            clock.add("pick_tokens", decoder.pick_seconds)
            clock.add("admit_slots", decoder.admit_seconds)


@dataclass(frozen=True)
class _Ticket:
    """What `solve_many` needs back when an attempt's slot finishes; shares are per fork."""

    job: AttemptJob
    prepared: PreparedAttempt
    k: int
    budget: int
    seed: int | None
    admitted: float
    prepare_joules: float
    prepare_seconds: float
    shared_by: int = 1   # forks of `prepared` that use its prefill (the shares' denominator)
    fork: int = 0


def solution_of(result: AttemptResult, prompt_format: PromptFormat = PLAIN) -> str:
    """The worked solution part of a `solve` continuation (what a self-deposit stores), as the
    format that asked for it marks its answer."""
    return prompt_format.solution_of(result.text)
