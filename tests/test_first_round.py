"""``--epochs auto`` gives more epochs to the cases whose first round varied: the rate a report and
its gate use stays unbiased all the same."""

from __future__ import annotations

import math
import random

import pytest

from reducer.adaptive import Gate, ShardKey, Verdicts, case_draws, finished, next_round
from reducer.epoch_weights import counts_of_cells, weighted_rate
from reducer.first_round import series_estimates
from schemas.adaptive import adaptive_plan


def _binomial(n: int, k: int, p: float) -> float:
    return math.comb(n, k) * p**k * (1 - p) ** (n - k)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8, 0.95])
def test_a_case_that_goes_on_to_the_last_epoch_is_estimated_without_bias(p: float) -> None:
    """Exact expectation over every outcome: a first round of 3, then (when it varied) 6 more."""
    r, n = 3, 9
    expected = plain = 0.0
    for k in range(r + 1):
        first = _binomial(r, k, p)
        if k in (0, r):
            expected += first * series_estimates([(k, r)], r)[0]
            plain += first * k / r
            continue
        for later in range(n - r + 1):
            chance = first * _binomial(n - r, later, p)
            expected += chance * series_estimates([(k + later, n)], r)[0]
            plain += chance * (k + later) / n
    assert expected == pytest.approx(p, abs=1e-12)
    # The plain mean over all of a case's epochs is pulled away from one half.
    assert abs(plain - 0.5) > abs(p - 0.5) or p == 0.5


def test_two_series_of_one_case_are_estimated_without_bias() -> None:
    """Two independent assertions: the case goes on when either varied in its first round."""
    r, n, ps = 3, 5, (0.9, 0.6)
    expected = [0.0, 0.0]
    outcomes = [(k, later) for k in range(r + 1) for later in range(n - r + 1)]
    for k1, l1 in outcomes:
        for k2, l2 in outcomes:
            stopped = k1 in (0, r) and k2 in (0, r)
            if stopped and (l1 or l2):
                continue  # a stopped case has no later epochs: count its first round once
            chance = _binomial(r, k1, ps[0]) * _binomial(r, k2, ps[1])
            if not stopped:
                chance *= _binomial(n - r, l1, ps[0]) * _binomial(n - r, l2, ps[1])
            series = [(k1, r), (k2, r)] if stopped else [(k1 + l1, n), (k2 + l2, n)]
            for j, e in enumerate(series_estimates(series, r)):
                expected[j] += chance * e
    assert expected == pytest.approx(list(ps), abs=1e-12)


def _run(probs: list[float], max_epochs: int, threshold: float, seed: int) -> float | None:
    """One simulated ``--epochs auto`` run through the product's own rule and rate."""
    rng = random.Random(seed)
    plan = adaptive_plan(max_epochs)
    cases = [("s", i) for i in range(len(probs))]
    observed: dict[ShardKey, Verdicts] = {}
    while True:
        for i, p in enumerate(probs):
            have = sum(1 for key in observed if key[2] == i)
            for epoch in range(have, plan.epochs_of("s", i)):
                observed[("s", "current", i, "m", epoch)] = (rng.random() < p,)
        plan = next_round(plan, cases, {"s": Gate(threshold)}, observed, ["current"])
        if finished(plan):
            break
    cells: dict[tuple[int, int, str], list[int]] = {}
    for (_, _, case_id, model, _), verdicts in observed.items():
        cell = cells.setdefault((case_id, 0, model), [0, 0])
        cell[0] += verdicts[0]
        cell[1] += 1
    return weighted_rate(counts_of_cells(cells)).rate


def test_the_adaptive_rate_is_not_pulled_away_from_one_half() -> None:
    """20 cases passing 4 times in 5, --max-epochs 9, a threshold the gate cannot decide early:
    the plain means averaged 0.864 over the same runs."""
    rates = [_run([0.8] * 20, 9, 0.83, seed) for seed in range(200)]
    assert sum(r or 0.0 for r in rates) / len(rates) == pytest.approx(0.8, abs=0.01)


def test_the_look_weighs_a_case_that_went_on_by_its_first_round() -> None:
    observed: dict[ShardKey, Verdicts] = {
        ("s", "current", 0, "m", e): (v,) for e, v in enumerate([True, False, True, True, True])
    }
    draws = case_draws(observed, "s", "current", first_round=3)[0]
    assert draws.mean == pytest.approx(0.8)
    # k of 3 first-round passes, given 4 of 5 and a mixed first round: k = 2 (C(3,2) C(2,2) = 3 ways)
    # or k = 1 impossible (would leave 3 passes for 2 epochs); so 2/3.
    assert draws.estimate == pytest.approx(2 / 3)


def test_a_run_whose_every_case_went_on_is_still_rated_by_first_rounds() -> None:
    """Every case varied in its first round and got 5 epochs: equal epochs, yet not the pooled rate."""
    from tests.test_unequal_epochs_report import adaptive_result

    result = adaptive_result(dict.fromkeys(range(1, 7), 5), lambda _, epoch: epoch != 1)
    # 4 of 5 passed, the first round mixed: k = 2 of 3 for certain, so each case is rated 2/3, not 4/5.
    assert result.skills[0].behavioural.rate == pytest.approx(2 / 3)
