"""Prefect's temporary server dies with the process that started it, even one killed by SIGKILL.

One test brings up the real temporary server in a child Python (~15-40 s); the others drive the
watchdog with a stand-in process (`sleep`), in well under a second each.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from flows import server
from flywheel.liveness import is_running, start_ticks

ROOT = Path(__file__).resolve().parents[2]
SERVER_UP_TIMEOUT_S = 240  # a fresh SQLite migration on 2 busy cores
GONE_TIMEOUT_S = 20        # the watchdog's grace is 5 s


def _gone(pid: int) -> bool:
    """No such process, or only its zombie (the reaper may be an init that never reaps)."""
    return not is_running(pid, "?")


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.1)
    return _gone(pid)


def _wait_ignoring(pid: int, sig: int, timeout: float) -> bool:
    """Poll until `pid` ignores `sig` (the SigIgn mask in /proc/PID/status), or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = Path(f"/proc/{pid}/status").read_text()
        ignored = next(int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigIgn:"))
        if ignored >> (sig - 1) & 1:
            return True
        time.sleep(0.01)
    return False


def _children(pid: int) -> dict[int, str]:
    """pid -> command line of each live child of `pid` (scans /proc: no `children` file needed)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rpartition(")")[2].split()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(stat[1]) == pid and stat[0] != "Z":
            out[int(entry.name)] = cmdline
    return out


@pytest.fixture
def stand_in() -> Iterator[subprocess.Popen[bytes]]:
    """A long-lived process in place of a server, reaped (or killed) afterwards."""
    proc = subprocess.Popen(["sleep", "600"])
    yield proc
    proc.kill()
    proc.wait()


def test_the_watchdog_stops_a_server_at_eof(stand_in: subprocess.Popen[bytes]) -> None:
    started = start_ticks(stand_in.pid)
    assert started is not None
    signalled = server.watch_until_eof([f"+ {stand_in.pid} {started}\n"], grace_s=2)
    assert signalled == [stand_in.pid]
    assert stand_in.wait(5) == -signal.SIGTERM


def test_the_watchdog_leaves_a_stopped_server_and_a_reused_pid_alone(stand_in: subprocess.Popen[bytes]) -> None:
    started = start_ticks(stand_in.pid)
    assert started is not None
    forgotten = [f"+ {stand_in.pid} {started}\n", f"- {stand_in.pid}\n"]
    assert server.watch_until_eof(forgotten, grace_s=0.5) == []
    reused = [f"+ {stand_in.pid} {int(started) - 1}\n"]  # same pid, an earlier start: another process
    assert server.watch_until_eof(reused, grace_s=0.5) == []
    assert stand_in.poll() is None


def test_the_watchdog_kills_what_ignores_sigterm() -> None:
    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, time\n"
                                 "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint(flush=True)\ntime.sleep(600)"],
                                stdout=subprocess.PIPE)
    try:
        assert stubborn.stdout is not None and stubborn.stdout.readline() == b"\n"  # SIGTERM now ignored
        started = start_ticks(stubborn.pid)
        assert started is not None
        t0 = time.monotonic()
        assert server.stop_servers({stubborn.pid: started}, grace_s=1) == [stubborn.pid]
        assert stubborn.wait(5) == -signal.SIGKILL and time.monotonic() - t0 >= 1
    finally:
        stubborn.kill()
        stubborn.wait()


def test_the_watchdog_process_outlives_its_parent_and_stops_the_server(stand_in: subprocess.Popen[bytes]) -> None:
    # The watchdog as it really runs (this file's script), fed by a pipe that then closes, as a
    # killed parent's would; Ctrl-C, which reaches the whole process group, does not stop it.
    started = start_ticks(stand_in.pid)
    assert started is not None
    watchdog = subprocess.Popen([sys.executable, "-I", server.__file__], stdin=subprocess.PIPE, text=True)
    assert watchdog.stdin is not None
    watchdog.stdin.write(f"+ {stand_in.pid} {started}\n")
    watchdog.stdin.flush()
    assert _wait_ignoring(watchdog.pid, signal.SIGINT, GONE_TIMEOUT_S), "the watchdog never ignored SIGINT"
    watchdog.send_signal(signal.SIGINT)   # an ignored signal is dropped as it is sent: nothing to wait for
    assert watchdog.poll() is None and stand_in.poll() is None
    watchdog.stdin.close()
    assert watchdog.wait(10) == 0         # its own exit at EOF, not SIGINT's
    assert stand_in.wait(5) == -signal.SIGTERM


_BRING_UP = """
import os, sys, time
import flows
from prefect.client.orchestration import get_client
with get_client(sync_client=True) as client:
    assert client.api_healthcheck() is None, "the temporary server is not healthy"
print(os.getpid(), flush=True)
time.sleep(600)
"""


def test_a_killed_process_leaves_no_temporary_server_behind(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    leftovers: list[int] = []
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-c", _BRING_UP], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=err)
        try:
            out = proc.stdout
            assert out is not None
            line: list[bytes] = []
            reader = threading.Thread(target=lambda: line.append(out.readline()), daemon=True)
            reader.start()
            reader.join(SERVER_UP_TIMEOUT_S)
            err.seek(0)
            assert line and line[0].strip() == str(proc.pid).encode(), err.read().decode(errors="replace")[-3000:]
            children = _children(proc.pid)
            leftovers += children
            servers = [pid for pid, cmd in children.items() if "prefect.server.api.server:create_app" in cmd]
            watchdogs = [pid for pid, cmd in children.items() if cmd.rstrip().endswith("flows/server.py")]
            assert len(servers) == 1 and len(watchdogs) == 1, children
            # in sessions of their own: a signal to the run's process group (`timeout`) reaches the run only,
            # which ends its flow while its server still answers
            assert os.getsid(servers[0]) != os.getsid(proc.pid) and os.getsid(watchdogs[0]) != os.getsid(proc.pid)
            proc.kill()
            assert proc.wait(10) == -signal.SIGKILL
            assert _wait_gone(servers[0], GONE_TIMEOUT_S), f"the temporary server {servers[0]} outlived its parent"
            assert _wait_gone(watchdogs[0], 5), "the watchdog stays after its work is done"
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for pid in leftovers:  # only if the test failed: the pids were checked gone above
                if not _gone(pid):
                    os.kill(pid, signal.SIGKILL)


# A server stopped at exit whose log handler's stream is closed by then (pytest's capture did this
# at the end of every suite): the stop's info line is lost, the server stopped, and no traceback.
_STOP_WITH_A_CLOSED_LOG = """
import io, logging, subprocess, sys
from flows import server
from prefect.server.api import server as prefect_server
server.arm(prefect_server.SubprocessASGIServer)
closed = io.StringIO()
closed.close()
log = prefect_server.subprocess_server_logger
log.addHandler(logging.StreamHandler(closed))
log.setLevel(logging.INFO)
stand_in = subprocess.Popen(["sleep", "600"])
temporary = prefect_server.SubprocessASGIServer(port=0)
temporary.server_process = stand_in
temporary.stop()
print(stand_in.poll() is not None, logging.raiseExceptions, flush=True)
"""


def test_a_stop_whose_log_stream_is_closed_stops_the_server_without_a_traceback(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    done = subprocess.run([sys.executable, "-c", _STOP_WITH_A_CLOSED_LOG], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["True", "True"], done.stdout   # stopped; the logging flag restored after
    assert "Logging error" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]
