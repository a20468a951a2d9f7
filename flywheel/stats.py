"""Small exact statistics for capability figures: Wilson intervals and the exact McNemar test.

Torch-free and dependency-free, so reports and tests can use them anywhere.

    >>> round(mcnemar_exact(0, 6), 4)        # 6 discordant pairs, all favouring one arm
    0.0312
"""

from __future__ import annotations

import math

Z95 = 1.959964


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (95% by default); (0, 1) when n is 0."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _binom_cdf(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pair counts (1.0 with none)."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    return min(1.0, 2 * _binom_cdf(min(only_a, only_b), n))


def mcnemar_power(discordant: int, favour: float = 0.75, alpha: float = 0.05) -> float:
    """Power of the exact two-sided McNemar test with `discordant` discordant pairs.

    The chance of p < `alpha` when each discordant pair favours one arm with probability
    `favour` (0.75: a 3:1 split). With few discordant pairs even a real effect cannot reach
    significance: this says how much the test could have seen.
    """
    power = 0.0
    for k in range(discordant + 1):  # k pairs favour the arm
        if mcnemar_exact(discordant - k, k) < alpha:
            power += math.comb(discordant, k) * favour ** k * (1 - favour) ** (discordant - k)
    return power
