"""The verifier's vocabulary: its configuration, its verdict and its two internal exceptions."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

Mode = Literal["auto", "integer", "aime", "number", "expression", "set", "interval", "equation", "text"]
Status = Literal["equivalent", "not_equivalent", "unparseable", "timeout"]

MODES: tuple[str, ...] = ("auto", "integer", "aime", "number", "expression", "set", "interval", "equation", "text")


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


class ParseError(ValueError):
    """Text outside the restricted grammar, or over one of its bounds (`refused` says which)."""

    def __init__(self, message: str, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


class CheckTimeout(BaseException):
    """A check ran past its wall-clock limit. BaseException so a stray `except Exception` cannot eat it."""
