"""Which process owns a run, and whether that process is gone (so a `kill -9`'d run can be told apart).

A run records its owner as `host:pid:start`, where `start` is the process's start time in clock
ticks since boot (`/proc/<pid>/stat`, field 22). A pid alone is not enough: after a crash the
kernel may give the same pid to an unrelated process. An owner is *gone* only when that can be
known from here: the same host, and no process with that pid and that start time. An owner on
another host, or a token this code cannot read, is never declared gone (unknown is not dead).

Example:
    >>> token = process_token()
    >>> is_gone(token)
    False
"""

from __future__ import annotations

import os
import socket
from typing import Literal


def start_ticks(pid: int) -> str | None:
    """Start time of live `pid` in clock ticks since boot; None when it has exited (zombies included).

    Without /proc (not Linux) a live pid reports "?": no pid-reuse check is possible there.
    """
    if not os.path.isdir("/proc"):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return "?"
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) is in parentheses and may hold spaces; fields after it are plain.
    fields = stat[stat.rfind(")") + 2:].split()
    if not fields or fields[0] in ("Z", "X"):   # a zombie has finished; only its exit status is left
        return None
    return fields[19] if len(fields) > 19 else "?"


def is_running(pid: int, started: str) -> bool:
    """`pid` is alive and still the process that started at `started` ("?" on either side: unknown)."""
    now = start_ticks(pid)
    return now is not None and ("?" in (started, now) or now == started)


def process_token(pid: int | None = None) -> str:
    """`host:pid:start` of this process (or `pid`): what a run records as its owner."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{start_ticks(pid) or '?'}"


def owner_state(token: str | None) -> Literal["alive", "gone", "unknown"]:
    """Whether the process `token` names is alive, gone (same host; pid dead or reused), or unknown here."""
    if not token:
        return "unknown"
    parts = token.rsplit(":", 2)          # host:pid:start (a host name holds no ':')
    if len(parts) != 3 or not parts[1].isdigit() or parts[0] != socket.gethostname():
        return "unknown"
    return "alive" if is_running(int(parts[1]), parts[2]) else "gone"


def is_gone(token: str | None) -> bool:
    """True only when the owner is known to have ended: same host, and its pid is dead or reused."""
    return owner_state(token) == "gone"


def is_mine(token: str | None) -> bool:
    """Whether `token` names this very process."""
    return token == process_token()
