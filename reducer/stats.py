"""Small statistics for honest rates: Wilson and case-clustered intervals, mean intervals, pass@k and pass^k."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

Z95 = 1.959963984540054


def wilson(successes: float, n: float, z: float = Z95) -> tuple[float, float]:
    """95% Wilson score interval for a proportion; ``(0.0, 1.0)`` when n is 0.

    ``successes`` and ``n`` may be fractional: an effective sample size (:func:`clustered_interval`).
    """
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


def mean_interval(values: Sequence[float], level: float = 0.95) -> tuple[float | None, tuple[float, float]]:
    """Mean of values in [0, 1] (one per case) and its t interval at ``level`` on ``len - 1``
    degrees of freedom, clipped to [0, 1].

    With fewer than two values nothing is known about the spread, so the interval is [0, 1].
    """
    if not values:
        return None, (0.0, 1.0)
    n = len(values)
    mean = math.fsum(values) / n
    if n < 2:
        return mean, (0.0, 1.0)
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    half = t_quantile(1 - (1 - level) / 2, n - 1) * math.sqrt(var / n)
    return mean, (max(0.0, mean - half), min(1.0, mean + half))


def composite_interval(values: Sequence[float], level: float = 0.95) -> tuple[float | None, tuple[float, float]]:
    """Mean of per-case values in [0, 1] and its interval over cases: the t interval of
    :func:`mean_interval`, never narrower than the case-clustered Wilson interval of the values
    taken as fractional successes, one trial per case (:func:`clustered_interval`).

    The floor is for a spread the cases cannot estimate: every case scoring the same gives a t
    interval of zero width, as if two cases at 1.0 proved the next one scores 1.0 too; the
    behavioural rate's interval counts each case as one trial then, and so does this one.
    """
    mean, (low, high) = mean_interval(values, level)
    floor = clustered_interval([(v, 1.0) for v in values], level)
    if floor is None:
        return mean, (low, high)
    return mean, (min(low, floor.low), max(high, floor.high))


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


def _t_central(t: float, df: int) -> float:
    """P(|T| < t) for Student's t with integer ``df``: the closed-form finite series
    (Abramowitz and Stegun 26.7.3 and 26.7.4)."""
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2:  # odd
        term, total = 1.0, 1.0 if df > 1 else 0.0
        for k in range(3, df - 1, 2):
            term *= (k - 1) / k * c2
            total += term
        return 2 / math.pi * (theta + (math.sin(theta) * math.cos(theta) * total if df > 1 else 0.0))
    term = total = 1.0
    for k in range(2, df - 1, 2):
        term *= (k - 1) / k * c2
        total += term
    return math.sin(theta) * total


CORNISH_FISHER_DF = 100
"""From this many degrees of freedom on, the t quantile comes from its Cornish-Fisher expansion
(error below 1e-7 there) instead of bisection on the series, whose length grows with df."""


def _cornish_fisher(p: float, df: int) -> float:
    """Abramowitz and Stegun 26.7.5: the t quantile as a series in 1/df around the normal one."""
    z = NormalDist().inv_cdf(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def t_quantile(p: float, df: int) -> float:
    """Quantile of Student's t with ``df`` degrees of freedom (df >= 1): by bisection on the exact
    distribution function below :data:`CORNISH_FISHER_DF`, by its expansion from there on."""
    if df < 1:
        raise ValueError("df must be at least 1")
    if not 0 < p < 1:
        raise ValueError("p must be in (0, 1)")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df >= CORNISH_FISHER_DF:
        return _cornish_fisher(p, df)
    target, low, high = 2 * p - 1, 0.0, 1.0
    while _t_central(high, df) < target:
        high *= 2
    for _ in range(100):
        mid = (low + high) / 2
        low, high = (mid, high) if _t_central(mid, df) < target else (low, mid)
    return (low + high) / 2


@dataclass(frozen=True)
class ClusteredInterval:
    """A rate over clusters (cases) of correlated trials, with its case-clustered interval."""

    rate: float
    low: float
    high: float
    clusters: int
    """Cases with at least one trial: the sampling unit."""
    design_effect: float
    """Clustered variance over the binomial variance of as many independent trials (at least 1)."""
    effective_n: float
    """Trials divided by the design effect: what the Wilson interval is computed on."""


CLUSTERED_METHOD = "cluster-wilson"
"""Wilson score interval on the design-effect-adjusted sample size, with Student's t on
clusters - 1 degrees of freedom (Korn and Graubard, 1998); docs/design/statistics.md."""


def clustered_interval(clusters: Sequence[tuple[float, float]], level: float = 0.95) -> ClusteredInterval | None:
    """The pooled rate of ``(passed, trials)`` per case and its interval with the case as the unit.

    The rate is the ratio estimator ``sum(passed) / sum(trials)``; its variance is the
    cluster-robust (linearised) one, ``k / (k - 1) * sum((y_i - p m_i)^2) / M^2`` over the k
    cases, so epochs and assertions of one case count as one draw of the case. Dividing the
    trials by the design effect gives the effective sample size the Wilson interval is
    computed on, with a t quantile on k - 1 degrees of freedom in place of z; the design effect
    is at least 1 (cases never count as more than their trials). When every trial passed or
    every one failed the spread between cases cannot be estimated, and each case counts as
    one trial. None with fewer than two cases: one case
    says nothing about another.
    """
    kept = [(y, m) for y, m in clusters if m > 0]
    k = len(kept)
    if k < 2:
        return None
    if not 0 < level < 1:
        raise ValueError("level must be in (0, 1)")
    trials = sum(m for _, m in kept)
    passed = sum(y for y, _ in kept)
    p = passed / trials
    residual = math.fsum((y - p * m) ** 2 for y, m in kept)
    binomial = p * (1 - p) / trials
    # With every trial passed (or failed) the spread between cases cannot be estimated.
    deff = trials / k if binomial <= 0 else max(1.0, (k / (k - 1)) * residual / trials**2 / binomial)
    n_eff = trials / deff
    t = t_quantile(1 - (1 - level) / 2, k - 1)
    # p * n_eff is 0 or n_eff exactly when every trial failed or passed, so the edges stay exact.
    low, high = wilson(0 if passed == 0 else n_eff if passed == trials else p * n_eff, n_eff, t)
    return ClusteredInterval(rate=p, low=low, high=high, clusters=k, design_effect=deff, effective_n=n_eff)
