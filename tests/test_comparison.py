"""Paired comparisons inside the reducer: pairing, dropped pairs, the gates, assertion quality. Pure."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.shard import CURRENT, NO_SKILL, baseline_variant
from schemas.shard_outcome import ShardOutcome
from schemas.status import ShardState, Verdict
from schemas.verdict import AssertionVerdict, JudgeAnswer, ShardGrade
from tests.test_reducer import bundle, graded, outcomes_for, plan_for, reduce

S = ShardState
OLD = baseline_variant("HEAD~1")


def arms(n_cases: int, epochs: int = 1, models: tuple[str, ...] = ("m",), other: str = OLD):  # type: ignore[no-untyped-def]
    return plan_for([bundle("s", [1] * n_cases)], models=models, epochs=epochs, variants=(CURRENT, other))


def fill(plan, variant: str, passes) -> dict:  # type: ignore[no-untyped-def,type-arg]
    """passes(case_id, model, epoch) -> bool | ShardState for every shard of ``variant``."""
    out = {}
    for sh in plan.shards:
        if sh.variant != variant:
            continue
        spec = passes(sh.case_id, sh.model, sh.epoch)
        out[sh.shard_id] = (
            ShardOutcome(sh, spec, detail=f"{spec.value}: boom") if isinstance(spec, ShardState) else graded(sh, [spec])
        )
    return out


def overall(result, baseline: str = OLD):  # type: ignore[no-untyped-def]
    return next(c for c in result.comparisons if c.model is None and c.baseline == baseline)


def test_one_epoch_of_pass_fail_cases_is_tested_with_mcnemar() -> None:
    plan = arms(8)
    old = fill(plan, OLD, lambda c, m, e: c <= 2)
    new = fill(plan, CURRENT, lambda c, m, e: True)
    c = overall(reduce(plan, {**old, **new}))
    assert c.test == "mcnemar-exact" and (c.better, c.worse) == (6, 0)
    assert c.p_uplift == 1 / 64 and c.p_two_sided == 2 / 64
    assert c.difference == 0.75 and c.low is not None and c.low > 0
    assert c.cases == 8 and c.pairs == 8 and c.dropped == 0


def test_several_epochs_are_tested_over_per_case_differences() -> None:
    plan = arms(6, epochs=3)
    old = fill(plan, OLD, lambda c, m, e: e == 0)  # 1 of 3 epochs passes
    new = fill(plan, CURRENT, lambda c, m, e: e < 2)  # 2 of 3
    c = overall(reduce(plan, {**old, **new}))
    assert c.test == "sign-flip-exact"
    assert c.cases == 6 and c.pairs == 18  # the unit is the case, not the epoch
    assert abs(c.difference - 1 / 3) < 1e-9
    assert abs(c.p_uplift - 1 / 64) < 1e-12


def test_a_pair_with_an_ungraded_side_is_dropped_and_counted_never_a_gain_or_a_loss() -> None:
    plan = arms(6)
    old = fill(plan, OLD, lambda c, m, e: S.EXECUTOR_FAILED if c == 1 else True)
    new = fill(plan, CURRENT, lambda c, m, e: S.BLOCKED if c == 2 else (c != 3))
    c = overall(reduce(plan, {**old, **new}))
    assert c.dropped == 2 and c.pairs == 4
    assert c.dropped_by == {f"{OLD}:executor-failed": 1, "current:blocked": 1}
    assert (c.better, c.worse) == (0, 1)  # only case 3 changed


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.booleans()), min_size=2, max_size=8),
    st.data(),
)
def test_infra_failures_only_remove_their_pairs(cases: list[tuple[bool, bool]], data: st.DataObject) -> None:
    n = len(cases)
    broken = data.draw(st.sets(st.integers(1, n), max_size=n - 1))
    plan = arms(n)

    def old_spec(c: int, m: str, e: int) -> bool | ShardState:
        return S.GRADER_MALFORMED if c in broken else cases[c - 1][0]

    with_failures = reduce(plan, {**fill(plan, OLD, old_spec), **fill(plan, CURRENT, lambda c, m, e: cases[c - 1][1])})
    kept = [cases[i - 1] for i in range(1, n + 1) if i not in broken]
    got = overall(with_failures)
    assert got.dropped == len(broken) and got.pairs == len(kept)
    assert got.better == sum(new and not old for old, new in kept)
    assert got.worse == sum(old and not new for old, new in kept)
    again = reduce(plan, {**fill(plan, OLD, old_spec), **fill(plan, CURRENT, lambda c, m, e: cases[c - 1][1])})
    assert overall(again) == got  # reducing again gives the same figures, interval included


def test_with_no_pair_left_only_the_unpaired_figure_is_given_and_labelled() -> None:
    plan = arms(4)
    old = fill(plan, OLD, lambda c, m, e: True if c <= 2 else S.EXECUTOR_FAILED)
    new = fill(plan, CURRENT, lambda c, m, e: False if c > 2 else S.EXECUTOR_FAILED)
    c = overall(reduce(plan, {**old, **new}))
    assert c.test == "two-proportion-z" and c.pairs == 0 and c.dropped == 4
    assert "unpaired" in c.note and c.low is None


def test_without_regression_alpha_any_drop_fails_with_it_only_a_significant_one() -> None:
    plan = arms(8)
    old = fill(plan, OLD, lambda c, m, e: True)
    one_drop = fill(plan, CURRENT, lambda c, m, e: c != 1)
    # fail_under=0: the threshold passes every rate, so only the regression gate decides.
    dropped = reduce(plan, {**old, **one_drop}, fail_under=0.0)
    assert dropped.verdict is Verdict.FAIL and dropped.reasons[0].startswith("s: regression")
    assert reduce(plan, {**old, **one_drop}, regression_alpha=0.05, fail_under=0.0).verdict is Verdict.PASS
    six_drops = fill(plan, CURRENT, lambda c, m, e: c > 6)
    result = reduce(plan, {**old, **six_drops}, regression_alpha=0.05, fail_under=0.0)
    assert result.verdict is Verdict.FAIL
    assert "significant" in result.reasons[0] and "Holm" in result.reasons[0]


def test_a_per_assertion_drop_is_holm_corrected() -> None:
    # One case, many epochs: assertion 1 drops in every epoch, the others hold.
    plan = plan_for([bundle("s", [3, 1])], epochs=8, variants=(CURRENT, OLD))
    old = {sh.shard_id: graded(sh, [True] * (3 if sh.case_id == 1 else 1)) for sh in plan.shards if sh.variant == OLD}
    new = {
        sh.shard_id: graded(sh, [False, True, True] if sh.case_id == 1 else [True])
        for sh in plan.shards
        if sh.variant == CURRENT
    }
    result = reduce(plan, {**old, **new}, regression_alpha=0.05)
    c = overall(result)
    first = c.assertions[0]
    assert (first.worse, first.better) == (8, 0) and first.p_drop_holm >= first.p_drop
    assert first.p_drop_holm < 0.05
    assert result.verdict is Verdict.FAIL
    assert any("case 1 assertion 1 dropped significantly" in r for r in result.reasons)


def test_require_uplift_fails_unless_the_lower_bound_clears_the_margin() -> None:
    plan = arms(8, other=NO_SKILL)
    without = fill(plan, NO_SKILL, lambda c, m, e: False)
    helps = fill(plan, CURRENT, lambda c, m, e: True)
    assert reduce(plan, {**without, **helps}, require_uplift=0.0).verdict is Verdict.PASS
    assert reduce(plan, {**without, **helps}).verdict is Verdict.PASS
    no_help = fill(plan, CURRENT, lambda c, m, e: c == 1)
    result = reduce(plan, {**without, **no_help}, require_uplift=0.0, fail_under=0.0)
    assert result.verdict is Verdict.FAIL and "lower bound not above the margin +0.0 pts" in result.reasons[0]
    # A drop against no skill is reported, and decides nothing without --require-uplift (the
    # threshold, lowered to 0 here, is what fails such a run by default).
    dropped = {**fill(plan, NO_SKILL, lambda c, m, e: True), **no_help}
    assert reduce(plan, dropped, fail_under=0.0).verdict is Verdict.PASS


def test_two_cases_that_both_gain_are_too_few_to_show_uplift() -> None:
    plan = arms(2, other=NO_SKILL)
    result = reduce(
        plan,
        {**fill(plan, NO_SKILL, lambda c, m, e: False), **fill(plan, CURRENT, lambda c, m, e: True)},
        require_uplift=0.0,
    )
    assert result.verdict is Verdict.FAIL and "too few cases" in result.reasons[0]


def test_a_margin_reads_in_points_as_the_uplift_beside_it_does() -> None:
    plan = arms(8, other=NO_SKILL)
    result = reduce(
        plan,
        {**fill(plan, NO_SKILL, lambda c, m, e: False), **fill(plan, CURRENT, lambda c, m, e: c == 1)},
        require_uplift=0.05,
        fail_under=0.0,
    )
    assert result.verdict is Verdict.FAIL
    assert result.reasons[0].endswith("has a lower bound not above the margin +5.0 pts")


def test_a_regression_gate_too_few_cases_can_never_fire_warns_never_passes() -> None:
    plan = arms(2, epochs=2)
    old = fill(plan, OLD, lambda c, m, e: True)
    new = fill(plan, CURRENT, lambda c, m, e: False)  # both cases dropped: p = 0.25 at best
    result = reduce(plan, {**old, **new}, regression_alpha=0.05, fail_under=0.0)
    assert result.verdict is Verdict.WARN
    assert result.reasons == [
        f"s: too few cases to test for a regression at 0.05 against {OLD}: the smallest p 2 cases can give "
        "is 0.25 (paired -100.0 pts, one-sided p = 0.25)"
    ]
    assert not any("no regression" in r or "no significant regression" in r for r in result.reasons)
    # Without --regression-alpha any drop fails, whatever the number of cases.
    assert reduce(plan, {**old, **new}, fail_under=0.0).verdict is Verdict.FAIL
    # Enough cases to reach alpha: the gate decides, and a PASS may then say what it found.
    plan = arms(8)
    same = reduce(plan, {**fill(plan, OLD, lambda c, m, e: True), **fill(plan, CURRENT, lambda c, m, e: True)})
    assert same.verdict is Verdict.PASS and same.reasons[0].endswith(f"; no drop against {OLD}")


def test_an_interval_from_too_few_cases_is_not_shown_beside_a_test_that_cannot_fire() -> None:
    from reducer.render_compare import comparison_summary
    from reducer.render_html import render_html

    plan = arms(2)
    old = fill(plan, OLD, lambda c, m, e: True)
    result = reduce(plan, {**old, **fill(plan, CURRENT, lambda c, m, e: False)}, regression_alpha=0.05)
    c = overall(result)
    line = comparison_summary(c)
    assert "interval not shown: 2 cases" in line and "95% CI" not in line
    page = render_html(result)
    assert "interval not shown: 2 cases" in page and "95% bootstrap CI" not in page
    paired_row = page.split('<div class="bar-row diff">', 1)[1].split('<div class="num">', 1)[0]
    assert 'class="whisker"' not in paired_row  # no whisker drawn for an interval not shown
    plan = arms(8)
    old = fill(plan, OLD, lambda c, m, e: True)
    c = overall(reduce(plan, {**old, **fill(plan, CURRENT, lambda c, m, e: c > 6)}))
    assert "-75.0 pts, 95% CI -100.0 pts to -33.4 pts;" in comparison_summary(c)


def test_a_comparison_a_guard_skipped_is_a_warn_and_never_a_pass_without_regression() -> None:
    plan = plan_for([bundle("s", [1, 1])])
    passing = fill(plan, CURRENT, lambda c, m, e: True)
    plain = reduce(plan, passing)
    assert plain.verdict is Verdict.PASS
    assert plain.reasons == ["all corpora graded and at or above the threshold 1.0 (default)"]  # nothing compared
    guard = "s: GUARD_BAD_REF: could not read HEAD~5:skills/s/SKILL.md"
    skipped = reduce(plan, passing, compare_guards=[guard])
    assert skipped.verdict is Verdict.WARN
    assert skipped.reasons == [f"comparison skipped: {guard}"]


def test_per_model_comparisons_beside_the_overall_one() -> None:
    plan = arms(4, models=("a", "b"))
    result = reduce(plan, {**fill(plan, OLD, lambda c, m, e: m == "a"), **fill(plan, CURRENT, lambda c, m, e: True)})
    by_model = {c.model: c for c in result.comparisons}
    assert set(by_model) == {None, "a", "b"}
    assert by_model["a"].difference == 0 and by_model["b"].difference == 1
    assert by_model[None].difference == 0.5


def test_assertion_quality_flags_constant_flaky_and_disputed_assertions() -> None:
    plan = plan_for([bundle("s", [2, 1])], models=("m", "n"), epochs=3)
    out = {}
    for sh in plan.shards:
        passes = [True, sh.epoch != 1] if sh.case_id == 1 else [False]
        verdicts = [AssertionVerdict(text=f"a{i}", passed=p, evidence="q") for i, p in enumerate(passes)]
        judges = [
            JudgeAnswer(judge="j1", state=S.GRADED, verdicts=verdicts),
            JudgeAnswer(
                judge="j2",
                state=S.GRADED,
                verdicts=[v.model_copy(update={"passed": not v.passed}) if sh.epoch == 0 else v for v in verdicts],
            ),
        ]
        grade = ShardGrade(shard_id=sh.shard_id, state=S.GRADED, verdicts=verdicts, judges=judges)
        out[sh.shard_id] = ShardOutcome(sh, S.GRADED, grade=grade)
    quality = {(q.case_id, q.index): q for q in reduce(plan, out).assertion_quality}
    assert quality[(1, 0)].non_discriminating and quality[(1, 0)].constant == "pass"
    assert quality[(2, 0)].non_discriminating and quality[(2, 0)].constant == "fail"
    assert quality[(1, 1)].flaky and quality[(1, 1)].flaky_in == ["current/m", "current/n"]
    assert not quality[(1, 1)].non_discriminating
    assert quality[(1, 0)].judge_disagreement == 1 / 3


def test_too_few_verdicts_or_one_group_flag_nothing() -> None:
    # Two equal verdicts of two models, or six of one model: not enough to call it non-discriminating.
    few = plan_for([bundle("s", [1, 1])], models=("m", "n"))
    assert not any(q.non_discriminating for q in reduce(few, fill_all(few, True)).assertion_quality)
    one_group = plan_for([bundle("s", [1, 1])], epochs=6)
    assert not any(q.non_discriminating for q in reduce(one_group, fill_all(one_group, True)).assertion_quality)
    # Four equal verdicts from two models are.
    enough = plan_for([bundle("s", [1, 1])], models=("m", "n"), epochs=2)
    assert all(q.non_discriminating for q in reduce(enough, fill_all(enough, True)).assertion_quality)
    # A flip across two epochs is not yet flaky; across three it is.
    for epochs, flaky in ((2, False), (3, True)):
        plan = plan_for([bundle("s", [1, 1])], epochs=epochs)
        out = {sh.shard_id: graded(sh, [sh.epoch == 0]) for sh in plan.shards}
        assert [q.flaky for q in reduce(plan, out).assertion_quality] == [flaky, flaky]


def fill_all(plan, passed: bool) -> dict:  # type: ignore[no-untyped-def,type-arg]
    return {sh.shard_id: graded(sh, [passed]) for sh in plan.shards}


def test_a_single_observation_is_not_called_non_discriminating() -> None:
    plan = plan_for([bundle("s", [1, 1])])
    quality = reduce(plan, outcomes_for(plan, {1: [True], 2: [True]})).assertion_quality
    assert len(quality) == 2 and not quality[0].non_discriminating and not quality[0].flaky


def test_a_pass_says_what_the_regression_test_found_and_its_interval_agrees() -> None:
    # 3 of 8 cases pass at the old ref and fail now: exact one-sided p = 1/8, not below 0.05.
    plan = arms(8)
    old = fill(plan, OLD, lambda c, m, e: True)
    new = fill(plan, CURRENT, lambda c, m, e: c > 3)
    result = reduce(plan, {**old, **new}, regression_alpha=0.05, fail_under=0.6)
    assert result.verdict is Verdict.PASS
    assert result.reasons[0].endswith("; no significant regression (one-sided p = 0.125 >= alpha 0.05)")
    c = overall(result)
    assert c.p_drop == 0.125 and c.high is not None and c.high >= 0  # the interval does not show a drop the test cannot
    # Without --regression-alpha a PASS means no drop at all.
    same = reduce(plan, {**old, **fill(plan, CURRENT, lambda c, m, e: True)})
    assert same.reasons[0].endswith(f"; no drop against {OLD}")


def _gated(p_drop: float, skill: str = "s", assertions: tuple = ()):  # type: ignore[no-untyped-def,type-arg]
    """A real reduced comparison against the old ref, its p-values set: the gate's inputs alone."""
    plan = arms(8)
    result = reduce(plan, {**fill(plan, OLD, lambda c, m, e: True), **fill(plan, CURRENT, lambda c, m, e: c > 2)})
    c = overall(result).model_copy(update={"skill": skill, "p_drop": p_drop, "assertions": list(assertions)})
    return c, [s.model_copy(update={"skill": skill}) for s in result.skills]


