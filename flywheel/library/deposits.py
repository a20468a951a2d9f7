"""What a deposit must be before anything is written: the text rules, what counts as a contradicted
answer, the words a refused verdict is given in, and a checked deposit waiting in a staging file
(a bundle entry). `Library.judge` applies them to a deposit and to a bundle entry alike, so both
refuse the same things in the same words."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from flywheel.errors import DepositRefusedError
from flywheel.prompts import PLAIN, PromptFormat
from flywheel.tables import MAX_CELL_CHARS
from flywheel.terminal import printable

if TYPE_CHECKING:
    from flywheel.catalog import ArtifactSpec, ProblemSpec, SolutionSpec
    from flywheel.problemsets import Problem
    from verifiers import Verdict

#: Longest problem, solution, answer or reference text a deposit (or an import) accepts.
MAX_TEXT_CHARS = MAX_CELL_CHARS
#: Longest problem id: the catalog column's width.
MAX_ID_CHARS = 255


def check_deposit_text(problem: Problem, solution: str, answer: str, prompt_format: PromptFormat = PLAIN) -> None:
    """Raise `DepositRefusedError` when a field is empty where required, too long, breaks `prompt_format`'s
    graft, or the id is unusable."""
    fields = {"problem": problem.text, "solution": solution, "answer": answer, "reference": problem.reference or ""}
    for name, value in fields.items():
        if not isinstance(value, str):
            raise DepositRefusedError(f"{name} is not text")
        if len(value) > MAX_TEXT_CHARS:
            raise DepositRefusedError(f"{name} is {len(value):,} characters (limit {MAX_TEXT_CHARS:,})",
                             hint="a deposit is one problem with its worked solution, not a document")
        if "\x00" in value:   # PostgreSQL stores no NUL in text, and no problem needs one
            raise DepositRefusedError(f"{name} contains a NUL character")
    for name in ("problem", "answer"):
        if not fields[name].strip():
            raise DepositRefusedError(f"{name} is empty")
    broken = prompt_format.template_break(problem.text, solution, answer, problem.reference or "")
    if broken:
        raise DepositRefusedError(f"{broken}, which would break the graft template",
                                  hint="give the answer alone on one line; the template adds its own markers")
    if "\x00" in problem.id:
        raise DepositRefusedError("problem id contains a NUL character")
    if len(problem.id) > MAX_ID_CHARS:
        raise DepositRefusedError(f"problem id {printable(problem.id, 40)!r} is {len(problem.id)} characters "
                         f"(limit {MAX_ID_CHARS})")


def contradicted(status: str) -> bool:
    """Whether a verdict contradicts the answer (as opposed to being unable to check it)."""
    return status == "not_equivalent"


def refuse_unverified(problem: Problem, answer: str, verdict: Verdict, *, allow_unverified: bool) -> None:
    """Raise `DepositRefusedError` when `verdict` contradicts `answer`, or cannot confirm it and
    `allow_unverified` was not given; `problem` carries the reference the verdict was reached on."""
    status, reason = verdict.status, verdict.reason
    if not contradicted(status) and (verdict.equivalent or allow_unverified):
        return
    against = f"reference {problem.reference!r}" if problem.reference else "substitution into the problem"
    said = f"answer {printable(answer, 80)!r} for {printable(problem.id or repr(problem.text[:40]), 80)}"
    why = f"{status}: {printable(reason, 200)}"
    if contradicted(status):
        raise DepositRefusedError(
            f"{said} was not verified: it is contradicted by {printable(against, 120)} ({why})",
            hint="correct the answer (--unverified stores answers that cannot be checked, never contradicted ones)")
    raise DepositRefusedError(
        f"{said} could not be verified against {printable(against, 120)} ({why})",
        hint="correct the answer, or pass --unverified to store it marked as such (never routed unless asked)")


@dataclass(frozen=True)
class Judgement:
    """An entry that passed `Library.judge`: the problem as filed, with the reference its answer was
    checked against, and the verifier's verdict on that answer."""

    problem: Problem
    verdict: Verdict

    @property
    def verified(self) -> bool:
        return self.verdict.equivalent


@dataclass(frozen=True)
class StagedDeposit:
    """A fully checked deposit whose artifact bytes wait in a staging file (a bundle entry)."""

    staged: Path
    problem: ProblemSpec
    solution: SolutionSpec
    artifact: ArtifactSpec
    routable: bool  # of the committing engine's fingerprint and verified: the index gets it
