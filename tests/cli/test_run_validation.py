"""Pass commands refuse bad input before Prefect starts: one `Error:` line, exit 2, within seconds."""

from __future__ import annotations

import time

import pytest

from tests.cli.conftest import Run


@pytest.mark.parametrize(("args", "says"), [
    (("run", "--problems", "gen:linear?n=99999"), "13,640 distinct problems"),
    (("run", "--problems", "gen:linear?m=3"), "unknown key 'm'"),
    (("run", "--problems", "/no/such/set.jsonl"), "is no existing file and names no problem source"),
    (("eval", "--problems", "gen:nosuch?n=2", "--heldout", "gen:linear?n=2"), "gen:nosuch"),
    (("study", "--problems", "gen:linear?n=2", "--heldout", "gen:linear?n=0"), "n=0"),
    (("study", "--problems", "gen:linear?n=2", "--heldout", "gen:linear?n=2", "--arms", "none,calc"),
     "unknown --arms value(s): calc"),
    (("serve", "--problems", "gen:linear?seed=x", "--cron", "0 3 * * *"), "seed"),
])
def test_bad_problem_sets_are_refused_before_prefect_starts(flywheel: Run, args: tuple[str, ...], says: str) -> None:
    start = time.perf_counter()
    proc = flywheel(*args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("Error:") and says in proc.stderr
    assert time.perf_counter() - start < 30     # no Prefect server, no model load


def test_verify_graft_refuses_a_prefix_past_the_window_and_an_unknown_device(flywheel: Run) -> None:
    assert "not one of 'cpu', 'cuda'" in flywheel("verify-graft", "--device", "tpu").stderr
    proc = flywheel("verify-graft", "--prefix-tokens", "5000", "--samples", "1")
    assert proc.returncode == 2 and "window" in proc.stderr and "Traceback" not in proc.stderr

