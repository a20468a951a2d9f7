"""Hostile input, round three, the rest (issue 23): a group signal ends a run promptly and quietly,
concurrent and large runs end without Prefect tracebacks."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.conftest import FLYWHEEL, catalog_rows, wait_for_a_recorded_attempt


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["term", "int", "hup"])
def test_a_signal_to_the_whole_process_group_ends_the_run_promptly_without_tracebacks(
        tiny_dirs: dict[str, Path], tmp_path: Path, sig: signal.Signals) -> None:
    """`timeout`, systemd and job control (Ctrl-C) signal the whole group: Prefect's temporary server
    is not in it, so the run ends while its server still answers (it took ~70 s of ConnectError
    tracebacks), and the server's own shutdown noise (CancelledError) goes to its log, not stderr."""
    lib = tmp_path / "lib"
    env = {**os.environ, "FLYWHEEL_LIBRARY": str(lib), "FLYWHEEL_MODEL": str(tiny_dirs["gemma3"])}
    env.pop("FLYWHEEL_DB", None)
    # As from a terminal: SIGINT and SIGHUP at their default disposition, even when this suite runs
    # in the background (a shell ignores SIGINT for background jobs, nohup SIGHUP; both are inherited).
    argv = [FLYWHEEL, "run", "--problems", "gen:linear?n=200&seed=1", "--budget", "48", "--run-id", "grp"]
    as_from_a_terminal = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                          "signal.signal(signal.SIGHUP, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])")
    proc = subprocess.Popen([sys.executable, "-c", as_from_a_terminal, *argv], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # a group of its own
    try:
        wait_for_a_recorded_attempt(proc, lib)
        assert proc.poll() is None, "the run ended before it could be signalled"
        os.killpg(proc.pid, sig)    # what `timeout` does: the group, not the process
        signalled = time.monotonic()
        _, err = proc.communicate(timeout=120)
        took = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130 and "interrupted" in err, err
    assert not [w for w in ("Traceback", "ConnectError", "CancelledError", "watchdog is gone") if w in err], err
    assert took < 15, f"the run took {took:.1f} s to end after the group signal"
    assert catalog_rows(lib, "SELECT status FROM runs WHERE id = 'grp'") == [("interrupted",)]


def test_db_naming_another_librarys_catalog_is_one_line_and_changes_nothing(tiny_dirs: dict[str, Path],
                                                                           tmp_path: Path) -> None:
    from tests.cli.test_hostile_cli import clean_error

    env = {**os.environ, "FLYWHEEL_MODEL": str(tiny_dirs["gemma3"])}
    env.pop("FLYWHEEL_DB", None)

    def flywheel(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([FLYWHEEL, *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)

    a, b = tmp_path / "a", tmp_path / "b"
    deposit = ("deposit", "--problem", "What is 2+3?", "--solution", "2+3=5", "--answer", "5", "--reference", "5")
    assert flywheel("--library", str(a), *deposit).returncode == 0
    a_db = f"sqlite:///{a / 'catalog.db'}"
    b.mkdir()   # an (empty) library folder: inspecting a missing one is refused before any catalog is read
    for args in (("library", "ls"), deposit):   # read-only and writing
        err = clean_error(flywheel("--library", str(b), "--db", a_db, *args), 2)
        assert "belongs to another library" in err and "--db" in err
    assert list(b.iterdir()) == []
    assert catalog_rows(a, "SELECT count(*) FROM solutions") == [(1,)]
    moved = tmp_path / "moved"
    a.rename(moved)                                   # a library moved with its catalog keeps working
    proc = flywheel("--library", str(moved), "library", "verify")
    assert proc.returncode == 0, proc.stderr


def test_concurrent_runs_on_one_library_both_finish_with_clean_stderr(tiny_dirs: dict[str, Path],
                                                                       tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    env = {**os.environ, "FLYWHEEL_LIBRARY": str(lib), "FLYWHEEL_MODEL": str(tiny_dirs["gemma3"])}
    env.pop("FLYWHEEL_DB", None)
    procs = [subprocess.Popen([FLYWHEEL, "run", "--problems", f"gen:linear?n=2&seed={i}", "--budget", "12",
                               "--attempts", "2", "--run-id", f"c{i}"], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
             for i in (1, 2)]
    try:
        outs = [p.communicate(timeout=400) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        noise = [line for line in err.replace("\r", "\n").splitlines()   # progress lines aside (piped: `[  N s] solving: …`)
                 if line.strip() and not re.fullmatch(r"(\[ *\d+ s\] (still )?)?solving(: .*)?", line.strip())]
        assert noise == [], err     # no Prefect shutdown traceback, warning or error line
    assert sorted(catalog_rows(lib, "SELECT id, status FROM runs")) == [("c1", "finished"), ("c2", "finished")]
    assert catalog_rows(lib, "SELECT count(*) FROM attempts") == [(8,)]
