"""Rates over cases with unequal epochs (``--epochs auto``): each case weighs once, whatever its epochs. Pure.

With equal epochs the pooled rate (passed verdicts over verdicts) weighs every case by its
assertions. Adaptive epochs give the uncertain cases more epochs; pooled, those cases (whose
rates sit between 0 and 1) would pull the rate towards them. Here each case counts as one
shard's worth of verdicts: its passed and judged verdicts divided by its graded shards.

Its passed verdicts are not the raw count, though: the rule that gave a case more epochs looked
at its first round, and a case's plain mean is biased by it (away from one half). The count
used is :func:`reducer.first_round.estimated_passes`, unbiased under the rule
(docs/design/statistics.md); the raw counts stay beside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from reducer.first_round import estimated_passes
from reducer.stats import clustered_interval, wilson
from schemas.adaptive import FIRST_ROUND
from schemas.report import ClusteredRate, Rate
from schemas.shard import RunPlan, SkillBundle

CaseCounts = tuple[int, int, int] | tuple[int, int, int, float]
"""One case's (passed, verdicts, shards) and, when known, its passed verdicts as the unbiased
estimate has them (:func:`reducer.first_round.estimated_passes`); without it, the raw passes."""


def weighted_clusters(counts: Sequence[CaseCounts]) -> list[tuple[float, float]]:
    """Each case's (estimated passed, trials) averaged over its graded shards: one shard's worth per case."""
    return [(_estimated(c) / c[2], c[1] / c[2]) for c in counts if c[2] > 0 and c[1] > 0]


def _estimated(c: CaseCounts) -> float:
    return c[3] if len(c) > 3 else c[0]


def weighted_rate(counts: Sequence[CaseCounts]) -> Rate:
    """The pass rate of cases with unequal epochs: each case's (passed, verdicts, shards[, estimated
    passed]), weighted as one shard of it (so by its assertions, not by how many epochs it got).

    ``passed`` and ``total`` stay the raw verdict counts; the rate and its intervals are the
    weighted ones (Wilson on the weighted counts, kept in ``weighted`` so a report can show what
    the interval is of, and the case-clustered interval beside it).
    """
    passed, total = sum(c[0] for c in counts), sum(c[1] for c in counts)
    clusters = weighted_clusters(counts)
    w_passed, w_total = sum(p for p, _ in clusters), sum(m for _, m in clusters)
    low, high = wilson(w_passed, w_total)
    found = clustered_interval(clusters)
    clustered = (
        ClusteredRate(clusters=found.clusters, low=found.low, high=found.high, design_effect=found.design_effect)
        if found is not None
        else None
    )
    return Rate(
        passed=passed,
        total=total,
        rate=w_passed / w_total if w_total else None,
        low=low,
        high=high,
        clustered=clustered,
        weighted=(w_passed, w_total),
    )


def counts_of_cells(
    cells: Mapping[tuple[int, int, str], Sequence[int]], first_round: int = FIRST_ROUND
) -> list[tuple[int, int, int, float]]:
    """The same from a streamed reduce's (case, assertion index, model) -> [passed, observed]: every
    graded shard of a case observed its first assertion once. Each (assertion, model) cell is one
    series of the case's epochs for the unbiased estimate (``first_round``: the rule's first round;
    every plan ``--epochs auto`` makes has :data:`schemas.adaptive.FIRST_ROUND`, or no later round)."""
    out: dict[int, list[int]] = {}
    series: dict[int, list[tuple[int, int]]] = {}
    for (case_id, index, _), (passed, observed) in cells.items():
        row = out.setdefault(case_id, [0, 0, 0])
        row[0] += passed
        row[1] += observed
        if index == 0:
            row[2] += observed
        series.setdefault(case_id, []).append((passed, observed))
    return [(a, b, c, estimated_passes(series[case_id], first_round)) for case_id, (a, b, c) in out.items() if c > 0]


def model_rate(arms: Sequence[Mapping[tuple[int, int, str], Sequence[int]]], model: str) -> Rate:
    """One model's case-weighted rate over the cells of one or more corpus arms (each case once)."""
    counts = [c for cells in arms for c in counts_of_cells({k: v for k, v in cells.items() if k[2] == model})]
    return weighted_rate(counts)


def cells_rate(arms: Sequence[Mapping[tuple[int, int, str], Sequence[int]]]) -> Rate:
    """The case-weighted rate of several corpus arms' cells (every model's), each case once."""
    return weighted_rate([c for cells in arms for c in counts_of_cells(cells)])


def planned_shards(plan: RunPlan, bundle: SkillBundle) -> int:
    """Shards one corpus arm plans per executor model: every case's own epochs."""
    return sum(plan.epochs_of(bundle.skill, case.id) for case in bundle.corpus.evals)


def unequal_epochs(plan: RunPlan, skills: Iterable[str]) -> bool:
    """Whether the cases of these corpora were planned unequal epochs (only ``--epochs auto`` can), or
    every one went on past the first round: with equal epochs every case already weighs by its
    assertions alone, but a case that went on is still rated by its first round (a run whose
    every case stopped there shows the pooled rate)."""
    if plan.adaptive is None:
        return False
    epochs = {plan.epochs_of(s, case.id) for s in skills for case in plan.bundle(s).corpus.evals}
    return len(epochs) > 1 or any(n > plan.adaptive.first_round for n in epochs)
