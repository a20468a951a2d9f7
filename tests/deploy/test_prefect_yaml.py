"""prefect.yaml declares the same deployment `flywheel serve` serves: it must resolve and validate."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from flows.deploy import DEPLOYMENT_NAME
from flows.run import RunConfig, flywheel_run

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def deployment() -> dict[str, Any]:
    data = yaml.safe_load((REPO / "prefect.yaml").read_text())
    (dep,) = data["deployments"]
    return dep


def test_entrypoint_loads_as_a_script_in_a_fresh_interpreter(deployment: dict[str, Any]) -> None:
    """As a worker loads it: the script's folder goes first on sys.path, so no module there may
    shadow a package the flow imports (a `flows/flywheel.py` once shadowed `flywheel`)."""
    path, _ = deployment["entrypoint"].split(":")
    assert (REPO / path).is_file()
    code = ("import sys; from prefect.flows import load_flow_from_entrypoint; "
            "print(load_flow_from_entrypoint(sys.argv[1]).name)")
    proc = subprocess.run([sys.executable, "-c", code, deployment["entrypoint"]], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PREFECT_LOGGING_LEVEL": "ERROR"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == flywheel_run.name
    assert deployment["name"] == DEPLOYMENT_NAME


def test_parameters_are_a_valid_run_config(deployment: dict[str, Any]) -> None:
    cfg = RunConfig.model_validate(deployment["parameters"]["cfg"])
    assert cfg.problems == "champ" and cfg.budget >= 1
    # Where the library, catalog and model live is the worker's environment, not the file's.
    assert not {"library", "db_url", "model"} & set(deployment["parameters"]["cfg"])


def test_schedule_is_a_valid_cron_like_the_served_one(deployment: dict[str, Any]) -> None:
    from prefect.schedules import Cron

    (schedule,) = deployment["schedules"]
    Cron(schedule["cron"], timezone=schedule["timezone"])  # raises on a bad expression
    with pytest.raises(ValueError):
        Cron("not a cron")
