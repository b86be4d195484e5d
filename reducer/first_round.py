"""An unbiased pass rate per case under ``--epochs auto``: what its first round would have said. Pure.

The adaptive rule gives more epochs to a case whose first round of ``r`` epochs varied, and
stops one whose first round was unanimous. A case's plain mean over all its epochs is then
biased away from one half: a unanimous first round (rate 0 or 1) is kept as it is, a mixed one
is diluted by later epochs pulled back towards the case's true chance. The mean of the first
round alone is unbiased (every case gets it, whatever happens after), and this module returns
its Rao-Blackwellisation: its expectation given the case's pass counts over all its epochs and
the fact that it continued, which is unbiased too and has a smaller variance.

A case's verdicts form series, one per (assertion, model): ``S`` passes in ``n`` epochs. Given
``S``, the first round's passes ``k`` of a series are hypergeometric, ``P(k) ∝ C(r, k) C(n - r,
S - k)``, whatever the pass chance. A case continued when some series of it was mixed in its
first round (``0 < k < r``); with the series independent, ``E[k | continued]`` follows from
the hypergeometric's chance of a unanimous first round (:func:`series_estimates`). With one
series (one assertion, one model) this is the hypergeometric conditioned to be mixed.
docs/design/statistics.md says when it is exactly unbiased and when nearly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def _hypergeometric(passed: int, epochs: int, first: int) -> list[float]:
    """P(k passes among the first ``first`` of ``epochs`` epochs | ``passed`` passes in all), k = 0..first."""
    whole = math.comb(epochs, passed)
    return [
        math.comb(first, k) * math.comb(epochs - first, passed - k) / whole if k <= passed else 0.0
        for k in range(first + 1)
    ]


def series_estimates(series: Sequence[tuple[int, int]], first_round: int) -> list[float]:
    """Each series' unbiased pass rate: ``series`` is one case's (passes, epochs) per (assertion, model).

    A series with no more epochs than the first round keeps ``passes / epochs`` (the case stopped
    there, or had only that round). Past it, the case continued because some series' first round
    was mixed: each series' estimate is ``E[k | some series mixed] / r``, computed from each
    series' hypergeometric chance ``u`` of a unanimous first round as
    ``(r S / n - r P(k = r) U_other) / (1 - U)`` over ``r``, where ``U`` is the product of every
    series' ``u`` and ``U_other`` that of the others'.
    """
    r = first_round
    if not series or all(n <= r for _, n in series):
        return [s / n if n else 0.0 for s, n in series]
    laws = [_hypergeometric(s, n, r) if n > r else None for s, n in series]
    unanimous = [(law[0] + law[r]) if law is not None else 1.0 for law in laws]
    all_unanimous = math.prod(unanimous)
    out = []
    for j, ((s, n), law) in enumerate(zip(series, laws, strict=True)):
        if law is None or all_unanimous >= 1.0:
            # All of this case's epochs passed or all failed in every series: nothing to re-weigh.
            out.append(s / n if n else 0.0)
            continue
        others = math.prod(u for i, u in enumerate(unanimous) if i != j)
        first_passes = (r * s / n - r * law[r] * others) / (1 - all_unanimous)
        out.append(min(1.0, max(0.0, first_passes / r)))
    return out


def estimated_passes(series: Sequence[tuple[int, int]], first_round: int) -> float:
    """The case's passed verdicts as its unbiased rates would have them: ``sum(estimate * epochs)``
    over its series (its raw passes when no series went past the first round)."""
    return math.fsum(e * n for e, (_, n) in zip(series_estimates(series, first_round), series, strict=True))
