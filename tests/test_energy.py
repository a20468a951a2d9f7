"""The energy meter: the estimate is CPU seconds x watts, RAPL survives wraparound, auto falls back."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from flywheel.energy import EnergyConfig, EnergyMeter, RaplCounter, detect_source, is_measured
from flywheel.errors import InputError


def _busy(seconds: float) -> int:
    end, n = time.process_time() + seconds, 0
    while time.process_time() < end:
        n += 1
    return n


def test_estimate_is_cpu_seconds_times_watts() -> None:
    meter = EnergyMeter(EnergyConfig(cpu_watts=7.5, source="estimate"))
    meter.start()
    _busy(0.15)
    reading = meter.stop()
    assert reading.source == "estimate"
    assert reading.cpu_seconds >= 0.15
    assert reading.joules == pytest.approx(reading.cpu_seconds * 7.5, rel=0.02)
    assert reading.seconds > 0


def test_meter_as_context_records_the_reading() -> None:
    with EnergyMeter(EnergyConfig(cpu_watts=2.0, source="estimate")) as meter:
        _busy(0.05)
    assert meter.reading is not None and meter.reading.joules >= 0.05 * 2.0 * 0.98


def _fake_rapl(root: Path, zones: dict[str, tuple[int, int]]) -> None:
    for name, (energy, max_range) in zones.items():
        zone = root / name
        zone.mkdir(parents=True)
        (zone / "energy_uj").write_text(f"{energy}\n")
        (zone / "max_energy_range_uj").write_text(f"{max_range}\n")


def _set(root: Path, name: str, energy: int) -> None:
    (root / name / "energy_uj").write_text(f"{energy}\n")


def test_rapl_sums_packages_and_survives_wraparound(tmp_path: Path) -> None:
    # Two packages plus a core sub-zone (part of package 0: must not be counted twice).
    _fake_rapl(tmp_path, {"intel-rapl:0": (999_000_000, 1_000_000_000),
                          "intel-rapl:1": (5_000_000, 1_000_000_000),
                          "intel-rapl:0:0": (1, 1_000_000_000)})
    counter = RaplCounter.discover(tmp_path)
    assert counter is not None and len(counter.zones) == 2
    meter = EnergyMeter(EnergyConfig(source="rapl", powercap_root=tmp_path))
    meter.start()
    _set(tmp_path, "intel-rapl:0", 2_000_000)   # wrapped: 1,000,000 to the top + 2,000,000 after it
    _set(tmp_path, "intel-rapl:1", 8_500_000)   # +3,500,000
    _set(tmp_path, "intel-rapl:0:0", 900_000_000)
    reading = meter.stop()
    assert reading.source == "rapl"
    assert reading.joules == pytest.approx(6.5)


def test_rapl_unreadable_counters_are_not_a_source(tmp_path: Path) -> None:
    zone = tmp_path / "intel-rapl:0"
    zone.mkdir()
    (zone / "max_energy_range_uj").write_text("100\n")  # energy_uj missing (as when root-only)
    assert RaplCounter.discover(tmp_path) is None
    with pytest.raises(InputError, match="rapl"):
        EnergyMeter(EnergyConfig(source="rapl", powercap_root=tmp_path))


def test_auto_falls_back_to_estimate_here(tmp_path: Path) -> None:
    # No GPU on the test machines, and an empty powercap tree: only the estimate remains.
    cfg = EnergyConfig(source="auto", powercap_root=tmp_path / "none")
    assert detect_source(cfg, device="cpu") == "estimate"
    assert EnergyMeter(cfg, device="cpu").source == "estimate"


def test_auto_prefers_rapl_over_estimate(tmp_path: Path) -> None:
    _fake_rapl(tmp_path, {"intel-rapl:0": (10, 1000)})
    assert detect_source(EnergyConfig(powercap_root=tmp_path), device="cpu") == "rapl"


def test_env_overrides_watts_and_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLYWHEEL_CPU_WATTS", "3.25")
    monkeypatch.setenv("FLYWHEEL_ENERGY_SOURCE", "estimate")
    cfg = EnergyConfig.from_env()
    assert cfg == EnergyConfig(cpu_watts=3.25, source="estimate")
    monkeypatch.setenv("FLYWHEEL_CPU_WATTS", "lots")
    with pytest.raises(InputError, match="FLYWHEEL_CPU_WATTS"):
        EnergyConfig.from_env()


@pytest.mark.parametrize(("source", "measured"), [("nvml", True), ("rapl", True), ("estimate", False),
                                                  ("mixed", False), (None, False)])
def test_only_hardware_counters_count_as_measurements(source: str | None, measured: bool) -> None:
    assert is_measured(source) is measured
