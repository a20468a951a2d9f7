"""Checks run in persistent worker processes, so a runaway sympy call costs a kill, not a hang.

The process is a `verifiers.lineworker.LineChild` (shared with the GSM-Symbolic generator). Why a process,
not `signal.alarm`: alarms only work on the main thread, and the flywheel calls the verifier from Prefect
worker threads. Why `subprocess` of a fresh interpreter rather than
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
import sys
import threading
from collections.abc import Callable
from typing import Any

from verifiers.lineworker import ChildDied, ChildTimeout, LineChild, serve
from verifiers.types import CheckTimeout, VerifierConfig, VerifierUnavailable

_STARTUP_S = 120.0  # importing sympy on a loaded 2-core machine; not part of any check's budget


class WorkerDied(RuntimeError):
    """The worker exited mid-request (memory limit, crash)."""


class _Proc:
    """One verifier worker (`verifiers.lineworker.LineChild`), its failures in the verifier's own words."""

    def __init__(self, memory_mb: int) -> None:
        self.memory_mb = memory_mb
        try:
            self.child = LineChild("verifiers.worker", memory_mb, startup_s=_STARTUP_S)
        except (ChildTimeout, ChildDied, ValueError) as err:
            raise VerifierUnavailable(f"the verifier's worker did not start ({err}; memory limit "
                                      f"{memory_mb} MB)") from None

    def alive(self) -> bool:
        return self.child.alive()

    def request(self, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        try:
            return self.child.request(payload, timeout)
        except ChildTimeout as err:
            raise CheckTimeout(str(err)) from None
        except ChildDied as err:
            raise WorkerDied(str(err)) from None

    def kill(self) -> None:
        self.child.kill()


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
        if proc is not None and (proc.memory_mb != cfg.memory_mb or not proc.alive()):
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
    """Child main loop (`verifiers.lineworker.serve`): limits first, then import sympy, then answer requests."""

    def setup() -> Callable[[dict[str, Any]], dict[str, Any]]:
        sys.set_int_max_str_digits(0)  # exact results are already bounded by max_result_bits
        sys.setrecursionlimit(20_000)
        from verifiers.core import check_local, output_local, substitution_local  # imports sympy

        def handle(req: dict[str, Any]) -> dict[str, Any]:
            cfg = VerifierConfig(**req["config"])
            if req["op"] == "check":
                cand, ref, mode = req["args"]
                return check_local(cand, ref, mode, config=cfg).to_dict()
            if req["op"] == "output":
                text, form, ref, problem, *rest = req["args"]
                answered = output_local(text, form, ref, problem, config=cfg,
                                        markers=rest[0] if rest else "final-line")
                return {"answer": answered.answer, "verdict": answered.verdict.to_dict()}
            problem, cand = req["args"]
            return substitution_local(problem, cand, config=cfg).to_dict()
        return handle

    def on_error(err: Exception) -> dict[str, Any]:
        if isinstance(err, MemoryError):
            return {"status": "unparseable", "reason": f"refused: memory limit of {memory_mb} MB reached"}
        return {"status": "unparseable", "reason": f"worker error: {type(err).__name__}: {err}"}   # malformed

    serve(memory_mb, setup, on_error)


if __name__ == "__main__":
    _serve(int(sys.argv[1]) if len(sys.argv) > 1 else VerifierConfig().memory_mb)
