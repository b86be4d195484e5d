"""Adaptive epochs, the pure rule: which cases get more epochs, when the gate is decided, and why a case stopped."""

from __future__ import annotations

import random

import pytest

from reducer.adaptive import (
    CaseDraws,
    Gate,
    ShardKey,
    Verdicts,
    case_draws,
    finished,
    next_round,
    paired_look,
    pass_rate_look,
    stop_counts,
    variances,
)
from reducer.epoch_weights import weighted_rate
from schemas.adaptive import AdaptivePlan, adaptive_plan


def observe(
    plan: AdaptivePlan, probs: dict[int, float], rng: random.Random, variant: str = "current", skill: str = "s"
) -> dict[ShardKey, Verdicts]:
    """One draw of every planned epoch of every case: one assertion passing with the case's probability."""
    return {
        (skill, variant, case, "m", epoch): (rng.random() < p,)
        for case, p in probs.items()
        for epoch in range(plan.epochs_of(skill, case))
    }


def test_the_plan_counts_its_looks_and_spreads_alpha_over_them() -> None:
    plan = adaptive_plan(9)
    assert (plan.first_round, plan.step, plan.looks) == (3, 2, 4)
    assert plan.level == pytest.approx(1 - 0.05 / 4)
    assert adaptive_plan(2).first_round == 2 and adaptive_plan(2).looks == 1
    with pytest.raises(ValueError):
        adaptive_plan(0)


def test_a_case_whose_verdicts_never_vary_stops_after_the_first_round() -> None:
    plan = adaptive_plan(9)
    cases = [("s", 1), ("s", 2), ("s", 3)]
    observed = {("s", "current", c, "m", e): (True, c != 3) for c in (1, 2, 3) for e in range(3)}
    observed[("s", "current", 2, "m", 1)] = (False, True)  # case 2 varies
    after = next_round(plan, cases, {"s": Gate(0.8)}, observed, ["current"])
    by_case = {c.case_id: c for c in after.cases}
    assert by_case[1].stopped == "stable" and by_case[1].epochs == 3
    assert by_case[3].stopped == "stable"
    assert by_case[2].stopped == "" and by_case[2].epochs == 5
    assert not finished(after) and after.looks_done == 1


def test_a_case_at_max_epochs_stops_and_a_spent_budget_stops_the_rest() -> None:
    plan = adaptive_plan(3)
    observed = {("s", "current", 1, "m", e): (e == 0,) for e in range(3)}
    after = next_round(plan, [("s", 1)], {"s": Gate(0.5)}, observed, ["current"])
    assert after.cases[0].stopped == "max-epochs"
    plan = adaptive_plan(9)
    after = next_round(plan, [("s", 1)], {"s": Gate(0.5)}, observed, ["current"], out_of_budget=True)
    assert after.cases[0].stopped == "max-cost" and finished(after)


def test_a_case_with_nothing_graded_is_left_to_resubmit() -> None:
    after = next_round(adaptive_plan(9), [("s", 1)], {"s": Gate(0.5)}, {}, ["current"])
    assert after.cases[0].stopped == "not-graded"


def test_a_clear_gate_is_decided_and_stops_every_case_of_the_corpus() -> None:
    plan = adaptive_plan(9)
    cases = [("s", c) for c in range(20)]
    # Every case fails one epoch of three: the rate (2/3) is far under the threshold 0.95.
    observed = {("s", "current", c, "m", e): (e != c % 3,) for c in range(20) for e in range(3)}
    after = next_round(plan, cases, {"s": Gate(0.95)}, observed, ["current"])
    assert after.gates[0].decided == "below" and after.gates[0].high < 0.95
    assert stop_counts(after) == {"decided": 20}
    assert after.gates[0].estimate == pytest.approx(2 / 3)


def test_a_rate_at_the_threshold_is_not_decided() -> None:
    cases = {c: CaseDraws((1.0, 0.0, 1.0, 0.0), 1) for c in range(10)}
    look = pass_rate_look(cases, Gate(0.5), 0.99, "s")
    assert look.low < 0.5 < look.high and look.decided == ""


