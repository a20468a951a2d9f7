"""Symbolic answer verifiers: extraction, safe parsing, equivalence and substitution checks.

Two verbs: `check(candidate=, reference=, mode=)` (keyword-only) and `check_by_substitution(problem, candidate)`,
each returning a `Verdict`; and `check_output(text, form=, reference=, problem_text=)`, which
extracts the answer a model's output states and checks it in the same request (`Answered`). Every check runs in a worker process under a wall-clock and memory
limit, so it is safe to call from any thread and on hostile model output.

    >>> from verifiers import check
    >>> check(candidate=r"\\dfrac{9}{7}", reference="9/7").equivalent
    True
"""

from verifiers.api import check, check_by_substitution, check_output, shutdown
from verifiers.extract import answer_in_output, extract_answer
from verifiers.parse import parse
from verifiers.types import (
    Answered,
    CheckTimeout,
    Mode,
    OutputForm,
    ParseError,
    Status,
    Verdict,
    VerifierConfig,
    VerifierUnavailable,
)

__all__ = [
    "check",
    "check_by_substitution",
    "check_output",
    "answer_in_output",
    "extract_answer",
    "parse",
    "shutdown",
    "Answered",
    "OutputForm",
    "Verdict",
    "VerifierConfig",
    "Mode",
    "Status",
    "ParseError",
    "CheckTimeout",
    "VerifierUnavailable",
]
