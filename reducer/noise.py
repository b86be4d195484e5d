"""The noise floor: how often two arms of the very same skill disagree, and what that lets a run detect. Pure.

With ``--baseline same`` both arms run the current skill, so every verdict that differs
between them is noise (the executor's sampling, the judge's). Pairs are the paired
comparison's (case, model, epoch) pairs, each split into its assertions: a flip is an
assertion that passed in one arm and failed in the other. The discordance is the share of
such pairs that flipped, with its interval clustered by case (docs/design/statistics.md);
from it, :func:`reducer.power.min_detectable_effect` gives the smallest difference a
paired comparison of this run's size detects with the regression test (one-sided, alpha 0.05,
power 0.8; at least :func:`reducer.power.min_cases` cases at any number of epochs).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from reducer.power import DEFAULT_ALPHA, DEFAULT_POWER, min_detectable_effect
from reducer.stats import clustered_interval, wilson
from schemas.comparison import FlipRate, NoiseFloor

Pair = tuple[tuple[int, str, int], tuple[bool, ...], tuple[bool, ...]]
"""(case, model, epoch), the current arm's verdicts, the other arm's."""


def _flip(case_id: int, index: int | None, counts: Sequence[int]) -> FlipRate:
    flips, pairs = counts
    return FlipRate(case_id=case_id, index=index, flips=flips, pairs=pairs, flip_rate=flips / pairs)


def noise_floor(pairs: Sequence[Pair]) -> NoiseFloor | None:
    """Flip rates per case and per assertion, the pooled discordance and the minimum detectable
    effect; None when no pair holds an assertion."""
    by_case: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    by_assertion: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0])
    per_unit: dict[tuple[int, str], int] = defaultdict(int)
    for (case_id, model, _), a, b in pairs:
        per_unit[(case_id, model)] += 1
        for index, (x, y) in enumerate(zip(a, b, strict=False)):
            for counts in (by_case[case_id], by_assertion[(case_id, index)]):
                counts[0] += x != y
                counts[1] += 1
    flips = sum(f for f, _ in by_case.values())
    total = sum(n for _, n in by_case.values())
    if not total:
        return None
    cases = len(by_case)
    clustered = clustered_interval([(f, n) for f, n in by_case.values()])
    # A single case: Wilson's interval over its pairs is about that case alone.
    low, high = (clustered.low, clustered.high) if clustered is not None else wilson(flips, total)
    epochs = max(per_unit.values())
    discordance = flips / total
    return NoiseFloor(
        discordance=discordance,
        flips=flips,
        pairs=total,
        low=low,
        high=high,
        method="cluster-wilson" if clustered is not None else "wilson",
        cases=cases,
        epochs=epochs,
        min_detectable=min_detectable_effect(cases, discordance, epochs=epochs) if discordance < 1 else None,
        alpha=DEFAULT_ALPHA,
        power=DEFAULT_POWER,
        per_case=[_flip(c, None, by_case[c]) for c in sorted(by_case)],
        per_assertion=[_flip(c, i, by_assertion[(c, i)]) for c, i in sorted(by_assertion)],
    )