def test_an_assertion_that_only_the_one_sided_count_can_test_is_in_the_family() -> None:
    from reducer.gates import comparison_failures
    from schemas.comparison import AssertionComparison

    # 5 of 5 pairs dropped: one-sided p = 1/32 < 0.05, though the two-sided p (1/16) is not.
    five = AssertionComparison(
        case_id=1, index=0, text="t", baseline_rate=1.0, current_rate=0.0, pairs=5, better=0, worse=5,
        p_two_sided=0.0625, p_drop=0.03125, p_drop_holm=0.0625,
    )  # fmt: skip
    c, skills = _gated(0.02, assertions=(five,))
    fails = comparison_failures([c], skills, regression_alpha=0.05)
    assert any("case 1 assertion 1 dropped significantly: 5 pairs worse" in f for f in fails)


def test_the_regression_gate_is_holm_corrected_across_corpora() -> None:
    from reducer.gates import comparison_failures

    a, skills_a = _gated(0.03, "a")
    b, skills_b = _gated(0.03, "b")
    assert len(comparison_failures([a], skills_a, regression_alpha=0.05)) == 1  # alone, 0.03 < 0.05
    # Two corpora, each at 0.03: Holm over both gives 0.06, so neither fails (each alone would).
    assert comparison_failures([a, b], skills_a + skills_b, regression_alpha=0.05) == []
    a, _ = _gated(0.01, "a")
    fails = comparison_failures([a, b], skills_a + skills_b, regression_alpha=0.05)
    assert len(fails) == 2 and "over 2 tests in 2 corpora" in fails[0]


def test_a_pass_never_says_a_p_below_alpha_was_above_it() -> None:
    from reducer.gates import regression_tested

    a, _ = _gated(0.03, "a")
    b, _ = _gated(0.03, "b")  # each below 0.05 alone; Holm over both: 0.06, no FAIL
    assert regression_tested([a, b], 0.05) == (
        "no significant regression (one-sided p = 0.03, not below alpha 0.05 after Holm's adjustment)"
    )
