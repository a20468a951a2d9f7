"""Processes of the Prefect tests: a free loopback port, waiting on a condition while watching the
processes (a dead one fails the test with its logs), stopping a process group, a log's tail."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

SERVER_TIMEOUT_S = 120
FLYWHEEL = Path(sys.executable).with_name("flywheel")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop(proc: subprocess.Popen[bytes], grace: float = 15) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGINT)          # our own process group (start_new_session)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def wait(what: str, check: Any, timeout: float, logs: list[Path], procs: list[subprocess.Popen[bytes]]) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in procs:
            if p.poll() is not None:
                pytest.fail(f"{p.args[:3]} exited with {p.returncode} while waiting for {what}:\n"
                            + "\n".join(tail(log) for log in logs))
        try:
            value = check()
        except httpx.HTTPError:
            value = None
        if value:
            return value
        time.sleep(1)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}:\n" + "\n".join(tail(log) for log in logs))
