"""Paired statistics: exact tests, the interval over cases, Holm, power. Pure; property-tested."""

from __future__ import annotations

import itertools
import json
import math
import random
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reducer.paired import (
    holm,
    mcnemar_exact,
    paired_interval,
    sign_flip_test,
)
from reducer.power import cases_needed, mcnemar_power, min_cases, min_detectable_effect, power_note

small_fraction = st.fractions(min_value=-1, max_value=1, max_denominator=6)


def brute_force(diffs: list[Fraction]) -> tuple[float, float, float]:
    """Every sign pattern enumerated: the definition the fast test must match."""
    observed = sum(diffs, Fraction(0))
    sums = [
        sum((s * d for s, d in zip(signs, diffs, strict=True)), Fraction(0))
        for signs in itertools.product((1, -1), repeat=len(diffs))
    ]
    n = len(sums)
    return (
        sum(abs(s) >= abs(observed) for s in sums) / n,
        sum(s <= observed for s in sums) / n,
        sum(s >= observed for s in sums) / n,
    )


def test_mcnemar_needs_five_discordant_pairs_all_one_way_for_one_sided_p_below_005() -> None:
    assert min_cases(0.05) == 5 and min_cases(0.025) == 6  # 2^-5 = 0.03125; 2^-4 = 0.0625
    assert mcnemar_exact(0, 5).two_sided == pytest.approx(0.0625)
    assert mcnemar_exact(0, 6).two_sided == pytest.approx(0.03125)
    assert mcnemar_exact(0, 6).drop == pytest.approx(1 / 64)  # six worse, none better: a drop
    assert mcnemar_exact(6, 0).uplift == pytest.approx(1 / 64)
    assert mcnemar_exact(0, 0).two_sided == 1.0


def test_a_textbook_mcnemar_value() -> None:
    # 2 vs 9 discordant pairs: two-sided exact p = 2 * P(X <= 2), X ~ Bin(11, 1/2) = 0.0654
    assert mcnemar_exact(2, 9).two_sided == pytest.approx(2 * (1 + 11 + 55) / 2**11)


@settings(max_examples=150, deadline=None)
@given(st.lists(small_fraction, max_size=9))
def test_the_sign_flip_test_is_the_full_enumeration(diffs: list[Fraction]) -> None:
    got = sign_flip_test(diffs)
    nonzero = [d for d in diffs if d != 0]
    want = brute_force(nonzero) if nonzero else (1.0, 1.0, 1.0)
    assert (got.two_sided, got.drop, got.uplift) == pytest.approx(want)
    assert got.exact


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 25), st.integers(0, 25), st.integers(0, 10))
def test_with_pass_fail_cases_the_sign_flip_test_is_mcnemars(better: int, worse: int, ties: int) -> None:
    diffs = [1] * better + [-1] * worse + [0] * ties
    flip, mc = sign_flip_test(diffs), mcnemar_exact(better, worse)
    assert flip.two_sided == pytest.approx(mc.two_sided)
    assert flip.drop == pytest.approx(mc.drop)
    assert flip.uplift == pytest.approx(mc.uplift)


@settings(max_examples=100, deadline=None)
@given(st.lists(small_fraction, max_size=12))
def test_p_values_are_probabilities_and_mirror_under_negation(diffs: list[Fraction]) -> None:
    p, q = sign_flip_test(diffs), sign_flip_test([-d for d in diffs])
    for x in (p.two_sided, p.drop, p.uplift):
        assert 0 < x <= 1
    assert p.drop == pytest.approx(q.uplift) and p.uplift == pytest.approx(q.drop)
    assert p.two_sided == pytest.approx(q.two_sided)
    assert p.drop + p.uplift >= 1 - 1e-12  # the observed sum sits in both tails


def test_the_monte_carlo_estimate_agrees_with_the_exact_test_within_its_error() -> None:
    from reducer.paired import MONTE_CARLO_DRAWS, _monte_carlo

    diffs = [Fraction(k % 7 - 3, 4) or Fraction(1, 2) for k in range(19)]  # exact support is small
    exact = sign_flip_test(diffs)
    assert exact.exact
    estimate = _monte_carlo([Fraction(d) for d in diffs], sum(diffs, Fraction(0)), seed=3)
    error = 4 * math.sqrt(0.25 / MONTE_CARLO_DRAWS)  # four standard errors of a proportion
    for p, q in ((estimate.two_sided, exact.two_sided), (estimate.drop, exact.drop), (estimate.uplift, exact.uplift)):
        assert abs(p - q) < error, (p, q)


