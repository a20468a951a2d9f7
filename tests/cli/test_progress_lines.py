"""Piped output of a long command: progress lines, and a `still ...` line while one step takes long."""

from __future__ import annotations

import time

import pytest

from flywheel.cli.common import progress_display


def _lines_within(capsys: pytest.CaptureFixture[str], seen: list[str], want: str, deadline_s: float) -> list[str]:
    """Collect stderr lines until one contains `want` or the deadline passes (polling, not a fixed sleep)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        seen += capsys.readouterr().err.splitlines()
        if any(want in line for line in seen):
            return seen
        time.sleep(0.02)
    return seen


def test_piped_progress_says_how_far_and_never_stays_silent_past_its_heartbeat(
        capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[str] = []
    with progress_display("solving", show_note=True, heartbeat_s=0.3) as progress:
        _lines_within(capsys, seen, "still solving: started", 10)
        assert any("still solving: started" in line for line in seen)      # before the first problem finished
        progress(1, 3, "p-1")
        progress(2, 3, "p-2")                                                 # within a third of a beat: folded
        seen += capsys.readouterr().err.splitlines()
        assert seen[-1].endswith("solving: 1/3 (p-1)") and not any("2/3" in line for line in seen)
        _lines_within(capsys, seen, "still solving: 2/3 (p-2)", 10)     # a long third problem: not silence
        assert any("still solving: 2/3 (p-2)" in line for line in seen)
        progress(3, 3, "p-3")                                                 # the last one: always said
    seen += capsys.readouterr().err.splitlines()
    assert seen[-1].endswith("solving: 3/3 (p-3)") and seen[-1].startswith("[")


def test_a_burst_of_steps_at_the_start_is_said_as_its_last_count(capsys: pytest.CaptureFixture[str]) -> None:
    """A resumed run reads back the problems it had finished, one progress call each, in its first instant."""
    seen: list[str] = []
    with progress_display("solving", heartbeat_s=0.3) as progress:
        for done in range(1, 40):
            progress(done, 200, "")
        seen += capsys.readouterr().err.splitlines()
        assert not any("/200" in line for line in seen)                    # folded, not "1/200"
        _lines_within(capsys, seen, "solving: 39/200", 10)
    assert any(line.endswith("solving: 39/200") for line in seen) and not any("solving: 1/200" in line for line in seen)


def test_a_phase_before_the_first_problem_is_said_at_once_and_kept_by_the_heartbeat(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`make run` printed `still solving: started` three times in its first 90 s: the phase is said instead."""
    seen: list[str] = []
    with progress_display("solving", show_note=True, heartbeat_s=0.3) as progress:
        progress(0, 4, "4 problems; loading qwen")
        seen += capsys.readouterr().err.splitlines()
        assert seen and seen[-1].endswith("solving: 0/4 (4 problems; loading qwen)")
        progress(0, 4, "4 problems; loading qwen")                         # the same phase again: not repeated
        assert capsys.readouterr().err == ""
        _lines_within(capsys, seen, "still solving: 0/4 (4 problems; loading qwen)", 10)
        assert not any("started" in line for line in seen)
