"""How many cases a paired comparison needs. Pure.

The test is the gates' own: one-sided (a regression is a drop, an uplift a gain) at the gate's
alpha (``--regression-alpha``, 0.05 when not given; 2.5% for the uplift and sensitivity tests).
The model: a pair (one case, one epoch, both arms) is discordant with probability
``discordance``; a difference ``delta`` means ``P(only the better arm passes) - P(only the
other passes) = delta``. With one epoch the test is McNemar's exact test and its power is
computed exactly (binomial sums over the number of discordant pairs). Whatever the epochs, the
exact test over cases cannot reject with fewer cases than :func:`min_cases` (``2^-n`` is the
smallest one-sided p ``n`` cases can give): every figure here respects that floor. With more epochs the test runs
over per-case mean differences; the figure there is a normal approximation that treats
epochs as independent draws with the same discordance and ignores how cases differ from
one another, so it is optimistic: read it as a floor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

from schemas.words import plural

DEFAULT_DIFFERENCE = 0.10
DEFAULT_DISCORDANCE = 0.20
DEFAULT_ALPHA = 0.05
DEFAULT_POWER = 0.80
MAX_CASES = 100_000


def _log_binom_pmf(k: int, n: int, p: float) -> float:
    if p <= 0:
        return 0.0 if k == 0 else -math.inf
    if p >= 1:
        return 0.0 if k == n else -math.inf
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * math.log(p) + (n - k) * math.log1p(-p)


def min_cases(alpha: float) -> int:
    """Fewest cases (or discordant pairs), all changed one way, whose exact one-sided p is below
    ``alpha``: ``2^-n < alpha`` (5 at 0.05, 6 at 0.025)."""
    if not 0 < alpha < 1:
        raise ValueError("alpha must be in (0, 1)")
    n = 1
    while 0.5**n >= alpha:
        n += 1
    return n


def _critical(d: int, alpha: float) -> int:
    """Fewest of ``d`` discordant pairs won by the better arm whose exact one-sided McNemar p is
    below alpha, or ``d + 1`` when none is."""
    tail, k = 0.0, d + 1
    for i in range(d, -1, -1):
        tail += math.comb(d, i) / 2**d
        if tail >= alpha:
            break
        k = i
    return k


def mcnemar_power(cases: int, discordance: float, difference: float, alpha: float = DEFAULT_ALPHA) -> float:
    """Exact power of the one-sided exact McNemar test at ``alpha`` with ``cases`` pairs."""
    _check(discordance, difference)
    q = (discordance + difference) / (2 * discordance)  # share of discordant pairs won by the better arm
    power = 0.0
    for d in range(cases + 1):
        weight = math.exp(_log_binom_pmf(d, cases, discordance))
        if weight < 1e-15:
            continue
        k = _critical(d, alpha)
        if k > d:
            continue
        power += weight * min(1.0, sum(math.exp(_log_binom_pmf(x, d, q)) for x in range(k, d + 1)))
    return power


def _check(discordance: float, difference: float) -> None:
    if not 0 < discordance <= 1:
        raise ValueError("discordance must be in (0, 1]")
    if not 0 < difference <= discordance:
        raise ValueError("the difference must be positive and at most the discordance")


def _normal_cases(discordance: float, difference: float, alpha: float, power: float, epochs: int) -> int:
    z = NormalDist().inv_cdf
    variance = (discordance - difference**2) / epochs
    return max(min_cases(alpha), math.ceil((z(1 - alpha) + z(power)) ** 2 * variance / difference**2))


def normal_power(cases: int, discordance: float, difference: float, alpha: float, epochs: int) -> float:
    """Power of the multi-epoch test under the normal approximation of :func:`cases_needed`
    (optimistic for the same reasons); 0 below the exact test's floor of cases."""
    _check(discordance, difference)
    if cases < min_cases(alpha):
        return 0.0
    z = NormalDist()
    spread = math.sqrt((discordance - difference**2) / epochs)
    if spread == 0:
        return 1.0
    return z.cdf(math.sqrt(cases) * difference / spread - z.inv_cdf(1 - alpha))


def cases_needed(
    discordance: float = DEFAULT_DISCORDANCE,
    difference: float = DEFAULT_DIFFERENCE,
    *,
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
    epochs: int = 1,
) -> int:
    """Fewest cases to reach ``power``: exact for one epoch, the normal approximation for more."""
    _check(discordance, difference)
    if epochs > 1:
        return _normal_cases(discordance, difference, alpha, power, epochs)
    start = max(min_cases(alpha), int(0.7 * _normal_cases(discordance, difference, alpha, power, 1)))
    for n in range(start, MAX_CASES):
        if mcnemar_power(n, discordance, difference, alpha) >= power:
            return n
    return MAX_CASES


