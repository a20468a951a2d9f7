"""Resident-memory readings the benchmarks share (Linux `/proc/self/status`, glibc `malloc_trim`).

Imported by the scripts in this folder as `from procmem import ...` (a script's own folder is on
its import path); the name must never shadow a package the project imports.
"""

from __future__ import annotations

import ctypes
from pathlib import Path


def release_free_memory() -> None:
    """Hand freed heap pages back to the OS (glibc `malloc_trim`), so an RSS rise is a new allocation.

    Without it, glibc keeps freed blocks resident and reuses them: a restore that allocates
    the same size as the previous one shows no RSS rise at all.
    """
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def status_kb(field: str) -> int:
    """A `kB` field of /proc/self/status (VmRSS, VmHWM, ...); 0 where the kernel has none."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0
