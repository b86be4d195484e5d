"""Trigger intervals are over queries: a query's epochs repeat one draw of the set, so the recall a
trigger set reports covers the recall of queries like it about as often as it says."""

from __future__ import annotations

import random

from reducer.triggers import TriggerRun, skill_figures

POSITIVE = (0.95, 0.2, 0.6)
"""Positive queries fire with chance 0.95 (60% of them) or 0.2 (40%): recall over such queries 0.65."""


def _draw(rng: random.Random) -> float:
    return POSITIVE[0] if rng.random() < POSITIVE[2] else POSITIVE[1]


def test_recall_covers_the_recall_of_queries_like_these_as_often_as_it_says() -> None:
    """10 positive and 10 negative queries, 3 epochs each, 600 trigger sets: the Wilson interval
    over runs covered the recall of the population 82.5% of the time here; over queries, 98%."""
    rng = random.Random(7)
    truth = POSITIVE[2] * POSITIVE[0] + (1 - POSITIVE[2]) * POSITIVE[1]
    covered, sets = 0, 600
    for _ in range(sets):
        runs = [
            TriggerRun("a", "m", i, "q", True, ("a",) if rng.random() < p else (), e)
            for i, p in enumerate(_draw(rng) for _ in range(10))
            for e in range(3)
        ]
        runs += [TriggerRun("a", "m", 100 + j, "q", False, (), e) for j in range(10) for e in range(3)]
        recall = skill_figures("a", "m", runs).recall
        covered += recall.low <= truth <= recall.high
    assert covered / sets > 0.9
