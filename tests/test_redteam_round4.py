"""Red team, round four (issue 34): nothing wrong stored, nothing lost, nothing unbounded.

One test (or table) per finding, each failing on the code before its fix; item 7 (decode memory)
is tested with the decoder. Tiny seeded models, real SQLite libraries in `tmp_path`.

| # | class | test |
|---|---|---|
| 1 | wrong answer stored as verified | test_1_* |
| 2 | error recorded as a verdict | test_2_* |
| 3 | fingerprint misses the model configuration | test_3_* |
| 4 | non-durable catalog | test_4_* |
| 5 | orphan artifact files | test_5_* |
| 6 | rebuild across models | test_6_* |
| 8 | unreadable run rows | test_8_* |
| 9 | an inspecting command creates things | test_9_* |
| 10 | password masks replace substrings | test_10_* |
"""

from __future__ import annotations

import os
import tempfile

# Flow tests run against Prefect's temporary server under a throwaway home (as tests/flows/conftest.py).
os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="flywheel-prefect-"))
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

import json  # noqa: E402
import shutil  # noqa: E402
import sqlite3  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from click.testing import CliRunner  # noqa: E402

import verifiers  # noqa: E402
from flywheel import config, errors  # noqa: E402
from flywheel.cli import error_text, main  # noqa: E402
from flywheel.engine import Engine  # noqa: E402
from flywheel.errors import (  # noqa: E402
    DepositRefusedError,
    FingerprintMismatchError,
    InputError,
    LibraryError,
)
from flywheel.kv import parse_artifact  # noqa: E402
from flywheel.library import Library  # noqa: E402
from flywheel.problemsets import Problem  # noqa: E402
from flywheel.prompts import TEMPLATE_VERSION, PlainFormat  # noqa: E402
from verifiers import VerifierConfig  # noqa: E402

SOLVE = Problem(id="lin", text="Solve for x: x + 1 = 3")          # verified by substitution: x = 2
#: Far below what the verifier's worker needs to import sympy: it cannot start.
STARVED = VerifierConfig(memory_mb=24)


@pytest.fixture
def lib(tmp_path: Path) -> Iterator[Library]:
    with Library.open(tmp_path / "lib") as opened:
        yield opened


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


# --- 1: a run's problem file is checked against stored verified answers -------------------------


def _run_on(tiny_gemma: Engine, tiny_dirs: dict[str, Path], root: Path, rows: list[dict[str, str]],
            **kw: object) -> dict[str, object]:
    from flows import RunConfig, flywheel_run, runtime

    name = str(tiny_dirs["gemma3"])
    runtime.register_engine(name, tiny_gemma)
    problems = root.parent / f"set-{len(list(root.parent.glob('set-*')))}.jsonl"
    problems.write_text("".join(json.dumps(r) + "\n" for r in rows))
    try:
        return flywheel_run(RunConfig(problems=str(problems), model=name, library=str(root), budget=4,
                                      starter=False, **kw))  # type: ignore[arg-type]
    finally:
        runtime.close_libraries()


@pytest.mark.parametrize("problem_id", ["lin", "lin-again"], ids=["same-id", "same-text-other-id"])
def test_1_a_run_cannot_set_a_reference_that_contradicts_a_stored_verified_answer(
        tiny_gemma: Engine, tiny_dirs: dict[str, Path], tmp_path: Path, problem_id: str) -> None:
    root = tmp_path / "lib"
    with Library.open(root) as lib:
        assert lib.deposit(tiny_gemma, SOLVE, "x = 3 - 1", "2").verdict_status == "equivalent"
    with pytest.raises(InputError, match=r"reference '5' for problem 'lin(-again)?' contradicts its stored verified answer '2'"):
        _run_on(tiny_gemma, tiny_dirs, root, [{"id": problem_id, "problem": SOLVE.text, "reference": "5"}])
    with Library.open(root) as lib:
        assert lib.catalog.get_problem("lin").reference is None            # never stored
        assert lib.catalog.get_problem(problem_id) is None or problem_id == "lin"
        with pytest.raises(DepositRefusedError):                            # a wrong answer is still refused
            lib.deposit(tiny_gemma, Problem(id=problem_id, text=SOLVE.text), "x = 5", "5")
        assert lib.scan().ok


