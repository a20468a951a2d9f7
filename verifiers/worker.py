"""Checks run in persistent worker processes, so a runaway sympy call costs a kill, not a hang.

Why a process, not `signal.alarm`: alarms only work on the main thread, and the flywheel calls
the verifier from Prefect worker threads. Why `subprocess` of a fresh interpreter rather than
`fork`: the parent holds torch's thread pools, and a fork of a threaded process can deadlock. (This
is what multiprocessing's 'spawn' does; running `python -m verifiers.worker` directly also avoids
re-importing the caller's `__main__` and keeps the wire format JSON, never pickle.)

Protocol: one JSON object per line. The child says `{"ready": true}` once sympy is imported, then
answers each request `{"op": "check"|"substitute", "args": [...], "config": {...}}` with a
`Verdict.to_dict()`, and `{"op": "output", ...}` (extract a model output's answer, then check it)
with `{"answer": ..., "verdict": {...}}` (a bare verdict when the request failed). The parent waits at most `timeout_s` per request; past it, the child is
killed (SIGKILL) and a fresh one is started on the next call.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from verifiers.types import CheckTimeout, VerifierConfig, VerifierUnavailable

_STARTUP_S = 120.0  # importing sympy on a loaded 2-core machine; not part of any check's budget


class WorkerDied(RuntimeError):
    """The worker exited mid-request (memory limit, crash)."""


class _Proc:
    def __init__(self, memory_mb: int) -> None:
        self.memory_mb = memory_mb
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        env.setdefault("OMP_NUM_THREADS", "1")
        python = sys.executable
        if not os.access(python, os.X_OK) and os.path.exists("/proc/self/exe"):
            # This user cannot reach the interpreter by its path (a venv linking into another user's
            # private folder): start the very binary this process runs, with this process's import path.
            python = "/proc/self/exe"
            env["PYTHONPATH"] = os.pathsep.join([root, *(p for p in sys.path if p and os.path.isdir(p))])
        self.p = subprocess.Popen(  # noqa: S603 - fixed argv, our own module
            [python, "-m", "verifiers.worker", str(memory_mb)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, close_fds=True, start_new_session=True,
        )
        self.buf = b""
        try:
            ready = self._read_line(_STARTUP_S)
            said = json.loads(ready)
        except (CheckTimeout, WorkerDied, ValueError) as err:
            self.kill()
            raise VerifierUnavailable(f"the verifier's worker did not start ({err}; memory limit "
                                      f"{memory_mb} MB)") from None
        if not isinstance(said, dict) or said.get("ready") is not True:
            self.kill()
            raise VerifierUnavailable(f"the verifier's worker did not start: it said {ready[:200]!r}")

    def _read_line(self, timeout: float) -> bytes:
        assert self.p.stdout is not None
        fd = self.p.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CheckTimeout(f"no answer within {timeout:.3g} s")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise WorkerDied(f"worker exited (code {self.p.poll()})")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    def request(self, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        assert self.p.stdin is not None
        try:
            self.p.stdin.write(json.dumps(payload).encode() + b"\n")
            self.p.stdin.flush()
        except (BrokenPipeError, OSError) as err:
            raise WorkerDied(f"worker pipe closed: {err}") from err
        out: dict[str, Any] = json.loads(self._read_line(timeout))
        return out

    def kill(self) -> None:
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


class WorkerPool:
    """Up to `VerifierConfig.workers` processes shared by every thread; thread-safe."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._idle: list[_Proc] = []
        self._busy = 0
        self.restarts = 0  # workers killed on timeout or death, for tests and benchmarks

    def _acquire(self, cfg: VerifierConfig) -> _Proc:
        with self._cond:
            while not self._idle and self._busy >= max(1, cfg.workers):
                self._cond.wait()
            self._busy += 1
            proc = self._idle.pop() if self._idle else None
        if proc is not None and (proc.memory_mb != cfg.memory_mb or proc.p.poll() is not None):
            proc.kill()
            proc = None
        if proc is None:
            try:
                proc = _Proc(cfg.memory_mb)
            except OSError as err:   # no interpreter, no process slots, no memory to fork
                self._release(None)
                raise VerifierUnavailable(f"the verifier's worker could not be started: {err}") from None
            except BaseException:
                self._release(None)
                raise
        return proc

    def _release(self, proc: _Proc | None) -> None:
        with self._cond:
            self._busy -= 1
            if proc is not None:
                self._idle.append(proc)
            self._cond.notify()

    def run(self, op: str, args: list[Any], cfg: VerifierConfig) -> dict[str, Any]:
        """Run one request under `cfg.timeout_s`; raises CheckTimeout or WorkerDied (worker replaced),
        or VerifierUnavailable when no worker could be started."""
        proc = self._acquire(cfg)
        try:
            out = proc.request({"op": op, "args": args, "config": cfg.to_dict()}, cfg.timeout_s)
        except BaseException:
            proc.kill()
            with self._cond:
                self.restarts += 1
            self._release(None)
            raise
        self._release(proc)
        return out

    def shutdown(self) -> None:
        """Kill idle workers (busy ones are killed by their own timeout)."""
        with self._cond:
            procs, self._idle = self._idle, []
        for p in procs:
            p.kill()


POOL = WorkerPool()
atexit.register(POOL.shutdown)


def _serve(memory_mb: int) -> None:
    """Child main loop: limits first, then import sympy, then answer requests forever."""
    import resource

    from verifiers.parentwatch import exit_with_parent

    exit_with_parent()   # a parent killed outright (kill -9) takes this worker with it within a second

    limit = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    sys.set_int_max_str_digits(0)  # exact results are already bounded by max_result_bits
    sys.setrecursionlimit(20_000)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints from libraries must not corrupt the protocol

    from verifiers.core import check_local, output_local, substitution_local  # imports sympy

    out.write(b'{"ready": true}\n')
    out.flush()
    for line in sys.stdin.buffer:
        try:
            req = json.loads(line)
            cfg = VerifierConfig(**req["config"])
            if req["op"] == "check":
                cand, ref, mode = req["args"]
                reply = check_local(cand, ref, mode, config=cfg).to_dict()
            elif req["op"] == "output":
                text, form, ref, problem, *rest = req["args"]
                answered = output_local(text, form, ref, problem, config=cfg, markers=rest[0] if rest else "final-line")
                reply = {"answer": answered.answer, "verdict": answered.verdict.to_dict()}
            else:
                problem, cand = req["args"]
                reply = substitution_local(problem, cand, config=cfg).to_dict()
        except MemoryError:
            reply = {"status": "unparseable", "reason": f"refused: memory limit of {memory_mb} MB reached"}
        except Exception as err:  # malformed request: answer, do not die
            reply = {"status": "unparseable", "reason": f"worker error: {type(err).__name__}: {err}"}
        out.write(json.dumps(reply).encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    _serve(int(sys.argv[1]) if len(sys.argv) > 1 else VerifierConfig().memory_mb)
