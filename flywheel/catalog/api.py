"""`Catalog`: the typed operations flows, the deposit CLI and the router perform on the catalog.

Ordering contract for deposits (what keeps "no row without its artifact"):
  1. `find_deposit(...)` — already deposited under this fingerprint? then stop, nothing to do;
  2. prefill and serialize the artifact, `store.put(bytes)` — returns only once the bytes are durable;
  3. `deposit(problem, solution, artifact)` — one transaction inserts the problem, solution and
     artifact rows. A crash between 2 and 3 leaves an orphan file (harmless; `put` is idempotent
     and `orphans()` lists them), never a row whose bytes are missing.
Every insert is idempotent on a unique key and tolerant of concurrent writers racing on it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from typing import Any, TypeVar

from sqlalchemy import Engine, delete, insert, select, update
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from flywheel.catalog.models import (
    ArtifactRow,
    AttemptRow,
    Base,
    GraftRow,
    ProblemRow,
    RunRow,
    SolutionRow,
    utcnow,
)
from flywheel.catalog.normalize import content_hash, text_hash
from flywheel.catalog.records import (
    ArtifactSpec,
    AttemptRecord,
    Deposit,
    GraftRecord,
    ProblemSpec,
    RecordedAttempt,
    RouterEntry,
    SolutionSpec,
)
from flywheel.domain import ArtifactSha, ShaPrefix
from flywheel.errors import ArtifactNotFoundError, CatalogConflictError, DepositRefusedError, InputError

T = TypeVar("T")
_LOCK_RETRIES = 8  # on top of SQLite's own busy timeout, for a writer starved under heavy contention


def insert_ignore(session: Session, model: type[Base], values: dict[str, Any]) -> bool:
    """INSERT `values`, doing nothing on any unique conflict. Returns True if a row was inserted."""
    dialect = session.get_bind().dialect.name
    if dialect in ("sqlite", "postgresql"):
        mod: Any = sqlite if dialect == "sqlite" else postgresql
        # RETURNING tells us whether the row went in: rowcount is -1 under implicit RETURNING (psycopg).
        pk = sa_inspect(model).primary_key[0]
        stmt = mod.insert(model).values(**values).on_conflict_do_nothing().returning(pk)
        return session.connection().execute(stmt).first() is not None
    try:  # other backends: a savepoint we can roll back when a racing writer won
        with session.begin_nested():
            session.connection().execute(insert(model).values(**values))
        return True
    except IntegrityError:
        return False


class Catalog:
    """The SQL catalog of problems, solutions, artifacts, runs, attempts and grafts.

    Open it with `flywheel.catalog.open_catalog(url)`, which migrates the schema first. Returned
    rows are detached snapshots (columns loaded, no lazy relationships).

    Example:
        >>> cat = open_catalog(config.database_url(library))
        >>> p = cat.upsert_problem(ProblemSpec(text="What is 2+2?", reference="4", source="demo"))
    """

    def __init__(self, db: Engine) -> None:
        self.db = db    # the SQLAlchemy engine ("engine" in this codebase is the model)
        self._sessions = sessionmaker(db, expire_on_commit=False)

    @property
    def url(self) -> str:
        """The catalog URL with every password form (`user:pw@`, `?password=`) hidden."""
        from flywheel.config import redact_url

        return redact_url(self.db.url.render_as_string(hide_password=True))

    def close(self) -> None:
        self.db.dispose()

    def session(self) -> Session:
        """A new ORM session (use as `with cat.session() as s, s.begin(): ...`)."""
        return self._sessions()

    def _write(self, work: Callable[[Session], T]) -> T:
        """Run `work` in one transaction, retrying when SQLite reports the database locked."""
        for attempt in range(_LOCK_RETRIES):
            try:
                with self._sessions() as s, s.begin():
                    return work(s)
            except OperationalError as err:
                if "locked" not in str(err).lower() or attempt == _LOCK_RETRIES - 1:
                    raise
                time.sleep(0.05 * 2**attempt)
        raise AssertionError("unreachable")

    def damage(self) -> list[str]:
        """What SQLite's own check of the catalog file finds (`PRAGMA quick_check`: overwritten
        pages, broken indexes); [] when sound, and always [] on other databases (their servers
        keep their own files sound)."""
        if self.db.url.get_backend_name() != "sqlite":
            return []
        try:
            with self.db.connect() as conn:
                rows = [str(r[0]) for r in conn.exec_driver_sql("PRAGMA quick_check").all()]
        except DBAPIError as err:
            return [str(err.orig or err).strip().splitlines()[0]]
        found = [line for row in rows for line in row.splitlines() if line.strip() and not line.startswith("***")]
        return [] if found == ["ok"] else found

    # --- problems --------------------------------------------------------------------------------

    @staticmethod
    def problem_id_for(spec: ProblemSpec) -> str:
        return spec.id or f"p-{text_hash(spec.text)[:16]}"

    def _upsert_problem(self, s: Session, spec: ProblemSpec) -> ProblemRow:
        pid = self.problem_id_for(spec)
        digest = text_hash(spec.text)
        insert_ignore(s, ProblemRow, {"id": pid, "text": spec.text, "text_hash": digest,
                                      "reference": spec.reference, "source": spec.source})
        row = s.get(ProblemRow, pid, populate_existing=True)
        assert row is not None
        if row.text_hash != digest:
            raise CatalogConflictError(
                f"problem id {pid!r} already holds a different text ({row.text[:60]!r}...)",
                hint="give this problem another --id, or deposit it under the existing text",
            )
        if spec.reference is not None and row.reference is None:
            row.reference = spec.reference
        if spec.source is not None and row.source is None:
            row.source = spec.source
        return row

    def upsert_problem(self, spec: ProblemSpec) -> ProblemRow:
        """Insert the problem, or return the stored one with the same id (filling a missing reference).

        Raises:
            CatalogConflictError: the id is taken by a problem with different (normalized) text.
        """
        return self._write(lambda s: self._upsert_problem(s, spec))

    def upsert_problems(self, specs: Iterable[ProblemSpec]) -> list[ProblemRow]:
        """`upsert_problem` for a whole problem set in one transaction."""
        items = list(specs)
        return self._write(lambda s: [self._upsert_problem(s, p) for p in items])

    def get_problem(self, problem_id: str) -> ProblemRow | None:
        with self._sessions() as s:
            return s.get(ProblemRow, problem_id)

    def problems_by_text(self, text: str) -> list[ProblemRow]:
        """Problems whose normalized text equals that of `text` (recurrences), oldest first."""
        with self._sessions() as s:
            stmt = select(ProblemRow).where(ProblemRow.text_hash == text_hash(text)).order_by(ProblemRow.created_at)
            return list(s.scalars(stmt))

    # --- deposits --------------------------------------------------------------------------------

    def find_deposit(self, problem: ProblemSpec, solution_text: str, answer: str,
                     fingerprint_digest: str) -> ArtifactRow | None:
        """The artifact already deposited for this problem, solution and fingerprint, if any."""
        with self._sessions() as s:
            stmt = (select(ArtifactRow).join(SolutionRow, ArtifactRow.solution_id == SolutionRow.id)
                    .where(SolutionRow.problem_id == self.problem_id_for(problem),
                           SolutionRow.content_hash == content_hash(solution_text, answer),
                           ArtifactRow.fingerprint_digest == fingerprint_digest))
            return s.scalars(stmt).first()

    def deposit(self, problem: ProblemSpec, solution: SolutionSpec, artifact: ArtifactSpec, *,
                replacing: str | None = None) -> Deposit:
        """Record a deposited artifact with its problem and solution, in one transaction.

        Call only after `store.put(bytes)` returned `artifact.sha256` (see the module docstring).
        Idempotent: the same problem, solution and fingerprint give the same rows. `replacing`
        names an artifact row this one replaces (the same solution and fingerprint, prefilled
        through an older template): it is deleted in the same transaction, so the solution is
        never without an artifact; the caller removes its bytes afterwards.

        Raises:
            DepositRefusedError: a solution marked verified whose verdict is not "equivalent".
            CatalogConflictError: the problem id holds another text.
        """
        self._check_verdict(problem, solution)

        def work(s: Session) -> Deposit:
            if replacing is not None:
                s.execute(delete(ArtifactRow).where(ArtifactRow.sha256 == replacing))
            return self._deposit(s, problem, solution, artifact)
        return self._write(work)

    def deposit_many(self, items: Sequence[tuple[ProblemSpec, SolutionSpec, ArtifactSpec]]) -> list[Deposit]:
        """`deposit` for several artifacts in ONE transaction: all rows are committed, or none
        (a bundle import). Same preconditions and errors as `deposit`."""
        for problem, solution, _ in items:
            self._check_verdict(problem, solution)
        return self._write(lambda s: [self._deposit(s, p, sol, a) for p, sol, a in items])

    def _check_verdict(self, problem: ProblemSpec, solution: SolutionSpec) -> None:
        if not solution.unverified and solution.verdict_status != "equivalent":
            raise DepositRefusedError(
                f"solution for {self.problem_id_for(problem)!r} has verdict "
                f"{solution.verdict_status!r}, not 'equivalent': {solution.verdict_reason or 'no reason given'}",
                hint="fix the answer, or deposit with --unverified (it is then never routed unless asked)",
            )

    def _deposit(self, s: Session, problem: ProblemSpec, sol: SolutionSpec, art: ArtifactSpec) -> Deposit:
        prow = self._upsert_problem(s, problem)
        chash = content_hash(sol.text, sol.answer)
        insert_ignore(s, SolutionRow, {
            "problem_id": prow.id, "text": sol.text, "answer": sol.answer, "content_hash": chash,
            "verdict_status": sol.verdict_status, "verdict_reason": sol.verdict_reason,
            "deposited_by": sol.deposited_by, "unverified": sol.unverified})
        srow = s.scalars(select(SolutionRow).where(SolutionRow.problem_id == prow.id,
                                                   SolutionRow.content_hash == chash)
                         .execution_options(populate_existing=True)).one()
        if srow.unverified and not sol.unverified:  # a later verified deposit upgrades the row
            srow.unverified, srow.verdict_status, srow.verdict_reason = False, sol.verdict_status, sol.verdict_reason
        inserted = insert_ignore(s, ArtifactRow, {**asdict(art), "problem_id": prow.id, "solution_id": srow.id})
        arow = s.scalars(select(ArtifactRow).where(ArtifactRow.solution_id == srow.id,
                                                   ArtifactRow.fingerprint_digest == art.fingerprint_digest)).first()
        if arow is None:  # identical bytes already catalogued under another problem id with this text
            arow = s.get(ArtifactRow, art.sha256)
        assert arow is not None
        return Deposit(problem=prow, solution=srow, artifact=arow, created=inserted)

    # --- artifacts -------------------------------------------------------------------------------

    def list_artifacts(self, fingerprint_digest: str | None = None,
                       include_unverified: bool = False) -> list[ArtifactRow]:
        """Artifacts, oldest first; only those with `fingerprint_digest` when given, verified only unless asked."""
        with self._sessions() as s:
            stmt = select(ArtifactRow).join(SolutionRow, ArtifactRow.solution_id == SolutionRow.id)
            if fingerprint_digest is not None:
                stmt = stmt.where(ArtifactRow.fingerprint_digest == fingerprint_digest)
            if not include_unverified:
                stmt = stmt.where(SolutionRow.unverified.is_(False))
            return list(s.scalars(stmt.order_by(ArtifactRow.created_at, ArtifactRow.sha256)))

    def get_artifact(self, sha_or_prefix: ArtifactSha | ShaPrefix) -> ArtifactRow:
        """The artifact whose id is, or starts with, `sha_or_prefix` (at least 4 hex digits).

        Raises:
            InputError: not hex, too short, or the prefix names several artifacts.
            ArtifactNotFoundError: no artifact has that id.
        """
        key = sha_or_prefix.strip().lower()
        if len(key) < 4 or len(key) > 64 or any(c not in "0123456789abcdef" for c in key):
            raise InputError(f"not an artifact id or prefix: {sha_or_prefix!r}",
                             hint="give at least 4 hex digits of the SHA-256 (`flywheel library ls`)")
        with self._sessions() as s:
            rows = list(s.scalars(select(ArtifactRow).where(ArtifactRow.sha256.startswith(key, autoescape=True))
                                  .limit(2)))
        if not rows:
            raise ArtifactNotFoundError(f"no artifact {key} in the catalog {self.url}",
                                        hint="list them with `flywheel library ls`")
        if len(rows) > 1:
            raise InputError(f"artifact prefix {key} is ambiguous ({rows[0].sha256[:12]}, {rows[1].sha256[:12]}, ...)",
                             hint="give more hex digits")
        return rows[0]

    def solutions_of(self, problem_id: str) -> list[SolutionRow]:
        """Every stored solution of a problem (verified or not), oldest first."""
        with self._sessions() as s:
            stmt = select(SolutionRow).where(SolutionRow.problem_id == problem_id).order_by(SolutionRow.id)
            return list(s.scalars(stmt))

    def get_solution(self, solution_id: int) -> SolutionRow | None:
        with self._sessions() as s:
            return s.get(SolutionRow, solution_id)

    def remove_artifact(self, sha256: str) -> bool:
        """Delete an artifact's row (the caller removes the bytes afterwards). True if it existed."""
        def work(s: Session) -> bool:
            row = s.get(ArtifactRow, sha256)
            if row is None:
                return False
            s.delete(row)
            return True
        return self._write(work)

    def names_artifact(self, sha256: str) -> bool:
        """Whether an artifact row names `sha256` (its bytes are then the catalog's, never removable)."""
        with self._sessions() as s:
            return s.get(ArtifactRow, sha256) is not None

    def orphans(self, stored_ids: Iterable[str]) -> list[str]:
        """Of `stored_ids` (e.g. `store.iter_ids()`), those without a catalog row."""
        with self._sessions() as s:
            known = set(s.scalars(select(ArtifactRow.sha256)))
        return sorted(set(stored_ids) - known)

    # --- routing lookups -------------------------------------------------------------------------

    def router_entries(self, fingerprint_digest: str, include_unverified: bool = False) -> list[RouterEntry]:
        """Routable artifacts for a fingerprint, with their problems' text, oldest first."""
        with self._sessions() as s:
            stmt = (select(ArtifactRow.sha256, ProblemRow.id, ProblemRow.text)
                    .join(SolutionRow, ArtifactRow.solution_id == SolutionRow.id)
                    .join(ProblemRow, ArtifactRow.problem_id == ProblemRow.id)
                    .where(ArtifactRow.fingerprint_digest == fingerprint_digest))
            if not include_unverified:
                stmt = stmt.where(SolutionRow.unverified.is_(False))
            rows = s.execute(stmt.order_by(ArtifactRow.created_at, ArtifactRow.sha256)).all()
        return [RouterEntry(artifact_sha256=ArtifactSha(a), problem_id=p, problem_text=t) for a, p, t in rows]

    def exact_match(self, problem_text: str, fingerprint_digest: str,
                    include_unverified: bool = False) -> RouterEntry | None:
        """The oldest routable artifact whose problem has the same normalized text, if any."""
        with self._sessions() as s:
            stmt = (select(ArtifactRow.sha256, ProblemRow.id, ProblemRow.text)
                    .join(SolutionRow, ArtifactRow.solution_id == SolutionRow.id)
                    .join(ProblemRow, ArtifactRow.problem_id == ProblemRow.id)
                    .where(ProblemRow.text_hash == text_hash(problem_text),
                           ArtifactRow.fingerprint_digest == fingerprint_digest))
            if not include_unverified:
                stmt = stmt.where(SolutionRow.unverified.is_(False))
            row = s.execute(stmt.order_by(ArtifactRow.created_at, ArtifactRow.sha256).limit(1)).first()
        return None if row is None else RouterEntry(artifact_sha256=ArtifactSha(row[0]), problem_id=row[1],
                                                   problem_text=row[2])

    # --- runs and attempts -----------------------------------------------------------------------

    def create_run(self, *, run_id: str, problem_set: str, problem_set_hash: str, budget: int,
                   attempts: int, model_name: str, model_fingerprint: str, no_graft: bool = False,
                   run_budget: int | None = None, flow_run_id: str | None = None,
                   decode_schedule: str | None = None, settings: str | None = None,
                   owner: str | None = None) -> RunRow:
        """Start run `run_id`, or reopen it if it exists (a resumed run: `running` again, under `owner`).

        `decode_schedule` and `settings` are canonical JSON: the batched decode schedule, and the
        router, energy and verifier settings of the run (`flows.run.RunConfig.settings`). `owner`
        is the process running it (`flywheel.liveness.process_token`).
        """
        def work(s: Session) -> RunRow:
            insert_ignore(s, RunRow, {
                "id": run_id, "flow_run_id": flow_run_id, "problem_set": problem_set,
                "problem_set_hash": problem_set_hash, "budget": budget, "run_budget": run_budget,
                "attempts": attempts, "no_graft": no_graft, "model_name": model_name,
                "model_fingerprint": model_fingerprint, "status": "running",
                "decode_schedule": decode_schedule, "settings": settings, "owner": owner})
            row = s.get(RunRow, run_id, populate_existing=True)
            assert row is not None
            if row.status != "running":  # resuming a finished or failed run reopens it
                row.status, row.finished_at = "running", None
            if flow_run_id is not None:
                row.flow_run_id = flow_run_id
            if owner is not None:
                row.owner = owner
            return row
        return self._write(work)

    def interrupt_abandoned_runs(self, is_gone: Callable[[str | None], bool]) -> list[str]:
        """Mark `interrupted` every `running` run whose owner `is_gone`; returns their ids.

        A process killed outright (SIGKILL, power loss) never marks its run; the next run on the
        catalog does. `finished_at` stays empty: when the process died is not known.
        """
        def work(s: Session) -> list[str]:
            running = s.execute(select(RunRow.id, RunRow.owner).where(RunRow.status == "running")).all()
            dead = [run_id for run_id, owner in running if owner is not None and is_gone(owner)]
            if dead:
                s.execute(update(RunRow).where(RunRow.id.in_(dead), RunRow.status == "running")
                          .values(status="interrupted"))
            return dead
        return self._write(work)

    def finish_run(self, run_id: str, status: str = "finished") -> RunRow:
        """Mark a run finished (or "failed") now."""
        def work(s: Session) -> RunRow:
            s.execute(update(RunRow).where(RunRow.id == run_id).values(status=status, finished_at=utcnow()))
            row = s.get(RunRow, run_id, populate_existing=True)
            if row is None:
                raise InputError(f"no run {run_id!r} in the catalog {self.url}")
            return row
        return self._write(work)

    def get_run(self, run_id: str) -> RunRow | None:
        with self._sessions() as s:
            return s.get(RunRow, run_id)

    def recorded_attempt_keys(self, run_id: str) -> set[tuple[str, int]]:
        """(problem_id, attempt_index) pairs already recorded for a run — what a resume skips."""
        with self._sessions() as s:
            rows = s.execute(select(AttemptRow.problem_id, AttemptRow.attempt_index).where(AttemptRow.run_id == run_id))
            return {(p, i) for p, i in rows}

    def attempts_for_run(self, run_id: str) -> list[AttemptRow]:
        with self._sessions() as s:
            stmt = select(AttemptRow).where(AttemptRow.run_id == run_id).order_by(AttemptRow.id)
            return list(s.scalars(stmt))

    def record_attempt(self, record: AttemptRecord, grafts: Sequence[GraftRecord] = ()) -> RecordedAttempt:
        """Record an attempt and its grafts in one transaction; a no-op (created=False) if the
        (run, problem, attempt index) key is already recorded."""
        def work(s: Session) -> RecordedAttempt:
            created = insert_ignore(s, AttemptRow, asdict(record))
            row = s.scalars(select(AttemptRow).where(
                AttemptRow.run_id == record.run_id, AttemptRow.problem_id == record.problem_id,
                AttemptRow.attempt_index == record.attempt_index)).one()
            if created:
                for g in grafts:
                    insert_ignore(s, GraftRow, {**asdict(g), "attempt_id": row.id})
            return RecordedAttempt(attempt=row, created=created)
        return self._write(work)

    def grafts_for_attempt(self, attempt_id: int) -> list[GraftRow]:
        with self._sessions() as s:
            return list(s.scalars(select(GraftRow).where(GraftRow.attempt_id == attempt_id).order_by(GraftRow.id)))
