"""Energy meter: joules spent between `start()` and `stop()`, always labelled with their source.

Sources, best first (auto-detection takes the first that works here):

- `nvml`: NVIDIA GPUs' total-energy counter (`nvmlDeviceGetTotalEnergyConsumption`, mJ since the
  driver loaded), summed over the visible GPUs. Counts GPU board energy only.
- `rapl`: Intel/AMD package counters under `/sys/class/powercap/intel-rapl:N/energy_uj`, when the
  kernel exposes them readable (many distributions make them root-only). Counts CPU packages only.
- `estimate`: this process's CPU seconds times a configured wattage (`EnergyConfig.cpu_watts`,
  env `FLYWHEEL_CPU_WATTS`). Not a measurement, and labelled `estimate` wherever it appears.

`nvml` and `rapl` measure the whole device, not just this process: meter on a quiet machine.

Example:
    >>> with EnergyMeter() as meter:                        # doctest: +SKIP
    ...     engine.prefill(ids)
    >>> meter.reading.joules, meter.reading.source          # doctest: +SKIP
    (41.7, 'estimate')
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from flywheel.config import ENV_CPU_WATTS, ENV_ENERGY_SOURCE
from flywheel.errors import InputError

Source = Literal["nvml", "rapl", "estimate"]
SOURCES: tuple[Source, ...] = ("nvml", "rapl", "estimate")
#: The sources that read a hardware energy counter. `estimate` reads none: CPU seconds x watts
#: varies about 3x between attempts over the same tokens, so a ratio of two estimates is shown
#: with its spread (`flywheel report`), never as a bare figure.
MEASURED_SOURCES: frozenset[str] = frozenset({"nvml", "rapl"})

#: Watts per fully busy core for the estimate: roughly a server CPU's TDP shared over its cores
#: (e.g. 200 W / 20 cores). Override with FLYWHEEL_CPU_WATTS for your machine.
DEFAULT_CPU_WATTS = 10.0
DEFAULT_POWERCAP_ROOT = Path("/sys/class/powercap")
#: Top-level RAPL zones are whole packages; sub-zones (intel-rapl:0:0, ...) are parts of them.
_RAPL_PACKAGE = re.compile(r"^intel-rapl:\d+$")


def is_measured(source: str | None) -> bool:
    """True for a hardware counter's reading; False for `estimate`, `mixed` or unknown sources."""
    return source in MEASURED_SOURCES


@dataclass(frozen=True)
class EnergyConfig:
    """How energy is metered; frozen so it can key caches and travel with a run's settings."""

    cpu_watts: float = DEFAULT_CPU_WATTS  # per busy core, for the `estimate` source only
    source: Source | Literal["auto"] = "auto"  # force one source; "auto" takes the best available
    powercap_root: Path = DEFAULT_POWERCAP_ROOT  # where RAPL zones live (tests point it elsewhere)

    @classmethod
    def from_env(cls, **overrides: Any) -> EnergyConfig:
        """The defaults, with FLYWHEEL_CPU_WATTS / FLYWHEEL_ENERGY_SOURCE applied, then `overrides`."""
        values: dict[str, Any] = {}
        watts = os.environ.get(ENV_CPU_WATTS)
        if watts:
            try:
                values["cpu_watts"] = float(watts)
            except ValueError as err:
                raise InputError(f"{ENV_CPU_WATTS}={watts!r} is not a number of watts",
                                 hint=f"e.g. {ENV_CPU_WATTS}=12.5") from err
        forced = os.environ.get(ENV_ENERGY_SOURCE)
        if forced:
            values["source"] = forced
        values.update(overrides)
        cfg = cls(**values)
        if cfg.source != "auto" and cfg.source not in SOURCES:
            raise InputError(f"unknown energy source {cfg.source!r}", hint=f"use auto or one of {', '.join(SOURCES)}")
        if not math.isfinite(cfg.cpu_watts) or cfg.cpu_watts <= 0:
            raise InputError(f"cpu_watts must be a positive, finite number of watts, got {cfg.cpu_watts}",
                             hint=f"e.g. {ENV_CPU_WATTS}=12.5")
        return cfg


@dataclass(frozen=True)
class Reading:
    """Energy spent over an interval: `joules` from `source`, over `seconds` of wall time."""

    joules: float
    source: Source
    seconds: float
    cpu_seconds: float = 0.0  # this process's CPU time over the interval


# --- counters: each returns an opaque sample, and the joules between two samples ----------------


class _Counter:
    source: Source

    def sample(self) -> Any:
        raise NotImplementedError

    def joules(self, start: Any, end: Any) -> float:
        raise NotImplementedError


class EstimateCounter(_Counter):
    """CPU seconds of this process (all threads) times `cpu_watts`."""

    source: Source = "estimate"

    def __init__(self, cpu_watts: float) -> None:
        self.cpu_watts = cpu_watts

    def sample(self) -> float:
        return time.process_time()

    def joules(self, start: float, end: float) -> float:
        return (end - start) * self.cpu_watts


@dataclass(frozen=True)
class RaplZone:
    """One RAPL package zone: its counter file and the value at which the counter wraps."""

    energy_file: Path
    max_range_uj: int


