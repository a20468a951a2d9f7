"""The Library's batch and upkeep methods, called directly (the CLI is a thin shell over them).

Each test uses the tiny seeded Gemma-style model and a real SQLite catalog in `tmp_path`.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import verifiers
from flywheel.bundle import export_bundle, import_bundle
from flywheel.catalog import ArtifactSpec, ProblemSpec, SolutionSpec
from flywheel.engine import Engine
from flywheel.errors import DepositRefusedError
from flywheel.library import Finding, Library, RefusedRow, StagedDeposit
from flywheel.library.staging import remove_stale_staging, staging_dir, stale_staging_dirs
from flywheel.problemsets import Problem
from flywheel.store import LocalStore
from flywheel.tables import BadRow
from tests.helpers import index_size
from verifiers import Verdict

TWO = Problem(id="two", text="What is 1+1?", reference="2")
SIX = Problem(id="six", text="What is 2*3?", reference="6")


@pytest.fixture
def lib(tmp_path: Path) -> Iterator[Library]:
    with Library.open(tmp_path / "lib") as opened:
        yield opened


def row(pid: str, problem: str, solution: str, answer: str, reference: str = "") -> dict[str, str]:
    return {"id": pid, "problem": problem, "solution": solution, "answer": answer, "reference": reference}


class Ticks:
    """A progress callback that records its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def __call__(self, done: int, total: int | None, note: str) -> None:
        self.calls.append((done, total))


# --- deposit_many --------------------------------------------------------------------------------


