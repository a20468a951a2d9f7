"""Symbolic answer verifiers: extraction, safe parsing, equivalence and substitution checks.

Two verbs: `check(candidate=, reference=, mode=)` (keyword-only) and `check_by_substitution(problem, candidate)`,
each returning a `Verdict`. Every check runs in a worker process under a wall-clock and memory
limit, so it is safe to call from any thread and on hostile model output.

    >>> from verifiers import check
    >>> check(candidate=r"\\dfrac{9}{7}", reference="9/7").equivalent
    True
"""

from verifiers.api import check, check_by_substitution, shutdown
from verifiers.extract import extract_answer
from verifiers.parse import parse
from verifiers.types import CheckTimeout, Mode, ParseError, Status, Verdict, VerifierConfig

__all__ = [
    "check",
    "check_by_substitution",
    "extract_answer",
    "parse",
    "shutdown",
    "Verdict",
    "VerifierConfig",
    "Mode",
    "Status",
    "ParseError",
    "CheckTimeout",
]
