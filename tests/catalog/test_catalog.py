"""Catalog operations the flows and the deposit CLI rely on: idempotent, verified-only, resumable."""

from __future__ import annotations

from dataclasses import replace

import pytest
from catalog_fixtures import FP, OTHER_FP, artifact, problem, solution
from sqlalchemy import func, select

from flywheel.catalog import AttemptRecord, Catalog, GraftRecord, ProblemSpec, SolutionRow
from flywheel.catalog.models import ArtifactRow
from flywheel.errors import ArtifactNotFoundError, CatalogConflictError, DepositRefusedError, InputError


def count(cat: Catalog, model: type) -> int:
    with cat.session() as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


def test_deposit_records_problem_solution_and_artifact(catalog: Catalog) -> None:
    d = catalog.deposit(problem(1), solution(1), artifact("a1"))
    assert d.created
    assert d.problem.id == "demo-1" and d.problem.reference == "2" and d.problem.source == "demo"
    assert d.solution.answer == "2" and d.solution.verdict_status == "equivalent"
    assert d.solution.deposited_by == "curator:test" and not d.solution.unverified
    assert d.artifact.sha256 == artifact("a1").sha256
    assert d.artifact.fingerprint_digest == FP and d.artifact.token_count == 42
    assert d.artifact.solution_id == d.solution.id and d.artifact.problem_id == "demo-1"


def test_deposit_is_idempotent(catalog: Catalog) -> None:
    first = catalog.deposit(problem(1), solution(1), artifact("a1"))
    again = catalog.deposit(problem(1), solution(1), artifact("a1"))
    # Same problem+solution+fingerprint but other bytes (e.g. a re-prefill): still the first row.
    other_bytes = catalog.deposit(problem(1), solution(1), artifact("a1-bis"))
    assert not again.created and not other_bytes.created
    assert again.artifact.sha256 == other_bytes.artifact.sha256 == first.artifact.sha256
    assert (count(catalog, ArtifactRow), count(catalog, SolutionRow)) == (1, 1)
    found = catalog.find_deposit(problem(1), solution(1).text, solution(1).answer, FP)
    assert found is not None and found.sha256 == first.artifact.sha256
    assert catalog.find_deposit(problem(1), solution(1).text, solution(1).answer, OTHER_FP) is None


def test_same_solution_under_another_fingerprint_is_a_second_artifact(catalog: Catalog) -> None:
    catalog.deposit(problem(1), solution(1), artifact("a1"))
    catalog.deposit(problem(1), solution(1), artifact("a1-other-model", fp=OTHER_FP))
    assert [a.fingerprint_digest for a in catalog.list_artifacts(FP)] == [FP]
    assert [a.fingerprint_digest for a in catalog.list_artifacts(OTHER_FP)] == [OTHER_FP]
    assert count(catalog, SolutionRow) == 1


def test_contradicted_answer_is_refused_and_leaves_no_rows(catalog: Catalog) -> None:
    bad = solution(1, verdict="not_equivalent")
    with pytest.raises(DepositRefusedError, match="not_equivalent"):
        catalog.deposit(problem(1), bad, artifact("a1"))
    assert count(catalog, ArtifactRow) == 0 and catalog.get_problem("demo-1") is None


def test_unverified_deposits_are_listed_and_routed_only_when_asked(catalog: Catalog) -> None:
    catalog.deposit(problem(1), solution(1), artifact("a1"))
    catalog.deposit(problem(2), solution(2, unverified=True, verdict="unchecked"), artifact("a2"))
    assert [a.problem_id for a in catalog.list_artifacts(FP)] == ["demo-1"]
    assert [a.problem_id for a in catalog.list_artifacts(FP, include_unverified=True)] == ["demo-1", "demo-2"]
    assert [e.problem_id for e in catalog.router_entries(FP)] == ["demo-1"]
    assert catalog.exact_match(problem(2).text, FP) is None
    hit = catalog.exact_match(problem(2).text, FP, include_unverified=True)
    assert hit is not None and hit.problem_id == "demo-2"


def test_verified_redeposit_upgrades_an_unverified_solution(catalog: Catalog) -> None:
    catalog.deposit(problem(2), solution(2, unverified=True, verdict="unchecked"), artifact("a2"))
    d = catalog.deposit(problem(2), solution(2), artifact("a2"))
    assert not d.solution.unverified and d.solution.verdict_status == "equivalent"
    assert [a.problem_id for a in catalog.list_artifacts(FP)] == ["demo-2"]


def test_exact_match_uses_normalized_text_and_fingerprint(catalog: Catalog) -> None:
    catalog.deposit(problem(3), solution(3), artifact("a3"))
    hit = catalog.exact_match("  What is 3 +   3?\n", FP)
    assert hit is not None and hit.artifact_sha256 == artifact("a3").sha256 and hit.problem_id == "demo-3"
    assert catalog.exact_match("What is 3 + 4?", FP) is None
    assert catalog.exact_match("WHAT is 3 + 3?", FP) is None   # case is part of the problem
    assert catalog.exact_match(problem(3).text, OTHER_FP) is None