def test_1_every_reference_setting_path_uses_the_same_check(lib: Library, tiny_gemma: Engine) -> None:
    """Deposit, import and a run's problem set all go through `checked_reference`: a reference for
    a look-alike id (the same text) is checked against the stored answers of the same problem."""
    lib.deposit(tiny_gemma, SOLVE, "x = 3 - 1", "2")
    other_id = Problem(id="lin-b", text=SOLVE.text, reference="5")
    with pytest.raises(DepositRefusedError, match="contradicts its stored verified answer '2'"):
        lib.checked_reference(other_id)
    with pytest.raises(InputError, match="contradicts"):
        lib.catalog_problems([other_id])
    assert lib.catalog.get_problem("lin-b") is None
    lib.catalog_problems([Problem(id="lin-b", text=SOLVE.text, reference="2")])   # agreeing: catalogued
    assert lib.catalog.get_problem("lin-b").reference == "2"


# --- 2: an error is never a verdict -----------------------------------------------------------------


def test_2_a_verifier_that_cannot_start_raises_instead_of_giving_a_verdict() -> None:
    for call in (lambda: verifiers.check(candidate="2", reference="2", config=STARVED),
                 lambda: verifiers.check_output("2\n", form="answer", reference="2", problem_text="1+1?",
                                                config=STARVED)):
        with pytest.raises(verifiers.VerifierUnavailable, match="did not start"):
            call()
    assert verifiers.check(candidate="2", reference="2").equivalent   # the pool still works after


def test_2_a_pass_whose_verifier_cannot_start_records_nothing_as_judged_and_stops(
        tiny_gemma: Engine, tiny_dirs: dict[str, Path], tmp_path: Path) -> None:
    root = tmp_path / "lib"
    rows = [{"id": "a", "problem": "What is 2+3?", "reference": "5"},
            {"id": "b", "problem": "What is 2+4?", "reference": "6"}]
    with pytest.raises(errors.VerifierUnavailableError, match="did not start.*not judged") as err:
        _run_on(tiny_gemma, tiny_dirs, root, rows, verifier=STARVED, run_id="r-broken")
    assert "\n" not in err.value.message and "--run-id" in (err.value.hint or "")
    with Library.open(root) as lib:
        assert lib.catalog.attempts_for_run("r-broken") == []            # nothing recorded as a miss
        run = lib.catalog.get_run("r-broken")
        assert run is not None and run.status == "failed"


def test_2_a_deposit_whose_verifier_cannot_start_stores_nothing_even_unverified(
        lib: Library, tiny_gemma: Engine) -> None:
    with pytest.raises(verifiers.VerifierUnavailable):
        lib.deposit(tiny_gemma, SOLVE, "x = 3 - 1", "2", unverified=True, verifier=STARVED)
    assert lib.catalog.list_artifacts(include_unverified=True) == [] and not list(lib.store.iter_ids())


# --- 3: the fingerprint covers the model configuration -------------------------------------------


@pytest.mark.parametrize(("key", "value"), [("rms_norm_eps", 1e-5), ("sliding_window", 8),
                                            ("layer_types", ["full_attention"] * 4)])
def test_3_an_artifact_made_under_another_config_json_is_refused_with_the_rebuild_hint(
        tiny_dirs: dict[str, Path], tmp_path: Path, key: str, value: object) -> None:
    model = tmp_path / "model"
    shutil.copytree(tiny_dirs["gemma3"], model)
    with Library.open(tmp_path / "lib") as lib:
        sha = lib.deposit(Engine.load(str(model), progress=False), SOLVE, "x = 3 - 1", "2").artifact_sha256
        cfg = json.loads((model / "config.json").read_text())
        cfg[key] = value
        (model / "config.json").write_text(json.dumps(cfg))
        edited = Engine.load(str(model), progress=False)
        with pytest.raises(FingerprintMismatchError, match="config_sha256") as err:
            lib.load_graft(edited, sha)
        assert "flywheel library rebuild" in (err.value.hint or "")


