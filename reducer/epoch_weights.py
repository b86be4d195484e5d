"""Rates over cases with unequal epochs (``--epochs auto``): each case weighs once, whatever its epochs. Pure.

With equal epochs the pooled rate (passed verdicts over verdicts) weighs every case by its
assertions. Adaptive epochs give the uncertain cases more epochs; pooled, those cases (whose
rates sit between 0 and 1) would pull the rate towards them. Here each case counts as one
shard's worth of verdicts: its passed and judged verdicts divided by its graded shards.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from reducer.stats import clustered_interval, wilson
from schemas.report import ClusteredRate, Rate
from schemas.shard import RunPlan, SkillBundle


def weighted_clusters(counts: Sequence[tuple[float, float, float]]) -> list[tuple[float, float]]:
    """Each case's (passed, trials) averaged over its graded shards: one shard's worth per case."""
    return [(p / n, m / n) for p, m, n in counts if n > 0 and m > 0]


def weighted_rate(counts: Sequence[tuple[int, int, int]]) -> Rate:
    """The pass rate of cases with unequal epochs: each case's (passed, verdicts, shards), weighted as
    one shard of it (so by its assertions, not by how many epochs it got).

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


def counts_of_cells(cells: Mapping[tuple[int, int, str], Sequence[int]]) -> list[tuple[int, int, int]]:
    """The same from a streamed reduce's (case, assertion index, model) -> [passed, observed]: every
    graded shard of a case observed its first assertion once."""
    out: dict[int, list[int]] = {}
    for (case_id, index, _), (passed, observed) in cells.items():
        row = out.setdefault(case_id, [0, 0, 0])
        row[0] += passed
        row[1] += observed
        if index == 0:
            row[2] += observed
    return [(a, b, c) for a, b, c in out.values() if c > 0]


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
    """Whether the cases of these corpora were planned unequal epochs (only ``--epochs auto`` can):
    with equal epochs every case already weighs by its assertions alone, and the pooled rate is
    the one to show."""
    if plan.adaptive is None:
        return False
    return len({plan.epochs_of(s, case.id) for s in skills for case in plan.bundle(s).corpus.evals}) > 1
