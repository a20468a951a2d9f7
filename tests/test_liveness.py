"""Run owners: a process is `gone` only when that is known (same host; pid dead or reused)."""

from __future__ import annotations

import socket
import subprocess
import sys

from flywheel.liveness import is_gone, is_mine, owner_state, process_token


def test_this_process_is_alive_and_mine() -> None:
    token = process_token()
    assert owner_state(token) == "alive" and not is_gone(token) and is_mine(token)


def test_an_exited_process_is_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    token = process_token(child.pid)
    assert owner_state(token) == "alive" and not is_mine(token)
    child.kill()
    child.wait()
    assert is_gone(token)


def test_a_reused_pid_is_gone_and_other_hosts_or_bad_tokens_are_unknown() -> None:
    host = socket.gethostname()
    pid, start = process_token().rsplit(":", 2)[1:]
    assert owner_state(f"{host}:{pid}:{int(start) + 1}") == "gone"      # same pid, another start time
    for token in (None, "", "garbage", f"{host}:x:1", f"another-{host}:{pid}:{start}"):
        assert owner_state(token) == "unknown" and not is_gone(token)
