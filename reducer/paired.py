"""Paired tests and intervals over cases. Pure; exact arithmetic where it decides a verdict.

The case is the unit (docs/design/statistics.md): every function here takes one paired
difference per case (``current - baseline``), never one per epoch or per assertion, so
repeated measures of one case are never counted as independent evidence.

- :func:`sign_flip_test`: the exact paired permutation test. Under the null hypothesis each
  case's difference is as likely to have the opposite sign, so the reference distribution
  is that of ``sum(±d_i)``, enumerated exactly. With differences in {-1, 0, +1} (one epoch,
  a pass/fail outcome per case) it *is* McNemar's exact test: the zero differences are the
  concordant pairs and the statistic is the binomial count of discordant pairs one way.
- :func:`mcnemar_exact`: McNemar's exact test from the two discordant counts.
- :func:`paired_interval`: a score interval of the mean difference over cases (Tango's for
  paired proportions, its variance floor kept for per-case means), made consistent with the
  exact test: never wholly on one side of zero unless that one-sided exact p is below 2.5%.
- :func:`holm`: Holm's step-down adjustment of a family of p-values.
"""

from __future__ import annotations

import hashlib
import math
import random
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist

MAX_EXACT_SUPPORT = 200_000
"""Bound on the exact enumeration's grid (ten times this many points) before it falls back to
seeded Monte Carlo."""
MONTE_CARLO_DRAWS = 100_000
UPLIFT_TEST_ALPHA = 0.025
"""One-sided level matching a two-sided 95% interval."""
MIN_INTERVAL_CASES = 6
"""Fewest cases whose 95% interval is printed: the fewest for which an exact one-sided paired
test can reach 2.5% (``2^-6 < 0.025``). Below it no test over the cases can exclude any
difference at that level, so readers get the case count instead of a bound that says little."""


@dataclass(frozen=True)
class PairedP:
    """p-values of one paired test of ``current - baseline``."""

    two_sided: float
    """P(|S| >= |s|) under the null."""
    drop: float
    """One-sided: P(S <= s), small when the current arm is worse."""
    uplift: float
    """One-sided: P(S >= s), small when the current arm is better."""
    exact: bool = True
    """False when the support was too large and the p-values come from seeded Monte Carlo."""


def seed_for(*parts: str) -> int:
    """A 64-bit seed from strings (the run id first): the same run reduces to the same interval."""
    return int.from_bytes(hashlib.sha256("\x1f".join(parts).encode()).digest()[:8], "big")