def test_a_support_too_large_falls_back_to_seeded_monte_carlo() -> None:
    diffs = [Fraction(1, k) for k in range(2, 26)]  # 24 distinct magnitudes: 2^24 sums
    a, b = sign_flip_test(diffs, seed=7), sign_flip_test(diffs, seed=7)
    assert not a.exact and a == b
    assert a.uplift < 0.001  # every case gained


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-6, 6), min_size=1, max_size=30))
def test_the_interval_holds_the_mean_stays_in_range_and_agrees_with_the_exact_test(steps: list[int]) -> None:
    diffs = [Fraction(k, 6) for k in steps]
    p = sign_flip_test(diffs)
    low, high = paired_interval([float(d) for d in diffs], p)  # type: ignore[misc]
    mean = float(sum(diffs, Fraction(0))) / len(diffs)
    assert -1 <= low <= mean + 1e-9 and mean - 1e-9 <= high <= 1
    # Wholly on one side of zero only when that one-sided exact p is below 2.5%.
    assert high >= 0 or p.drop < 0.025
    assert low <= 0 or p.uplift < 0.025
    assert paired_interval([]) is None


def test_cases_that_all_agree_give_an_interval_as_wide_as_the_data_allow() -> None:
    low, high = paired_interval([0.0] * 10)  # type: ignore[misc]
    assert low < -0.25 and high > 0.25  # ten unchanged cases cannot rule out a 25-point change
    low, high = paired_interval([1.0] * 8)  # type: ignore[misc]
    assert low < 0.75 and high == 1.0


def _coverage(n: int, up: float, down: float, runs: int = 400) -> float:
    """Share of simulated runs whose interval holds the true difference ``up - down``."""
    rng = random.Random(n)
    covered = 0
    for _ in range(runs):
        diffs = [1.0 if (u := rng.random()) < up else -1.0 if u < up + down else 0.0 for _ in range(n)]
        low, high = paired_interval(diffs)  # type: ignore[misc]
        covered += low - 1e-9 <= up - down <= high + 1e-9
    return covered / runs


@pytest.mark.parametrize("n", [6, 10, 30])
@pytest.mark.parametrize(("up", "down"), [(0.3, 0.1), (0.5, 0.1), (0.15, 0.05), (0.1, 0.0)])
def test_the_interval_covers_the_true_difference_at_small_numbers_of_cases(n: int, up: float, down: float) -> None:
    # The percentile bootstrap covered 47-95% here (60% at 6 cases, 15 and 5 points discordant).
    assert _coverage(n, up, down) >= 0.92


@settings(max_examples=150, deadline=None)
@given(st.lists(st.floats(0, 1), max_size=20))
def test_holm_never_lowers_a_p_value_and_keeps_their_order(ps: list[float]) -> None:
    adjusted = holm(ps)
    assert all(a >= p - 1e-12 and a <= 1 for a, p in zip(adjusted, ps, strict=True))
    for i, j in itertools.combinations(range(len(ps)), 2):
        if ps[i] < ps[j]:
            assert adjusted[i] <= adjusted[j] + 1e-12


def test_holm_on_a_known_family() -> None:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def test_power_is_exact_for_one_epoch_and_grows_with_cases() -> None:
    # Every pair discordant and every one won: the one-sided test at 0.05 rejects from 5 such pairs.
    assert mcnemar_power(5, 1.0, 1.0) == pytest.approx(1.0)
    assert mcnemar_power(4, 1.0, 1.0) == 0.0  # four all-one-way pairs never reach p < 0.05 (1/16)
    assert mcnemar_power(5, 1.0, 1.0, alpha=0.025) == 0.0
    assert mcnemar_power(40, 0.2, 0.1) < mcnemar_power(200, 0.2, 0.1)
    n = cases_needed(0.2, 0.1)
    assert mcnemar_power(n, 0.2, 0.1) >= 0.8 > mcnemar_power(n - 1, 0.2, 0.1) - 0.02


def test_more_epochs_need_fewer_cases_under_the_stated_assumption() -> None:
    assert cases_needed(0.2, 0.1, epochs=4) < cases_needed(0.2, 0.1, epochs=1)
    with pytest.raises(ValueError):
        cases_needed(0.1, 0.2)  # a difference larger than the discordance is impossible


