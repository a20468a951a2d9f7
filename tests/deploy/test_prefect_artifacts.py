"""A pass run against a real Prefect server: its log lines and its two artifacts, read back through Prefect's client.

The server is `prefect server start` on loopback with its own SQLite database (no PostgreSQL needed);
`flywheel run` runs as a user would run it, in its own process, pointed at the server by
`PREFECT_API_URL`. Everything is stopped at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prefect_proc import FLYWHEEL, free_port, stop, wait

PROBLEMS = "gen:linear?n=2&seed=1"
SERVER_TIMEOUT_S = 180


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory, tiny_dirs: dict[str, Path]) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("prefect-publish")
    api = f"http://127.0.0.1:{free_port()}/api"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "FLYWHEEL_"))}
    log = tmp / "server.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [str(FLYWHEEL.with_name("prefect")), "server", "start", "--host", "127.0.0.1", "--port",
             api.rsplit(":", 1)[1].split("/")[0]],
            env={**base, "PREFECT_HOME": str(tmp / "server-home"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                 "PREFECT_UI_ENABLED": "false"}, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait("/api/health", lambda: httpx.get(f"{api}/health", timeout=5).status_code == 200, SERVER_TIMEOUT_S,
             [log], [server])
        env = {**base, "PREFECT_HOME": str(tmp / "client-home"), "PREFECT_API_URL": api,
               "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
        run = subprocess.run([str(FLYWHEEL), "--library", str(tmp / "library"), "--model", str(tiny_dirs["gemma3"]),
                              "run", "--problems", PROBLEMS, "--budget", "4", "--attempts", "2", "--json"],
                             env=env, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-3000:]
        yield {"api": api, "summary": json.loads(run.stdout.strip().splitlines()[-1])}
    finally:
        stop(server)


def _read(api: str, flow_run_id: str) -> tuple[list[Any], list[Any]]:
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        LogFilter,
        LogFilterFlowRunId,
    )

    with SyncPrefectClient(api) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])))
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
    return artifacts, logs


def test_a_pass_publishes_its_headline_and_problems_as_artifacts(published: dict[str, Any]) -> None:
    summary = published["summary"]
    artifacts, _ = _read(published["api"], summary["flow_run_id"])
    by_key = {a.key: a for a in artifacts}
    assert set(by_key) == {"flywheel-summary", "flywheel-problems"}
    md = by_key["flywheel-summary"]
    assert md.type == "markdown" and f"# flywheel run `{summary['run_id']}`" in md.data
    assert summary["savings"]["lines"][0] in md.data          # the report's headline, as the run returned it
    table = by_key["flywheel-problems"]
    rows = json.loads(table.data) if isinstance(table.data, str) else table.data
    assert table.type == "table"
    assert [r["problem_id"] for r in rows] == [r["problem_id"] for r in summary["results"]]
    assert [r["decode_tokens"] for r in rows] == [r["decode_tokens"] for r in summary["results"]]


def test_a_pass_logs_progress_and_routes_to_its_flow_run(published: dict[str, Any]) -> None:
    summary = published["summary"]
    _, logs = _read(published["api"], summary["flow_run_id"])
    messages = [log.message for log in logs]
    n = len(summary["results"])
    for i, r in enumerate(summary["results"]):
        assert any(m.startswith(f"problem {j}/{n} finished") for m in messages for j in [i + 1])
        assert any(m.startswith(f"{r['problem_id']}: route {r['route']}, ") for m in messages), messages
    assert summary["savings"]["lines"][0] in messages
