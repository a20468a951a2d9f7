"""The library facade: store + catalog + router for one library root, and what is done to it.

Deposits (`deposit`, `deposit_many`, `deposit_staged` for a checked bundle: `flywheel.bundle`
imports through it), upkeep (`rebuild` for another model, `scan` for store/catalog/index
disagreements) and grafts (`route`, `load_graft`, `composite`) are methods here; the CLI only
parses, calls and prints. What a deposit or a bundle entry says is judged in one place, `judge`;
artifact bytes are read for a graft in one place, `checked_read`.

Deposit order is what makes a crash harmless: verify the answer, prefill, write the artifact
bytes durably (atomic rename), then commit the catalog row, then index it. A crash before the
commit leaves at most an uncatalogued file (`flywheel library verify` reports it, `--repair`
removes it, a re-deposit reuses it); a row the catalog refuses takes its new file with it; never
a row without its bytes.

Example:
    >>> lib = Library.open(Path("library"))                       # doctest: +SKIP
    >>> lib.deposit(engine, problem, solution="2+3=5", answer="5")  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from flywheel import config
from flywheel.domain import ArtifactSha, Progress
from flywheel.errors import (
    ArtifactError,
    CatalogVersionError,
    DepositRefusedError,
    FlywheelError,
    LibraryError,
)
from flywheel.kv import Graft, capture, graft
from flywheel.kv.artifact import Artifact, artifact_name
from flywheel.kv.checked import CheckedArtifacts
from flywheel.library.deposits import (
    Judgement,
    StagedDeposit,
    check_deposit_text,
    contradicted,
    refuse_unverified,
)
from flywheel.library.staging import STAGING_PREFIX, stale_staging_dirs
from flywheel.problemsets import Problem
from flywheel.store import ArtifactStore as ArtifactStoreBase
from flywheel.tables import BadRow
from flywheel.terminal import printable

if TYPE_CHECKING:
    from flywheel.catalog import ArtifactRow, Catalog, ProblemRow
    from flywheel.domain import RouteDecision
    from flywheel.engine import Engine
    from flywheel.prompts import PromptFormat
    from flywheel.router import Router, RouterConfig
    from flywheel.store import ArtifactStore
    from verifiers import Verdict, VerifierConfig


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


@dataclass(frozen=True)
class DepositedRow:
    """A batch row that was deposited: its line, the id it was given (or ""), and the result."""

    line: int
    given_id: str
    result: DepositResult

    @property
    def filed_under_existing(self) -> bool:
        """The row named an id, but its text was already catalogued under another one."""
        return bool(self.given_id) and self.result.problem_id != self.given_id


@dataclass(frozen=True)
class RefusedRow:
    """A batch row that was not deposited, with the one-line reason."""

    line: int
    reason: str


@dataclass(frozen=True)
class BatchDeposit:
    """What `Library.deposit_many` did, row by row, in input order."""

    deposited: tuple[DepositedRow, ...]
    refused: tuple[RefusedRow, ...]


@dataclass(frozen=True)
class Finding:
    """One disagreement between store, catalog and index; `artifact`/`problem` are "" when none applies."""

    artifact: str
    problem: str
    reason: str


@dataclass(frozen=True)
class ScanReport:
    """What `Library.scan` found: `checked` catalogued artifacts, each disagreement, and notes
    on harmless leftovers (an interrupted import's staging folder) that are not disagreements."""

    checked: int
    findings: tuple[Finding, ...]
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.findings


@dataclass(frozen=True)
class StagedCommit:
    """What `Library.deposit_staged` did: rows newly created, and artifact files already stored."""

    created: int
    already_stored: int


#: Where composite near-graft artifacts live, under the library root (not catalogued deposits).
COMPOSITES_DIR = "composites"


def open_catalog_read_only(url: str) -> Catalog:
    """The catalog at `url`, opened so that nothing is written (SQLite: `mode=ro`, else `immutable`)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import DBAPIError

    from flywheel.catalog import open_catalog

    parsed = make_url(url)
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:" or database.startswith("file:"):
        return open_catalog(url)
    path = Path(database).resolve()
    if not path.is_file():
        raise LibraryError(f"no catalog at {path}", hint="point --library/--db at a library")
    last: Exception | None = None
    for flags in ("mode=ro", "immutable=1"):  # immutable: WAL needs a writable folder for its -shm file
        try:
            return open_catalog(f"sqlite:///file:{path}?{flags}&uri=true")
        except CatalogVersionError:
            raise
        except (DBAPIError, LibraryError) as err:
            last = err
    raise LibraryError(f"cannot open the catalog {path} read-only: {last}")


#: What a library folder holds; a folder holding other things and none of these is not a library.
LIBRARY_ENTRIES = ("catalog.db", "library.id", "artifacts", "index", COMPOSITES_DIR)


def _check_library_folder(root: Path) -> None:
    """Refuse to make a library inside a folder of other files (`--library /`, a home folder, a
    mistyped path to a project): its catalog, artifacts and index would be mixed into them."""
    try:
        if not root.is_dir():
            return
        entries = [p.name for p in root.iterdir()]
    except OSError:
        return   # the folder's permissions are reported where it is written
    except RuntimeError as err:   # a symlink loop
        raise LibraryError(f"library path {printable(str(root), 120)} cannot be resolved: {err}") from None
    if entries and not any(name in LIBRARY_ENTRIES or name.startswith(STAGING_PREFIX) for name in entries):
        raise LibraryError(f"{printable(str(root), 120)} holds other files and no library: a library is not "
                           "made inside it", hint="point --library (FLYWHEEL_LIBRARY) at a new or empty folder, "
                                                  "or at an existing library")


def _owned(root: Path, catalog: Catalog, url: str, *, read_only: bool) -> Catalog:
    """`catalog`, once it is known to be this library's (`flywheel.ownership`); closed if it is not."""
    from flywheel.ownership import bind

    try:
        bind(root, catalog, url, read_only=read_only)
    except BaseException:
        catalog.close()
        raise
    return catalog


class _EmptyStore(ArtifactStoreBase):
    """The store of a read-only library that has no artifacts folder yet: holds nothing."""

    def put(self, data: bytes) -> str:
        raise LibraryError("this library was opened read-only")

    def get(self, sha: str) -> bytes | None:
        return None

    def contains(self, sha: str) -> bool:
        return False

    def remove(self, sha: str) -> bool:
        return False

    def iter_ids(self) -> Iterator[str]:
        return iter(())


class Library:
    """One library root: artifacts under `<root>/artifacts`, catalog at `db_url`, index under `<root>/index`."""

    def __init__(self, root: Path, store: ArtifactStore, catalog: Catalog,
                 router_config: RouterConfig | None = None) -> None:
        self.root = root
        self.store = store
        self.catalog = catalog
        self._router_config = router_config
        self._router: Router | None = None
        self._composites: ArtifactStore | None = None

    @classmethod
    def open(cls, root: Path | None = None, db_url: str | None = None,
             router_config: RouterConfig | None = None, store_url: str | None = None, *,
             read_only: bool = False) -> Library:
        """Open (creating if needed) the library at `root`; migrations run on open.

        With `read_only`, nothing is created or written: a library on a read-only disk or
        folder can still be listed, verified and reported on (its SQLite catalog is opened
        read-only, immutable when SQLite cannot share its WAL there).

        Raises:
            LibraryError: `read_only` and there is no library at `root`.
        """
        from flywheel.catalog import open_catalog
        from flywheel.store import open_store

        root = config.library_root(root)
        url = config.database_url(root, db_url)
        if read_only:
            if not root.is_dir():
                raise LibraryError(f"no library at {root}", hint="point --library (FLYWHEEL_LIBRARY) at a library folder")
            store = (open_store(store_url or root, name_of=artifact_name)
                     if store_url or (root / "artifacts").is_dir() else _EmptyStore())
            return cls(root, store, _owned(root, open_catalog_read_only(url), url, read_only=True), router_config)
        _check_library_folder(root)
        catalog = _owned(root, open_catalog(url), url, read_only=False)   # refused before any folder is made
        try:
            root.mkdir(parents=True, exist_ok=True)
            store = open_store(store_url or root, name_of=artifact_name)
        except BaseException:
            catalog.close()
            raise
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
                deposited_by: str = "curator", unverified: bool = False, index: bool = True,
                verifier: VerifierConfig | None = None, verdict: Verdict | None = None) -> DepositResult:
        """Verify `answer`, prefill the canonical graft prompt, store the artifact, catalogue and index it.

        `verifier` bounds the check (a run passes the settings it verified its own answers under;
        the verifier's defaults when None). `verdict` is the caller's own verdict on this `answer`
        to this `problem` under `verifier` (a pass carries the one it computed): it stands for the
        check when the answer is checked against the very reference the verdict was reached on;
        when the catalogue holds another reference for the problem, the answer is checked again.

        A problem whose text is already in the catalog under another id is filed under that id
        (recognised by its normalized-text hash), so the same problem is never stored twice;
        `DepositResult.problem_id` says which id it went to.

        Raises:
            DepositRefusedError: the verifier contradicts the answer (even with `unverified`: an
                unverified deposit is one that could not be checked, never one that was refuted),
                or cannot check it and `unverified` was not asked for; or the text is longer
                than the model's window.
                A field empty or over the text limits is refused the same way.
        """
        from flywheel.catalog import ArtifactSpec, ProblemSpec, SolutionSpec

        judged = self.judge(problem, solution, answer, engine.prompt_format, verifier=verifier,
                            allow_unverified=unverified, verdict=verdict)
        problem = judged.problem
        status, reason = judged.verdict.status, judged.verdict.reason
        pspec = ProblemSpec.of(problem)
        fp = engine.fingerprint
        existing = self.catalog.find_deposit(pspec, solution, answer, fp.digest)
        if existing is not None and self._current(existing.sha256, engine.prompt_format.tag):
            return DepositResult(existing.problem_id, existing.sha256, False, status, reason,
                                 existing.token_count, unverified)
        # else: new, or this engine's artifact of it is missing or of another template: replaced below
        fmt = engine.prompt_format
        ids = engine.encode_prompt(fmt.graft([(problem.text, solution, answer)]))
        window = engine.context_window
        if window and len(ids) > window:
            raise DepositRefusedError(f"the graft text of {printable(problem.id or problem.text[:40], 80)} is "
                                      f"{len(ids):,} tokens, longer than the model's {window:,}-token window",
                                      hint="shorten the solution")
        cache, last = engine.prefill(ids)
        artifact = capture(engine, cache, ids, last, meta={"problem_id": problem.id, "template": fmt.tag})
        data = artifact.to_bytes()
        fresh = not self.store.contains(artifact.sha256)
        sha = self.store.put(data)                     # durable before the row exists
        try:
            row = self.catalog.deposit(
                pspec,
                SolutionSpec(text=solution, answer=answer, verdict_status=status, verdict_reason=reason,
                             deposited_by=deposited_by, unverified=unverified),
                ArtifactSpec(sha256=sha, fingerprint_digest=fp.digest, fingerprint_json=json.dumps(fp.to_dict()),
                             model_name=fp.model, token_count=len(ids), size_bytes=len(data),
                             logits_sha256=artifact.header.logits_sha256),
                replacing=existing.sha256 if existing is not None else None)
        except BaseException:
            if fresh:   # the row was refused (or never written): its file must not outlive it
                self._remove_unnamed(sha)
            raise
        if not self.store.contains(sha):   # removed as unnamed (`library verify --repair`) before the row landed
            self.store.put(data)
        if existing is not None and existing.sha256 != sha:
            self._remove_unnamed(existing.sha256)   # replaced: removed only now that its successor is stored
        if index and not unverified:
            # sync, not add: it also indexes what an interrupted deposit committed but never indexed.
            self.router.sync(fp.digest)
        return DepositResult(row.problem.id, row.artifact.sha256, row.created, status, reason, len(ids), unverified)

    def judge(self, problem: Problem, solution: str, answer: str, prompt_format: PromptFormat, *,
              verifier: VerifierConfig | None = None, allow_unverified: bool = False, verdict: Verdict | None = None,
              file_as: Callable[[Problem], Problem] | None = None) -> Judgement:
        """The one judgement of what a deposit or a bundle entry says, before anything is written.

        The text rules (`check_deposit_text`: sizes, NUL, empty fields, texts that would break
        `prompt_format`'s graft), then the problem as filed (`file_as`, default `filed_as`; an
        import also files within its bundle) with its catalogued reference (`checked_reference`),
        then the verifier's verdict on `answer` under `verifier` (its defaults when None). A
        carried `verdict` stands when the answer is checked against the very reference it was
        reached on. Contradicted answers are refused; unverifiable ones unless `allow_unverified`.

        Raises:
            DepositRefusedError: any rule, reference or verdict refused it (in the same words for both).

        Example:
            >>> lib.judge(problem, "2+3=5", "5", engine.prompt_format).verified   # doctest: +SKIP
            True
        """
        check_deposit_text(problem, solution, answer, prompt_format)
        filed = self.checked_reference((file_as or self.filed_as)(problem), verifier)
        if verdict is None or filed.reference != problem.reference:
            verdict = filed.check(answer, config=verifier)
        refuse_unverified(filed, answer, verdict, allow_unverified=allow_unverified)
        return Judgement(filed, verdict)

    def filed_as(self, problem: Problem) -> Problem:
        """`problem` with the id it is (or would be) catalogued under.

        Its own id when that id is already catalogued (or none is taken by the same text);
        otherwise the id of the oldest catalogued problem with the same normalized text.
        """
        if problem.id and self.catalog.get_problem(problem.id) is not None:
            return problem
        same = self.catalog.problems_by_text(problem.text)
        return replace(problem, id=same[0].id) if same else problem

    def checked_reference(self, problem: Problem, verifier: VerifierConfig | None = None) -> Problem:
        """`problem` with the reference its answers are checked against: the catalogue's, when it has one.

        The one check every path that sets a problem's reference goes through (a deposit, an
        import, a run or study over a problem file: `catalog_problems`). The catalogued problem
        is the row under `problem.id` and every row with the same normalized text. An answer is
        checked against its catalogued reference, never against one brought along: another
        reference for a catalogued problem is refused. A reference for a problem catalogued
        without one is accepted only if no stored verified solution contradicts it.

        Raises:
            DepositRefusedError: the references differ, or the new one contradicts a stored answer.
        """
        import verifiers

        same = self._same_problem(problem)
        if not same:
            return problem   # a new problem; or the id holds another text, which the catalog refuses
        label = printable(problem.id or same[0].id, 80)
        given = (problem.reference or "").strip()
        stored_row = next((row for row in same if (row.reference or "").strip()), None)
        if stored_row is not None:
            stored = (stored_row.reference or "").strip()
            if given and given != stored and not verifiers.check(candidate=given, reference=stored,
                                                                 config=verifier).equivalent:
                raise DepositRefusedError(
                    f"problem {label!r} is catalogued with reference {printable(stored, 60)!r}, "
                    f"not {printable(given, 60)!r}",
                    hint="leave the reference out (the catalogued one is used), or file the problem under another id")
            return replace(problem, reference=stored_row.reference)
        if given:
            for row in same:
                for sol in self.catalog.solutions_of(row.id):
                    if not sol.unverified and contradicted(
                            verifiers.check(candidate=sol.answer, reference=given, config=verifier).status):
                        raise DepositRefusedError(
                            f"reference {printable(given, 60)!r} for problem {label!r} contradicts its stored "
                            f"verified answer {printable(sol.answer, 60)!r}",
                            hint="check the reference; the stored solutions were verified without one")
        return problem

    def _same_problem(self, problem: Problem) -> list[ProblemRow]:
        """The catalogued rows of `problem`: its id's row (when it holds the same text) first, then
        every other row with the same normalized text, oldest first."""
        from flywheel.catalog import text_hash

        digest = text_hash(problem.text)
        own = self.catalog.get_problem(problem.id) if problem.id else None
        if own is not None and own.text_hash != digest:
            return []
        rows = [own] if own is not None else []
        return rows + [row for row in self.catalog.problems_by_text(problem.text) if own is None or row.id != own.id]

    def catalog_problems(self, problems: Sequence[Problem], verifier: VerifierConfig | None = None) -> None:
        """Catalogue a problem set (a run's or a study's), each reference through `checked_reference`.

        Raises:
            InputError: a problem's reference contradicts the catalogue (another reference, or a
                stored verified answer); nothing of the set is catalogued.
        """
        from flywheel.catalog import ProblemSpec
        from flywheel.errors import InputError

        for problem in problems:
            if (problem.reference or "").strip():
                try:
                    self.checked_reference(problem, verifier)
                except DepositRefusedError as err:
                    raise InputError(f"{err.message} (problem set row {printable(problem.id, 80)!r})",
                                     hint="correct the reference in the problem set, or give the problem "
                                          "another id and text") from None
        self.catalog.upsert_problems(ProblemSpec.of(p) for p in problems)

    def deposit_many(self, engine: Engine, rows: Sequence[tuple[int, Mapping[str, str]] | BadRow], *,
                     source: str = "curator", deposited_by: str = "curator", unverified: bool = False,
                     verifier: VerifierConfig | None = None, progress: Progress | None = None) -> BatchDeposit:
        """Deposit table rows one by one; a bad row is refused with its line and the rest go on.

        Args:
            engine: the model that prefills each graft.
            rows: `(line, row)` pairs with keys problem, solution, answer (id and reference optional),
                or `BadRow`s, as `flywheel.tables.read_table` yields them.
            source: the problem set name recorded with each problem (e.g. the file's name).
            deposited_by: recorded with each solution.
            unverified: as for `deposit`.
            verifier: the verifier settings each answer is checked under, as for `deposit`.
            progress: called as `progress(done, total, problem id)` (e.g. to draw a bar).
        Returns:
            the deposited rows (with each `DepositResult`) and the refused ones, by line.

        Example:
            >>> lib.deposit_many(engine, list(read_table(path, required=REQ))).refused   # doctest: +SKIP
            (RefusedRow(line=2, reason='line 2 is not valid JSON ...'),)
        """
        deposited: list[DepositedRow] = []
        refused: list[RefusedRow] = []
        if progress:
            progress(0, len(rows), "")
        for done, item in enumerate(rows, start=1):
            if isinstance(item, BadRow):
                refused.append(RefusedRow(item.line, item.reason))
            else:
                line, row = item
                problem = Problem(id=row.get("id", "").strip(), text=row["problem"],
                                  reference=row.get("reference") or None, source=source)
                try:
                    result = self.deposit(engine, problem, row["solution"], row["answer"],
                                          deposited_by=deposited_by, unverified=unverified, verifier=verifier)
                except FlywheelError as err:
                    refused.append(RefusedRow(line, err.message))
                else:
                    deposited.append(DepositedRow(line, problem.id, result))
            if progress:
                progress(done, len(rows), "" if isinstance(item, BadRow) else problem.id)
        return BatchDeposit(tuple(deposited), tuple(refused))

    def deposit_staged(self, entries: Sequence[StagedDeposit], *, fingerprint: str) -> StagedCommit:
        """Commit checked deposits all or nothing: store their files, catalogue every row in one
        transaction (on failure the files written here are removed again), then index.

        Args:
            entries: deposits that passed every check (see `flywheel.bundle`), artifacts staged on disk.
            fingerprint: the digest of the engine whose index receives the routable entries.
        Returns:
            how many rows were created, and how many artifact files the store already held.
        """
        written: list[str] = []
        present = 0
        try:
            for item in entries:
                if self.store.contains(item.artifact.sha256):
                    present += 1
                else:
                    self.store.put(item.staged.read_bytes())
                    written.append(item.artifact.sha256)
            rows = self.catalog.deposit_many([(e.problem, e.solution, e.artifact) for e in entries])
        except BaseException:
            for sha in written:
                self.store.remove(sha)
            raise
        if any(e.routable for e in entries):
            self.router.sync(fingerprint)
        return StagedCommit(sum(r.created for r in rows), present)

    # --- upkeep ----------------------------------------------------------------------------------

    def rebuild(self, engine: Engine, *, progress: Progress | None = None) -> int:
        """Re-prefill every stored solution for `engine`'s model, then rebuild its index.

        Each solution is deposited again for this engine (`deposit`): its artifact of this
        fingerprint is kept when current, replaced when it was prefilled through an older graft
        template (or its file is gone), made when there is none. Which model's row comes first
        does not matter: repeats are keyed by solution, and each deposit looks only at this
        engine's artifact of it. An old artifact is removed only after its replacement is stored.

        Artifacts of other fingerprints stay (they are never grafted by this engine). Returns
        how many solutions were deposited again (0: the library holds none).
        """
        rows = self.catalog.list_artifacts(include_unverified=True)
        solution_ids = list(dict.fromkeys(a.solution_id for a in rows))   # each solution once, oldest first
        done = 0
        if progress:
            progress(0, len(solution_ids), "")
        for n, solution_id in enumerate(solution_ids, start=1):
            sol = self.catalog.get_solution(solution_id)
            prob = self.catalog.get_problem(sol.problem_id) if sol is not None else None
            if sol is not None and prob is not None:
                p = Problem(id=prob.id, text=prob.text, reference=prob.reference, source=prob.source or "")
                self.deposit(engine, p, sol.text, sol.answer, deposited_by=sol.deposited_by,
                             unverified=sol.unverified, index=False)
                done += 1
            if progress:
                progress(n, len(solution_ids), prob.id if prob is not None else "")
        self.router.rebuild(self.catalog, engine.fingerprint.digest)
        return done

    def repair(self) -> list[str]:
        """Remove every stored artifact file that no catalog row names (a deposit interrupted between
        its file and its row, or refused by an older version after writing its file); returns their ids.

        A deposit running meanwhile is safe: it stores its file again if it finds it gone once its
        row is committed.
        """
        removed = []
        for sha in self.catalog.orphans(self.store.iter_ids()):
            if self._remove_unnamed(sha):
                removed.append(sha)
        return removed

    def scan(self, *, progress: Progress | None = None) -> ScanReport:
        """Re-hash every catalogued artifact and compare catalog, store and index; writes nothing.

        Finds missing or corrupt files, files without a catalog row, an unreadable index, and
        index entries the catalog lacks or catalogued artifacts the index lacks (an interrupted
        deposit: the next deposit or run repairs the index). A read-only library can be scanned.
        """
        damage = self.catalog.damage()
        if damage:   # nothing read from a damaged file can be trusted (or read at all): say so, and stop
            more = f" (and {len(damage) - 1} more)" if len(damage) > 1 else ""
            return ScanReport(0, (Finding("", "", f"the catalog database is damaged: {printable(damage[0], 160)}"
                                                  f"{more}; restore it from a backup, or import an export into a "
                                                  "new library"),))
        found: list[Finding] = []
        rows = self.catalog.list_artifacts(include_unverified=True)
        if progress:
            progress(0, len(rows), "")
        for n, a in enumerate(rows, start=1):
            try:
                if self.store.get(a.sha256) is None:
                    found.append(Finding(a.sha256, a.problem_id, "file missing"))
            except ArtifactError as err:
                found.append(Finding(a.sha256, a.problem_id, err.message))
            if progress:
                progress(n, len(rows), a.problem_id)
        found.extend(self._contradicted_answers(rows))
        for sha in self.catalog.orphans(self.store.iter_ids()):
            found.append(Finding(sha, "", "file has no catalog row (interrupted deposit?): "
                                          "`flywheel library verify --repair` removes it"))
        problem_of = {a.sha256: a.problem_id for a in rows}
        for check in (self.router.check(fp) for fp in sorted({a.fingerprint_digest for a in rows})):
            if check.unreadable:
                found.append(Finding("", "", f"index for fingerprint {check.fingerprint[:12]} "
                                     "is unreadable (rebuilt by the next deposit or run)"))
                continue
            for sha in check.missing:
                found.append(Finding(sha, problem_of.get(sha, ""), "catalogued but not in the index (interrupted "
                                     "deposit; the next deposit or run repairs it)"))
            for sha in check.stale:
                found.append(Finding(sha, "", "in the index but not routable in the catalog "
                                     "(the next deposit or run repairs it)"))
        notes = tuple(f"{d.name} is the staging folder of an interrupted import (the next import removes it)"
                      for d in stale_staging_dirs(self.root))
        return ScanReport(len(rows), tuple(found), notes)

    def _contradicted_answers(self, rows: Sequence[ArtifactRow]) -> list[Finding]:
        """Verified solutions whose answer the problem's catalogued reference contradicts (an older
        version checked a second deposit against its own reference, or filed it under a look-alike)."""
        import verifiers

        found: list[Finding] = []
        verdicts: dict[int, bool] = {}
        for a in rows:
            if a.solution_id not in verdicts:
                sol, prob = self.catalog.get_solution(a.solution_id), self.catalog.get_problem(a.problem_id)
                verdicts[a.solution_id] = bool(
                    sol is not None and prob is not None and not sol.unverified and (prob.reference or "").strip()
                    and contradicted(verifiers.check(candidate=sol.answer,
                                                     reference=prob.reference or "").status))
                if verdicts[a.solution_id]:
                    assert sol is not None and prob is not None
                    found.append(Finding(a.sha256, a.problem_id,
                                         f"verified answer {printable(sol.answer, 40)!r} is contradicted by the "
                                         f"problem's reference {printable(prob.reference, 40)!r}"))
            elif verdicts[a.solution_id]:
                found.append(Finding(a.sha256, a.problem_id, "its verified answer is contradicted by the "
                                     "problem's reference"))
        return found

    # --- graft -----------------------------------------------------------------------------------

    def load_graft(self, engine: Engine, sha256: str) -> Graft:
        """Graft an artifact read through `checked_read` for `engine` and its prompt format; raises `ArtifactError` if refused."""
        return graft(engine, self.checked_read(sha256, engine=engine, template=engine.prompt_format.tag))

    def load_raw_graft(self, engine: Engine, sha256: str) -> Graft:
        """`load_graft` without the template check, for artifacts of arbitrary text (the restore benches'
        prefixes); still hash- and fingerprint-checked. Attempts use `load_graft`."""
        return graft(engine, self.checked_read(sha256, engine=engine))

    def checked_read(self, sha256: str, *, engine: Engine | None = None, template: str | None = None) -> Artifact:
        """The artifact `sha256` (a deposit's, else a composite's), hashed once and checked before any
        tensor reaches an engine: see `flywheel.kv.checked.checked_artifact`.

        Raises:
            ArtifactError: missing, corrupt, truncated or substituted bytes, another setup or template.
        """
        stores = (self.store, self.composites) if (self.root / COMPOSITES_DIR).is_dir() else (self.store,)
        return CheckedArtifacts(*stores).read(sha256, engine=engine, template=template)

    def _current(self, sha256: str, template: str) -> bool:
        """Whether a stored deposit artifact is whole and was prefilled through `template` (the engine's format's)."""
        try:
            CheckedArtifacts(self.store).read(sha256, template=template)
        except ArtifactError:
            return False
        return True

    def _remove_unnamed(self, sha256: str) -> bool:
        """Remove the stored file `sha256` unless a catalog row names it; True if it was removed."""
        return not self.catalog.names_artifact(sha256) and self.store.remove(sha256)

    def route(self, engine: Engine, problem_text: str, *, members: int | None = None) -> RouteDecision:
        """Route a problem among artifacts of `engine`'s fingerprint (exact, near or none).

        A near route with several members grafts their composite (`composite`), built once.
        """
        decision = self.router.route(problem_text, engine.fingerprint.digest, members=members)
        if decision.kind == "near" and len(decision.members) > 1:
            decision = replace(decision, artifact_sha=self.composite(engine, decision.members))
        return decision

    # --- composite near grafts --------------------------------------------------------------------

    @property
    def composites(self) -> ArtifactStore:
        """Composite artifacts (several verified solutions prefilled together), apart from deposits."""
        if self._composites is None:
            from flywheel.store import LocalStore

            self._composites = LocalStore(self.root / COMPOSITES_DIR / "artifacts", name_of=artifact_name)
        return self._composites

    def composite(self, engine: Engine, members: Sequence[ArtifactSha]) -> ArtifactSha:
        """The artifact of `members`' worked solutions prefilled together; computed once, then reused.

        Members are ordered by artifact id (a fixed order: the same set gives the same bytes
        whichever problem routed to it) and the artifact is content-addressed like any other;
        `<root>/composites/keys/<key>` maps the key (members, template, fingerprint) to it.
        Every member must be a catalogued artifact of this engine's fingerprint.
        """
        import hashlib

        from flywheel.engine import canonical_json
        from flywheel.fsutil import atomic_write_bytes

        ordered = sorted(set(members))
        fp = engine.fingerprint.digest
        fmt = engine.prompt_format
        key = hashlib.sha256(canonical_json({"members": ordered, "template": fmt.tag,
                                             "fingerprint": fp}).encode()).hexdigest()
        key_file = self.root / COMPOSITES_DIR / "keys" / key
        if key_file.is_file():
            sha = key_file.read_text().strip()
            if self.composites.contains(sha):
                return ArtifactSha(sha)
        examples = []
        for member in ordered:
            art = self.catalog.get_artifact(member)
            sol = self.catalog.get_solution(art.solution_id)
            prob = self.catalog.get_problem(art.problem_id)
            if art.fingerprint_digest != fp or sol is None or prob is None:
                raise LibraryError(f"composite member {member[:12]} is not a catalogued artifact of this engine",
                                   hint="flywheel library verify; flywheel library rebuild")
            examples.append((prob.text, sol.text, sol.answer))
        ids = engine.encode_prompt(fmt.graft(examples))
        cache, last = engine.prefill(ids)
        artifact = capture(engine, cache, ids, last, meta={"members": ",".join(ordered), "template": fmt.tag})
        sha = self.composites.put(artifact.to_bytes())
        key_file.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(key_file, sha.encode())
        return ArtifactSha(sha)
