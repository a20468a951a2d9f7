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
from tests.cli.conftest import Run
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
