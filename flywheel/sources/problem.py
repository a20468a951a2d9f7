"""The problem a source yields, the hash that names a list of them, and a resolved set."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from flywheel.domain import json_sha256

if TYPE_CHECKING:
    from verifiers import Answered, OutputForm, Verdict, VerifierConfig
    from verifiers.types import AnswerMarkers


@dataclass(frozen=True)
class Problem:
    """One problem; its `reference` answer when known (else it is checked by substitution), and a worked
    `solution` for curated sets (CHAMP)."""

    id: str
    text: str
    reference: str | None = None
    solution: str | None = None
    source: str = ""
    meta: dict[str, str] = field(default_factory=dict)

    def check(self, answer: str | None, *, config: VerifierConfig | None = None) -> Verdict:
        """The verifier's verdict on `answer`: against `reference` when there is one, else by substitution.

        No answer at all (None or blank) is `unparseable`. `config` bounds the check (the verifier's
        defaults when None).

        Example: `Problem("p1", "What is 2+2?", reference="4").check("4").equivalent` -> True.
        """
        import verifiers

        if answer is None or not answer.strip():
            return verifiers.Verdict("unparseable", "no answer in the output")
        if self.reference is not None and self.reference.strip():
            return verifiers.check(candidate=answer, reference=self.reference, config=config)
        return verifiers.check_by_substitution(self.text, answer, config=config)

    def check_output(self, text: str, form: OutputForm, *, config: VerifierConfig | None = None,
                     markers: AnswerMarkers = "final-line") -> Answered:
        """The answer a model's output `text` states and the verdict on it, as `check` gives it: one
        bounded request to the verifier's worker, which extracts the answer (`form`: `answer` or
        `solve`, the attempt's mode) and checks it; the untrusted text is never parsed here.

        Example: `Problem("p1", "What is 2+2?", reference="4").check_output("4\\n", "answer").answer` -> "4".
        """
        import verifiers

        return verifiers.check_output(text, form=form, reference=self.reference, problem_text=self.text,
                                      config=config, markers=markers)


def set_hash(problems: list[Problem]) -> str:
    """SHA-256 over (id, text, reference) of every problem in order."""
    rows = [[p.id, p.text, p.reference] for p in problems]
    return json_sha256(rows)


@dataclass(frozen=True)
class ProblemSet:
    """A resolved set: its spec as given, its problems, their hash, and rows skipped as bad."""

    spec: str
    problems: list[Problem]
    skipped: list[str] = field(default_factory=list)  # "file.jsonl line 7: no 'problem' field"

    @property
    def hash(self) -> str:
        return set_hash(self.problems)
