"""`flywheel serve` over an inbox on a one-minute cron, against a real Prefect server (issue 55).

Three ticks of the schedule with problems dropped in between: the first takes what was there, the second
is killed outright (SIGKILL) after recording its first attempts, the third takes what the killed tick never
touched and what arrived since. Each problem is attempted by exactly one tick and none is lost. The Prefect
server keeps its state in SQLite under a temporary PREFECT_HOME; the catalog is the library's SQLite; the
model is the tiny seeded one. Takes ~3-4 minutes: the ticks are a minute apart.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prefect_proc import FLYWHEEL, SERVER_TIMEOUT_S, free_port, stop, tail, wait

CRON = "* * * * *"
TICK_TIMEOUT_S = 150   # the next minute's tick, plus its start-up (a model load, Prefect's engine)


def _drop(box: Path, name: str, ids: list[str]) -> None:
    """Drop one arrival file into the inbox, whole (written aside, then renamed)."""
    rows = [{"id": pid, "problem": f"What is {i} plus {i + 3}?", "reference": str(2 * i + 3)}
            for i, pid in enumerate(ids, 1)]
    tmp = box / f".{name}.tmp"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.replace(tmp, box / name)


def _runs(db: Path) -> list[dict[str, Any]]:
    """The catalog's runs in start order, each with the problems it recorded attempts for."""
    if not db.exists():
        return []
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
        try:
            runs = con.execute("SELECT id, status, owner, flow_run_id FROM runs ORDER BY started_at").fetchall()
            rows = con.execute("SELECT run_id, problem_id FROM attempts").fetchall()
        except sqlite3.OperationalError:   # tables not made yet
            return []
    attempted: dict[str, list[str]] = {}
    for run_id, pid in rows:
        attempted.setdefault(run_id, []).append(pid)
    return [{"id": r, "status": s, "owner": o, "flow_run_id": f, "attempted": sorted(attempted.get(r, []))}
            for r, s, o, f in runs]


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory, tiny_dirs: dict[str, Path]) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("prefect-stream")
    box, library = tmp / "inbox", tmp / "library"
    box.mkdir()
    db = library / "catalog.db"
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "FLYWHEEL_"))}
    server_env = {**base, "PREFECT_HOME": str(tmp / "server-home"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                  "PREFECT_UI_ENABLED": "false", "PREFECT_API_SERVICES_SCHEDULER_LOOP_SECONDS": "5"}
    server_log, serve_log = tmp / "server.log", tmp / "serve.log"
    procs: list[subprocess.Popen[bytes]] = []
    logs = [serve_log, server_log]
    with open(server_log, "wb") as out:
        procs.append(subprocess.Popen([str(FLYWHEEL.with_name("prefect")), "server", "start", "--host", "127.0.0.1",
                                       "--port", str(port)], env=server_env, stdout=out, stderr=subprocess.STDOUT,
                                      start_new_session=True))
    try:
        client = httpx.Client(base_url=api, timeout=10)
        wait("/api/health", lambda: client.get("/health").status_code == 200, SERVER_TIMEOUT_S, [server_log], procs)
        first = [f"a-{i}" for i in range(3)]
        second = [f"b-{i}" for i in range(120)]     # long enough to be caught mid-run
        third = [f"c-{i}" for i in range(2)]
        _drop(box, "1-first.jsonl", first)
        worker_env = {**base, "PREFECT_HOME": str(tmp / "worker-home"), "PREFECT_API_URL": api,
                      "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_RUNNER_POLL_FREQUENCY": "2",
                      "FLYWHEEL_LIBRARY": str(library), "FLYWHEEL_MODEL": str(tiny_dirs["gemma3"])}
        with open(serve_log, "wb") as out:
            procs.append(subprocess.Popen([str(FLYWHEEL), "serve", "--problems", f"inbox:{box}", "--cron", CRON,
                                           "--budget", "48", "--name", "stream-test"], env=worker_env, stdout=out,
                                          stderr=subprocess.STDOUT, start_new_session=True))

        def finished_runs(k: int) -> list[dict[str, Any]] | None:
            runs = _runs(db)
            return runs if sum(r["status"] == "finished" for r in runs) >= k else None

        wait("the first tick", lambda: finished_runs(1), TICK_TIMEOUT_S + 60, logs, procs)
        _drop(box, "2-second.jsonl", second)

        def mid_run() -> dict[str, Any] | None:
            return next((r for r in _runs(db)[1:] if r["status"] == "running" and r["attempted"]), None)

        deadline = time.monotonic() + TICK_TIMEOUT_S
        killed = None
        while killed is None and time.monotonic() < deadline:
            killed = mid_run()
            time.sleep(0.05)
        if killed is None:
            pytest.fail("the second tick was never seen mid-run:\n" + "\n".join(tail(log) for log in logs))
        pid = int(killed["owner"].rsplit(":", 2)[1])
        serve_pid = procs[-1].pid
        os.kill(pid, signal.SIGKILL)
        seen_at_kill = len(killed["attempted"])
        if pid == serve_pid:    # the tick ran inside the serve process: serving starts again, as a supervisor would
            procs[-1].wait(10)
            with open(serve_log, "ab") as out:
                procs[-1] = subprocess.Popen([str(FLYWHEEL), "serve", "--problems", f"inbox:{box}", "--cron", CRON,
                                              "--budget", "48", "--name", "stream-test"], env=worker_env, stdout=out,
                                             stderr=subprocess.STDOUT, start_new_session=True)
        _drop(box, "3-third.jsonl", third)
        runs = wait("the third tick", lambda: finished_runs(2), TICK_TIMEOUT_S + 60, logs, procs)
        yield {"runs": _runs(db), "killed": killed["id"], "seen_at_kill": seen_at_kill,
               "first": first, "second": second, "third": third, "serve_log": serve_log, "in_serve": pid == serve_pid,
               "finished_then": runs}
    finally:
        for p in reversed(procs):
            stop(p)


def test_each_problem_is_taken_by_exactly_one_tick_and_none_is_lost(stream: dict[str, Any]) -> None:
    runs = stream["runs"]
    owners: dict[str, list[str]] = {}
    for r in runs:
        for pid in r["attempted"]:
            owners.setdefault(pid, []).append(r["id"])
    everything = stream["first"] + stream["second"] + stream["third"]
    assert sorted(owners) == sorted(everything), tail(stream["serve_log"])   # none lost
    assert all(len(o) == 1 for o in owners.values()), {p: o for p, o in owners.items() if len(o) > 1}   # none twice


def test_the_killed_tick_is_interrupted_and_the_next_takes_what_it_never_touched(stream: dict[str, Any]) -> None:
    by_id = {r["id"]: r for r in stream["runs"]}
    killed = by_id[stream["killed"]]
    assert killed["status"] == "interrupted"      # its owner is gone: the next run's open marked it
    assert 0 < len(killed["attempted"]) < len(stream["second"])
    assert set(killed["attempted"]) <= set(stream["second"])
    first = next(r for r in stream["runs"] if stream["first"][0] in r["attempted"])
    third = next(r for r in stream["runs"] if stream["third"][0] in r["attempted"])
    assert first["status"] == third["status"] == "finished"
    assert first["attempted"] == sorted(stream["first"])
    assert set(third["attempted"]) == (set(stream["second"]) - set(killed["attempted"])) | set(stream["third"])
    assert first["flow_run_id"] and third["flow_run_id"] and first["flow_run_id"] != third["flow_run_id"]
