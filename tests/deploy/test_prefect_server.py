"""A real Prefect server on loopback: the flywheel deployment is served on a cron schedule,
a run is triggered through the REST API, and the catalog rows it produced are checked.

The configuration is docker-compose.yml's, natively: the Prefect server keeps its state in
PostgreSQL (asyncpg), the worker (`flywheel serve`) writes the catalog to PostgreSQL, the model
is the tiny seeded one. Everything is stopped at the end.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from deploy_pg import fresh_database
from prefect_proc import FLYWHEEL, SERVER_TIMEOUT_S, free_port, stop, tail, wait
from sqlalchemy.engine import make_url

from flywheel.catalog import open_catalog

PROBLEMS = "gen:arith?n=2&seed=1"
CRON = "0 3 * * *"
DEPLOYMENT = "deploy-test"
RUN_TIMEOUT_S = 240


@pytest.fixture(scope="module")
def served_run(tmp_path_factory: pytest.TempPathFactory, tiny_dirs: dict[str, Path]) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("prefect")
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    with fresh_database("prefect") as prefect_db, fresh_database("catalog") as catalog_db:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "FLYWHEEL_"))}
        server_env = {**base, "PREFECT_HOME": str(tmp / "server-home"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                      "PREFECT_UI_ENABLED": "false",
                      "PREFECT_API_DATABASE_CONNECTION_URL": make_url(prefect_db).set(
                          drivername="postgresql+asyncpg").render_as_string(hide_password=False)}
        server_log = tmp / "server.log"
        serve_log = tmp / "serve.log"
        procs: list[subprocess.Popen[bytes]] = []
        with open(server_log, "wb") as out:
            server = subprocess.Popen([str(FLYWHEEL.with_name("prefect")), "server", "start", "--host", "127.0.0.1",
                                       "--port", str(port)], env=server_env, stdout=out, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        procs.append(server)
        try:
            client = httpx.Client(base_url=api, timeout=10)
            started = time.monotonic()
            wait("/api/health", lambda: client.get("/health").status_code == 200, SERVER_TIMEOUT_S,
                  [server_log], procs)
            server_seconds = time.monotonic() - started

            worker_env = {**base, "PREFECT_HOME": str(tmp / "worker-home"), "PREFECT_API_URL": api,
                          "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                          "FLYWHEEL_LIBRARY": str(tmp / "library"), "FLYWHEEL_DB": catalog_db,
                          "FLYWHEEL_MODEL": str(tiny_dirs["gemma3"])}
            with open(serve_log, "wb") as out:
                serve = subprocess.Popen([str(FLYWHEEL), "serve", "--problems", PROBLEMS, "--cron", CRON,
                                          "--budget", "6", "--name", DEPLOYMENT], env=worker_env, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
            procs.append(serve)

            def deployment() -> dict[str, Any] | None:
                r = client.get(f"/deployments/name/flywheel-run/{DEPLOYMENT}")
                return r.json() if r.status_code == 200 else None

            dep = wait("the served deployment", deployment, 120, [serve_log, server_log], procs)
            schedules = client.get(f"/deployments/{dep['id']}/schedules").json()
            flow_run = client.post(f"/deployments/{dep['id']}/create_flow_run", json={}).json()

            def finished() -> dict[str, Any] | None:
                fr = client.get(f"/flow_runs/{flow_run['id']}").json()
                return fr if fr["state"] and fr["state"]["type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED") else None

            final = wait("the triggered flow run", finished, RUN_TIMEOUT_S, [serve_log, server_log], procs)
            yield {"deployment": dep, "schedules": schedules, "flow_run": final, "catalog_db": catalog_db,
                   "library": tmp / "library", "serve_log": serve_log, "server_seconds": server_seconds}
        finally:
            for p in reversed(procs):
                stop(p)


def test_served_deployment_runs_through_the_api_and_records_the_catalog(served_run: dict[str, Any]) -> None:
    dep, fr = served_run["deployment"], served_run["flow_run"]
    assert [s["schedule"].get("cron") for s in served_run["schedules"]] == [CRON]
    assert fr["state"]["type"] == "COMPLETED", tail(served_run["serve_log"])
    cat = open_catalog(served_run["catalog_db"])
    try:
        from flywheel.catalog.models import RunRow

        with cat.session() as s:
            runs = list(s.query(RunRow).filter(RunRow.flow_run_id == fr["id"]))
        assert len(runs) == 1, "the flow run left no (or several) runs rows"
        run = runs[0]
        assert run.status == "finished" and run.problem_set == PROBLEMS
        attempts = cat.attempts_for_run(run.id)
        assert len(attempts) == 2 and {a.attempt_index for a in attempts} == {0}
        assert all(a.budget == 6 and a.decode_tokens <= 6 for a in attempts)
    finally:
        cat.close()
    assert dep["parameters"]["cfg"]["problems"] == PROBLEMS


def test_deployment_parameters_carry_no_database_password(served_run: dict[str, Any]) -> None:
    """The Prefect server stores deployment parameters; a catalog password must not be among them."""
    password = make_url(served_run["catalog_db"]).password
    assert password
    params = str(served_run["deployment"]["parameters"])
    assert password not in params
    assert "db_url" not in served_run["deployment"]["parameters"]["cfg"]
