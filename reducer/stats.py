"""Small statistics for honest rates: Wilson intervals, mean intervals, pass@k and pass^k."""

from __future__ import annotations

import math
from collections.abc import Sequence

Z95 = 1.959963984540054


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """95% Wilson score interval for a proportion; ``(0.0, 1.0)`` when n is 0."""
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # Exact at the edges: float rounding would otherwise put 0/n's lower bound a hair above 0
    # (outside its own interval) and n/n's upper bound a hair below 1.
    low = 0.0 if successes <= 0 else max(0.0, min(p, centre - half))
    high = 1.0 if successes >= n else min(1.0, max(p, centre + half))
    return (low, high)


def mean_interval(values: Sequence[float], z: float = Z95) -> tuple[float | None, tuple[float, float]]:
    """Mean of values in [0, 1] and a normal-approximation 95% interval clipped to [0, 1].

    With fewer than two values nothing is known about the spread, so the interval is [0, 1].
    """
    if not values:
        return None, (0.0, 1.0)
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, (0.0, 1.0)
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    half = z * math.sqrt(var / n)
    return mean, (max(0.0, mean - half), min(1.0, mean + half))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k: chance that at least one of k draws from n attempts (c passed) passes."""
    if k > n:
        raise ValueError("k must not exceed n")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k: chance that all of k draws from n attempts (c passed) pass."""
    if k > n:
        raise ValueError("k must not exceed n")
    return math.comb(c, k) / math.comb(n, k)


def two_proportion_p(c1: int, n1: int, c2: int, n2: int) -> float | None:
    """Two-sided p-value of a pooled two-proportion z-test (None when either side is empty or no variance)."""
    if n1 == 0 or n2 == 0:
        return None
    pooled = (c1 + c2) / (n1 + n2)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    if se == 0:  # pooled rate 0 or 1: both sides all fail or all pass, nothing to test
        return None
    z = abs(c1 / n1 - c2 / n2) / se
    return math.erfc(z / math.sqrt(2))
