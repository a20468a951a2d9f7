"""The public verbs: `check`, `check_by_substitution` and `check_output`, each one bounded request to a
worker."""

from __future__ import annotations

import time
from typing import Any

from verifiers.types import (
    ANSWER_MARKERS,
    MAX_OUTPUT_CHARS,
    MODES,
    Answered,
    AnswerMarkers,
    CheckTimeout,
    Mode,
    OutputForm,
    Verdict,
    VerifierConfig,
    VerifierUnavailable,
    input_refusal,
)
from verifiers.worker import POOL, WorkerDied

DEFAULT = VerifierConfig()


def _request(op: str, args: list[str], mode: str, cfg: VerifierConfig) -> dict[str, Any]:
    """The worker's reply to one request, or a verdict's dict saying why the input got none.

    Raises:
        VerifierUnavailable: no worker could be started; that is no verdict on the input.
    """
    t0 = time.perf_counter()
    try:
        d = POOL.run(op, args, cfg)
    except CheckTimeout:
        return Verdict("timeout", f"no verdict within {cfg.timeout_s:g} s; worker killed and replaced", mode,
                       elapsed_s=time.perf_counter() - t0).to_dict()
    except WorkerDied as err:
        return Verdict("unparseable", f"refused: worker died ({err}); likely the {cfg.memory_mb} MB memory limit",
                       mode, elapsed_s=time.perf_counter() - t0).to_dict()
    verdict = d.get("verdict", d)
    verdict["mode"] = verdict.get("mode", mode)
    verdict["elapsed_s"] = time.perf_counter() - t0
    return d


def _run(op: str, args: list[str], mode: str, cfg: VerifierConfig) -> Verdict:
    return Verdict.from_dict(_request(op, args, mode, cfg))


def check(*, candidate: str, reference: str, mode: Mode = "auto", config: VerifierConfig | None = None) -> Verdict:
    """Is the model's answer equivalent to the reference? Bounded in time and memory.

    Every argument is keyword-only: candidate and reference are both strings and a swap would be
    silent (Math-Verify's `verify(gold, target)` takes them in the other order).

    Args:
        candidate: model output, free text or a bare answer (`\\boxed{}` etc. are extracted).
        reference: the reference answer (`A, or equivalently B` lists accepted forms).
        mode: auto|integer|aime|number|expression|set|interval|equation|text.
        config: bounds and tolerance (`VerifierConfig`); defaults are exact and 5 s.
    Returns:
        a `Verdict`; `.equivalent` is True only for status `equivalent`.
    Raises:
        VerifierUnavailable: no worker process could be started (there is no verdict to give).

    Example: `check(candidate=r"\\dfrac{9}{7}", reference="9/7").equivalent` -> True;
    `check(candidate="0.333", reference="1/3")` -> not_equivalent.
    """
    cfg = config or DEFAULT
    if mode not in MODES:
        return Verdict("unparseable", f"unknown mode {mode!r}; one of {', '.join(MODES)}", str(mode))
    why = input_refusal(candidate, reference, cfg)
    if why:
        return Verdict("unparseable", why, mode)
    return _run("check", [candidate, reference, mode], mode, cfg)


def check_by_substitution(problem_text: str, candidate: str, *, config: VerifierConfig | None = None) -> Verdict:
    """Verify an answer to a "solve"/"find all x" problem with no reference: plug it in.

    Args:
        problem_text: the problem; its equation is found in `$...$` or plain text.
        candidate: model output or bare answer (`x = 2`, `{2, 3}`, `x=1, y=2`).
        config: bounds; as for `check`.
    Returns:
        `equivalent` when every value satisfies the equation and, where sympy can solve it, the
        claimed set is complete; `not_equivalent` when a value fails it, or one is missing from a
        problem that asks for all; `unparseable` when no equation is found, and (reason
        "unverifiable: ...") when the problem asks for something other than the equation's unknown
        ("If x = 3, what is x^2 + 1?") or its conditions go beyond the equation.

    Example: `check_by_substitution("Solve x^2 - 5x + 6 = 0.", "x = 2 or x = 3").equivalent` -> True.
    """
    cfg = config or DEFAULT
    why = input_refusal(candidate, problem_text, cfg)
    if why:
        return Verdict("unparseable", why, "substitution")
    return _run("substitute", [problem_text, candidate], "substitution", cfg)


def check_output(text: str, *, form: OutputForm, reference: str | None, problem_text: str,
                 config: VerifierConfig | None = None, markers: AnswerMarkers = "final-line") -> Answered:
    """What a model's output answers, and whether it is right: one bounded request does both.

    The answer is extracted from the untrusted `text` inside the worker (never in this process):
    its first line in `answer` form, its `Final answer:` line in `solve` form. It is then checked
    against `reference`, or by substitution into `problem_text` when the reference is None or
    blank (as `check` and `check_by_substitution` would). Raises `VerifierUnavailable` (only)
    when no worker process can be started.

    Args:
        text: the model's raw continuation.
        form: how it states its answer: `answer` or `solve`.
        reference: the reference answer, or None.
        problem_text: the problem (for a check by substitution).
        config: bounds; as for `check`.
        markers: what marks the answer (the asking prompt format's): `final-line` or `boxed`.
    Returns:
        `Answered(answer, verdict)`: the answer stated (None: none; also when the worker was killed
        before replying), and the verdict on it.

    Example: `check_output("x = 9.\\nFinal answer: 9\\n", form="solve", reference="9",
    problem_text="Solve x - 9 = 0.")` -> `Answered("9", <equivalent>)`.
    """
    cfg = config or DEFAULT
    mode = "auto" if reference is not None and reference.strip() else "substitution"
    if not isinstance(text, str) or not text.strip():
        return Answered(None, Verdict("unparseable", "no answer in the output"))
    if len(text) > MAX_OUTPUT_CHARS:
        return Answered(None, Verdict("unparseable", f"refused: output of {len(text):,} chars exceeds "
                                                     f"{MAX_OUTPUT_CHARS:,}", mode))
    if markers not in ANSWER_MARKERS:
        raise ValueError(f"unknown answer markers {markers!r}; one of {', '.join(ANSWER_MARKERS)}")
    d = _request("output", [text, form, reference or "", problem_text, markers], mode, cfg)
    if "verdict" not in d:   # the request failed: `d` is the verdict saying why
        return Answered(None, Verdict.from_dict(d))
    answer = d.get("answer")
    return Answered(answer if isinstance(answer, str) else None, Verdict.from_dict(d["verdict"]))


def shutdown() -> None:
    """Stop the idle worker processes (they restart on the next check)."""
    POOL.shutdown()


__all__ = ["check", "check_by_substitution", "check_output", "shutdown", "CheckTimeout", "VerifierUnavailable"]