def _null_distribution(diffs: Sequence[Fraction]) -> tuple[Sequence[int], int, int] | None:
    """Counts of ``sum(±d_i)`` over all 2^n sign patterns, on the integer grid ``d * scale``.

    Returns (counts indexed by ``sum * scale + offset``, offset, scale), or None when the
    grid would exceed the support cap.
    """
    scale = math.lcm(*(d.denominator for d in diffs))
    steps = [abs(d.numerator) * (scale // d.denominator) for d in diffs]
    offset = sum(steps)
    if 2 * offset + 1 > MAX_EXACT_SUPPORT * 10:
        return None
    if len(steps) < 64:
        return _packed_counts(steps, offset), offset, scale
    return _shifted_counts(steps, offset), offset, scale


def _packed_counts(steps: Sequence[int], offset: int) -> Sequence[int]:
    """The null counts as one big integer with a 64-bit digit per grid point.

    Choosing ``-step`` or ``+step`` for a difference multiplies the generating polynomial by
    ``1 + x^(2 step)``: one shift and one add of the whole integer, done in C. A count is at
    most 2^n < 2^64 (fewer than 64 differences), so no digit ever carries into the next.
    """
    poly = 1
    for step in steps:
        poly += poly << (128 * step)  # 2 * step grid points of 64 bits each
    counts = array("Q")
    counts.frombytes(poly.to_bytes((2 * offset + 1) * 8, "little"))
    return counts


def _shifted_counts(steps: Sequence[int], offset: int) -> list[int]:
    """The same counts by shifted adds over a list (any number of differences)."""
    counts = [0] * (2 * offset + 1)
    counts[offset] = 1
    reach = 0  # the counts are zero outside offset ± reach
    for step in steps:
        low, high = offset - reach, offset + reach
        nxt = [0] * len(counts)
        for i in range(low, high + 1):
            c = counts[i]
            if c:
                nxt[i + step] += c
                nxt[i - step] += c
        counts, reach = nxt, reach + step
    return counts


def sign_flip_test(diffs: Sequence[Fraction | int], seed: int = 0) -> PairedP:
    """Exact paired permutation (sign-flip) test of the differences' sum.

    Zero differences carry no sign information and drop out, as the concordant pairs do in
    McNemar's test. With no non-zero difference every p-value is 1.
    """
    nonzero = [Fraction(d) for d in diffs if d != 0]
    if not nonzero:
        return PairedP(1.0, 1.0, 1.0)
    observed = sum(nonzero, Fraction(0))
    dist = _null_distribution(nonzero)
    if dist is None:
        return _monte_carlo(nonzero, observed, seed)
    counts, offset, scale = dist
    total = 2 ** len(nonzero)
    at = offset + int(observed * scale)  # exact: observed * scale is an integer on the grid
    mirror = offset - (at - offset)
    low = sum(counts[: at + 1])
    high = sum(counts[at:])
    two = sum(counts[: min(at, mirror) + 1]) + sum(counts[max(at, mirror) :])
    if at == mirror:  # observed sum 0: every pattern is at least as extreme
        two = total
    return PairedP(two / total, low / total, high / total)


_CHUNK = 8
"""Signs are read 16 at a time: one random word per draw and a 65,536-entry table of partial
sums per 16 differences (made from two 256-entry tables), instead of a random number and an
add per difference (about 20x faster)."""


def _monte_carlo(diffs: Sequence[Fraction], observed: Fraction, seed: int) -> PairedP:
    rng = random.Random(seed)
    values = [float(d) for d in diffs]
    obs, eps = float(observed), 1e-12
    tables = []
    for start in range(0, len(values), _CHUNK):
        chunk = values[start : start + _CHUNK]
        table = [
            math.fsum(v if (pattern >> i) & 1 else -v for i, v in enumerate(chunk))
            for pattern in range(1 << len(chunk))
        ]
        tables.append((start, len(chunk), table))
    paired = []  # two neighbouring 8-difference tables as one 16-difference table
    for i in range(0, len(tables), 2):
        (start, width, low_table), *rest = tables[i : i + 2]
        if rest:
            _, high_width, high_table = rest[0]
            combined = [h + lo for h in high_table for lo in low_table]  # index: (high << width) | low
            paired.append((start, (1 << (width + high_width)) - 1, combined))
        else:
            paired.append((start, (1 << width) - 1, low_table))
    n_values = len(values)
    two = low = high = 0
    for _ in range(MONTE_CARLO_DRAWS):
        signs = rng.getrandbits(n_values)
        s = 0.0
        for start, mask, table in paired:
            s += table[(signs >> start) & mask]
        two += abs(s) >= abs(obs) - eps
        low += s <= obs + eps
        high += s >= obs - eps
    # The observed pattern is one of the permutations: counting it keeps p above zero.
    n = MONTE_CARLO_DRAWS + 1
    return PairedP((two + 1) / n, (low + 1) / n, (high + 1) / n, exact=False)


def mcnemar_exact(better: int, worse: int) -> PairedP:
    """McNemar's exact test: ``better`` pairs passed only in the current arm, ``worse`` only in the baseline."""
    if better < 0 or worse < 0:
        raise ValueError("discordant counts must not be negative")
    n = better + worse
    if n == 0:
        return PairedP(1.0, 1.0, 1.0)

    # P(X <= better) and P(X <= better - 1), X ~ Binomial(n, 1/2), in one pass of exact integers:
    # C(n, i) from C(n, i - 1), since summing math.comb anew for every i costs O(n^2) digits at
    # the thousands of pairs an assertion has in a sweep of many models.
    term = total = 1  # C(n, 0)
    for i in range(1, better + 1):
        term = term * (n - i + 1) // i
        total += term
    drop = Fraction(total, 2**n)  # few "better" pairs is evidence of a drop
    uplift = 1 - Fraction(total - term, 2**n) if better > 0 else Fraction(1)
    two = min(Fraction(1), 2 * min(drop, uplift))
    return PairedP(float(two), float(drop), float(uplift))


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def paired_interval(
    diffs: Sequence[Fraction | float], p: PairedP | None = None, level: float = 0.95
) -> tuple[float, float] | None:
    """Score interval of the mean of per-case differences in [-1, 1]; None with no case.

    The set of means ``t`` that the score test does not reject: ``n (mean - t)^2 <= z^2 v(t)``,
    with ``v(t)`` the variance of a case's difference restricted to mean ``t``: the spread of the
    data about ``t``, and at least the least variance a difference of mean ``t`` can have on the
    grid the differences lie on (steps of ``h``, one over the common denominator: a case's
    difference is a mean of paired pass/fail outcomes): ``(t - a)(b - t)`` between neighbouring
    grid points ``a < t < b``. For single pass/fail outcomes (``h = 1``) that is ``|t| (1 - |t|)``,
    the restricted estimate of Tango's interval when no pair disagreed. So cases that all agree
    still give an interval (ten unchanged cases: about -28 to +28 points), never a point.
    ``p``: the exact test's p-values over the same differences; the interval then reaches zero
    whenever that one-sided exact p is not below ``(1 - level) / 2``, so it never shows a change
    the exact test cannot.
    """
    if not diffs:
        return None
    if not 0 < level < 1:
        raise ValueError("level must be in (0, 1)")
    n = len(diffs)
    z = NormalDist().inv_cdf(1 - (1 - level) / 2)
    values = [float(d) for d in diffs]
    centre = math.fsum(values) / n
    spread = math.fsum((d - centre) ** 2 for d in values) / n
    # Floats (a caller's rates) are read back as the ratios of small counts they were.
    step = 1 / math.lcm(*{Fraction(d).limit_denominator(1_000_000).denominator for d in diffs})

    def rejected(t: float) -> bool:
        r = t / step - math.floor(t / step)
        variance = max(spread + (centre - t) ** 2, step * step * r * (1 - r))
        return n * (centre - t) ** 2 > z * z * variance

    def edge(far: float) -> float:
        if not rejected(far):
            return far
        inside, outside = centre, far  # the statistic grows away from the mean: one crossing
        for _ in range(50):
            mid = (inside + outside) / 2
            inside, outside = (mid, outside) if not rejected(mid) else (inside, mid)
        return inside

    low, high = edge(-1.0), edge(1.0)
    tail = (1 - level) / 2
    if p is not None:
        if p.drop >= tail:
            high = max(high, 0.0)
        if p.uplift >= tail:
            low = min(low, 0.0)
    return (low, high)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order (each clipped to 1)."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    m = len(p_values)
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
