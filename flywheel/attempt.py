"""One attempt: graft the routed artifact (or not), feed the problem, decode under a token budget.

Token accounting is exact and split three ways: `restored_tokens` came from the graft (no
compute), `prefill_tokens` were run through the model before decoding, `decode_tokens` were
generated. An exhausted budget is an outcome (`budget_exhausted=True`), not an error; a refused
graft is an outcome too: its reason is kept and the attempt runs ungrafted.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import torch

from flywheel.engine import StopRule
from flywheel.errors import ArtifactError
from flywheel.kv.artifact import logits_sha256
from flywheel.prompts import AttemptMode, attempt_suffix, plain_prompt

if TYPE_CHECKING:
    from flywheel.engine import Engine
    from flywheel.library import Library
    from flywheel.problemsets import Problem

RouteKind = Literal["exact", "near", "none"]
#: Sampling temperature when attempts > 1 (attempt 0 of a single-attempt run is greedy).
SAMPLE_TEMPERATURE = 0.7

_FINAL_LINE = re.compile(r"final answer\s*[:：]\s*(\S[^\n]*)\n", re.IGNORECASE)


@dataclass(frozen=True)
class SolveStop(StopRule):
    """Stop once a complete `Final answer: ...` line was produced, or the model starts a new problem."""

    newline: bool = False

    def should_stop(self, engine: Engine, produced: list[int]) -> bool:
        text = engine.decode_text(produced[-64:]) if len(produced) > 64 else engine.decode_text(produced)
        return bool(_FINAL_LINE.search(text)) or "\nProblem:" in text


@dataclass(frozen=True)
class RefusedGraft:
    """A graft the library refused, with the reason (hash mismatch, fingerprint mismatch, missing file)."""

    artifact: str
    reason: str


@dataclass(frozen=True)
class AttemptResult:
    """What one attempt produced and cost; `text` is the raw decoded continuation."""

    text: str
    answer: str | None
    mode: AttemptMode
    grafted_artifact: str | None
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


def extract(text: str, mode: AttemptMode) -> str | None:
    """The answer in a continuation: the first line in `answer` mode, the final-answer line in `solve`."""
    import verifiers

    if mode == "answer":
        line = text.strip().splitlines()[0].strip() if text.strip() else ""
        return (verifiers.extract_answer(line) or line.rstrip(".")) or None
    m = _FINAL_LINE.search(text + "\n")
    if m:
        return verifiers.extract_answer("Final answer: " + m.group(1)) or m.group(1).strip().rstrip(".")
    if re.search(r"answer|boxed", text, re.IGNORECASE):  # a cut-off solution may still state it
        return verifiers.extract_answer(text)
    return None  # prose without a stated answer has no answer (a stray number is not one)


def run_attempt(engine: Engine, library: Library | None, problem: Problem, *, route: RouteKind,
                artifact_sha: str | None, budget: int, seed: int | None = None,
                temperature: float = 0.0) -> AttemptResult:
    """Attempt `problem` once under a decode budget of `budget` tokens.

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

    Example: `run_attempt(engine, lib, p, route="exact", artifact_sha=sha, budget=160).answer` -> `"239"`.
    """
    start = time.perf_counter()
    refused: list[RefusedGraft] = []
    cache = None
    restored = 0
    grafted: str | None = None
    if artifact_sha is not None and library is not None:
        try:
            g = library.load_graft(engine, artifact_sha)
            cache, restored, grafted = g.cache, g.token_count, g.artifact_sha256
        except ArtifactError as err:
            refused.append(RefusedGraft(artifact_sha, f"{type(err).__name__}: {err}"))
    # Only a recurrence whose graft actually loaded is asked for the answer at once.
    mode: AttemptMode = "answer" if route == "exact" and grafted else "solve"
    if budget <= 0:
        return AttemptResult("", None, mode, grafted, restored, 0, 0, budget, True,
                             time.perf_counter() - start, None, seed, refused)
    prompt = attempt_suffix(problem.text, mode) if grafted else plain_prompt(problem.text, mode)
    ids = engine.encode(prompt, bos=not grafted)  # a graft already starts with BOS
    cache, logits = engine.prefill(ids, cache)
    first = logits[-1]
    stop = StopRule() if mode == "answer" else SolveStop()
    generator = torch.Generator().manual_seed(seed) if temperature > 0 and seed is not None else None
    produced: list[int] = []
    for token in engine.decode_n_tokens(cache, first, budget, stop=stop, generator=generator,
                                        temperature=temperature):
        produced.append(token)
    text = engine.decode_text(produced)
    ended = bool(produced) and (produced[-1] in engine.eos_ids or stop.should_stop(engine, produced))
    exhausted = len(produced) >= budget and not ended
    return AttemptResult(text=text, answer=extract(text, mode), mode=mode, grafted_artifact=grafted,
                         restored_tokens=restored, prefill_tokens=len(ids), decode_tokens=len(produced),
                         budget=budget, budget_exhausted=exhausted, wall_seconds=time.perf_counter() - start,
                         logits_sha256=logits_sha256(first), seed=seed if generator is not None else None,
                         refused=refused)


def solution_of(result: AttemptResult) -> str:
    """The worked solution part of a `solve` continuation (what a self-deposit stores)."""
    text = result.text
    m = _FINAL_LINE.search(text + "\n")
    return (text[:m.start()] if m else text).strip()