def test_problem_id_reused_for_other_text_is_a_conflict(catalog: Catalog) -> None:
    catalog.upsert_problem(problem(1))
    again = catalog.upsert_problem(ProblemSpec(text="  What is 1 +\n1? ", id="demo-1"))
    assert again.text == problem(1).text
    with pytest.raises(CatalogConflictError, match="demo-1"):
        catalog.upsert_problem(ProblemSpec(text="Something else", id="demo-1"))
    with pytest.raises(CatalogConflictError, match="demo-1"):
        catalog.upsert_problem(ProblemSpec(text="what is 1 + 1?", id="demo-1"))


def test_problem_without_id_gets_a_stable_one_and_reference_is_filled_later(catalog: Catalog) -> None:
    a = catalog.upsert_problem(ProblemSpec(text="Find x: 2x = 6"))
    b = catalog.upsert_problem(ProblemSpec(text="Find x: 2x = 6", reference="3"))
    assert a.id == b.id and a.id.startswith("p-") and b.reference == "3"
    assert [p.id for p in catalog.problems_by_text("Find x:  2x = 6")] == [a.id]


def test_get_artifact_by_prefix(catalog: Catalog) -> None:
    sha = catalog.deposit(problem(1), solution(1), artifact("a1")).artifact.sha256
    assert catalog.get_artifact(sha).sha256 == sha
    assert catalog.get_artifact(sha[:8].upper()).sha256 == sha
    with pytest.raises(ArtifactNotFoundError):
        catalog.get_artifact("0000" if not sha.startswith("0000") else "1111")
    for bad in ["ab", "zzzz", "../x", "%%%%"]:
        with pytest.raises(InputError):
            catalog.get_artifact(bad)


def test_ambiguous_prefix_is_an_input_error(catalog: Catalog) -> None:
    for i, sha in enumerate(["abcd" + "1" * 60, "abcd" + "2" * 60]):
        catalog.deposit(problem(i), solution(i), replace(artifact(f"x{i}"), sha256=sha))
    with pytest.raises(InputError, match="ambiguous"):
        catalog.get_artifact("abcd")
    assert catalog.get_artifact("abcd2").sha256 == "abcd" + "2" * 60


def test_runs_resume_and_attempts_are_recorded_once(catalog: Catalog) -> None:
    catalog.upsert_problems([problem(1), problem(2)])
    run = catalog.create_run(run_id="run-1", problem_set="demo", problem_set_hash="1" * 64, budget=160,
                             attempts=2, model_name="tiny", model_fingerprint=FP, flow_run_id="flow-a")
    assert run.status == "running" and run.finished_at is None
    rec = AttemptRecord(run_id="run-1", problem_id="demo-1", attempt_index=0, route="exact", budget=160,
                        route_score=1.0, routed_artifact_sha="a" * 64, grafted_artifact_sha=None,
                        prompt_tokens=20, prefill_tokens=20, restored_tokens=0, decode_tokens=160,
                        budget_exhausted=True, energy_joules=12.5, energy_source="estimate",
                        error="graft refused: hash mismatch")
    first = catalog.record_attempt(rec, [GraftRecord("a" * 64, "refused", reason="hash mismatch")])
    second = catalog.record_attempt(rec, [GraftRecord("a" * 64, "refused", reason="hash mismatch")])
    assert first.created and not second.created and first.attempt.id == second.attempt.id
    grafts = catalog.grafts_for_attempt(first.attempt.id)
    assert [(g.outcome, g.reason) for g in grafts] == [("refused", "hash mismatch")]
    assert catalog.recorded_attempt_keys("run-1") == {("demo-1", 0)}

    finished = catalog.finish_run("run-1")
    assert finished.status == "finished" and finished.finished_at is not None
    resumed = catalog.create_run(run_id="run-1", problem_set="demo", problem_set_hash="1" * 64, budget=160,
                                 attempts=2, model_name="tiny", model_fingerprint=FP, flow_run_id="flow-b")
    assert resumed.status == "running" and resumed.flow_run_id == "flow-b"
    assert catalog.recorded_attempt_keys("run-1") == {("demo-1", 0)}
    stored = catalog.attempts_for_run("run-1")[0]
    assert (stored.decode_tokens, stored.budget_exhausted, stored.energy_source) == (160, True, "estimate")


def test_attempt_for_unknown_problem_is_refused_by_foreign_key(catalog: Catalog) -> None:
    from sqlalchemy.exc import IntegrityError

    catalog.create_run(run_id="r", problem_set="s", problem_set_hash="0" * 64, budget=1, attempts=1,
                       model_name="m", model_fingerprint=FP)
    with pytest.raises(IntegrityError):
        catalog.record_attempt(AttemptRecord(run_id="r", problem_id="nope", attempt_index=0, route="none", budget=1))


def test_orphans_lists_stored_bytes_without_rows(catalog: Catalog) -> None:
    sha = catalog.deposit(problem(1), solution(1), artifact("a1")).artifact.sha256
    stray = artifact("crashed-before-commit").sha256
    assert catalog.orphans([sha, stray]) == [stray]
