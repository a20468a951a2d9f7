"""A bounded child process that answers one JSON object per line: where unbounded work is run so it costs a kill.

The verifier (`verifiers.worker`: sympy on model output) and the GSM-Symbolic generator
(`flywheel.sources.gsm_worker`: a package that may enumerate for minutes) each run their work in one. Why a
process: a deadline in the caller's thread cannot stop a computation (`signal.alarm` works only on the main
thread, and the flywheel calls from worker threads); a child can be killed. Why a fresh interpreter
(`python -m MODULE MEMORY_MB`), never a fork: the parent holds torch's thread pools, and a fork of a threaded
process can deadlock. The wire is JSON lines, never pickle.

Parent side, `LineChild`: starts the module, waits for its `{"ready": true}` line, then `request(payload,
timeout)` writes one line and reads one back within `timeout` (`ChildTimeout`; the caller kills the child);
`ChildDied` when it exits or its pipe closes. Child side, `serve(memory_mb, setup)`: the parent watch, the
memory limit, stdout kept for the protocol (stray prints go to stderr), then `setup()` (imports; a failure is
said as `{"error": ...}` instead of ready) returns the handler that turns each request into its reply.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = str(Path(__file__).resolve().parent.parent)   # the checkout: first on the child's import path

Handler = Callable[[dict[str, Any]], dict[str, Any]]


class ChildTimeout(Exception):
    """No reply within the time given."""


class ChildDied(Exception):
    """The child exited, or its pipe closed."""


class LineChild:
    """`python -m module memory_mb` in its own session, ready to answer (see the module docstring).

    Raises (at start): ChildTimeout, ChildDied, or ValueError with what the child said instead of ready.
    """

    def __init__(self, module: str, memory_mb: int, *, startup_s: float, env: Mapping[str, str] = {}) -> None:
        self.memory_mb = memory_mb
        environ = dict(os.environ)
        environ["PYTHONPATH"] = ROOT + os.pathsep + environ.get("PYTHONPATH", "")
        environ.setdefault("OMP_NUM_THREADS", "1")
        environ.update(env)
        python = sys.executable
        if not os.access(python, os.X_OK) and os.path.exists("/proc/self/exe"):
            # This user cannot reach the interpreter by its path (a venv linking into another user's
            # private folder): start the very binary this process runs, with this process's import path.
            python = "/proc/self/exe"
            environ["PYTHONPATH"] = os.pathsep.join([ROOT, *(p for p in sys.path if p and os.path.isdir(p))])
        self.p = subprocess.Popen(  # noqa: S603 - fixed argv, our own module
            [python, "-m", module, str(memory_mb)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=environ, close_fds=True, start_new_session=True)
        self._buf = b""
        try:
            line = self._read_line(startup_s)
            said = json.loads(line)
            if not isinstance(said, dict) or said.get("ready") is not True:
                raise ValueError(said.get("error", said) if isinstance(said, dict) else line[:200])
        except BaseException:
            self.kill()
            raise

    def alive(self) -> bool:
        return self.p.poll() is None

    def request(self, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        """One request, its reply within `timeout` seconds. Raises ChildTimeout, ChildDied, ValueError (not JSON)."""
        assert self.p.stdin is not None
        try:
            self.p.stdin.write(json.dumps(payload).encode() + b"\n")
            self.p.stdin.flush()
        except OSError as err:   # BrokenPipeError: it died between requests
            raise ChildDied(f"worker pipe closed: {err}") from None
        reply: dict[str, Any] = json.loads(self._read_line(timeout))
        return reply

    def kill(self) -> None:
        """Kill the child (if it runs) and close its pipes."""
        if self.p.poll() is None:
            self.p.kill()
        try:
            self.p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for f in (self.p.stdin, self.p.stdout):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass

    def _read_line(self, timeout: float) -> bytes:
        assert self.p.stdout is not None
        fd = self.p.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChildTimeout(f"no answer within {timeout:.3g} s")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise ChildDied(f"worker exited (code {self.p.poll()})")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line


def serve(memory_mb: int, setup: Callable[[], Handler], on_error: Callable[[Exception], dict[str, Any]]) -> None:
    """The child's main loop: limits, `setup()`, ready, then one reply per request line until stdin closes.

    A request whose handler raises is answered with `on_error(err)` (MemoryError too: over `memory_mb`);
    the child serves on.
    """
    import resource

    from verifiers.parentwatch import exit_with_parent

    exit_with_parent()   # a parent killed outright (kill -9) takes this worker with it within a second
    limit = memory_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)   # stray prints from libraries must not corrupt the protocol

    def say(reply: dict[str, Any]) -> None:
        out.write(json.dumps(reply).encode() + b"\n")
        out.flush()

    try:
        handle = setup()
    except Exception as err:  # noqa: BLE001 - reported to the parent, which names it
        say({"error": f"{type(err).__name__}: {err}"[:500]})
        return
    say({"ready": True})
    for line in sys.stdin.buffer:
        try:
            reply = handle(json.loads(line))
        except Exception as err:  # noqa: BLE001 - one request's failure is answered, the worker serves on
            reply = on_error(err)
        say(reply)
