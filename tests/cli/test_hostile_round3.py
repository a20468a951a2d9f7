"""Hostile input, round three (issue 23): bounds are checked before any work starts, one bad row
never costs the good ones, and a refusal is one `Error:` line, never a Prefect traceback."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from flywheel import config
from flywheel.catalog import open_catalog
from tests.cli.conftest import Run, catalog_rows
from tests.cli.test_hostile_cli import clean_error


def _runs(lib: Path) -> list[str]:
    if not (lib / "catalog.db").exists():
        return []
    cat = open_catalog(config.database_url(lib))
    with cat.session() as s:
        from sqlalchemy import select

        from flywheel.catalog.models import RunRow
        ids = list(s.scalars(select(RunRow.id)))
    cat.close()
    return ids


def test_a_problem_longer_than_the_window_is_refused_by_name_before_the_run_starts(flywheel: Run,
                                                                                   tmp_path: Path) -> None:
    problems = tmp_path / "set.jsonl"
    problems.write_text(json.dumps({"id": "short", "problem": "What is 1+1?", "reference": "2"}) + "\n"
                        + json.dumps({"id": "novel", "problem": "word " * 6_000, "reference": "1"}) + "\n")
    t0 = time.perf_counter()
    proc = flywheel("run", "--problems", str(problems), "--budget", "8")
    err = clean_error(proc, 2)
    tokens = re.search(r"problem 'novel' is ([\d,]+) prompt tokens", err)
    assert tokens and int(tokens.group(1).replace(",", "")) > len("word " * 6_000) - 1 and "4,096-token window" in err
    assert "flywheel-run" not in proc.stderr and "Traceback" not in proc.stdout   # Prefect never started
    assert time.perf_counter() - t0 < 60
    assert _runs(tmp_path / "lib") == []


@pytest.mark.parametrize(("args", "what"), [
    (("--budget", "5000"), "window"),                              # raised in the flow before: a traceback
    (("--attempts", "1000000"), "--attempts"),
    (("--seed", "3000000000"), "--seed"),
    (("--seed", "-1"), "--seed"),
    (("--run-budget", "99999999999999999999"), "--run-budget"),
    (("--run-budget", "3000000000"), "--run-budget"),
    (("--budget", "99999999999"), "--budget"),
])
def test_numbers_the_catalog_cannot_hold_are_refused_before_any_decoding(args: tuple[str, ...], what: str,
                                                                         flywheel: Run, tmp_path: Path) -> None:
    proc = flywheel("run", "--problems", "gen:linear?n=1&seed=1", *args)
    assert what in clean_error(proc, 2)
    assert _runs(tmp_path / "lib") == []


def test_run_config_bounds_what_the_catalog_stores() -> None:
    from flows.run import RunConfig
    from flywheel.errors import InputError

    for bad in ({"seed": config.MAX_SEED + 1}, {"attempts": config.MAX_ATTEMPTS + 1},
                {"run_budget": config.MAX_DB_INT + 1}, {"budget": -1}):
        with pytest.raises(InputError, match="outside"):
            RunConfig(problems="champ", **bad)   # type: ignore[arg-type]
    cfg = RunConfig(problems="champ", seed=config.MAX_SEED, attempts=config.MAX_ATTEMPTS)
    assert cfg.seed + cfg.attempts - 1 <= config.MAX_DB_INT


def test_graft_never_decodes_past_the_window(flywheel: Run) -> None:
    dep = json.loads(flywheel("deposit", "--problem", "What is 2+3?", "--solution", "2+3=5", "--answer", "5",
                              "--reference", "5", "--json", check=True).stdout.strip().splitlines()[-1])
    sha = dep["deposited"][0]["artifact"]
    proc = flywheel("graft", sha[:16], "--prompt", " What is 2+3?\nFinal answer:", "--max-new", "100000")
    err = clean_error(proc, 2)
    assert "--max-new 100,000" in err and "4,096-token window" in err
    ok = flywheel("graft", sha[:16], "--prompt", " What is 2+3?\nFinal answer:", "--max-new", "4", "--json",
                  check=True)
    assert json.loads(ok.stdout)["decode_tokens"] <= 4


def test_a_nul_row_in_a_batch_is_refused_alone(flywheel: Run, tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"problem": "What is 1+1?", "solution": "1+1=2", "answer": "2", "reference": "2"})
                    + "\n" + json.dumps({"problem": "What is\u0000 2+2?", "solution": "4", "answer": "4"}) + "\n"
                    + json.dumps({"problem": "What is 3+3?", "solution": "3+3=6", "answer": "6", "reference": "6"})
                    + "\n")
    proc = flywheel("deposit", "--file", str(rows), "--json")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(out["deposited"]) == 2 and [r["line"] for r in out["refused"]] == [2]
    assert "NUL" in out["refused"][0]["reason"]


def test_an_input_error_inside_the_flow_is_one_line_without_a_prefect_traceback(flywheel: Run,
                                                                                tmp_path: Path) -> None:
    flywheel("run", "--problems", "gen:linear?n=1&seed=1", "--budget", "4", "--run-id", "r1", check=True)
    proc = flywheel("run", "--problems", "gen:linear?n=1&seed=1", "--budget", "5", "--run-id", "r1")
    assert "started with --budget 4, not 5" in clean_error(proc, 2)
    assert "Traceback" not in proc.stderr + proc.stdout and "ERROR" not in proc.stderr
    assert catalog_rows(tmp_path / "lib", "SELECT id, status FROM runs") == [("r1", "finished")]


def test_sigterm_marks_the_run_interrupted_and_keeps_what_was_recorded(tiny_dirs: dict[str, Path],
                                                                      tmp_path: Path) -> None:
    import os
    import signal
    import subprocess

    from tests.cli.conftest import FLYWHEEL, wait_for_a_recorded_attempt

    lib = tmp_path / "lib"
    env = {**os.environ, "FLYWHEEL_LIBRARY": str(lib), "FLYWHEEL_MODEL": str(tiny_dirs["gemma3"])}
    env.pop("FLYWHEEL_DB", None)
    proc = subprocess.Popen([FLYWHEEL, "run", "--problems", "gen:linear?n=50&seed=1", "--budget", "400",
                             "--run-id", "sig"], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for_a_recorded_attempt(proc, lib)
        assert proc.poll() is None, "the run ended before it could be signalled"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "interrupted" in err
    assert catalog_rows(lib, "SELECT status FROM runs WHERE id = 'sig'") == [("interrupted",)]
    assert catalog_rows(lib, "SELECT count(*) FROM attempts")[0][0] > 0


def test_a_damaged_or_newer_catalog_is_named_never_a_traceback(flywheel: Run, tmp_path: Path) -> None:
    import sqlite3

    lib = tmp_path / "lib"
    for i in (1, 2):
        flywheel("deposit", "--problem", f"What is {i}+1?", "--solution", "so", "--answer", str(i + 1),
                 "--reference", str(i + 1), check=True)
    with sqlite3.connect(lib / "catalog.db") as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = db.execute("PRAGMA page_size").fetchone()[0]
        roots = [r for (r,) in db.execute("SELECT rootpage FROM sqlite_master WHERE type = 'index' "
                                          "AND tbl_name = 'problems'")]
    with open(lib / "catalog.db", "r+b") as fh:   # two index pages overwritten
        for root in roots[:2]:
            fh.seek((root - 1) * page)
            fh.write(b"\xde\xad" * (page // 2))
    verify = flywheel("library", "verify")
    assert verify.returncode == 1 and "catalog database is damaged" in verify.stdout + verify.stderr
    assert "Traceback" not in verify.stderr
    assert "catalog database is damaged" in clean_error(flywheel("run", "--problems", "gen:linear?n=1&seed=1",
                                                                 "--budget", "4"))
    other = tmp_path / "newer"
    flywheel("deposit", "--problem", "What is 1+1?", "--solution", "so", "--answer", "2", "--reference", "2",
             library=other, check=True)
    with sqlite3.connect(other / "catalog.db") as db:
        db.execute("UPDATE alembic_version SET version_num = '0999'")
    for args in (("library", "ls"), ("report",), ("deposit", "--problem", "What is 1+1?", "--solution", "so",
                                                  "--answer", "2")):
        err = clean_error(flywheel(*args, library=other))
        assert "revision '0999'" in err and "reads revisions up to" in err


def test_inspecting_never_creates_a_library_and_none_is_made_among_other_files(flywheel: Run,
                                                                               tmp_path: Path) -> None:
    typo = tmp_path / "libary"
    for args in (("library", "ls"), ("library", "verify"), ("library", "export", str(tmp_path / "b.tar"))):
        assert "no library at" in clean_error(flywheel(*args, library=typo))
    assert not typo.exists()
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("mine\n")
    deposit = ("deposit", "--problem", "What is 1+1?", "--solution", "so", "--answer", "2", "--reference", "2")
    for root in (project, Path("/")):
        assert "holds other files and no library" in clean_error(flywheel(*deposit, library=root))
    assert sorted(p.name for p in project.iterdir()) == ["README.md"] and not Path("/catalog.db").exists()
    loop = tmp_path / "loop"
    loop.symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(loop)
    for args in (("library", "ls"), deposit):
        assert "cannot be resolved" in clean_error(flywheel(*args, library=loop / "lib"))


def test_smaller_inputs_are_one_line_each(flywheel: Run, tmp_path: Path) -> None:
    import os
    import subprocess

    from tests.cli.conftest import FLYWHEEL

    flywheel("deposit", "--problem", "What is 1+1?", "--solution", "so", "--answer", "2", "--reference", "2",
             check=True)
    for plot, why in (("x.svg", "writes a PNG image"), ("x.jpg", "writes a PNG image"),
                      ("/proc/x.png", "cannot write the plot")):
        proc = flywheel("report", "--plot", plot)
        assert why in clean_error(proc, 2) and proc.stdout == ""   # refused before the report is printed
    assert not (tmp_path / "x.svg").exists()
    for watts in ("nan", "inf", "-3"):
        env = {**os.environ, "FLYWHEEL_LIBRARY": str(tmp_path / "lib"), "FLYWHEEL_CPU_WATTS": watts}
        proc = subprocess.run([FLYWHEEL, "run", "--problems", "gen:linear?n=1&seed=1"], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert "cpu_watts" in clean_error(proc, 2)
    env = {**os.environ, "FLYWHEEL_MODEL_CACHE": "/dev/null"}
    proc = subprocess.run([FLYWHEEL, "--model", "gemma3-270m", "prepare-model"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert "FLYWHEEL_MODEL_CACHE='/dev/null' is not a folder" in clean_error(proc)
    proc = flywheel("serve", "--problems", "gen:linear?n=1&seed=1", "--cron", "0 3 * * *", "--name", "a/b")
    err = clean_error(proc, 2)
    assert "invalid deployment name 'a/b'" in err and "cron" not in err.splitlines()[0]
