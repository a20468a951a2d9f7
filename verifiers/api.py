"""The public verbs: `check` and `check_by_substitution`, each one bounded request to a worker."""

from __future__ import annotations

import time

from verifiers.types import MODES, CheckTimeout, Mode, Verdict, VerifierConfig
from verifiers.worker import POOL, WorkerDied

DEFAULT = VerifierConfig()


def _run(op: str, args: list[str], mode: str, cfg: VerifierConfig) -> Verdict:
    t0 = time.perf_counter()
    try:
        d = POOL.run(op, args, cfg)
    except CheckTimeout:
        return Verdict("timeout", f"no verdict within {cfg.timeout_s:g} s; worker killed and replaced", mode,
                       elapsed_s=time.perf_counter() - t0)
    except WorkerDied as err:
        return Verdict("unparseable", f"refused: worker died ({err}); likely the {cfg.memory_mb} MB memory limit",
                       mode, elapsed_s=time.perf_counter() - t0)
    except Exception as err:  # cannot start a process at all: still no exception into the flow
        return Verdict("unparseable", f"verifier unavailable: {type(err).__name__}: {err}", mode,
                       elapsed_s=time.perf_counter() - t0)
    d["mode"] = d.get("mode", mode)
    d["elapsed_s"] = time.perf_counter() - t0
    return Verdict.from_dict(d)


def _refuse(candidate: object, reference: object, cfg: VerifierConfig) -> str | None:
    for name, s in (("candidate", candidate), ("reference", reference)):
        if not isinstance(s, str):
            return f"{name} must be a string, got {type(s).__name__}"
        if len(s) > cfg.max_input_chars:
            return f"refused: {name} of {len(s)} chars exceeds {cfg.max_input_chars}"
    return None


def check(*, candidate: str, reference: str, mode: Mode = "auto", config: VerifierConfig | None = None) -> Verdict:
    """Is the model's answer equivalent to the reference? Never raises; bounded in time and memory.

    Every argument is keyword-only: candidate and reference are both strings and a swap would be
    silent (Math-Verify's `verify(gold, target)` takes them in the other order).

    Args:
        candidate: model output, free text or a bare answer (`\\boxed{}` etc. are extracted).
        reference: the reference answer (`A, or equivalently B` lists accepted forms).
        mode: auto|integer|aime|number|expression|set|interval|equation|text.
        config: bounds and tolerance (`VerifierConfig`); defaults are exact and 5 s.
    Returns:
        a `Verdict`; `.equivalent` is True only for status `equivalent`.

    Example: `check(candidate=r"\\dfrac{9}{7}", reference="9/7").equivalent` -> True;
    `check(candidate="0.333", reference="1/3")` -> not_equivalent.
    """
    cfg = config or DEFAULT
    if mode not in MODES:
        return Verdict("unparseable", f"unknown mode {mode!r}; one of {', '.join(MODES)}", str(mode))
    why = _refuse(candidate, reference, cfg)
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
    why = _refuse(candidate, problem_text, cfg)
    if why:
        return Verdict("unparseable", why, "substitution")
    return _run("substitute", [problem_text, candidate], "substitution", cfg)


def shutdown() -> None:
    """Stop the idle worker processes (they restart on the next check)."""
    POOL.shutdown()


__all__ = ["check", "check_by_substitution", "shutdown", "CheckTimeout"]
