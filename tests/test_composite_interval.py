"""The composite score's interval is over cases: a case's epochs are not independent draws."""

from __future__ import annotations

import pytest

from reducer.render import render_markdown
from reducer.render_html import render_html
from reducer.stats import composite_interval, mean_interval
from tests.test_reducer import bundle, graded, plan_for, reduce


def test_two_deterministic_cases_give_no_interval_narrower_than_their_two_composites_allow() -> None:
    """2 cases x 3 epochs, each case scoring the same every epoch (1 and 1/3 of its assertions):
    over shards the interval was 37.4%-95.9%, as if six independent draws; over two cases a t on
    one degree of freedom spans everything."""
    plan = plan_for([bundle("s", (3, 3))], epochs=3)
    passes = {1: [True, True, True], 2: [True, False, False]}
    result = reduce(plan, {s.shard_id: graded(s, passes[s.case_id]) for s in plan.shards})
    m = result.skills[0].models[0]
    assert m.composite_cases == 2
    assert m.composite_mean == pytest.approx(2 / 3)
    assert (m.composite_low, m.composite_high) == (0.0, 1.0)
    assert "composite (95% CI over cases)" in render_markdown(result, "s", {})


def test_the_interval_over_cases_uses_t_on_cases_minus_one_degrees_of_freedom() -> None:
    values = [0.2, 0.4, 0.6, 0.8, 1.0]
    mean, (low, high) = mean_interval(values)
    half = 2.7764451051977987 * (0.1 / 5) ** 0.5  # t(0.975, 4); the five values' variance is 0.1
    assert mean == pytest.approx(0.6) and (low, high) == pytest.approx((0.6 - half, min(1.0, 0.6 + half)))


def test_one_case_shows_no_composite_interval() -> None:
    """Only the first case was graded (the second's shards never ended)."""
    plan = plan_for([bundle("s", (2, 2))], models=["a", "b"], epochs=3)
    result = reduce(plan, {s.shard_id: graded(s, [True, s.epoch == 0]) for s in plan.shards if s.case_id == 1})
    a = result.leaderboard[0]
    assert a.composite_cases == 1 and a.composite_interval is None
    assert "| 66.7% | 3/6 |" in render_markdown(result, "s", {})  # the composite alone, no interval beside it
    assert "95% CI over cases</th>" in render_html(result)


@pytest.mark.parametrize(("cases", "low"), [(2, "1.2%"), (4, "28.3%")])
def test_cases_that_all_score_full_marks_give_no_zero_width_interval(cases: int, low: str) -> None:
    """Every case at 1.0: the t interval's spread is zero, so it read 100.0%-100.0%; the floor is the
    case-clustered Wilson interval with each case one trial, as the behavioural by-case one."""
    plan = plan_for([bundle("s", [1] * cases)], epochs=2)
    result = reduce(plan, {s.shard_id: graded(s, [True]) for s in plan.shards})
    m = result.leaderboard[0]
    assert m.composite_cases == cases and m.composite_mean == 1.0 and m.composite_high == 1.0
    assert f"{m.composite_low:.1%}" == low
    assert f"100.0% ({low}–100.0%)" in render_markdown(result, "s", {})


def test_the_floor_never_narrows_the_t_interval() -> None:
    values = [0.0, 1.0, 1.0]
    assert composite_interval(values)[1][0] <= mean_interval(values)[1][0]
    assert composite_interval(values)[1][1] >= mean_interval(values)[1][1]