def min_detectable_effect(
    cases: int,
    noise: float,
    *,
    epochs: int = 1,
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
) -> float | None:
    """Smallest difference ``cases`` cases detect with ``power`` at ``alpha`` over a noise floor.

    ``noise`` is the discordance of two identical arms (``--baseline same``): symmetric flips,
    as many each way. A difference ``d`` adds ``d`` pairs won by the better arm on top of it,
    so the comparison's discordance is ``noise + d`` (the model of :func:`cases_needed`). For
    one epoch, bisection on McNemar's exact power (which grows with ``d``); for more, the
    closed-form root of the normal approximation ``n e d^2 = K (noise + d - d^2)``. None with
    fewer cases than the exact test needs to reach ``alpha`` (:func:`min_cases`, at any number of
    epochs), or when no difference up to ``1 - noise`` is detectable.
    """
    if cases < min_cases(alpha):
        return None
    if not 0 <= noise < 1:
        raise ValueError("the noise floor must be in [0, 1)")
    if epochs > 1:
        k = (NormalDist().inv_cdf(1 - alpha) + NormalDist().inv_cdf(power)) ** 2
        m = cases * epochs + k
        d = (k + math.sqrt(k * k + 4 * m * k * noise)) / (2 * m)
        return d if noise + d <= 1 else None
    top = 1 - noise
    if mcnemar_power(cases, noise + top, top, alpha) < power:
        return None
    low, high = 0.0, top
    while high - low > 1e-4:
        mid = (low + high) / 2
        low, high = (mid, high) if mcnemar_power(cases, noise + mid, mid, alpha) < power else (low, mid)
    return high


@dataclass(frozen=True)
class PowerNote:
    """What a compare or baseline run can detect, for printing before it starts."""

    cases: int
    epochs: int
    needed: int
    needed_one_epoch: int
    power_now: float | None
    difference: float
    discordance: float
    alpha: float
    power: float
    min_discordant: int
    observed_in: str = ""
    """The ``--baseline same`` run whose discordance this is; empty: the assumed default."""
    gate: str = "the gate's"
    """Whose one-sided test at ``alpha`` the figures are for (``--regression-alpha``'s, ...)."""

    def lines(self) -> list[str]:
        detect = (
            f"a {100 * self.difference:.0f}-point difference with {self.gate} one-sided test at alpha {self.alpha:g} "
            f"with power {self.power:g}"
        )
        basis = (
            f"with {100 * self.discordance:.1f}% of pairs discordant (the noise floor observed by run "
            f"{self.observed_in}, plus the difference)"
            if self.observed_in
            else f"assuming {100 * self.discordance:.0f}% of pairs discordant"
        )
        at_one = "exact McNemar" if self.epochs == 1 else f"{self.needed_one_epoch} at one epoch, exact McNemar"
        out = [
            f"power: to detect {detect}, {basis}, "
            f"you need about {self.needed} cases at {plural(self.epochs, 'epoch')} ({at_one}); "
            f"this run has {plural(self.cases, 'case')}.",
        ]
        if self.power_now is not None:
            how = "exact McNemar" if self.epochs == 1 else "normal approximation"
            if self.cases < self.min_discordant:
                how = f"no exact test over {self.cases} cases reaches p < {self.alpha:g}"
            out.append(
                f"power: with {plural(self.cases, 'case')} at {plural(self.epochs, 'epoch')} "
                f"the chance to detect it is {self.power_now:.0%} ({how})."
            )
        if self.epochs > 1:
            out.append(
                "power: the multi-epoch figure is a normal approximation that treats epochs as independent "
                "and cases as alike, so it is optimistic."
            )
        out.append(
            f"power: an exact one-sided McNemar test needs at least {self.min_discordant} discordant pairs, "
            f"all one way, to reach p < {self.alpha:g}."
        )
        return out


def power_note(
    cases: int,
    epochs: int,
    *,
    difference: float = DEFAULT_DIFFERENCE,
    discordance: float = DEFAULT_DISCORDANCE,
    alpha: float = DEFAULT_ALPHA,
    power: float = DEFAULT_POWER,
    observed_in: str = "",
    gate: str = "the gate's",
) -> PowerNote:
    """The printout before a compare or baseline run of ``cases`` cases and ``epochs`` epochs.

    ``alpha`` is the one-sided level of the gate's test, ``gate`` whose test it is (``the
    regression gate's (--regression-alpha)``). ``observed_in`` names the ``--baseline same`` run
    whose noise floor gave ``discordance`` (the noise plus the difference; empty: the assumed default).
    """
    one = cases_needed(discordance, difference, alpha=alpha, power=power)
    return PowerNote(
        cases=cases,
        epochs=epochs,
        needed=cases_needed(discordance, difference, alpha=alpha, power=power, epochs=epochs),
        needed_one_epoch=one,
        power_now=_power_now(cases, epochs, discordance, difference, alpha),
        difference=difference,
        discordance=discordance,
        alpha=alpha,
        power=power,
        min_discordant=min_cases(alpha),
        observed_in=observed_in,
        gate=gate,
    )


def _power_now(cases: int, epochs: int, discordance: float, difference: float, alpha: float) -> float | None:
    """The chance this run, at its own epochs, detects the difference: exact for one epoch."""
    if not cases:
        return None
    if cases < min_cases(alpha):
        return 0.0  # the exact test over cases cannot reach alpha, at any number of epochs
    if epochs > 1:
        return normal_power(cases, discordance, difference, alpha, epochs)
    return mcnemar_power(cases, discordance, difference, alpha)