def test_3_the_config_hash_ignores_where_the_model_was_loaded_from(tiny_gemma: Engine, tiny_dirs: dict[str, Path],
                                                                   tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(tiny_dirs["gemma3"], copy)
    moved = Engine.load(str(copy), progress=False).fingerprint
    assert len(tiny_gemma.fingerprint.config_sha256) == 64
    assert moved.config_sha256 == tiny_gemma.fingerprint.config_sha256


# --- 4: non-durable catalogs are refused before anything is written ------------------------------


@pytest.mark.parametrize("url", ["sqlite:///:memory:", "sqlite://", "sqlite:///file:cat?mode=memory&uri=true",
                                 "sqlite:///file::memory:?uri=true"])
def test_4_an_in_memory_catalog_is_refused_in_one_line_before_anything_is_written(
        tmp_path: Path, url: str) -> None:
    with pytest.raises(InputError, match="in-memory SQLite database"):
        config.validate_db_url(url)
    root = tmp_path / "lib"
    code, err = _invoke("--library", str(root), "--db", url, "deposit", "--problem", "What is 2+3?",
                        "--solution", "2+3=5", "--answer", "5")
    assert code == 2 and "in-memory SQLite" in err and "Traceback" not in err
    assert not root.exists()


# --- 5: a refused row leaves no file; unnamed files are removed -----------------------------------


def test_5_a_batch_row_the_catalog_refuses_leaves_no_file_behind(lib: Library, tiny_gemma: Engine) -> None:
    lib.deposit(tiny_gemma, Problem(id="p1", text="What is 2+3?", reference="5"), "2+3=5", "5")
    batch = lib.deposit_many(tiny_gemma, [(1, {"id": "p1", "problem": "What is 7+1?", "solution": "7+1=8",
                                               "answer": "8", "reference": "8"})])
    assert len(batch.refused) == 1 and "already holds a different text" in batch.refused[0].reason
    assert len(list(lib.store.iter_ids())) == 1
    assert lib.scan().ok, lib.scan().findings


def test_5_library_verify_repair_removes_a_file_no_row_names(lib: Library, tiny_gemma: Engine,
                                                              tmp_path: Path) -> None:
    kept = lib.deposit(tiny_gemma, Problem(id="p1", text="What is 2+3?", reference="5"), "2+3=5", "5")
    with Library.open(tmp_path / "other") as other:
        stray = other.deposit(tiny_gemma, Problem(id="q", text="What is 7+1?", reference="8"), "7+1=8", "8")
        lib.store.put(other.store.get(stray.artifact_sha256) or b"")   # an interrupted deposit's file
    assert not lib.scan().ok
    code, err = _invoke("--library", str(lib.root), "library", "verify", "--repair")
    assert code == 0, err
    assert list(lib.store.iter_ids()) == [kept.artifact_sha256] and lib.scan().ok


def test_5_rebuild_keeps_the_old_artifact_when_its_replacement_cannot_be_stored(
        lib: Library, tiny_gemma: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as m:
        m.setattr(PlainFormat, "tag", property(lambda self: "v0"))
        old = lib.deposit(tiny_gemma, Problem(id="six", text="What is 2*3?", reference="6"), "2*3=6", "6")

    def refused(*args: object, **kw: object) -> object:
        raise LibraryError("the catalog refused the row")

    with monkeypatch.context() as m:
        m.setattr(lib.catalog, "deposit", refused)
        with pytest.raises(LibraryError):
            lib.rebuild(tiny_gemma)
    assert [a.sha256 for a in lib.catalog.list_artifacts()] == [old.artifact_sha256]   # still there, whole
    assert list(lib.store.iter_ids()) == [old.artifact_sha256] and lib.scan().ok


# --- 6: rebuild across models ------------------------------------------------------------------------


def test_6_rebuild_replaces_this_models_stale_artifact_whichever_models_row_comes_first(
        lib: Library, tiny_gemma: Engine, tiny_llama: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    six = Problem(id="six", text="What is 2*3?", reference="6")
    other_model = lib.deposit(tiny_llama, six, "2*3=6", "6")            # the first row rebuild meets
    with monkeypatch.context() as m:
        m.setattr(PlainFormat, "tag", property(lambda self: "v0"))
        stale = lib.deposit(tiny_gemma, six, "2*3=6", "6")
    assert lib.rebuild(tiny_gemma) == 1
    mine = lib.catalog.list_artifacts(tiny_gemma.fingerprint.digest)
    assert len(mine) == 1 and mine[0].sha256 != stale.artifact_sha256
    data = lib.store.get(mine[0].sha256)
    assert data is not None and parse_artifact(data).header.meta["template"] == TEMPLATE_VERSION
    assert not lib.store.contains(stale.artifact_sha256)
    assert lib.store.contains(other_model.artifact_sha256)              # the other model's stays
    lib.load_graft(tiny_gemma, mine[0].sha256)
    assert lib.scan().ok


# --- 8: an unreadable run row is named, never a traceback -----------------------------------------


@pytest.mark.parametrize("column", ["decode_schedule", "settings"])
def test_8_a_run_row_that_is_not_json_is_named_in_one_line(lib: Library, tiny_gemma: Engine,
                                                           tiny_dirs: dict[str, Path], column: str) -> None:
    from flywheel.replay import engine_for_run, recheck

    lib.catalog.create_run(run_id="r1", problem_set="x", problem_set_hash="0" * 64, budget=4, attempts=1,
                           model_name=str(tiny_dirs["gemma3"]), model_fingerprint=tiny_gemma.fingerprint.digest,
                           decode_schedule="{}", settings="{}")
    with sqlite3.connect(lib.root / "catalog.db") as db:
        db.execute(f"UPDATE runs SET {column} = 'not json {{' WHERE id = 'r1'")
    what = column.replace("_", " ")
    with pytest.raises(LibraryError, match=f"run 'r1' has an unreadable {what}"):
        recheck(lib, tiny_gemma, "r1", 1)
    if column == "decode_schedule":
        with pytest.raises(LibraryError, match=f"run 'r1' has an unreadable {what}"):
            engine_for_run(lib, "r1")
    for args in (["report"], ["report", "--run", "r1"], ["report", "--run", "r1", "--recheck", "1"]):
        code, err = _invoke("--library", str(lib.root), *args)
        assert "Traceback" not in err and "JSONDecodeError" not in err, (args, err)
        assert code == 0 or f"unreadable {what}" in err, (args, code, err)


# --- 9: inspecting never creates ----------------------------------------------------------------------


def test_9_library_ls_with_a_db_file_that_does_not_exist_creates_nothing(lib: Library, tmp_path: Path) -> None:
    missing = tmp_path / "elsewhere" / "catalog.db"
    for args in (["library", "ls"], ["library", "verify"], ["library", "show", "abcd"]):
        code, err = _invoke("--library", str(lib.root), "--db", f"sqlite:///{missing}", *args)
        assert code != 0 and "no catalog at" in err and "Traceback" not in err, err
    assert not (tmp_path / "elsewhere").exists()
    nowhere = tmp_path / "nowhere"
    code, err = _invoke("--library", str(nowhere), "--db", f"sqlite:///{lib.root / 'catalog.db'}", "library", "ls")
    assert code != 0 and "no library at" in err and not nowhere.exists()


# --- 10: masks replace whole secrets only ------------------------------------------------------------


def test_10_a_short_password_is_masked_where_it_stands_and_never_inside_words() -> None:
    from flywheel.catalog.db import _shown_error, make_db

    db = make_db("postgresql+psycopg://user:p@localhost:1/db")
    try:
        shown = _shown_error(db, RuntimeError("connection to port 1 failed: password p rejected"))
    finally:
        db.dispose()
    assert shown == "connection to port 1 failed: password *** rejected"
    assert config.mask_secrets("p@ss and p-q", ["p"]) == "***@ss and ***-q"
    assert error_text(LibraryError("port 1 failed for p"), ["p"]) == "Error: port 1 failed for ***"