def test_deposit_many_deposits_good_rows_and_refuses_bad_ones_by_line(lib: Library, tiny_gemma: Engine) -> None:
    ticks = Ticks()
    batch = lib.deposit_many(tiny_gemma, [
        (1, row("a", "What is 1+1?", "1+1=2", "2", "2")),
        BadRow(2, "line 2 is not valid JSON"),
        (3, row("c", "What is 2*3?", "2*3=6", "7", "6")),               # contradicted by its reference
        (4, row("d", "What is 3*3?", "3*3=9", "9", "9")),
        (5, row("a2", "  What is\n1+1? ", "1+1 is 2", "2", "2")),      # the same problem under a new id
    ], source="curated.jsonl", deposited_by="curator:test", progress=ticks)
    assert [(d.line, d.result.problem_id, d.result.created) for d in batch.deposited] == [
        (1, "a", True), (4, "d", True), (5, "a", True)]
    assert [d.filed_under_existing for d in batch.deposited] == [False, False, True]
    assert batch.refused[0] == RefusedRow(2, "line 2 is not valid JSON")
    assert batch.refused[1].line == 3 and "not_equivalent" in batch.refused[1].reason
    assert ticks.calls == [(0, 5), (1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]
    assert sorted(a.problem_id for a in lib.catalog.list_artifacts()) == ["a", "a", "d"]
    problem = lib.catalog.get_problem("d")
    assert problem is not None and problem.source == "curated.jsonl"
    sol = lib.catalog.get_solution(lib.catalog.list_artifacts()[0].solution_id)
    assert sol is not None and sol.deposited_by == "curator:test"


def test_deposit_many_is_idempotent_and_marks_unverified_rows(lib: Library, tiny_gemma: Engine) -> None:
    rows = [(1, row("sky", "Name the colour of the sky.", "It is blue.", "blue"))]
    assert lib.deposit_many(tiny_gemma, rows).refused[0].line == 1          # cannot be checked: refused
    first = lib.deposit_many(tiny_gemma, rows, unverified=True).deposited[0].result
    again = lib.deposit_many(tiny_gemma, rows, unverified=True).deposited[0].result
    assert first.unverified and first.created and not again.created
    assert first.artifact_sha256 == again.artifact_sha256
    assert lib.catalog.list_artifacts() == [] and len(lib.catalog.list_artifacts(include_unverified=True)) == 1


def test_deposit_checks_the_answer_with_the_problems_own_verdict(lib: Library, tiny_gemma: Engine) -> None:
    by_reference = lib.deposit(tiny_gemma, TWO, "1+1=2", "2")
    assert by_reference.verdict_status == "equivalent" == TWO.check("2").status
    by_substitution = lib.deposit(tiny_gemma, Problem(id="lin", text="Solve for x: 2x+3=7"), "x=2", "2")
    assert by_substitution.verdict_status == "equivalent"
    with pytest.raises(DepositRefusedError, match="not_equivalent"):
        lib.deposit(tiny_gemma, SIX, "2*3=7", "7")


# --- rebuild -------------------------------------------------------------------------------------


def test_rebuild_re_prefills_every_solution_for_another_model(lib: Library, tiny_gemma: Engine,
                                                             tiny_llama: Engine) -> None:
    lib.deposit(tiny_gemma, TWO, "1+1=2", "2")
    lib.deposit(tiny_gemma, SIX, "2*3=6", "6")
    lib.deposit(tiny_gemma, Problem(id="sky", text="Name the colour of the sky."), "It is blue.", "blue",
                unverified=True)
    ticks = Ticks()
    assert lib.rebuild(tiny_llama, progress=ticks) == 3
    assert ticks.calls[0] == (0, 3) and ticks.calls[-1] == (3, 3)
    llama = tiny_llama.fingerprint.digest
    rebuilt = lib.catalog.list_artifacts(fingerprint_digest=llama, include_unverified=True)
    assert sorted(a.problem_id for a in rebuilt) == ["six", "sky", "two"]
    assert len(lib.catalog.list_artifacts(fingerprint_digest=tiny_gemma.fingerprint.digest,
                                          include_unverified=True)) == 3          # the old ones stay
    assert lib.router.check(llama).ok and index_size(lib.router, llama) == 2             # unverified: not routed
    assert lib.route(tiny_llama, TWO.text).kind == "exact"
    assert lib.scan().ok


def test_rebuild_of_an_empty_library_does_nothing(lib: Library, tiny_gemma: Engine) -> None:
    assert lib.rebuild(tiny_gemma) == 0
    assert lib.catalog.list_artifacts(include_unverified=True) == []


# --- scan ----------------------------------------------------------------------------------------


def test_scan_of_a_sound_library_finds_nothing(lib: Library, tiny_gemma: Engine) -> None:
    lib.deposit(tiny_gemma, TWO, "1+1=2", "2")
    ticks = Ticks()
    report = lib.scan(progress=ticks)
    assert report.ok and report.checked == 1 and report.findings == () and report.notes == ()
    assert ticks.calls == [(0, 1), (1, 1)]


def test_scan_names_corrupt_missing_orphan_and_unindexed_artifacts(lib: Library, tiny_gemma: Engine,
                                                                   tmp_path: Path) -> None:
    corrupt = lib.deposit(tiny_gemma, TWO, "1+1=2", "2").artifact_sha256
    missing = lib.deposit(tiny_gemma, SIX, "2*3=6", "6").artifact_sha256
    unindexed = lib.deposit(tiny_gemma, Problem(id="nine", text="What is 3*3?", reference="9"), "3*3=9", "9",
                            index=False).artifact_sha256
    assert isinstance(lib.store, LocalStore)
    files = {sha: lib.store.path_for(sha) for sha in (corrupt, missing, unindexed)}
    data = bytearray(files[corrupt].read_bytes())
    data[-10] ^= 0xFF
    files[corrupt].write_bytes(bytes(data))
    files[missing].unlink()
    with Library.open(tmp_path / "other") as other:                    # sound bytes no row here vouches for
        elsewhere = other.deposit(tiny_gemma, Problem(id="x", text="What is 5+5?", reference="10"), "5+5=10", "10")
        orphan = lib.store.put(other.store.get(elsewhere.artifact_sha256) or b"")
    report = lib.scan()
    assert not report.ok and report.checked == 3
    by_artifact = {f.artifact: f for f in report.findings}
    assert set(by_artifact) == {corrupt, missing, orphan, unindexed}
    assert by_artifact[corrupt].problem == "two" and "hashes to" in by_artifact[corrupt].reason
    assert by_artifact[missing] == Finding(missing, "six", "file missing")
    assert by_artifact[orphan].problem == "" and "no catalog row" in by_artifact[orphan].reason
    assert by_artifact[unindexed].problem == "nine" and "not in the index" in by_artifact[unindexed].reason


def test_scan_notes_a_stale_import_folder_without_calling_it_a_disagreement(lib: Library, tiny_gemma: Engine) -> None:
    lib.deposit(tiny_gemma, TWO, "1+1=2", "2")
    stale = lib.root / f".import-{dead_pid()}-abc"
    stale.mkdir()
    report = lib.scan()
    assert report.ok and len(report.notes) == 1 and stale.name in report.notes[0]


# --- deposit_staged and import_bundle -----------------------------------------------------------


def staged_from(source: Library, sha: str, folder: Path) -> StagedDeposit:
    """A `StagedDeposit` of one of `source`'s artifacts, its bytes copied into `folder`."""
    art = source.catalog.get_artifact(sha)
    sol, prob = source.catalog.get_solution(art.solution_id), source.catalog.get_problem(art.problem_id)
    assert sol is not None and prob is not None
    folder.mkdir(exist_ok=True)
    staged = folder / f"{sha}.kv"
    staged.write_bytes(source.store.get(sha) or b"")
    return StagedDeposit(
        staged, ProblemSpec(text=prob.text, id=prob.id, reference=prob.reference),
        SolutionSpec(text=sol.text, answer=sol.answer, verdict_status=sol.verdict_status,
                     deposited_by="import", unverified=sol.unverified),
        ArtifactSpec(sha256=art.sha256, fingerprint_digest=art.fingerprint_digest,
                     fingerprint_json=art.fingerprint_json, model_name=art.model_name,
                     token_count=art.token_count, size_bytes=art.size_bytes, logits_sha256=art.logits_sha256),
        routable=not sol.unverified)


def test_deposit_staged_commits_files_rows_and_index_together(tmp_path: Path, tiny_gemma: Engine) -> None:
    fp = tiny_gemma.fingerprint.digest
    with Library.open(tmp_path / "source") as source, Library.open(tmp_path / "target") as target:
        shas = [source.deposit(tiny_gemma, p, s, a).artifact_sha256 for p, s, a in ((TWO, "1+1=2", "2"),
                                                                                    (SIX, "2*3=6", "6"))]
        entries = [staged_from(source, sha, tmp_path / "staging") for sha in shas]
        target.store.put(entries[0].staged.read_bytes())               # one file is already there
        done = target.deposit_staged(entries, fingerprint=fp)
        assert (done.created, done.already_stored) == (2, 1)
        assert {a.sha256 for a in target.catalog.list_artifacts()} == set(shas)
        assert all(target.store.contains(sha) for sha in shas)
        assert target.router.check(fp).ok and index_size(target.router, fp) == 2
        again = target.deposit_staged(entries, fingerprint=fp)
        assert (again.created, again.already_stored) == (0, 2)


def test_deposit_staged_refused_in_the_catalog_removes_the_files_it_wrote(tmp_path: Path,
                                                                          tiny_gemma: Engine) -> None:
    with Library.open(tmp_path / "source") as source, Library.open(tmp_path / "target") as target:
        shas = [source.deposit(tiny_gemma, p, s, a).artifact_sha256 for p, s, a in ((TWO, "1+1=2", "2"),
                                                                                    (SIX, "2*3=6", "6"))]
        good, bad = (staged_from(source, sha, tmp_path / "staging") for sha in shas)
        present = target.store.put(good.staged.read_bytes())           # already stored: must stay
        refuted = StagedDeposit(bad.staged, bad.problem,
                                SolutionSpec(text="2*3=7", answer="7", verdict_status="not_equivalent",
                                             deposited_by="import"), bad.artifact, routable=True)
        with pytest.raises(DepositRefusedError):
            target.deposit_staged([good, refuted], fingerprint=tiny_gemma.fingerprint.digest)
        assert target.store.contains(present) and not target.store.contains(bad.artifact.sha256)
        assert target.catalog.list_artifacts(include_unverified=True) == []


def test_import_bundle_through_the_library_round_trips(tmp_path: Path, tiny_gemma: Engine) -> None:
    bundle = tmp_path / "bundle.tar"
    with Library.open(tmp_path / "source") as source:
        source.deposit(tiny_gemma, TWO, "1+1=2", "2")
        source.deposit(tiny_gemma, Problem(id="sky", text="Name the colour of the sky."), "It is blue.", "blue",
                       unverified=True)
        assert export_bundle(source, bundle) == 2
        sent = sorted(p.read_bytes() for p in (source.root / "artifacts").rglob("*") if p.is_file())
    with Library.open(tmp_path / "target") as target:
        report = import_bundle(target, bundle, tiny_gemma, allow_unverified=True)
        assert (report.imported, report.unverified, report.present, report.skipped) == (2, 1, 0, [])
        assert sorted(p.read_bytes() for p in (target.root / "artifacts").rglob("*") if p.is_file()) == sent
        assert target.route(tiny_gemma, TWO.text).kind == "exact"
        assert target.scan().ok and stale_staging_dirs(target.root) == []
        assert not list(target.root.glob(".import-*"))                     # its staging folder is gone
        assert import_bundle(target, bundle, tiny_gemma, allow_unverified=True).present == 2


# --- staging folders of interrupted imports ------------------------------------------------------


def dead_pid() -> int:
    """The id of a process that has exited (and been reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_import_removes_a_killed_imports_staging_folder_but_not_a_live_ones(tmp_path: Path,
                                                                            tiny_gemma: Engine) -> None:
    bundle = tmp_path / "bundle.tar"
    with Library.open(tmp_path / "source") as source:
        source.deposit(tiny_gemma, TWO, "1+1=2", "2")
        export_bundle(source, bundle)
    with Library.open(tmp_path / "target") as target:
        killed = target.root / f".import-{dead_pid()}-k1ll3d"          # kill -9 before it took its lock
        killed.mkdir()
        (killed / "0123.kv").write_bytes(b"half an artifact")
        reused = target.root / f".import-{os.getpid()}-r3us3d"          # lock free, its pid taken since
        reused.mkdir()
        (reused / ".lock").touch()
        old = time.time() - 3600
        os.utime(reused, (old, old))
        with staging_dir(target.root) as live:                         # an import running right now
            (live / "staged.kv").write_bytes(b"in progress")
            assert stale_staging_dirs(target.root) == sorted([killed, reused])
            report = import_bundle(target, bundle, tiny_gemma)
            assert report.imported == 1
            assert not killed.exists() and not reused.exists()
            assert (live / "staged.kv").read_bytes() == b"in progress"
        assert not live.exists()                                       # removed when its import ends
        assert [p.name for p in target.root.glob(".import-*")] == []


def test_a_staging_folder_held_by_its_lock_is_never_stale(tmp_path: Path) -> None:
    folder = tmp_path / f".import-{dead_pid()}-h3ld"                   # even if the named pid is gone
    folder.mkdir()
    with open(folder / ".lock", "wb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert remove_stale_staging(tmp_path) == [] and folder.is_dir()
    assert remove_stale_staging(tmp_path) == [folder] and not folder.exists()


# --- deposit under a run's verifier settings ------------------------------------------------------


def test_deposit_checks_under_the_verifier_settings_it_is_given(lib: Library, tiny_gemma: Engine) -> None:
    from verifiers import VerifierConfig

    third = Problem(id="third", text="What is 1/3 to three places?", reference="1/3")
    with pytest.raises(DepositRefusedError, match="not verified"):   # exact by default: 0.333 is not 1/3
        lib.deposit(tiny_gemma, third, "1/3 = 0.333", "0.333")
    assert lib.catalog.list_artifacts(include_unverified=True) == []
    dep = lib.deposit(tiny_gemma, third, "1/3 = 0.333", "0.333", verifier=VerifierConfig(tolerance=1e-2))
    assert dep.created and dep.verdict_status == "equivalent"
    assert [a.sha256 for a in lib.catalog.list_artifacts()] == [dep.artifact_sha256]


# --- a carried verdict ---------------------------------------------------------------------------


class CountedChecks:
    """`verifiers.check`, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.real = verifiers.check

    def __call__(self, **kwargs: Any) -> Verdict:
        self.calls += 1
        return self.real(**kwargs)


def test_a_carried_verdict_stands_for_the_check(lib: Library, tiny_gemma: Engine,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    own = TWO.check("2")                                     # what a pass computed for its attempt
    counted = CountedChecks()
    monkeypatch.setattr(verifiers, "check", counted)
    dep = lib.deposit(tiny_gemma, TWO, "1+1=2", "2", deposited_by="run:test", verdict=own)
    assert dep.created and dep.verdict_status == "equivalent"
    assert counted.calls == 0                                # one verdict per attempt: no second check


def test_a_carried_verdict_is_checked_again_against_another_catalogued_reference(
        lib: Library, tiny_gemma: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    lib.deposit(tiny_gemma, SIX, "2*3=6", "6")               # catalogued with reference "6"
    bare = Problem(id="six", text=SIX.text)                  # the same problem, without a reference
    claimed = Verdict("equivalent", "the caller says so")    # reached without the catalogued reference
    counted = CountedChecks()
    monkeypatch.setattr(verifiers, "check", counted)
    with pytest.raises(DepositRefusedError, match="not_equivalent"):
        lib.deposit(tiny_gemma, bare, "2*3=7", "7", verdict=claimed)
    assert counted.calls == 1                                # checked against the catalogued "6"
    assert [s.answer for s in lib.catalog.solutions_of("six")] == ["6"]
