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

__all__ = ["RunConfig", "flywheel_run"]


def __getattr__(name: str) -> object:
    # `flows.run` imports torch and transformers (seconds): loaded on first use, so that
    # `flows.server.start_early()` can start Prefect's server before that import, not after it.
    if name in __all__:
        from flows import run

        return getattr(run, name)
    raise AttributeError(f"module 'flows' has no attribute {name!r}")
