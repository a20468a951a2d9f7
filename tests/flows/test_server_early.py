"""`flows.server.start_early`: Prefect's temporary server boots while the process loads its model,
and a flow that asks for the API meanwhile waits for it instead of talking to a server not yet up.

Each case runs in a child Python: the server is a per-process singleton, and this test process
may have started its own already.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVER_UP_TIMEOUT_S = 300  # a fresh SQLite migration on 2 busy cores

_SECOND_CALLER = r"""
import time
import httpx
from flows import server

thread = server.start_early()
assert thread is not None, "no early start without PREFECT_API_URL"
from prefect.server.api.server import SubprocessASGIServer

s = SubprocessASGIServer()
deadline = time.monotonic() + 120
while not s.running:           # the early thread is inside Prefect's start (it marks `running` first)
    assert time.monotonic() < deadline, "the early start never began"
    time.sleep(0.01)
s.start()                      # what a flow's client does: must return only once the server answers
print("health", httpx.get(f"{s.api_url}/health", timeout=10).status_code, flush=True)
thread.join(30)
print("early thread done", not thread.is_alive(), flush=True)
"""

_CONFIGURED = r"""
from flows import server
print("thread", server.start_early())
"""


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_LOGGING_LEVEL="WARNING", **extra)
    return env


def test_a_flow_asking_for_the_api_during_the_early_start_waits_for_the_server(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", _SECOND_CALLER], cwd=ROOT, env=_env(tmp_path),
                         capture_output=True, text=True, timeout=SERVER_UP_TIMEOUT_S)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "health 200" in out.stdout and "early thread done True" in out.stdout, out.stdout + out.stderr[-2000:]


def test_no_early_start_against_a_configured_server(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", _CONFIGURED], cwd=ROOT,
                         env=_env(tmp_path, PREFECT_API_URL="http://127.0.0.1:9/api"),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "thread None"
