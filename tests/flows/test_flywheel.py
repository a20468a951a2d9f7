"""`flywheel_run` end to end on tiny seeded models and a real temporary SQLite library."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flows import RunConfig, flywheel_run, runtime
from flywheel import config
from flywheel.domain import canonical_json
from flywheel.energy import EnergyConfig
from flywheel.engine import Engine
from flywheel.errors import InputError
from flywheel.library import Library
from flywheel.problemsets import Problem, load_problem_set
from flywheel.prompts import attempt_suffix, plain_prompt
from flywheel.router import RouterConfig
from verifiers import Verdict, VerifierConfig

PROBLEMS = [
    {"id": "lin-a", "problem": "Solve for x: 3x + 8 = 35.", "reference": "9",
     "solution": "Subtract 8: 3x = 27. Divide by 3: x = 9."},
    {"id": "lin-b", "problem": "Solve for x: 2x + 1 = 7.", "reference": "3",
     "solution": "Subtract 1: 2x = 6. Divide by 2: x = 3."},
]


@pytest.fixture(scope="module")
def tiny(tiny_dirs: dict[str, Path], tiny_gemma: Engine) -> str:
    name = str(tiny_dirs["gemma3"])
    runtime.register_engine(name, tiny_gemma)
    return name


@pytest.fixture
def set_file(tmp_path: Path) -> Path:
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS))
    return path


def open_lib(root: Path) -> Library:
    return runtime.library(str(root), config.database_url(root))


def _cfg(model: str, lib: Path, problems: Path | str, **kw: object) -> RunConfig:
    return RunConfig(problems=str(problems), model=model, library=str(lib), **kw)  # type: ignore[arg-type]


def _curate(model: str, lib: Path, problems: list[Problem]) -> list[str]:
    lib_ = open_lib(lib)
    eng = runtime.engine(model)
    return [lib_.deposit(eng, p, p.solution or "", p.reference or "", deposited_by="curator:test").artifact_sha256
            for p in problems]


def test_first_pass_routes_none_then_curated_deposits_are_grafted_exactly(tiny: str, lib_dir: Path,
                                                                          set_file: Path, tiny_gemma: Engine) -> None:
    first = flywheel_run(_cfg(tiny, lib_dir, set_file, budget=6))
    assert [r["route"] for r in first["results"]] == ["none", "none"]
    assert all(r["grafted_artifact"] is None and r["restored_tokens"] == 0 for r in first["results"])
    assert first["flow_run_id"] and first["run_id"].startswith("run-")

    shas = _curate(tiny, lib_dir, load_problem_set(str(set_file)).problems)
    second = flywheel_run(_cfg(tiny, lib_dir, set_file, budget=6))
    assert second["run_id"] != first["run_id"]
    assert [r["route"] for r in second["results"]] == ["exact", "exact"]
    assert [r["grafted_artifact"] for r in second["results"]] == shas
    for r, p in zip(second["results"], PROBLEMS, strict=True):
        assert r["restored_tokens"] > 20            # the worked example came from the graft ...
        asked = tiny_gemma.encode(attempt_suffix(p["problem"], "answer"), bos=False)
        assert r["prefill_tokens"] == len(asked)    # ... only the new question was prefilled
        assert r["refused_grafts"] == []


def test_verified_new_solution_is_deposited_by_the_flow_run_and_recurs_exactly(scripted: str, lib_dir: Path,
                                                                               set_file: Path) -> None:
    budget = 24                                      # the scripted 18-byte output fits (byte tokens)
    first = flywheel_run(_cfg(scripted, lib_dir, set_file, budget=budget))
    a = {r["problem_id"]: r for r in first["results"]}
    assert a["lin-a"]["verified"] and a["lin-a"]["answer"] == "9"
    assert not a["lin-b"]["verified"]                # scripted "9" is wrong for 2x + 1 = 7
    lib = open_lib(lib_dir)
    arts = lib.catalog.list_artifacts()
    assert len(arts) == 1                            # only the verified one was deposited
    sol = lib.catalog.get_solution(arts[0].solution_id)
    assert sol is not None and sol.deposited_by == first["flow_run_id"]

    second = flywheel_run(_cfg(scripted, lib_dir, set_file, budget=budget))
    b = {r["problem_id"]: r for r in second["results"]}
    assert b["lin-a"]["route"] == "exact" and b["lin-a"]["grafted_artifact"] == arts[0].sha256
    assert b["lin-a"]["verified"] and b["lin-a"]["decode_tokens"] <= 2   # "9", "\n"
    assert len(lib.catalog.list_artifacts()) == 1    # a recurrence is not deposited again


def test_rerun_with_the_same_run_id_does_no_new_attempts(tiny: str, lib_dir: Path, set_file: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    first = flywheel_run(_cfg(tiny, lib_dir, set_file, budget=5, attempts=2, seed=3))
    rows = open_lib(lib_dir).catalog.attempts_for_run(first["run_id"])
    assert sorted((a.problem_id, a.attempt_index) for a in rows) == [("lin-a", 0), ("lin-a", 1),
                                                                     ("lin-b", 0), ("lin-b", 1)]
    assert {a.seed for a in rows} == {3, 4}          # sampled attempts carry their seeds

    def no_model(*a: object, **k: object) -> None:
        raise AssertionError("a resumed run attempted a problem again")

    monkeypatch.setattr("flywheel.attempt.prepare_attempt", no_model)
    again = flywheel_run(_cfg(tiny, lib_dir, set_file, budget=5, attempts=2, seed=3, run_id=first["run_id"]))
    assert len(open_lib(lib_dir).catalog.attempts_for_run(first["run_id"])) == 4
    assert again["results"] == first["results"]
    assert again["run_id"] == first["run_id"]


def test_resuming_a_run_over_another_problem_set_is_refused(tiny: str, lib_dir: Path, set_file: Path) -> None:
    first = flywheel_run(_cfg(tiny, lib_dir, set_file, budget=2, limit=1))
    with pytest.raises(InputError, match="was over problem set"):
        flywheel_run(_cfg(tiny, lib_dir, "gen:linear?n=2&seed=1", budget=2, run_id=first["run_id"]))


def test_budget_exhaustion_is_a_recorded_outcome(tiny: str, lib_dir: Path, set_file: Path) -> None:
    out = flywheel_run(_cfg(tiny, lib_dir, "gen:linear?n=3&seed=1", budget=4, run_budget=6))
    rows = out["results"]
    assert [r["decode_tokens"] for r in rows] == [4, 2, 0]   # the run budget runs dry on the third
    assert all(r["budget_exhausted"] and not r["verified"] for r in rows)
    assert rows[2]["prefill_tokens"] == 0                    # no model work once the budget is spent
    recorded = sorted(open_lib(lib_dir).catalog.attempts_for_run(out["run_id"]), key=lambda a: a.problem_id)
    assert [(a.budget, a.budget_exhausted) for a in recorded] == [(4, True), (2, True), (0, True)]


def test_corrupted_artifact_is_refused_with_its_reason_and_the_attempt_runs_ungrafted(
        tiny: str, lib_dir: Path, set_file: Path, tiny_gemma: Engine) -> None:
    problems = load_problem_set(str(set_file)).problems
    (sha,) = _curate(tiny, lib_dir, problems[:1])
    path = open_lib(lib_dir).store.path_for(sha)  # type: ignore[attr-defined]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.chmod(0o644)
    path.write_bytes(bytes(data))

    out = flywheel_run(_cfg(tiny, lib_dir, set_file, budget=3, limit=1))
    (r,) = out["results"]
    assert r["route"] == "exact" and r["grafted_artifact"] is None
    (refusal,) = r["refused_grafts"]
    assert refusal["artifact"] == sha
    assert "Integrity" in refusal["reason"] or "hash" in refusal["reason"].lower()
    assert r["restored_tokens"] == 0
    assert r["prefill_tokens"] == len(tiny_gemma.encode(plain_prompt(problems[0].text, "solve")))
    assert r["decode_tokens"] == 3


def test_no_graft_never_routes(tiny: str, lib_dir: Path, set_file: Path) -> None:
    _curate(tiny, lib_dir, load_problem_set(str(set_file)).problems)
    out = flywheel_run(_cfg(tiny, lib_dir, set_file, budget=2, no_graft=True, deposit=False))
    assert [r["route"] for r in out["results"]] == ["none", "none"]
    assert all(r["restored_tokens"] == 0 for r in out["results"])


def test_every_attempt_records_its_energy_with_the_source(tiny: str, lib_dir: Path, set_file: Path) -> None:
    from flywheel.energy import SOURCES

    out = flywheel_run(_cfg(tiny, lib_dir, set_file, budget=4, deposit=False))
    attempts = open_lib(lib_dir).catalog.attempts_for_run(out["run_id"])
    assert len(attempts) == 2
    for a in attempts:
        assert a.energy_source in SOURCES              # nvml | rapl | estimate: never unlabelled
        assert a.energy_joules is not None and a.energy_joules > 0.0


def test_resuming_with_another_budget_or_attempt_count_is_refused(tiny: str, lib_dir: Path, set_file: Path) -> None:
    first = flywheel_run(_cfg(tiny, lib_dir, set_file, budget=2, limit=1))
    with pytest.raises(InputError, match="--budget 2, not 3"):
        flywheel_run(_cfg(tiny, lib_dir, set_file, budget=3, limit=1, run_id=first["run_id"]))
    with pytest.raises(InputError, match="--attempts 1, not 2"):
        flywheel_run(_cfg(tiny, lib_dir, set_file, budget=2, attempts=2, limit=1, run_id=first["run_id"]))
    # another slot count is the same schedule for a slot's bits: the resume is accepted
    flywheel_run(_cfg(tiny, lib_dir, set_file, budget=2, limit=1, slots=3, run_id=first["run_id"]))


def test_every_attempt_keeps_its_decoded_text_and_why_it_stopped(scripted: str, lib_dir: Path,
                                                                 set_file: Path) -> None:
    out = flywheel_run(_cfg(scripted, lib_dir, set_file, budget=3, attempts=2, seed=1))
    rows = open_lib(lib_dir).catalog.attempts_for_run(out["run_id"])
    assert len(rows) == 4 and {r.stop_reason for r in rows} == {"budget"}
    assert all(r.text == "9\nF" and r.decode_tokens == 3 for r in rows)  # the script, cut by the budget
    run = open_lib(lib_dir).catalog.get_run(out["run_id"])
    assert run is not None and json.loads(run.decode_schedule or "{}")["slots"] == RunConfig.model_fields["slots"].default


def test_a_run_stopped_midway_is_marked_and_resumes(tiny: str, lib_dir: Path, set_file: Path) -> None:
    def stop(done: int, total: int, problem_id: str) -> None:
        if done:   # the first finished problem (the calls before it name the phase: taking problems, loading)
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        flywheel_run(_cfg(tiny, lib_dir, set_file, budget=2, run_id="run-stopped"), stop)
    run = open_lib(lib_dir).catalog.get_run("run-stopped")
    assert run is not None and run.status == "interrupted"
    out = flywheel_run(_cfg(tiny, lib_dir, set_file, budget=2, run_id="run-stopped"))
    assert len(out["results"]) == 2 and open_lib(lib_dir).catalog.get_run("run-stopped").status == "finished"


# --- the router, energy and verifier settings a run used --------------------------------------------


def test_near_members_is_the_routers_setting_and_is_bounded() -> None:
    cfg = RunConfig(problems="champ", router=RouterConfig(near_threshold=0.7), near_members=3)
    assert cfg.router == RouterConfig(near_threshold=0.7, near_members=3) and cfg.near_members == 3
    assert RunConfig(problems="champ").router == RouterConfig()
    with pytest.raises(InputError, match="outside 1..16"):
        RunConfig(problems="champ", near_members=17)


def test_a_run_records_the_router_energy_and_verifier_settings_it_used(tiny: str, lib_dir: Path,
                                                                      set_file: Path) -> None:
    cfg = _cfg(tiny, lib_dir, set_file, budget=2, limit=1, router=RouterConfig(near_threshold=0.7, search_k=4),
               near_members=2, energy=EnergyConfig(cpu_watts=7.5, source="estimate"),
               verifier=VerifierConfig(timeout_s=3.0, tolerance=1e-6))
    out = flywheel_run(cfg)
    catalog = open_lib(lib_dir).catalog
    run = catalog.get_run(out["run_id"])
    assert run is not None and run.settings == canonical_json(cfg.settings(runtime.engine(tiny).prompt_format.tag))
    recorded = json.loads(run.settings)
    assert recorded["seed"] == cfg.seed and recorded["prompt_format"] == runtime.engine(tiny).prompt_format.tag
    assert recorded["router"] == {"near_threshold": 0.7, "index_kind": "flat", "hnsw_m": 32, "search_k": 4,
                                  "include_unverified": False, "near_members": 2}
    assert recorded["energy"] == {"cpu_watts": 7.5, "source": "estimate", "powercap_root": "/sys/class/powercap"}
    assert recorded["verifier"]["timeout_s"] == 3.0 and recorded["verifier"]["tolerance"] == 1e-6
    assert {a.energy_source for a in catalog.attempts_for_run(out["run_id"])} == {"estimate"}  # metered as set


def test_the_runs_near_threshold_decides_its_routes(tiny: str, lib_dir: Path, tmp_path: Path) -> None:
    _curate(tiny, lib_dir, load_problem_set(str(_write(tmp_path / "curated.jsonl", PROBLEMS[:1]))).problems)
    fresh = _write(tmp_path / "fresh.jsonl", PROBLEMS[1:])   # related to the curated one, not the same
    loose = flywheel_run(_cfg(tiny, lib_dir, fresh, budget=2, router=RouterConfig(near_threshold=0.05)))
    strict = flywheel_run(_cfg(tiny, lib_dir, fresh, budget=2, router=RouterConfig(near_threshold=0.999)))
    assert [r["route"] for r in loose["results"]] == ["near"]
    assert [r["route"] for r in strict["results"]] == ["none"]


def test_the_runs_verifier_settings_decide_its_verdicts(scripted: str, lib_dir: Path, tmp_path: Path) -> None:
    near_nine = _write(tmp_path / "set.jsonl", [{"id": "p", "problem": "Compute 3 * 3.0003.", "reference": "9.0009"}])
    exact = flywheel_run(_cfg(scripted, lib_dir, near_nine, budget=24, deposit=False))
    tolerant = flywheel_run(_cfg(scripted, lib_dir, near_nine, budget=24, deposit=False,
                                 verifier=VerifierConfig(tolerance=1e-3)))
    assert exact["results"][0]["answer"] == tolerant["results"][0]["answer"] == "9"   # the script's answer
    assert not exact["results"][0]["verified"] and tolerant["results"][0]["verified"]


def test_a_pass_checks_each_answer_once_and_deposits_on_that_verdict(scripted: str, lib_dir: Path, set_file: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import verifiers

    real, real_output, checked = verifiers.check, verifiers.check_output, []

    def counted(**kwargs: Any) -> Verdict:
        checked.append(kwargs["candidate"])
        return real(**kwargs)

    def counted_output(text: str, **kwargs: Any) -> verifiers.Answered:   # extracts and checks in one request
        got = real_output(text, **kwargs)
        checked.append(got.answer)
        return got

    monkeypatch.setattr(verifiers, "check", counted)
    monkeypatch.setattr(verifiers, "check_output", counted_output)
    out = flywheel_run(_cfg(scripted, lib_dir, set_file, budget=24))
    assert sorted(r["problem_id"] for r in out["results"] if r["verified"]) == ["lin-a"]
    assert [a.problem_id for a in open_lib(lib_dir).catalog.list_artifacts()] == ["lin-a"]   # deposited
    assert checked == ["9", "9"]              # one verdict per attempt; the deposit used lin-a's own


def test_a_run_deposits_what_it_verified_under_its_own_verifier_settings(scripted: str, lib_dir: Path,
                                                                         tmp_path: Path) -> None:
    near_nine = _write(tmp_path / "set.jsonl", [{"id": "p", "problem": "Compute 3 * 3.0003.", "reference": "9.0009"}])
    flywheel_run(_cfg(scripted, lib_dir, near_nine, budget=24))          # exact: 9 is refused, nothing deposited
    assert open_lib(lib_dir).catalog.list_artifacts(include_unverified=True) == []
    tolerant = flywheel_run(_cfg(scripted, lib_dir, near_nine, budget=24, verifier=VerifierConfig(tolerance=1e-3)))
    assert tolerant["results"][0]["verified"]
    deposits = open_lib(lib_dir).catalog.list_artifacts()
    assert [a.problem_id for a in deposits] == ["p"]       # re-checked under the run's tolerance, not the default


def test_resuming_under_other_router_energy_or_verifier_settings_is_refused(tiny: str, lib_dir: Path,
                                                                           set_file: Path) -> None:
    first = flywheel_run(_cfg(tiny, lib_dir, set_file, budget=2, limit=1))
    again = {"budget": 2, "limit": 1, "run_id": first["run_id"]}
    with pytest.raises(InputError, match="router.near_threshold 0.5, not 0.7"):
        flywheel_run(_cfg(tiny, lib_dir, set_file, router=RouterConfig(near_threshold=0.7), **again))
    with pytest.raises(InputError, match="router.near_members 1, not 2"):
        flywheel_run(_cfg(tiny, lib_dir, set_file, near_members=2, **again))
    with pytest.raises(InputError, match="verifier.tolerance None, not 0.01"):
        flywheel_run(_cfg(tiny, lib_dir, set_file, verifier=VerifierConfig(tolerance=0.01), **again))
    with pytest.raises(InputError, match="energy.cpu_watts"):
        flywheel_run(_cfg(tiny, lib_dir, set_file, energy=EnergyConfig(cpu_watts=99.0), **again))
    # the verifier's worker count does not change a verdict: the resume is accepted
    flywheel_run(_cfg(tiny, lib_dir, set_file, verifier=VerifierConfig(workers=1), **again))


def _write(path: Path, rows: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _pretend_running(lib_dir: Path, run_id: str, owner: str) -> None:
    """Put a finished run back to `running` under `owner`, as a process killed outright leaves it."""
    from sqlalchemy import update

    from flywheel.catalog.models import RunRow

    with open_lib(lib_dir).catalog.db.begin() as conn:
        conn.execute(update(RunRow).where(RunRow.id == run_id).values(status="running", owner=owner,
                                                                      finished_at=None))


def test_a_run_whose_process_was_killed_is_marked_interrupted_and_one_still_alive_is_not_resumed(
        tiny: str, lib_dir: Path, set_file: Path) -> None:
    import subprocess
    import sys

    from flywheel.liveness import process_token

    first = flywheel_run(_cfg(tiny, lib_dir, set_file, budget=2, limit=1))
    assert open_lib(lib_dir).catalog.get_run(first["run_id"]).owner == process_token()  # type: ignore[union-attr]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _pretend_running(lib_dir, first["run_id"], process_token(child.pid))
        with pytest.raises(InputError, match="is still running"):      # another live process owns it
            flywheel_run(_cfg(tiny, lib_dir, set_file, budget=2, limit=1, run_id=first["run_id"]))
    finally:
        child.kill()
        child.wait()
    # the owner was killed: the next run on the catalog marks the run interrupted
    flywheel_run(_cfg(tiny, lib_dir, set_file, budget=2, limit=1))
    assert open_lib(lib_dir).catalog.get_run(first["run_id"]).status == "interrupted"  # type: ignore[union-attr]
    resumed = flywheel_run(_cfg(tiny, lib_dir, set_file, budget=2, limit=1, run_id=first["run_id"]))
    assert resumed["run_id"] == first["run_id"]
    assert open_lib(lib_dir).catalog.get_run(first["run_id"]).status == "finished"  # type: ignore[union-attr]
