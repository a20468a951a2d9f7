"""Per-process resources the tasks share: one engine per model, one library per catalog.

Tasks receive names, not objects, and look the heavy objects up here, so a worker holds one
model in memory however many tasks and flow runs it executes. Model calls are serialized by the
engine itself (`Engine.lock`: a torch model is not safe to drive from two threads at once). A Dask
worker process is such a worker: `engine_loads()` and `worker_id()` let a run report it.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flywheel.energy import EnergyConfig, EnergyMeter
    from flywheel.engine import Engine, EngineSettings
    from flywheel.library import Library
    from flywheel.router import RouterConfig

_lock = threading.Lock()
_engines: dict[tuple[str, EngineSettings], Engine] = {}
_libraries: dict[tuple[str, str, RouterConfig], Library] = {}
_meters: dict[EnergyConfig | None, EnergyMeter] = {}
_engine_loads = 0  # Engine.load calls made by this process (registered engines not counted)


def engine(model: str, settings: EngineSettings | None = None, *, progress: bool = False) -> Engine:
    """The process's engine for `model` under `settings`, loaded on first use."""
    from flywheel.engine import Engine, EngineSettings

    global _engine_loads
    key = (model, settings or EngineSettings())
    with _lock:
        if key not in _engines:
            _engines[key] = Engine.load(model, key[1], progress=progress)
            _engine_loads += 1
        return _engines[key]


def engine_loads() -> int:
    """How many models this process has loaded from disk (one per model and settings, ever)."""
    return _engine_loads


def worker_id() -> str:
    """`host:pid` of this process: which worker did a piece of work."""
    return f"{socket.gethostname()}:{os.getpid()}"


def register_engine(model: str, eng: Engine, settings: EngineSettings | None = None) -> None:
    """Make `eng` the process's engine for `model` (tests use it to inject a scripted engine)."""
    from flywheel.engine import EngineSettings

    with _lock:
        _engines[(model, settings or EngineSettings())] = eng


def energy_meter(config: EnergyConfig | None = None) -> EnergyMeter:
    """The process's energy meter under `config` (default: the environment's); its source, NVML,
    RAPL or a labelled estimate, is chosen once per config."""
    from flywheel.energy import EnergyMeter

    with _lock:
        if config not in _meters:
            _meters[config] = EnergyMeter(config)
        return _meters[config]


def library(root: str, db_url: str, router_config: RouterConfig | None = None) -> Library:
    """The process's open library for (`root`, `db_url`), routing under `router_config` (default: the router's)."""
    from flywheel.library import Library
    from flywheel.router import RouterConfig

    key = (str(Path(root).resolve()), db_url, router_config or RouterConfig())
    with _lock:
        if key not in _libraries:
            _libraries[key] = Library.open(Path(root), db_url, router_config=key[2])
        return _libraries[key]


def close_libraries() -> None:
    """Close every library this process opened (tests use it between temporary libraries)."""
    with _lock:
        for lib in _libraries.values():
            lib.close()
        _libraries.clear()
