"""The inbox source: arrival order, claims under a lock, retries, and what frees a claim."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from flywheel.errors import InputError
from flywheel.problemsets import load_problem_set
from flywheel.sources import inbox
from flywheel.sources.inbox import RunOutcome, take


def drop(folder: Path, name: str, ids: list[str], at: int) -> Path:
    """A problem file arriving at time `at` (its mtime)."""
    path = folder / name
    path.write_text("".join(json.dumps({"id": i, "problem": f"What is {len(i)}+1?", "reference": str(len(i) + 1)})
                            + "\n" for i in ids))
    os.utime(path, ns=(at * 10**9, at * 10**9))
    return path


def test_problems_arrive_in_file_time_order_and_repeated_ids_are_named(tmp_path: Path) -> None:
    drop(tmp_path, "z-first.jsonl", ["a", "b"], 100)
    drop(tmp_path, "a-later.jsonl", ["c", "a"], 200)
    pset = load_problem_set(f"inbox:{tmp_path}")
    assert [p.id for p in pset.problems] == ["a", "b", "c"]
    assert any("'a' arrived earlier" in s for s in pset.skipped)


def test_two_runs_never_take_the_same_problem_and_a_resume_takes_its_own(tmp_path: Path) -> None:
    drop(tmp_path, "one.jsonl", ["a", "b", "c"], 100)
    running = {"r1": RunOutcome(running=True), "r2": RunOutcome(running=True)}
    spec = f"inbox:{tmp_path}?take=2"
    assert [p.id for p in take(spec, "r1", running.get).problems] == ["a", "b"]
    assert [p.id for p in take(spec, "r2", running.get).problems] == ["c"]
    assert [p.id for p in take(spec, "r1", running.get).problems] == ["a", "b"]     # resumed: the same
    assert take(spec, "r3", running.get).problems == []                            # nothing left
    drop(tmp_path, "two.jsonl", ["d"], 300)                                        # a new arrival
    assert [p.id for p in take(spec, "r3", running.get).problems] == ["d"]


def test_a_dead_runs_unattempted_claims_are_free_again_and_failures_retry_by_policy(tmp_path: Path) -> None:
    drop(tmp_path, "one.jsonl", ["a", "b", "c"], 100)
    spec = f"inbox:{tmp_path}"
    assert len(take(spec, "dead", lambda r: RunOutcome(running=True)).problems) == 3
    # The run died having attempted a (failed) and verified b; c it never reached.
    died = RunOutcome(running=False, attempted=frozenset({"a", "b"}), verified=frozenset({"b"}))
    outcomes = {"dead": died}
    assert [p.id for p in take(spec, "next", outcomes.get).problems] == ["c"]      # retries=0: a not again
    outcomes["next"] = RunOutcome(running=False, attempted=frozenset({"c"}))
    assert [p.id for p in take(f"{spec}?retries=1", "third", outcomes.get).problems] == ["a", "c"]
    outcomes["third"] = RunOutcome(running=False, attempted=frozenset({"a", "c"}))
    assert take(f"{spec}?retries=1", "fourth", outcomes.get).problems == []       # both failed twice


def test_bad_inbox_specs_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a folder"):
        load_problem_set(f"inbox:{tmp_path / 'missing'}")
    with pytest.raises(InputError, match="not an integer"):
        take(f"inbox:{tmp_path}?take=x", "r", lambda r: None)
    with pytest.raises(InputError, match="unknown key"):
        load_problem_set(f"inbox:{tmp_path}?n=3")


def test_a_torn_ledger_line_is_ignored(tmp_path: Path) -> None:
    drop(tmp_path, "one.jsonl", ["a", "b"], 100)
    spec = f"inbox:{tmp_path}?take=1"
    take(spec, "r1", lambda r: RunOutcome(running=True))
    with open(tmp_path / inbox.STATE_DIR / "claims.jsonl", "a") as f:
        f.write('{"run": "r2", "id": "b"')                                         # a crash mid-write
    assert [p.id for p in take(spec, "r3", lambda r: RunOutcome(running=True)).problems] == ["b"]
    assert take(spec, "r4", lambda r: RunOutcome(running=True)).problems == []      # r3's claim was kept whole
