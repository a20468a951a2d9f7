"""Prefect 3 flows: one flywheel pass (load -> route -> attempt -> verify -> deposit -> record).

Prefect runs with no server configured (its temporary local server, started once per process) and uses `PREFECT_API_URL`
when set. Importing this package quiets Prefect's anonymous telemetry unless asked for: with the
temporary SQLite server its writes race the first flow run and print lock tracebacks. It also
makes that temporary server die with this process, however it dies (`flows.server`).
"""

from __future__ import annotations

import os

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
# The temporary server migrates a fresh SQLite database on first start: ~15 s on 2 busy cores,
# past Prefect's 20 s default when the machine is loaded.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")

from flows import server  # noqa: E402

server.install()  # before anything can start a temporary server

from flows.run import RunConfig, flywheel_run  # noqa: E402

__all__ = ["RunConfig", "flywheel_run"]
