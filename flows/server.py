"""Prefect's temporary server dies with the process that started it, even one killed by SIGKILL.

With no `PREFECT_API_URL`, Prefect 3 runs a temporary API server as a uvicorn subprocess
(`prefect.server.api.server.SubprocessASGIServer`) and stops it from an `atexit` hook, which
never runs when this process is killed by SIGKILL: each orphan keeps ~230 MB.

`install()` (called when `flows` is imported) wraps the method that spawns that subprocess. The
first server spawned also spawns a watchdog: this file run as a script (stdlib and the light flywheel.liveness only), whose stdin
is the read end of a pipe that only this process writes to (the write end is not inheritable, so
the server does not hold it). Each server's pid and start time go down the pipe. However this
process ends, the kernel closes the write end; the watchdog reads EOF and stops every server it
was told about that is still the same process (SIGTERM, then SIGKILL after `GRACE_S`). A server
Prefect stopped itself is crossed off first, and a start time that no longer matches means the pid
was reused, so the watchdog never signals a stranger.

Why not `prctl(PR_SET_PDEATHSIG)` in the server child: it fires when the *thread* that forked
exits, and Prefect starts the server from whichever thread first needs the API (an events worker,
a run's event-loop thread), which can end long before the process; it also needs a `preexec_fn`,
unsafe in a threaded parent. A watchdog sees the whole process end, and nothing else.

Prefect's server module takes seconds to import, so it is not imported here: `install()` patches
it when something else imports it (which is when a temporary server is about to start).
"""

from __future__ import annotations

import contextlib
import importlib.abc
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import types
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

from flywheel.liveness import is_running, start_ticks

SERVER_MODULE = "prefect.server.api.server"
GRACE_S = 5.0  # SIGTERM -> SIGKILL; uvicorn shuts the SQLite-backed server down in about a second
_POLL_S = 0.05

_lock = threading.Lock()
_start_lock = threading.RLock()   # one temporary-server start at a time (see `arm`)
_watchdog: subprocess.Popen[str] | None = None
_broken = False  # the watchdog's pipe failed once (warned); stop writing to it


# --- the watchdog process ---------------------------------------------------------------------------


def watch_until_eof(lines: Iterable[str], grace_s: float = GRACE_S) -> list[int]:
    """Read `+ PID START` / `- PID` lines until EOF, then stop the pids still listed; returns those signalled."""
    servers: dict[int, str] = {}
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and parts[0] == "+":
            servers[int(parts[1])] = parts[2]
        elif len(parts) == 2 and parts[0] == "-":
            servers.pop(int(parts[1]), None)
    return stop_servers(servers, grace_s)


def stop_servers(servers: dict[int, str], grace_s: float = GRACE_S) -> list[int]:
    """SIGTERM each live server, SIGKILL whichever is still up after `grace_s`; returns the pids signalled."""
    alive = [pid for pid, started in servers.items() if is_running(pid, started)]
    signalled = list(alive)
    for pid in alive:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while alive and time.monotonic() < deadline:
        time.sleep(_POLL_S)
        alive = [pid for pid in alive if is_running(pid, servers[pid])]
    for pid in alive:
        _signal(pid, signal.SIGKILL)
    return signalled


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:  # it ended between the check and the signal
        pass


def _watchdog_main() -> None:
    # Ctrl-C and a closed terminal reach the whole process group: stay, the parent may be gone next.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "SIGHUP"):  # not on Windows
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    watch_until_eof(sys.stdin)


# --- the parent's side --------------------------------------------------------------------------------


def _send(line: str, *, start: bool) -> None:
    """Write one line to the watchdog, starting it first when `start` (no-op if it never started)."""
    global _watchdog, _broken
    with _lock:
        if _broken:
            return
        if _watchdog is None:
            if not start:
                return
            # -I: isolated, so the script's folder (flows/) is not on sys.path and no PYTHON* variable applies.
            # its own session: a signal to this process group (`timeout`, a job-control kill) must not end it
            _watchdog = subprocess.Popen([sys.executable, "-I", os.path.abspath(__file__)], stdin=subprocess.PIPE,
                                         stdout=subprocess.DEVNULL, text=True, close_fds=True,
                                         start_new_session=True)
        assert _watchdog.stdin is not None
        try:
            _watchdog.stdin.write(line + "\n")
            _watchdog.stdin.flush()
        except OSError as err:  # the watchdog was killed: the run goes on, unguarded, and says so once
            _broken = True
            warnings.warn(f"the temporary Prefect server's watchdog is gone ({err}); a killed run may leave "
                          "its server behind", RuntimeWarning, stacklevel=3)


def watch(pid: int) -> None:
    """Have the watchdog stop `pid` when this process ends (starting the watchdog on first use)."""
    started = start_ticks(pid)
    if started is not None:  # else it has already exited: nothing to watch
        _send(f"+ {pid} {started}", start=True)


def forget(pid: int) -> None:
    """`pid` was stopped in an orderly way: the watchdog leaves it (and any later owner of the pid) alone."""
    _send(f"- {pid}", start=False)


def watchdog_pid() -> int | None:
    """The watchdog's pid in this process, None before any temporary server started."""
    return None if _watchdog is None else _watchdog.pid


#: The temporary server's own output (uvicorn, its services), under PREFECT_HOME: never the user's terminal.
SERVER_LOG = "temporary-server.log"


