"""Scheduled flywheel runs: a cron deployment of `flywheel_run`, served by this process (or a work pool via prefect.yaml)."""

from __future__ import annotations

import re
from typing import Any

from flows.run import RunConfig, flywheel_run
from flywheel import config
from flywheel.errors import InputError

DEPLOYMENT_NAME = "flywheel"


#: A deployment name Prefect accepts (it refuses '/', '%', '&', '<', '>' and others).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._ -]{0,99}")


def deployment(cfg: RunConfig, cron: str, *, name: str = DEPLOYMENT_NAME, timezone: str | None = None) -> Any:
    """A `RunnerDeployment` of `flywheel_run` on `cron` with `cfg` as its parameters.

    Raises:
        InputError: `cron` is not a valid cron expression.
    """
    from prefect.schedules import Cron

    if not _NAME.fullmatch(name):
        raise InputError(f"invalid deployment name {name!r}: letters, digits, '.', '_', '-' and spaces only "
                         "(at most 100)", hint="e.g. --name nightly")
    try:
        schedule = Cron(cron, timezone=timezone) if timezone else Cron(cron)
    except ValueError as err:
        raise InputError(f"invalid cron schedule {cron!r}: {err}", hint="e.g. --cron '0 3 * * *' (03:00 daily)") from err
    # The catalog URL may carry a password and the server stores parameters in the clear:
    # runs resolve it from FLYWHEEL_DB in the worker's environment instead.
    return flywheel_run.to_deployment(name=name, schedule=schedule,
                                      parameters={"cfg": cfg.model_dump(mode="json", exclude={"db_url"})},
                                      description=f"flywheel pass over {cfg.problems} on {cron!r}")


def serve(cfg: RunConfig, cron: str, *, name: str = DEPLOYMENT_NAME) -> None:
    """Serve the deployment until interrupted: each scheduled run is a `flywheel_run` in this process."""
    import os

    from prefect import serve as prefect_serve

    if cfg.db_url:  # served runs are child processes: they read the catalog URL from here
        os.environ[config.ENV_DB] = cfg.db_url
    prefect_serve(deployment(cfg, cron, name=name))
