"""Plain inputs and results of `Catalog` methods, so callers need not build ORM rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from flywheel.catalog.models import ArtifactRow, AttemptRow, ProblemRow, SolutionRow
from flywheel.domain import ArtifactSha, RouteKind

if TYPE_CHECKING:
    from flywheel.problemsets import Problem

GraftOutcome = Literal["ok", "refused"]
#: Characters of an attempt's decoded text kept in the catalog (a 1,024-token budget fits).
ATTEMPT_TEXT_LIMIT = 8_000


def storable(text: str | None) -> str | None:
    """`text` with each NUL replaced by U+FFFD: PostgreSQL stores no NUL in text, and a model's
    output may hold one (the record must never be lost to it)."""
    return None if text is None else text.replace("\x00", "\ufffd")


def bounded_text(text: str, limit: int = ATTEMPT_TEXT_LIMIT) -> str:
    """`text`, cut to `limit` characters with a marker saying how much was left out (NULs replaced)."""
    text = text.replace("\x00", "\ufffd")
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters not stored]"


@dataclass(frozen=True)
class ProblemSpec:
    """A problem to upsert; `id` defaults to `p-<first 16 hex of the normalized-text hash>`."""

    text: str
    id: str | None = None
    reference: str | None = None
    source: str | None = None  # the problem set's name

    @classmethod
    def of(cls, problem: Problem) -> ProblemSpec:
        """The catalog's spec of a problem-set `Problem` (an empty id or source is none)."""
        return cls(text=problem.text, id=problem.id or None, reference=problem.reference,
                   source=problem.source or None)


@dataclass(frozen=True)
class SolutionSpec:
    """A worked solution and the verifier's verdict on its answer."""

    text: str
    answer: str
    verdict_status: str  # verifiers.Verdict.status; must be "equivalent" unless unverified
    deposited_by: str  # a flow-run id, or "curator:<user>"
    verdict_reason: str | None = None
    unverified: bool = False


@dataclass(frozen=True)
class ArtifactSpec:
    """The catalog facts of an artifact whose bytes are already durable in the store."""

    sha256: str
    fingerprint_digest: str
    fingerprint_json: str
    model_name: str
    token_count: int
    size_bytes: int
    logits_sha256: str | None = None


@dataclass(frozen=True)
class Deposit:
    """Result of `Catalog.deposit`. `created` is False when the deposit already existed; then
    `artifact.sha256` may differ from the one passed in (the caller's bytes are an orphan)."""

    problem: ProblemRow
    solution: SolutionRow
    artifact: ArtifactRow
    created: bool


@dataclass(frozen=True)
class GraftRecord:
    """A graft tried in an attempt: `ok`, or `refused` with the engine's reason.

    `restored_tokens` is the graft's whole length (what the attempt would restore alone), not a fork's share.
    """

    artifact_sha256: str
    outcome: GraftOutcome
    reason: str | None = None
    restored_tokens: int | None = None


@dataclass(frozen=True)
class AttemptRecord:
    """One attempt's accounting; token counts are exact, energy carries its source.

    When K attempts fork one graft restore and one prefill, `prefill_tokens` and `restored_tokens`
    are this attempt's whole-token share (`flywheel.attempt.apportion`; `flows.tasks.attempt_record`
    converts a finished attempt), so the K rows add up to
    what the model ran, counted once; `prompt_tokens` and the graft row's `restored_tokens` keep
    what the attempt would cost alone. Energy is apportioned the same way.
    """

    run_id: str
    problem_id: str
    attempt_index: int
    route: RouteKind
    budget: int
    route_score: float | None = None
    routed_artifact_sha: str | None = None
    grafted_artifact_sha: str | None = None
    prompt_tokens: int = 0    # the prompt this attempt fed: what it would prefill alone
    prefill_tokens: int = 0   # its share of the prefill the pass actually ran (K forks: 1/K each)
    restored_tokens: int = 0  # its share of the tokens actually restored from the graft
    decode_tokens: int = 0
    tool_tokens: int = 0      # tokens the calculator forced (in `text`, not in `decode_tokens`)
    budget_exhausted: bool = False
    answer: str | None = None
    verified: bool = False
    verdict_status: str | None = None
    wall_seconds: float | None = None
    energy_joules: float | None = None
    energy_source: str | None = None  # nvml | rapl | estimate
    logits_sha256: str | None = None
    error: str | None = None
    seed: int | None = None
    text: str | None = None          # the decoded continuation (bounded: see `bounded_text`)
    stop_reason: str | None = None   # stop | eos | budget


@dataclass(frozen=True)
class RecordedAttempt:
    """Result of `Catalog.record_attempt`; `created` is False on a resumed, already-recorded key."""

    attempt: AttemptRow
    created: bool


@dataclass(frozen=True)
class RouterEntry:
    """A routable artifact: verified, matching the fingerprint, with its problem's text."""

    artifact_sha256: ArtifactSha
    problem_id: str
    problem_text: str
