"""Intervals with the case as the unit: epochs and assertions of one case are not independent. Pure."""

from __future__ import annotations

import json
import random

import pytest

from reducer.render import render_json, render_markdown
from reducer.scoring import rate
from reducer.stats import clustered_interval, t_quantile, wilson
from reducer.stream import reduce_run
from tests.test_reducer import bundle, graded, plan_for

RUNS = 2000


def _simulate(seed: int, cases: int, trials: tuple[int, int], a: float, b: float) -> tuple[float, float]:
    """Coverage of the clustered and of the naive Wilson interval over ``RUNS`` simulated runs.

    Each case has its own pass probability drawn from Beta(a, b) (cases differ, as real ones
    do); its trials (epochs x assertions, a random count in ``trials``) pass with that
    probability. The truth is the population's mean rate, a / (a + b).
    """
    rng = random.Random(seed)
    truth = a / (a + b)
    clustered = naive = 0
    for _ in range(RUNS):
        units = []
        for _ in range(cases):
            p, m = rng.betavariate(a, b), rng.randint(*trials)
            units.append((sum(rng.random() < p for _ in range(m)), m))
        found = clustered_interval(units)
        assert found is not None
        clustered += found.low <= truth <= found.high
        low, high = wilson(sum(y for y, _ in units), sum(m for _, m in units))
        naive += low <= truth <= high
    return clustered / RUNS, naive / RUNS


@pytest.mark.parametrize(
    ("seed", "cases", "trials", "a", "b"),
    [
        (1, 20, (5, 5), 2.0, 2.0),  # 20 cases x 5 epochs, cases spread widely
        (2, 12, (4, 4), 3.0, 1.0),  # a small corpus that mostly passes
        (3, 30, (1, 9), 1.0, 4.0),  # unequal assertion counts, mostly failing
    ],
)
def test_the_clustered_interval_covers_the_truth_at_the_nominal_rate(
    seed: int, cases: int, trials: tuple[int, int], a: float, b: float
) -> None:
    covered, naive = _simulate(seed, cases, trials, a, b)
    assert abs(covered - 0.95) <= 0.02, covered
    # The Wilson interval over every trial, as if independent, misses far more often: why the case is the unit.
    assert naive < 0.90, naive


def test_t_quantiles_match_the_tables() -> None:
    for df, expected in [(1, 12.7062), (2, 4.3027), (3, 3.1824), (5, 2.5706), (10, 2.2281), (30, 2.0423)]:
        assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-4)
    assert t_quantile(0.025, 7) == pytest.approx(-t_quantile(0.975, 7))
    # Past 100 degrees of freedom the expansion takes over, continuous with the exact value.
    assert t_quantile(0.975, 99) > t_quantile(0.975, 100) == pytest.approx(1.983972, abs=1e-6)
    assert t_quantile(0.975, 10**6) == pytest.approx(1.959966, abs=1e-6)


def test_edges_of_the_clustered_interval() -> None:
    assert clustered_interval([(3, 5)]) is None  # one case says nothing about another
    assert clustered_interval([(3, 5), (0, 0)]) is None  # a case without trials is not a case
    every = clustered_interval([(5, 5)] * 6)
    assert every is not None and every.high == 1.0 and every.rate == 1.0
    # All passed: the spread between cases is unknown, so each case counts as one trial.
    assert every.effective_n == 6 and every.low == pytest.approx(wilson(6, 6, t_quantile(0.975, 5))[0])
    none = clustered_interval([(0, 4)] * 8)
    assert none is not None and none.low == 0.0 and 0 < none.high < 1
    # Cases that agree perfectly within themselves are worth one trial each.
    split = clustered_interval([(4, 4)] * 5 + [(0, 4)] * 5)
    assert split is not None and split.design_effect == pytest.approx(4 * 10 / 9)
    # Identical cases with independent trials are no worse than independent trials (design effect at least 1).
    mixed = clustered_interval([(2, 4)] * 10)
    assert mixed is not None and mixed.design_effect == 1.0


def test_a_rate_gets_a_clustered_interval_only_when_a_case_has_several_trials() -> None:
    assert rate(3, 6, [(1, 1)] * 3 + [(0, 1)] * 3).clustered is None
    assert rate(3, 6).clustered is None
    r = rate(6, 12, [(3, 3), (3, 3), (0, 3), (0, 3)])
    assert r.clustered is not None and r.clustered.method == "cluster-wilson" and r.clustered.clusters == 4
    assert r.clustered.high - r.clustered.low > r.high - r.low


def test_a_run_of_several_epochs_reports_the_clustered_interval_beside_wilson_and_names_it() -> None:
    b = bundle("s", (2, 2, 2, 2))
    plan = plan_for([b], epochs=3)
    outcomes = {s.shard_id: graded(s, [s.case_id <= 2, s.case_id <= 2]) for s in plan.shards}
    result = reduce_run(plan, outcomes)
    (skill,) = result.skills
    c = skill.behavioural.clustered
    assert c is not None and c.clusters == 4 and c.design_effect == pytest.approx(6 * 4 / 3)
    assert (c.low, c.high) != (skill.behavioural.low, skill.behavioural.high)
    assert skill.models[0].behavioural.clustered == c and result.leaderboard[0].behavioural.clustered == c
    md = render_markdown(result, "s", {})
    assert f"95% CI {100 * c.low:.1f}%–{100 * c.high:.1f}% over 4 cases" in md and "cluster-wilson" in md
    doc = json.loads(render_json(result, "s", {}))
    assert doc["variants"][0]["behavioural"]["clustered"]["method"] == "cluster-wilson"


def test_the_leaderboard_keeps_cases_of_different_corpora_apart() -> None:
    one, two = bundle("one", (1, 1)), bundle("two", (1, 1))
    plan = plan_for([one, two], epochs=2)
    # Case 1 passes in corpus one and fails in corpus two: merged by id they would look alike.
    outcomes = {s.shard_id: graded(s, [(s.case_id == 1) == (s.skill == "one")]) for s in plan.shards}
    board = reduce_run(plan, outcomes).leaderboard[0].behavioural.clustered
    assert board is not None and board.clusters == 4
