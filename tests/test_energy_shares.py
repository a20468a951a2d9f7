"""Energy of a many-attempt pass (issue 23, "0.0 J for huge runs"): every joule the meter read is
apportioned to an attempt, none lost to the split however many forks share a prefill, and no
attempt that decoded is recorded at 0 J."""

from __future__ import annotations

import math

from flywheel.attempt import AttemptJob, PlannedAttempt, solve_many
from flywheel.energy import EnergyConfig, EnergyMeter, Reading
from flywheel.engine import Engine
from flywheel.problemsets import Problem


class _Recording(EnergyMeter):
    """The real estimate meter, keeping every reading it gave."""

    def __init__(self) -> None:
        super().__init__(EnergyConfig(source="estimate", cpu_watts=10.0))
        self.readings: list[Reading] = []

    def stop(self) -> Reading:
        reading = super().stop()
        self.readings.append(reading)
        return reading


def test_a_pass_with_more_attempts_than_slots_apportions_every_joule(tiny_gemma: Engine) -> None:
    meter = _Recording()
    attempts = 70   # over four times the slots: forks wait, share one prefill, finish at different steps
    job = AttemptJob(Problem(id="p", text="What is 2+3?", reference="5"), "none", None,
                     [PlannedAttempt(k, 5, k) for k in range(attempts)], temperature=0.7)
    results = [r for _, _, r in solve_many(tiny_gemma, None, [job], slots=16, meter=meter)]
    assert len(results) == attempts
    assert all(r.energy_source == "estimate" for r in results)
    assert all(r.energy_joules is not None and r.energy_joules > 0 for r in results if r.decode_tokens > 0)
    read = sum(r.joules for r in meter.readings)
    recorded = sum(r.energy_joules or 0.0 for r in results)
    assert read > 0 and math.isclose(recorded, read, rel_tol=1e-9)