def test_the_power_printout_states_its_assumption_and_the_six_pair_floor() -> None:
    text = "\n".join(power_note(4, 1).lines())
    assert "assuming 20% of pairs discordant" in text
    assert "10-point difference with the gate's one-sided test at alpha 0.05 with power 0.8" in text
    assert "at least 5 discordant pairs, all one way" in text and "one-sided" in text
    assert "this run has 4 cases." in text
    needed = text.splitlines()[0]
    assert "cases at 1 epoch (exact McNemar)" in needed and "at one epoch" not in needed  # one count, said once
    assert "at one epoch, exact McNemar" in power_note(4, 3).lines()[0]  # several epochs: the one-epoch count too
    assert math.isclose(power_note(4, 1).power_now or 0.0, 0.0)


def test_the_chance_to_detect_is_for_the_run_s_own_epochs() -> None:
    several = power_note(59, 2)
    assert several.needed == 59 and 0.8 <= (several.power_now or 0.0) < 0.85  # the run's epochs, not one
    assert several.power_now != power_note(59, 1).power_now
    line = several.lines()[1]
    assert line == "power: with 59 cases at 2 epochs the chance to detect it is 80% (normal approximation)."
    # Two cases: no exact test over cases can reach alpha, at any number of epochs.
    assert power_note(2, 2).lines()[1] == (
        "power: with 2 cases at 2 epochs the chance to detect it is 0% (no exact test over 2 cases reaches p < 0.05)."
    )
    assert "; this run has 2 cases." in power_note(2, 2).lines()[0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=20))
def test_the_packed_null_counts_equal_the_shifted_adds(steps: list[int]) -> None:
    from reducer.paired import _packed_counts, _shifted_counts

    offset = sum(steps)
    assert list(_packed_counts(steps, offset)) == _shifted_counts(steps, offset)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 60), st.integers(0, 60))
def test_mcnemar_equals_the_binomial_sums_it_stands_for(better: int, worse: int) -> None:
    n = better + worse
    p = mcnemar_exact(better, worse)
    if n == 0:
        assert (p.two_sided, p.drop, p.uplift) == (1.0, 1.0, 1.0)
        return
    drop = Fraction(sum(math.comb(n, i) for i in range(better + 1)), 2**n)
    uplift = 1 - Fraction(sum(math.comb(n, i) for i in range(better)), 2**n)
    assert (p.drop, p.uplift) == (float(drop), float(uplift))
    assert p.two_sided == float(min(Fraction(1), 2 * min(drop, uplift)))


def test_power_is_for_the_gate_s_one_sided_test_and_respects_the_exact_floor() -> None:
    # The regression gate is one-sided: 134 cases, not the two-sided test's 168.
    assert cases_needed(0.2, 0.1) == 134
    assert cases_needed(0.2, 0.1, alpha=0.025) > 134
    # Five cases can fail a run at 0.05 (p = 1/32): the printout must not say they cannot.
    five = power_note(5, 30)
    assert five.needed == 5 and (five.power_now or 0.0) > 0
    assert "no exact test" not in five.lines()[1]
    # Fewer cases than the exact test needs: nothing is detectable, whatever the epochs.
    assert min_detectable_effect(2, 0.2, epochs=3) is None
    assert min_detectable_effect(4, 0.2, epochs=30) is None
    assert min_detectable_effect(5, 0.2, epochs=30) is not None
    assert "needs at least 6 discordant pairs" in "\n".join(power_note(6, 1, alpha=0.025).lines())


def test_the_planned_power_is_for_the_test_that_gates_the_run() -> None:
    from producer.plan.planning import gate_test

    assert gate_test(("current", "baseline@v1"), 0.01) == (0.01, "the regression gate's (--regression-alpha)")
    assert gate_test(("current", "baseline@v1"), None)[0] == 0.05  # any drop fails; the test shown at 0.05
    assert gate_test(("current", "no-skill"), None)[0] == 0.025  # --require-uplift's one-sided 2.5%
    # Against no-skill without --require-uplift no gate reads the uplift test: the power says whose test
    # it is without claiming a gate the run does not have.
    assert gate_test(("current", "no-skill"), None) == (0.025, "an uplift")
    assert gate_test(("current", "no-skill"), None, 0.1) == (0.025, "the uplift gate's (--require-uplift)")


def test_a_dry_run_names_the_uplift_gate_only_when_it_is_required(tmp_path: Path) -> None:
    from tests.test_baseline_no_skill import make_repo

    repo = make_repo(tmp_path / "repo")
    for extra, said in (((), "with an uplift one-sided test"), (("--require-uplift", "0.1"), "--require-uplift")):
        args = ["run", "greeter", "--repo", str(repo), "--baseline", "no-skill", "--dry-run", "--json", *extra]
        done = subprocess.run([sys.executable, "-m", "producer.commands.cli", *args], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        (power, *_) = json.loads(done.stdout)["power"]
        assert said in power and ("gate" in power) == bool(extra)