def test_more_epochs_on_the_varying_case_narrow_the_interval() -> None:
    few = {1: CaseDraws((1.0, 0.0, 1.0), 1), 2: CaseDraws((1.0, 1.0, 1.0), 1)}
    more = {1: CaseDraws((1.0, 0.0, 1.0) * 3, 1), 2: few[2]}
    narrow, wide = pass_rate_look(more, Gate(0.5), 0.95, "s"), pass_rate_look(few, Gate(0.5), 0.95, "s")
    assert narrow.high - narrow.low < wide.high - wide.low


def test_cases_weigh_by_their_assertions() -> None:
    cases = {1: CaseDraws((1.0,), 3), 2: CaseDraws((0.0,), 1)}
    assert pass_rate_look(cases, Gate(0.5), 0.95, "s").estimate == pytest.approx(0.75)


def test_unequal_epochs_weigh_each_case_once() -> None:
    # Case A passed 1 of 1 epoch, case B 1 of 9: pooled 2/10, but each case is one case: (1 + 1/9) / 2.
    r = weighted_rate([(1, 1, 1), (1, 9, 9)])
    assert (r.passed, r.total) == (2, 10)
    assert r.rate == pytest.approx((1 + 1 / 9) / 2)
    assert r.clustered is not None and r.clustered.clusters == 2


def test_equal_epochs_weigh_as_the_pooled_rate() -> None:
    r = weighted_rate([(2, 3, 3), (1, 3, 3), (3, 3, 3)])
    assert r.rate == pytest.approx(6 / 9)


def test_the_paired_difference_is_decided_when_its_interval_excludes_the_margin() -> None:
    current = {c: CaseDraws((1.0, 1.0, 1.0), 1) for c in range(12)}
    base = {c: CaseDraws((0.0, 1.0, 0.0) if c % 2 else (0.0, 0.0, 0.0), 1) for c in range(12)}
    look = paired_look(current, base, Gate(0.0, "baseline@HEAD"), 0.99, "s")
    assert look.decided == "above" and look.low > 0
    same = paired_look(current, current, Gate(0.0, "baseline@HEAD"), 0.99, "s")
    assert same.decided == "" and same.estimate == 0


def test_a_stable_case_keeps_its_reason_when_the_gate_is_decided_at_the_same_look() -> None:
    observed = {("s", "current", c, "m", e): (c == 1 or e > 0,) for c in range(1, 41) for e in range(3)}
    after = next_round(adaptive_plan(9), [("s", c) for c in range(1, 41)], {"s": Gate(0.95)}, observed, ["current"])
    assert after.gates[0].decided == "below"
    assert stop_counts(after) == {"decided": 39, "stable": 1}


def test_rounds_end_with_every_case_stopped() -> None:
    rng = random.Random(5)
    probs = {c: (0.5 if c < 6 else 1.0) for c in range(20)}
    plan = adaptive_plan(11)
    cases = [("s", c) for c in probs]
    for _ in range(plan.looks):
        plan = next_round(plan, cases, {"s": Gate(0.8)}, observe(plan, probs, rng), ["current"])
        if finished(plan):
            break
    assert finished(plan)
    assert all(c.epochs == 3 for c in plan.cases if c.case_id >= 6)


def test_a_stable_case_is_not_taken_as_certain_when_others_vary() -> None:
    alone = variances({1: CaseDraws((1.0, 1.0, 1.0), 1)})
    with_coins = variances({1: CaseDraws((1.0, 1.0, 1.0), 1), **{c: CaseDraws((1.0, 0.0, 1.0), 1) for c in (2, 3, 4)}})
    assert 0 < alone[1] < with_coins[1]
    assert with_coins[2] == pytest.approx(CaseDraws((1.0, 0.0, 1.0), 1).variance_of_mean)


