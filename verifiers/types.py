"""The verifier's vocabulary: its configuration, its verdict, its two internal exceptions, and
`VerifierUnavailable` (raised to callers when no worker can start)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Literal

Mode = Literal["auto", "integer", "aime", "number", "expression", "set", "interval", "equation", "text"]
Status = Literal["equivalent", "not_equivalent", "unparseable", "timeout"]

MODES: tuple[str, ...] = ("auto", "integer", "aime", "number", "expression", "set", "interval", "equation", "text")
#: How a model's output states its answer: `answer` on its first line, `solve` on a `Final answer:` line.
OutputForm = Literal["answer", "solve"]
#: What marks the answer in a model's output, as the prompt format that asked says (data, not code):
#: `final-line` a `Final answer:` line (the plain format), `boxed` the last `\\boxed{...}` (the chat format).
AnswerMarkers = Literal["final-line", "boxed"]
ANSWER_MARKERS: tuple[str, ...] = ("final-line", "boxed")

#: Longest model output an answer is extracted from (far above any decode budget's text).
MAX_OUTPUT_CHARS = 4_000_000

#: Largest relative tolerance: 1% (100 and 101 agree; 1 and 1,000,000 never do).
MAX_TOLERANCE = 0.01
#: Longest wall clock for one check, in seconds.
MAX_TIMEOUT_S = 600.0


def tolerance_problem(value: float | None) -> str | None:
    """Why `value` is not a usable relative tolerance (None when it is, or when it is None: exact)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 <= value <= MAX_TOLERANCE:
        return f"tolerance {value!r} is not a relative tolerance between 0 and {MAX_TOLERANCE:g}"
    return None


def timeout_problem(value: float) -> str | None:
    """Why `value` is not a usable wall-clock limit in seconds (None when it is)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 < value <= MAX_TIMEOUT_S:
        return f"timeout {value!r} is not a number of seconds above 0 and at most {MAX_TIMEOUT_S:g}"
    return None


@dataclass(frozen=True)
class VerifierConfig:
    """Bounds and tolerances for one check; frozen so it can key caches and cross a process boundary.

    Every default lives here and nowhere else (the CLI and the worker read them from this class).
    """

    tolerance: float | None = None  # relative; None = exact (0.333 is not 1/3 unless this is set)
    timeout_s: float = 5.0  # wall clock per check, enforced by killing the worker process
    memory_mb: int = 1024  # RLIMIT_AS of the worker; sympy itself needs ~150 MB
    max_input_chars: int = 4000  # longer text is refused before any parsing
    max_answer_chars: int = 600  # an extracted answer longer than this is not a short answer
    max_depth: int = 40  # bracket/operator nesting depth of the restricted grammar
    max_exponent: int = 10_000  # |n| in b^n for numeric n (2^997 passes; 9^9^9 does not)
    max_result_bits: int = 200_000  # bits of an exact numeric power; ~60k decimal digits
    max_factorial: int = 5_000  # largest n evaluated in n! or C(n, k)
    max_set_size: int = 64  # elements compared in one set/list
    probes: int = 8  # randomized numeric probes for symbolic expressions
    last_number_fallback: bool = False  # extraction: use the last number in prose (off: never guess)
    workers: int = 2  # worker processes shared by all threads of this process

    def __post_init__(self) -> None:
        why = tolerance_problem(self.tolerance) or timeout_problem(self.timeout_s)
        if why:
            raise ValueError(why)
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type in ("int", int) and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValueError(f"{f.name} {value!r} is not a whole number >= 0")

    def to_dict(self) -> dict[str, object]:
        """Plain dict (JSON-safe) form, used to cross the process boundary."""
        return asdict(self)


@dataclass(frozen=True)
class Verdict:
    """Outcome of one check. `status` decides; `reason` says why in one line for a human.

    `candidate`/`reference` are the extracted answer strings; `*_parsed` the parsed forms as text.
    """

    status: Status
    reason: str
    mode: str = "auto"
    candidate: str | None = None
    reference: str | None = None
    candidate_parsed: str | None = None
    reference_parsed: str | None = None
    elapsed_s: float = field(default=0.0, compare=False)

    @property
    def equivalent(self) -> bool:
        """True only for status `equivalent`; unparseable and timeout count as not verified."""
        return self.status == "equivalent"

    def to_dict(self) -> dict[str, object]:
        """JSON-safe dict including `equivalent`."""
        d: dict[str, object] = asdict(self)
        d["equivalent"] = self.equivalent
        return d

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> Verdict:
        """Inverse of `to_dict` (unknown keys are ignored)."""
        keys = {"status", "reason", "mode", "candidate", "reference", "candidate_parsed",
                "reference_parsed", "elapsed_s"}
        return cls(**{k: v for k, v in d.items() if k in keys})  # type: ignore[arg-type]


@dataclass(frozen=True)
class Answered:
    """What one model output was found to answer, and the verdict on that answer: both from one
    bounded request (`verifiers.check_output`). `answer` is None when the output states none."""

    answer: str | None
    verdict: Verdict


def input_refusal(candidate: object, reference: object, cfg: VerifierConfig) -> str | None:
    """Why a check refuses its inputs before any parsing (not text, or over `max_input_chars`), else None."""
    for name, s in (("candidate", candidate), ("reference", reference)):
        if not isinstance(s, str):
            return f"{name} must be a string, got {type(s).__name__}"
        if len(s) > cfg.max_input_chars:
            return f"refused: {name} of {len(s)} chars exceeds {cfg.max_input_chars}"
    return None


class ParseError(ValueError):
    """Text outside the restricted grammar, or over one of its bounds (`refused` says which)."""

    def __init__(self, message: str, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


class VerifierUnavailable(RuntimeError):
    """No worker process could be started (no interpreter, no memory, the import failed): there is
    no verdict, and none may be recorded. Raised to the caller, never turned into a `Verdict`;
    what went wrong with one check (a timeout, a worker killed mid-check) stays a verdict."""


class CheckTimeout(BaseException):
    """A check ran past its wall-clock limit. BaseException so a stray `except Exception` cannot eat it."""
