"""The library facade: store + catalog + router for one library root, and the deposit path.

Deposit order is what makes a crash harmless: verify the answer, prefill, write the artifact
bytes durably (atomic rename), then commit the catalog row, then index it. A crash before the
commit leaves at most an uncatalogued file (`flywheel library verify` reports it, a re-deposit
reuses it); never a row without its bytes.

Example:
    >>> lib = Library.open(Path("library"))                       # doctest: +SKIP
    >>> lib.deposit(engine, problem, solution="2+3=5", answer="5")  # doctest: +SKIP
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from flywheel import config
from flywheel.errors import ArtifactNotFoundError, DepositRefusedError
from flywheel.kv import Graft, capture, graft, parse_artifact
from flywheel.kv.artifact import artifact_name
from flywheel.problemsets import Problem
from flywheel.prompts import TEMPLATE_VERSION, graft_prefix

if TYPE_CHECKING:
    from flywheel.catalog import Catalog
    from flywheel.engine import Engine
    from flywheel.router import RouteDecision, Router, RouterConfig
    from flywheel.store import ArtifactStore


@dataclass(frozen=True)
class DepositResult:
    """What a deposit did: `created` is False when the same deposit already existed."""

    problem_id: str
    artifact_sha256: str
    created: bool
    verdict_status: str
    verdict_reason: str
    token_count: int
    unverified: bool


def verify_answer(problem: Problem, answer: str) -> tuple[str, str]:
    """(status, reason): against the reference when there is one, else by substitution."""
    import verifiers

    if problem.reference is not None and problem.reference.strip():
        verdict = verifiers.check(answer, problem.reference)
    else:
        verdict = verifiers.check_by_substitution(problem.text, answer)
    return verdict.status, verdict.reason


class Library:
    """One library root: artifacts under `<root>/artifacts`, catalog at `db_url`, index under `<root>/index`."""

    def __init__(self, root: Path, store: ArtifactStore, catalog: Catalog,
                 router_config: RouterConfig | None = None) -> None:
        self.root = root
        self.store = store
        self.catalog = catalog
        self._router_config = router_config
        self._router: Router | None = None

    @classmethod
    def open(cls, root: Path | None = None, db_url: str | None = None,
             router_config: RouterConfig | None = None, store_url: str | None = None) -> Library:
        """Open (creating if needed) the library at `root`; migrations run on open."""
        from flywheel.catalog import open_catalog
        from flywheel.store import open_store

        root = config.library_root(root)
        root.mkdir(parents=True, exist_ok=True)
        store = open_store(store_url or root, name_of=artifact_name)
        catalog = open_catalog(config.database_url(root, db_url))
        return cls(root, store, catalog, router_config)

    @property
    def router(self) -> Router:
        if self._router is None:
            from flywheel.router import Router

            self._router = Router(self.root, self.catalog, self._router_config)
        return self._router

    def close(self) -> None:
        self.catalog.close()
        self.store.close()

    def __enter__(self) -> Library:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- deposit ---------------------------------------------------------------------------------

    def deposit(self, engine: Engine, problem: Problem, solution: str, answer: str, *,
                deposited_by: str = "curator", unverified: bool = False, index: bool = True) -> DepositResult:
        """Verify `answer`, prefill the canonical graft prompt, store the artifact, catalogue and index it.

        Raises:
            DepositRefusedError: the verifier contradicts the answer (or cannot check it) and
                `unverified` was not asked for.
        """
        from flywheel.catalog import ArtifactSpec, ProblemSpec, SolutionSpec

        status, reason = verify_answer(problem, answer)
        if status != "equivalent" and not unverified:
            against = f"reference {problem.reference!r}" if problem.reference else "substitution into the problem"
            raise DepositRefusedError(
                f"answer {answer!r} for {problem.id or repr(problem.text[:40])} was not verified against {against}: {status} ({reason})",
                hint="correct the answer, or pass --unverified to deposit it marked as such (never routed unless asked)")
        pspec = ProblemSpec(text=problem.text, id=problem.id or None, reference=problem.reference,
                            source=problem.source or None)
        fp = engine.fingerprint
        existing = self.catalog.find_deposit(pspec, solution, answer, fp.digest)
        if existing is not None and self.store.contains(existing.sha256):
            return DepositResult(existing.problem_id, existing.sha256, False, status, reason,
                                 existing.token_count, unverified)
        ids = engine.encode(graft_prefix(problem.text, solution, answer))
        cache, last = engine.prefill(ids)
        artifact = capture(engine, cache, ids, last, meta={"problem_id": problem.id, "template": TEMPLATE_VERSION})
        data = artifact.to_bytes()
        sha = self.store.put(data)                     # durable before the row exists
        row = self.catalog.deposit(
            pspec,
            SolutionSpec(text=solution, answer=answer, verdict_status=status, verdict_reason=reason,
                         deposited_by=deposited_by, unverified=unverified),
            ArtifactSpec(sha256=sha, fingerprint_digest=fp.digest, fingerprint_json=json.dumps(fp.to_dict()),
                         model_name=fp.model, token_count=len(ids), size_bytes=len(data),
                         logits_sha256=artifact.header.logits_sha256))
        if index and not unverified:
            self.router.add(row.artifact.sha256, row.problem.id, row.problem.text, fp.digest)
        return DepositResult(row.problem.id, row.artifact.sha256, row.created, status, reason, len(ids), unverified)

    # --- graft -----------------------------------------------------------------------------------

    def load_graft(self, engine: Engine, sha256: str) -> Graft:
        """Fetch, hash-check, fingerprint-check and graft an artifact; raises `ArtifactError` if refused."""
        # Hashed once, by parse_artifact against the requested id: corrupt, truncated or
        # substituted bytes raise before any tensor reaches the engine.
        data = self.store.get_unchecked(sha256)
        if data is None:
            raise ArtifactNotFoundError(f"artifact {sha256[:12]} is catalogued but its file is missing",
                                        hint="`flywheel library verify` lists missing files; re-deposit or import them")
        return graft(engine, parse_artifact(data, expected_sha256=sha256))

    def route(self, engine: Engine, problem_text: str) -> RouteDecision:
        """Route a problem among artifacts of `engine`'s fingerprint (exact, near or none)."""
        return self.router.route(problem_text, engine.fingerprint.digest)