def server_log_path() -> str:
    """Where temporary servers write their output: `SERVER_LOG` in Prefect's home folder."""
    from prefect.settings import get_current_settings

    return os.path.join(str(get_current_settings().home), SERVER_LOG)


class _OwnSessionPopen(subprocess.Popen):  # type: ignore[type-arg]
    """`subprocess.Popen` for the temporary server: a session (and process group) of its own, and
    its output appended to `server_log_path()`, not this process's stderr: when it is stopped with
    events still queued, its services log CancelledError tracebacks that are no user's concern
    (they appeared after concurrent, 1000-attempt or interrupted runs). Inherited if no log opens."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("start_new_session", True)
        log = None
        if "stdout" not in kwargs and "stderr" not in kwargs:
            try:
                path = server_log_path()
                os.makedirs(os.path.dirname(path), exist_ok=True)
                log = open(path, "ab")  # noqa: SIM115  # the child keeps its own copy; ours closes below
                kwargs.update(stdout=log, stderr=subprocess.STDOUT)
            except Exception:  # noqa: BLE001  # an unwritable home: the server's output stays inherited
                log = None
        try:
            super().__init__(*args, **kwargs)
        finally:
            if log is not None:
                log.close()


def _own_session_subprocess() -> types.ModuleType:
    """A `subprocess` module for Prefect's server module: the same, but `Popen` starts a new session."""
    shim = types.ModuleType("subprocess")
    shim.__dict__.update(subprocess.__dict__)
    shim.Popen = _OwnSessionPopen  # type: ignore[attr-defined]
    return shim


def arm(server_class: Any) -> None:
    """Wrap `SubprocessASGIServer` so each server process it spawns is watched, and forgotten when stopped.

    Each server also starts in its own session: a signal sent to this process's whole group
    (`timeout`, `kill -TERM -PGID`, a shell's job control, Ctrl-C) reaches this process only, which
    then ends its flow run while the server still answers, and stops the server itself on exit. In
    the same group, the server died first and the flow retried it for about 70 s with tracebacks.
    """
    if getattr(server_class, "_flywheel_watched", False):
        return
    module = sys.modules.get(server_class.__module__)
    if module is not None and getattr(module, "subprocess", None) is subprocess:
        module.subprocess = _own_session_subprocess()  # type: ignore[attr-defined]
    spawn, stop = getattr(server_class, "_run_uvicorn_command", None), server_class.stop
    if spawn is None:
        warnings.warn(f"{SERVER_MODULE}.SubprocessASGIServer has no _run_uvicorn_command (Prefect changed): a "
                      "killed run may leave its temporary server behind", RuntimeWarning, stacklevel=2)
        return

    def _run_uvicorn_command(self: Any) -> subprocess.Popen[Any]:
        process: subprocess.Popen[Any] = spawn(self)
        watch(process.pid)
        return process

    def _stop(self: Any) -> None:
        process = self.server_process
        with _lines_lost_not_raised():
            stop(self)
        if process is not None:
            forget(process.pid)

    begin = server_class.start

    def _start(self: Any, *args: Any, **kwargs: Any) -> None:
        # Prefect marks a server `running` before it answers; a second caller (a flow, while
        # `start_early`'s thread is still booting it) waits here for the first to finish.
        with _start_lock:
            begin(self, *args, **kwargs)

    server_class._run_uvicorn_command = _run_uvicorn_command
    server_class.stop = _stop
    server_class.start = _start
    server_class._flywheel_watched = True


@contextlib.contextmanager
def _lines_lost_not_raised() -> Iterator[None]:
    """Stop's "Stopping temporary server" line runs from an `atexit` hook, when a log handler's stream
    may be closed already (pytest's capture, a pipe's reader gone): the line is then lost, never a
    `--- Logging error ---` traceback at exit. Only for the stop's own seconds; the flag is restored."""
    before = logging.raiseExceptions
    logging.raiseExceptions = False
    try:
        yield
    finally:
        logging.raiseExceptions = before


class _ArmOnImport:
    """A `sys.meta_path` finder that lets Prefect's server module load, then arms its server class."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != SERVER_MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _ArmingLoader(spec.loader)
                return spec
        return None


class _ArmingLoader(importlib.abc.Loader):
    """Delegates to the real loader (source, tracebacks), arming the class once the module has run."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        arm(module.SubprocessASGIServer)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def install() -> None:
    """Arm the temporary server now if Prefect's server module is loaded, else when it is imported."""
    module = sys.modules.get(SERVER_MODULE)
    if module is not None:
        arm(module.SubprocessASGIServer)
    elif not any(isinstance(f, _ArmOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _ArmOnImport())


# --- starting the temporary server while the process loads its model ----------------------------------


def start_early() -> threading.Thread | None:
    """With no Prefect API configured, begin starting Prefect's temporary server now, on a thread.

    The server boots in its own process (~4-8 s on 2 cores) while this one imports torch and
    loads its model; the first flow then finds it up instead of waiting for it (a flow that
    comes first waits for this start, see `arm`). Returns the thread, or None when a server
    is configured (`PREFECT_API_URL`) or temporary servers are off. A failed early start is
    left for the first flow to retry and report.
    """
    install()
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED

    if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
        return None

    def boot() -> None:
        try:
            from prefect.server.api.server import SubprocessASGIServer

            SubprocessASGIServer().start()
        except Exception:  # the first flow starts it again and says what is wrong
            pass

    thread = threading.Thread(target=boot, name="prefect-server-start", daemon=True)
    thread.start()
    return thread


if __name__ == "__main__":
    _watchdog_main()
