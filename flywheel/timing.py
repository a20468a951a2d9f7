"""Where a pass's time went: seconds per named phase, safe to add to from a second thread.

    >>> clock = PhaseClock()
    >>> with clock.phase("route"):
    ...     pass
    >>> sorted(clock.snapshot())
    ['route']
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class PhaseClock:
    """Accumulated wall seconds per phase name (a phase may run on any thread)."""

    def __init__(self) -> None:
        self._seconds: dict[str, float] = {}
        self._lock = threading.Lock()

    def add(self, name: str, seconds: float) -> None:
        with self._lock:
            self._seconds[name] = self._seconds.get(name, 0.0) + seconds

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start)

    def snapshot(self) -> dict[str, float]:
        """Seconds per phase so far, rounded to the millisecond."""
        with self._lock:
            return {k: round(v, 3) for k, v in sorted(self._seconds.items())}