class RaplCounter(_Counter):
    """Sum of the package zones' `energy_uj`, each corrected for one wraparound per interval."""

    source: Source = "rapl"

    def __init__(self, zones: list[RaplZone]) -> None:
        if not zones:
            raise InputError("no readable RAPL zones")
        self.zones = zones

    @classmethod
    def discover(cls, root: Path = DEFAULT_POWERCAP_ROOT) -> RaplCounter | None:
        """The readable package zones under `root`, or None when there are none."""
        zones = []
        try:
            entries = sorted(root.iterdir()) if root.is_dir() else []
        except OSError:
            return None
        for zone in entries:
            if not _RAPL_PACKAGE.match(zone.name):
                continue
            try:
                int((zone / "energy_uj").read_text())
                max_range = int((zone / "max_energy_range_uj").read_text())
            except (OSError, ValueError):  # root-only counters, or a zone without a range
                continue
            zones.append(RaplZone(zone / "energy_uj", max_range))
        return cls(zones) if zones else None

    def sample(self) -> list[int]:
        return [int(z.energy_file.read_text()) for z in self.zones]

    def joules(self, start: list[int], end: list[int]) -> float:
        total_uj = 0
        for zone, a, b in zip(self.zones, start, end, strict=True):
            total_uj += b - a if b >= a else zone.max_range_uj - a + b  # the counter wrapped once
        return total_uj / 1e6


class NvmlCounter(_Counter):
    """Total energy of the visible NVIDIA GPUs, from NVML (millijoules since driver load)."""

    source: Source = "nvml"

    def __init__(self, nvml: Any, handles: list[Any]) -> None:
        self._nvml = nvml
        self.handles = handles

    @classmethod
    def discover(cls) -> NvmlCounter | None:
        """A counter over every GPU NVML sees, or None without nvidia-ml-py, a driver or a GPU."""
        try:
            import pynvml  # from the nvidia-ml-py distribution

            pynvml.nvmlInit()
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
            for h in handles:  # older GPUs lack the counter: fail here, not mid-attempt
                pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
        except Exception:  # ImportError, NVMLError_* (no driver, no GPU, not supported)
            return None
        return cls(pynvml, handles) if handles else None

    def sample(self) -> list[int]:
        return [int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(h)) for h in self.handles]

    def joules(self, start: list[int], end: list[int]) -> float:
        return sum(b - a for a, b in zip(start, end, strict=True)) / 1e3


def _counter_for(source: Source, config: EnergyConfig) -> _Counter | None:
    if source == "nvml":
        return NvmlCounter.discover()
    if source == "rapl":
        return RaplCounter.discover(config.powercap_root)
    return EstimateCounter(config.cpu_watts)


def detect_counter(config: EnergyConfig | None = None, device: str | None = None) -> _Counter:
    """The forced source's counter, or the best available one.

    Args:
        config: metering settings (default `EnergyConfig.from_env()`).
        device: the torch device the work runs on; `nvml` is only chosen automatically for a
            `cuda` device (or when None), so CPU work on a GPU box is not metered by an idle GPU.
    Raises:
        InputError: a forced source is not available on this machine.
    """
    config = config or EnergyConfig.from_env()
    if config.source != "auto":
        counter = _counter_for(config.source, config)
        if counter is None:
            raise InputError(f"energy source {config.source!r} is not available on this machine",
                             hint=f"use --energy-source auto (or unset {ENV_ENERGY_SOURCE})")
        return counter
    order: list[Source] = ["rapl", "estimate"]
    if device is None or device.startswith("cuda"):
        order.insert(0, "nvml")
    for source in order:
        counter = _counter_for(source, config)
        if counter is not None:
            return counter
    raise AssertionError("the estimate source is always available")


def detect_source(config: EnergyConfig | None = None, device: str | None = None) -> Source:
    """The source `EnergyMeter(config, device=device)` would use here."""
    return detect_counter(config, device).source


class EnergyMeter:
    """Meters one interval at a time: `start()`, work, `stop() -> Reading`; or use it as a context.

    The source is chosen once, on construction, so every interval of a run carries the same label.
    """

    def __init__(self, config: EnergyConfig | None = None, *, device: str | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.config = config or EnergyConfig.from_env()
        self._counter = detect_counter(self.config, device)
        self._clock = clock
        self._start: tuple[float, float, Any] | None = None
        self.reading: Reading | None = None  # the last interval's reading

    @property
    def source(self) -> Source:
        return self._counter.source

    def start(self) -> None:
        self._start = (self._clock(), time.process_time(), self._counter.sample())

    def stop(self) -> Reading:
        if self._start is None:
            raise RuntimeError("EnergyMeter.stop() called before start()")
        t0, cpu0, sample0 = self._start
        sample1, cpu1, t1 = self._counter.sample(), time.process_time(), self._clock()
        self._start = None
        self.reading = Reading(joules=max(self._counter.joules(sample0, sample1), 0.0), source=self.source,
                               seconds=t1 - t0, cpu_seconds=cpu1 - cpu0)
        return self.reading

    def __enter__(self) -> EnergyMeter:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


__all__ = ["DEFAULT_CPU_WATTS", "MEASURED_SOURCES", "SOURCES", "EnergyConfig", "EnergyMeter", "Reading", "Source",
           "detect_source", "is_measured"]
