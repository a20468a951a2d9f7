"""Exact statistics behind the capability figures (flywheel/stats.py)."""

from __future__ import annotations

import math

import pytest

from flywheel.stats import mcnemar_exact, mcnemar_power, wilson


@pytest.mark.parametrize(("k", "n", "lo", "hi"), [
    (0, 10, 0.0, 0.2775), (5, 10, 0.2366, 0.7634), (10, 10, 0.7225, 1.0), (81, 263, 0.2553, 0.3662),
])
def test_wilson_matches_published_values(k: int, n: int, lo: float, hi: float) -> None:
    got = wilson(k, n)
    assert got[0] == pytest.approx(lo, abs=5e-4) and got[1] == pytest.approx(hi, abs=5e-4)


def test_mcnemar_exact_is_the_two_sided_binomial_on_discordant_pairs() -> None:
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)            # 2 * 0.5**6
    assert mcnemar_exact(1, 9) == pytest.approx(2 * 11 / 1024)     # 2 * P(X <= 1), X ~ Bin(10, 1/2)
    assert mcnemar_exact(5, 5) == 1.0
    assert mcnemar_exact(3, 7) == mcnemar_exact(7, 3)


def test_mcnemar_power_grows_with_discordant_pairs_and_is_zero_when_significance_is_impossible() -> None:
    assert mcnemar_power(5) == 0.0                 # even 5:0 gives p = 0.0625
    assert mcnemar_power(6) == pytest.approx(0.75 ** 6 + 0.25 ** 6)
    assert mcnemar_power(10) < mcnemar_power(30) < mcnemar_power(60) <= 1.0
    assert math.isclose(mcnemar_power(40, favour=0.5), 2 * sum(
        math.comb(40, k) for k in range(41) if mcnemar_exact(k, 40 - k) < 0.05 and k < 20) / 2 ** 40)