def test_the_rule_keeps_its_error_rate_when_the_threshold_is_the_truth() -> None:
    # Every decision is wrong here: the share of runs that decide is the rule's error rate over its looks.
    probs = {c: (1.0 if c < 12 else 0.5) for c in range(20)}
    truth = sum(probs.values()) / len(probs)
    cases = [("s", c) for c in probs]
    wrong = 0
    runs = 300
    for seed in range(runs):
        rng = random.Random(seed)
        plan = adaptive_plan(9)
        seen: dict[ShardKey, Verdicts] = {}
        while not finished(plan):
            for c, p in probs.items():
                for e in range(plan.epochs_of("s", c)):
                    seen.setdefault(("s", "current", c, "m", e), (rng.random() < p,))
            plan = next_round(plan, cases, {"s": Gate(truth)}, seen, ["current"])
        wrong += bool(plan.gates[0].decided)
    assert wrong / runs <= 0.05 + 2 * (0.05 * 0.95 / runs) ** 0.5


def _draws(seed: int, probs: list[float], epochs: dict[int, int]) -> dict[ShardKey, Verdicts]:
    """Each (case, epoch) draw a function of the seed, case and epoch: an adaptive and a fixed run
    of one seed see the same verdicts where both ran (common random numbers)."""
    return {
        ("s", "current", c, "m", e): (random.Random(seed * 1_000_003 + c * 1_009 + e).random() < p,)
        for c, p in enumerate(probs)
        for e in range(epochs[c])
    }


def _width(seen: dict[ShardKey, Verdicts], threshold: float) -> float:
    look = pass_rate_look(case_draws(seen, "s", "current"), Gate(threshold), 0.95, "s")
    return look.high - look.low


def test_adaptive_epochs_give_the_interval_of_fixed_epochs_for_fewer_calls() -> None:
    # A suite of mostly deterministic checks with a few flaky cases: 36 always pass, 4 pass half the time.
    probs = [1.0] * 36 + [0.5] * 4
    threshold, seeds = 0.93, 60
    calls, widths = [], []
    for seed in range(seeds):
        plan = adaptive_plan(11)
        cases = [("s", c) for c in range(len(probs))]
        while not finished(plan):
            epochs = {c: plan.epochs_of("s", c) for c in range(len(probs))}
            plan = next_round(plan, cases, {"s": Gate(threshold)}, _draws(seed, probs, epochs), ["current"])
        epochs = {c: plan.epochs_of("s", c) for c in range(len(probs))}
        calls.append(sum(epochs.values()))
        widths.append(_width(_draws(seed, probs, epochs), threshold))
    adaptive_calls, adaptive_width = sum(calls) / seeds, sum(widths) / seeds
    fixed = next(
        e
        for e in range(3, 12)
        if sum(_width(_draws(s, probs, dict.fromkeys(range(len(probs)), e)), threshold) for s in range(seeds)) / seeds
        <= adaptive_width
    )
    print(
        f"adaptive: {adaptive_calls:.1f} calls, mean 95% width {adaptive_width:.3f}; "
        f"fixed epochs as narrow: {fixed} ({fixed * len(probs)} calls)"
    )
    assert adaptive_calls < fixed * len(probs)


def test_an_undecided_look_says_what_its_interval_is_over_and_does_not_contradict_a_fail() -> None:
    """At threshold 1 a look's interval reaches 1 and stays undecided while the rate FAILs: the
    look says it stopped nothing and that the verdict does not read it, and names its interval as
    stratified over these cases' epochs (narrower than the 95% interval over cases beside it)."""
    from reducer.render_adaptive import summary_lines
    from schemas.adaptive import AdaptivePlan, CaseEpochs, GateLook

    look = GateLook(skill="s", figure="pass-rate", target=1.0, estimate=0.871, low=0.741, high=1.0, level=0.9833)
    case = CaseEpochs(skill="s", case_id=1, epochs=5, stopped="max-epochs")
    plan = AdaptivePlan(first_round=3, step=2, max_epochs=5, looks_done=1, cases=(case,), gates=(look,))
    (line,) = summary_lines(plan)
    assert "98.33% interval stratified by case over these cases' epochs [0.741, 1.000]" in line
    assert "not decided against" not in line
    assert line.endswith("undecided (1 inside its interval), so the look stopped no case; the verdict does not read it")
