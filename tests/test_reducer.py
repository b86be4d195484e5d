"""The reducer's arithmetic: rates, infra tallies, gates, verdicts, composite, statistics. Pure."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from producer.launch.grade_only import recorded_plan
from producer.plan.planning import plan_run
from reducer.render import corpus_status, render_markdown
from reducer.scoring import headline, is_inconclusive, rate
from reducer.stats import mean_interval, pass_at_k, pass_hat_k, two_proportion_p, wilson
from reducer.stream import StreamReducer, reduce_run
from schemas.corpus import Assertion, Corpus, EvalCase, ToolCallCheck
from schemas.errors import BlockedError, FixtureNeedsGit, NoIsolation, NoSandbox
from schemas.outcome import CalibrationRecord, CalibrationStatus
from schemas.report import UNFINISHED, CarriedReport, RunResult
from schemas.shard import CURRENT, RunPlan, Shard, SkillBundle, baseline_variant
from schemas.shard_outcome import ShardOutcome, outcome_line_of
from schemas.status import ExitCode, SandboxMode, ShardState, Verdict
from schemas.trajectory import Trajectory
from schemas.verdict import AssertionVerdict, ShardGrade

S = ShardState


def bundle(skill: str, assertions_per_case: Sequence[int] = (2, 2, 2, 2), *, weighted: bool = False) -> SkillBundle:
    cases = []
    for i, n in enumerate(assertions_per_case, start=1):
        assertions: list[Assertion] = [f"The agent runs step {i}.{k} in the shell" for k in range(n)]
        if weighted:  # one deterministic assertion worth 3
            assertions.append(ToolCallCheck(text=f"case {i} calls the tool", pattern="x", weight=3.0))
        cases.append(EvalCase(id=i, prompt=f"case {i}", expected_output="-", files=(), assertions=tuple(assertions)))
    return SkillBundle(
        skill=skill,
        bundle_key=f"{skill}-000000000000",
        corpus_file=f"evals/{skill}.evals.json",
        corpus=Corpus(skill_name=skill, evals=tuple(cases)),
    )


def plan_for(
    bundles: Sequence[SkillBundle],
    models: Sequence[str] = ("m",),
    epochs: int = 1,
    variants: Sequence[str] = (CURRENT,),
) -> RunPlan:
    return plan_run("20260101-000000-00000000", bundles, models, judges=["j"], epochs=epochs, variants=variants)


def graded(shard: Shard, passes: Sequence[bool], weights: Sequence[float] | None = None) -> ShardOutcome:
    weights = weights or [1.0] * len(passes)
    verdicts = [
        AssertionVerdict(text=f"a{i}", passed=p, evidence="quote" if p else "absent: it", weight=w)
        for i, (p, w) in enumerate(zip(passes, weights, strict=True))
    ]
    return ShardOutcome(shard, S.GRADED, grade=ShardGrade(shard_id=shard.shard_id, state=S.GRADED, verdicts=verdicts))


def outcomes_for(
    plan: RunPlan, by_case: Mapping[int, object], skill: str | None = None, variant: str = CURRENT
) -> dict:  # type: ignore[type-arg]
    """Outcome per shard: a list of bools (graded) or a state (not graded), keyed by case id."""
    out = {}
    for shard in plan.shards:
        if (skill and shard.skill != skill) or shard.variant != variant or shard.case_id not in by_case:
            continue
        spec = by_case[shard.case_id]
        if isinstance(spec, ShardState):
            detail = "BLOCKED_BAD_FIXTURE: case escapes" if spec is S.BLOCKED else f"{spec.value}: boom"
            out[shard.shard_id] = ShardOutcome(shard, spec, detail=detail)
        else:
            out[shard.shard_id] = graded(shard, spec)  # type: ignore[arg-type]
    return out


def reduce(plan: RunPlan, outcomes: dict, **kw: object) -> RunResult:  # type: ignore[type-arg]
    return reduce_run(plan, outcomes, **kw)  # type: ignore[arg-type]


# --- behavioural rate, infra tally, blocked --------------------------------------------------------
def test_the_behavioural_rate_counts_assertions_of_graded_cases_only() -> None:
    plan = plan_for([bundle("s")])
    result = reduce(
        plan, outcomes_for(plan, {1: [True, True], 2: [True, False], 3: [False, True], 4: S.EXECUTOR_FAILED})
    )
    s = result.skills[0]
    assert (s.behavioural.passed, s.behavioural.total) == (4, 6)
    assert s.headline == "4/6 (66.7%)"
    assert s.infra == {"budget-exhausted": 0, "executor-failed": 1, "grader-dispatch-failed": 0, "grader-malformed": 0}
    assert not s.inconclusive and s.not_graded == 1


def test_infra_failures_are_tallied_by_kind_and_blocked_cases_listed_apart() -> None:
    plan = plan_for([bundle("s", (1,) * 8)])
    specs = {
        1: [True],
        2: S.GRADER_MALFORMED,
        3: S.GRADER_DISPATCH_FAILED,
        4: S.BLOCKED,
        5: [False],
        6: [True],
        7: [True],
        8: [True],
    }
    s = reduce(plan, outcomes_for(plan, specs)).skills[0]
    assert s.infra == {"budget-exhausted": 0, "executor-failed": 0, "grader-dispatch-failed": 1, "grader-malformed": 1}
    assert [r.case_id for r in s.blocked] == [4]
    assert s.not_graded == 3 and s.behavioural.total == 5  # blocked is neither graded nor infra
    assert s.inconclusive  # 3 of 8 not graded > 25%


def test_a_shard_that_never_finished_counts_as_not_graded() -> None:
    plan = plan_for([bundle("s", (1, 1))])
    s = reduce(plan, outcomes_for(plan, {1: [True]})).skills[0]
    assert s.not_graded == 1 and s.inconclusive
    assert [r.state for r in s.runs] == [S.GRADED, S.QUEUED]


infra_states = st.sampled_from([S.EXECUTOR_FAILED, S.GRADER_MALFORMED, S.GRADER_DISPATCH_FAILED, S.BLOCKED])


@given(
    passes=st.lists(st.lists(st.booleans(), min_size=1, max_size=3), min_size=1, max_size=6),
    failures=st.lists(infra_states, max_size=6),
)
def test_infra_shards_never_change_the_behavioural_rate(passes: list[list[bool]], failures: list[ShardState]) -> None:
    sizes = [len(p) for p in passes] + [1] * len(failures) + [1] * max(0, 2 - len(passes) - len(failures))
    plan = plan_for([bundle("s", sizes)])
    specs: dict[int, object] = {i + 1: p for i, p in enumerate(passes)}
    clean = reduce(plan, outcomes_for(plan, specs)).skills[0].behavioural
    specs.update({len(passes) + 1 + i: state for i, state in enumerate(failures)})
    noisy = reduce(plan, outcomes_for(plan, specs)).skills[0]
    assert noisy.behavioural == clean
    assert clean.passed == sum(map(sum, passes)) and clean.total == sum(map(len, passes))
    # the padding cases have no outcome at all: tallied apart, as missing or still running
    assert sum(n for kind, n in noisy.infra.items() if kind != UNFINISHED) + len(noisy.blocked) == len(failures)


# --- the trustworthiness gate --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("not_graded", "shards", "cases", "expected"),
    [
        (0, 4, 4, False),
        (1, 4, 4, False),  # exactly 25% is not more than 25%
        (2, 8, 8, False),
        (2, 4, 4, True),
        (3, 8, 8, True),
        (1, 3, 3, True),  # any case in a corpus of fewer than 4
        (1, 2, 2, True),
        (0, 3, 3, False),
        (1, 8, 4, False),  # 2 models x 4 cases: 1 of 8 shards
    ],
)
def test_inconclusive_when_more_than_a_quarter_or_any_case_of_a_small_corpus_is_not_graded(
    not_graded: int, shards: int, cases: int, expected: bool
) -> None:
    assert is_inconclusive(not_graded, shards, cases) is expected


def test_an_inconclusive_corpus_headlines_the_count_not_a_rate_and_warns() -> None:
    plan = plan_for([bundle("s")])
    result = reduce(plan, outcomes_for(plan, {1: [True, True], 2: [True, True], 3: S.GRADER_MALFORMED, 4: S.BLOCKED}))
    # The headline names the kinds, adding up to the count: one infra failure, one blocked case.
    assert result.skills[0].headline == "INCONCLUSIVE (2/4 shards not graded — 1 infra, 1 blocked)"
    assert result.skills[0].verdict == "INCONCLUSIVE"
    assert result.verdict is Verdict.WARN and result.verdict.exit_code == ExitCode.WARN
    assert int(ExitCode.WARN) == 3
    assert result.reasons == [
        "s (current): INCONCLUSIVE (2/4 shards not graded — 1 infra, 1 blocked)",
        "s (current) case 4 blocked: BLOCKED_BAD_FIXTURE: case escapes",
    ]


@pytest.mark.parametrize(("inconclusive", "aggregate"), [(1, False), (2, True)])
def test_several_corpora_are_inconclusive_together_above_ten_percent(inconclusive: int, aggregate: bool) -> None:
    bundles = [bundle(f"s{i}", (1, 1)) for i in range(10)]
    plan = plan_for(bundles)
    outcomes: dict = {}  # type: ignore[type-arg]
    for i, b in enumerate(bundles):
        outcomes |= outcomes_for(plan, {1: [True], 2: S.EXECUTOR_FAILED if i < inconclusive else [False]}, b.skill)
    result = reduce(plan, outcomes, fail_under=0.5)  # each trusted corpus passes 1 of 2: at the threshold
    assert result.aggregate_inconclusive is aggregate
    if aggregate:
        assert result.aggregate_headline == "AGGREGATE: INCONCLUSIVE (2/10 corpora not trustworthy)"
    else:
        # The one INCONCLUSIVE corpus is left out of the suite rate: 9 trusted corpora, 1 of 2 each.
        assert result.aggregate_headline == "AGGREGATE: 9/18 (50.0%) (1 INCONCLUSIVE corpus left out)"
    assert result.verdict is Verdict.WARN  # any INCONCLUSIVE corpus warns


# --- verdicts and exit codes -------------------------------------------------------------------
def all_pass(plan: RunPlan, variant: str = CURRENT) -> dict:  # type: ignore[type-arg]
    return outcomes_for(plan, {i: [True, True] for i in range(1, 5)}, variant=variant)


def test_a_fully_graded_run_without_gates_passes_with_exit_0() -> None:
    plan = plan_for([bundle("s")])
    result = reduce(plan, all_pass(plan))
    assert result.verdict is Verdict.PASS and result.verdict.exit_code == 0
    assert result.aggregate_headline == ""  # one corpus: no aggregate line


def test_a_pass_with_a_whole_case_not_graded_says_so_instead_of_all_corpora_graded() -> None:
    # One case of four failed for infra in each of its 3 epochs: 25% of the shards, not over it.
    plan = plan_for([bundle("s", (1, 1, 1, 1))], epochs=3)
    outcomes = outcomes_for(plan, {1: [True], 2: [True], 3: [True], 4: S.EXECUTOR_FAILED})
    result = reduce(plan, outcomes)
    assert result.verdict is Verdict.PASS and not result.skills[0].inconclusive
    assert result.reasons == [
        "every corpus conclusive (3 of 12 shards not graded) and at or above the threshold 1.0 (default)"
    ]


@pytest.mark.parametrize(("fail_under", "verdict"), [(0.8, Verdict.FAIL), (0.75, Verdict.PASS), (0.5, Verdict.PASS)])
def test_a_rate_below_fail_under_fails_with_exit_1(fail_under: float, verdict: Verdict) -> None:
    plan = plan_for([bundle("s")])
    result = reduce(
        plan,
        outcomes_for(plan, {1: [True, True], 2: [True, False], 3: [True, False], 4: [True, True]}),
        fail_under=fail_under,
    )
    assert result.verdict is verdict
    if verdict is Verdict.FAIL:
        assert result.verdict.exit_code == 1
        assert result.reasons == ["s: behavioural pass rate 6/8 (75.0%) is below the threshold 0.8 (--fail-under)"]
    assert result.threshold == fail_under and result.threshold_source == "--fail-under"
    assert result.skills[0].verdict == verdict.value


def test_fail_under_is_not_applied_to_an_inconclusive_corpus() -> None:
    plan = plan_for([bundle("s", (1, 1))])
    result = reduce(plan, outcomes_for(plan, {1: [False], 2: S.EXECUTOR_FAILED}), fail_under=0.9)
    assert result.verdict is Verdict.WARN


def test_a_regression_against_the_baseline_variant_fails() -> None:
    base = baseline_variant("HEAD~1")
    plan = plan_for([bundle("s")], variants=(CURRENT, base))
    old = all_pass(plan, variant=base)
    new = outcomes_for(plan, {1: [True, True], 2: [True, True], 3: [True, True], 4: [True, False]})
    result = reduce(plan, {**old, **new}, fail_under=0.5)  # the threshold passes: only the regression fails
    assert result.verdict is Verdict.FAIL and result.verdict.exit_code == 1
    assert result.reasons == [
        "s: regression 8/8 (100.0%) -> 7/8 (87.5%) (baseline@HEAD~1; paired -12.5 pts, "
        "interval not shown: 4 cases, one-sided p = 0.5)"
    ]
    assert reduce(plan, {**old, **all_pass(plan)}).verdict is Verdict.PASS  # equal is no regression


def test_no_isolation_blocks_the_run_with_exit_2_but_a_bad_fixture_only_blocks_its_case() -> None:
    plan = plan_for([bundle("s")])
    outcomes = all_pass(plan)
    bad_fixture = outcomes_for(plan, {4: S.BLOCKED})
    # 1 of 4 blocked is 25%: not INCONCLUSIVE, but a blocked case is a corpus defect the user must see.
    one_blocked = reduce(plan, {**outcomes, **bad_fixture})
    assert one_blocked.verdict is Verdict.WARN
    assert one_blocked.reasons == ["s (current) case 4 blocked: BLOCKED_BAD_FIXTURE: case escapes"]
    shard = next(s for s in plan.shards if s.case_id == 4)
    no_iso = blocked_by(shard, NoIsolation("cannot copy the repo"))
    result = reduce(plan, {**outcomes, shard.shard_id: no_iso}, fail_under=0.99)
    assert result.verdict is Verdict.BLOCKED and result.verdict.exit_code == 2  # BLOCKED beats FAIL
    assert result.reasons == ["s case 4: BLOCKED_NO_ISOLATION: cannot copy the repo"]


def blocked_by(shard: Shard, err: BlockedError) -> ShardOutcome:
    """The outcome a worker records for a shard that raised ``err`` (its status and ``stops_run``)."""
    return ShardOutcome(shard, S.BLOCKED, detail=str(err), stops_run=err.stops_run)


@pytest.mark.parametrize("err", [FixtureNeedsGit("base fixtures need git"), NoSandbox("worker requires bwrap")])
def test_a_base_fixture_without_git_or_a_refused_sandbox_blocks_the_run(err: BlockedError) -> None:
    plan = plan_for([bundle("s")])
    shard = next(s for s in plan.shards if s.case_id == 4)
    result = reduce(plan, {**all_pass(plan), shard.shard_id: blocked_by(shard, err)})
    assert result.verdict is Verdict.BLOCKED


def test_the_verdict_reads_whether_a_block_stops_the_run_from_the_record_not_from_its_text() -> None:
    plan = plan_for([bundle("s")])
    shard = next(s for s in plan.shards if s.case_id == 4)
    lookalike = ShardOutcome(shard, S.BLOCKED, detail="BLOCKED_NO_ISOLATION: only the words", stops_run=False)
    assert reduce(plan, {**all_pass(plan), shard.shard_id: lookalike}).verdict is Verdict.WARN


def test_a_baseline_that_cannot_be_isolated_degrades_the_comparison_not_the_run() -> None:
    b = bundle("s")
    plan = plan_run("20260101-000000-00000000", [b], ["m"], judges=["j"], variants=[CURRENT, "baseline@v1"])
    outcomes = {}
    for shard in plan.shards:
        if shard.variant == CURRENT:
            outcomes |= {k: v for k, v in all_pass(plan).items() if k == shard.shard_id}
        else:
            outcomes[shard.shard_id] = blocked_by(shard, NoIsolation("bad ref"))
    result = reduce(plan, outcomes)
    assert result.verdict is Verdict.WARN
    assert "s: baseline unavailable, no comparison" in result.reasons


def calibrated(judge: str, *misses: str) -> CalibrationRecord:
    status = CalibrationStatus.FAILED if misses else CalibrationStatus.OK
    return CalibrationRecord(judge=judge, status=status, details=list(misses))


def test_a_failed_calibration_and_skipped_corpora_warn_with_exit_3() -> None:
    plan = plan_for([bundle("s")])
    failed = reduce(plan, all_pass(plan), calibration={"j": calibrated("j", "good-run: 1 wrong")})
    assert failed.verdict is Verdict.WARN and failed.reasons == ["judge j failed calibration: good-run: 1 wrong"]
    assert failed.calibration == {"j": "failed: good-run: 1 wrong"}
    assert reduce(plan, all_pass(plan), calibration={"j": calibrated("j")}).verdict is Verdict.PASS
    missing = CalibrationRecord(judge="j", status=CalibrationStatus.MISSING)
    assert reduce(plan, all_pass(plan), calibration={"j": missing}).reasons == [
        "judge j was not calibrated: no calibration result was recorded"
    ]
    skipped_calibration = CalibrationRecord(judge="j", status=CalibrationStatus.SKIPPED)
    assert reduce(plan, all_pass(plan), calibration={"j": skipped_calibration}).verdict is Verdict.PASS
    skipped = reduce(plan, all_pass(plan), skipped=["BLOCKED_BAD_CORPUS: evals/x.evals.json: bad"])
    assert skipped.verdict is Verdict.WARN and skipped.reasons == [
        "skipped BLOCKED_BAD_CORPUS: evals/x.evals.json: bad"
    ]


def test_fail_beats_warn() -> None:
    plan = plan_for([bundle("s")])
    result = reduce(
        plan,
        outcomes_for(plan, {i: [False, False] for i in range(1, 5)}),
        fail_under=0.5,
        calibration={"j": calibrated("j", "x")},
    )
    assert result.verdict is Verdict.FAIL


def carried(skill: str, verdict: str) -> CarriedReport:
    return CarriedReport(
        corpus_file=f"evals/{skill}.evals.json", skill=skill, verdict=verdict, report=f"out/skill-eval-{skill}-x.json"
    )


def test_nothing_to_run_is_blocked_only_when_every_corpus_was_bad() -> None:
    empty = plan_for([])
    bad = ["BLOCKED_BAD_CORPUS: evals/x.evals.json: bad"]
    assert reduce(empty, {}, skipped=bad).verdict is Verdict.BLOCKED
    assert reduce(empty, {}, skipped=bad, already_reported=[carried("y", "PASS")]).verdict is Verdict.WARN
    done = reduce(empty, {}, already_reported=[carried("y", "PASS")])
    assert done.verdict is Verdict.PASS
    assert done.reasons == [
        "nothing to run: 1 corpus already reported",
        "y: PASS in its earlier report out/skill-eval-y-x.json (--force re-runs it)",
    ]


def test_a_corpus_skipped_for_its_earlier_report_carries_that_reports_verdict() -> None:
    """Its earlier report stands: a FAIL there fails this run, over the WARN of a bad corpus and
    over the PASS of the corpora that ran; a carried WARN warns; a carried PASS is named."""
    empty = plan_for([])
    bad = ["BLOCKED_BAD_CORPUS: evals/x.evals.json: bad"]
    failed = reduce(empty, {}, skipped=bad, already_reported=[carried("y", "FAIL"), carried("z", "PASS")])
    assert failed.verdict is Verdict.FAIL
    assert failed.reasons == ["y: FAIL in its earlier report out/skill-eval-y-x.json (--force re-runs it)"]
    plan = plan_for([bundle("s")])
    passing = outcomes_for(plan, {i: [True, True] for i in range(1, 5)})
    assert reduce(plan, passing, already_reported=[carried("y", "FAIL")]).verdict is Verdict.FAIL
    warned = reduce(plan, passing, already_reported=[carried("y", "WARN")])
    assert warned.verdict is Verdict.WARN and warned.reasons == [carried("y", "WARN").reason()]
    kept = reduce(plan, passing, already_reported=[carried("y", "PASS")])
    assert kept.verdict is Verdict.PASS and kept.reasons[1:] == [carried("y", "PASS").reason()]


# --- headline, composite, leaderboard, epochs ------------------------------------------------------
@pytest.mark.parametrize(
    ("passed", "total", "text"),
    [(4, 7, "4/7 (57.1%)"), (0, 3, "0/3 (0.0%)"), (2, 2, "2/2 (100.0%)"), (1, 3, "1/3 (33.3%)"), (2, 3, "2/3 (66.7%)")],
)
def test_the_headline_is_passed_over_graded_with_one_decimal(passed: int, total: int, text: str) -> None:
    assert headline(rate(passed, total)) == text


def test_the_composite_is_the_weighted_share_of_a_cases_assertions_judged_and_deterministic_alike() -> None:
    plan = plan_for([bundle("s", (1, 1), weighted=True)])  # per case: one judged (1) + one deterministic (3)
    passes = {1: [False, True], 2: [True, False]}
    outcomes = {s.shard_id: graded(s, passes[s.case_id], weights=[1.0, 3.0]) for s in plan.shards}
    s = reduce(plan, outcomes).skills[0]
    assert [r.composite for r in s.runs] == [0.75, 0.25]
    m = s.models[0]
    assert m.composite_mean == pytest.approx(0.5)
    assert (m.composite_low, m.composite_high) == pytest.approx(mean_interval([0.75, 0.25])[1])
    assert s.behavioural.passed == 2 and s.behavioural.total == 4  # the rate is unweighted


def test_the_leaderboard_ranks_executor_models_by_composite_across_corpora() -> None:
    plan = plan_for([bundle("s", (1, 1)), bundle("t", (1, 1))], models=("zeta", "alpha", "mid", "none"))
    outcomes = {}
    score = {"zeta": [True], "alpha": [False], "mid": [True]}
    for shard in plan.shards:
        if shard.model == "none":
            outcomes[shard.shard_id] = ShardOutcome(shard, S.EXECUTOR_FAILED, detail="x")
        elif shard.model == "mid" and shard.skill == "t":
            outcomes[shard.shard_id] = graded(shard, [False])
        else:
            outcomes[shard.shard_id] = graded(shard, score[shard.model])
    board = reduce(plan, outcomes).leaderboard
    assert [(m.model, m.composite_mean) for m in board] == [("zeta", 1.0), ("mid", 0.5), ("alpha", 0.0), ("none", None)]


def test_epochs_give_per_assertion_pass_at_k_and_pass_hat_k_and_a_rate_per_model() -> None:
    plan = plan_for([bundle("s", (1, 1))], models=("a", "b"), epochs=3)
    outcomes = {}
    for shard in plan.shards:
        ok = shard.model == "a" or (shard.case_id == 1 and shard.epoch == 0)  # b passes case 1 once in 3
        outcomes[shard.shard_id] = graded(shard, [ok])
    stats = reduce(plan, outcomes).skills[0].assertions
    first = stats[0]
    assert (first.by_model["a"].passed, first.by_model["a"].total) == (3, 3)
    assert (first.by_model["b"].passed, first.by_model["b"].total) == (1, 3)
    assert first.pass_at_k == pytest.approx((1.0 + 1.0) / 2)  # k = 3 of 3 draws: one pass is enough
    assert first.pass_hat_k == pytest.approx((1.0 + 0.0) / 2)
    assert stats[1].pass_at_k == pytest.approx(0.5) and stats[1].pass_hat_k == pytest.approx(0.5)


# --- statistics ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("successes", "n", "low", "high"),
    [(0, 10, 0.0, 0.2775), (5, 10, 0.2366, 0.7634), (10, 10, 0.7225, 1.0), (4, 7, 0.2504, 0.8416), (1, 1, 0.2065, 1.0)],
)
def test_wilson_intervals_match_published_values(successes: int, n: int, low: float, high: float) -> None:
    assert wilson(successes, n) == pytest.approx((low, high), abs=5e-4)


def test_an_empty_sample_says_nothing_so_its_interval_is_everything() -> None:
    assert wilson(0, 0) == (0.0, 1.0)
    assert rate(0, 0).rate is None
    assert mean_interval([]) == (None, (0.0, 1.0))
    assert mean_interval([0.4]) == (0.4, (0.0, 1.0))


@given(n=st.integers(1, 500), data=st.data())
def test_a_rate_always_lies_within_its_wilson_interval(n: int, data: st.DataObject) -> None:
    c = data.draw(st.integers(0, n))
    r = rate(c, n)
    assert 0.0 <= r.low <= r.rate <= r.high <= 1.0  # type: ignore[operator]


@pytest.mark.parametrize(
    ("n", "c", "k", "at_k", "hat_k"),
    [
        (5, 2, 2, 0.7, 0.1),
        (5, 2, 1, 0.4, 0.4),
        (3, 0, 2, 0.0, 0.0),
        (3, 3, 3, 1.0, 1.0),
        (4, 3, 2, 1.0, 0.5),
        (10, 1, 5, 0.5, 0.0),
    ],
)
def test_pass_at_k_and_pass_hat_k_known_values(n: int, c: int, k: int, at_k: float, hat_k: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(at_k)
    assert pass_hat_k(n, c, k) == pytest.approx(hat_k)


def test_k_larger_than_the_attempts_is_refused() -> None:
    with pytest.raises(ValueError, match="k must not exceed n"):
        pass_at_k(2, 1, 3)
    with pytest.raises(ValueError, match="k must not exceed n"):
        pass_hat_k(2, 1, 3)


@given(n=st.integers(1, 30), data=st.data())
def test_pass_hat_k_never_exceeds_the_rate_which_never_exceeds_pass_at_k(n: int, data: st.DataObject) -> None:
    c, k = data.draw(st.integers(0, n)), data.draw(st.integers(1, n))
    assert pass_hat_k(n, c, k) <= c / n + 1e-12 <= pass_at_k(n, c, k) + 2e-12
    assert math.isclose(pass_at_k(n, c, 1), c / n) and math.isclose(pass_hat_k(n, c, 1), c / n)


def test_two_proportions_with_no_spread_have_no_p_value_and_different_ones_do() -> None:
    assert two_proportion_p(0, 5, 0, 7) is None and two_proportion_p(5, 5, 7, 7) is None
    assert two_proportion_p(0, 5, 0, 0) is None
    p = two_proportion_p(1, 10, 9, 10)
    assert p is not None and 0.0 < p < 0.01


def test_a_grade_only_run_lists_in_each_corpus_only_the_models_recorded_for_it() -> None:
    # Corpus a recorded with exec-a only, corpus b with exec-b only: no 0/0 row of the other model.
    kept = [
        (skill, case_id, 0, Trajectory(skill=skill, case_id=case_id, model=model))
        for skill, model in (("a", "exec-a"), ("b", "exec-b"))
        for case_id in (1, 2, 3, 4)
    ]
    plan = recorded_plan(
        "20260101-000000-00000000", [bundle("a"), bundle("b")], kept, judges=["j"], sandbox=SandboxMode.NONE
    )
    outcomes = {s.shard_id: graded(s, [True, True]) for s in plan.shards}
    streamed = StreamReducer(plan)
    for o in outcomes.values():
        streamed.add(outcome_line_of(o))
    for result in (reduce_run(plan, outcomes), streamed.result()):
        assert [[m.model for m in s.models] for s in result.skills] == [["exec-a"], ["exec-b"]]
        assert [list(s.usage) for s in result.skills] == [["exec-a"], ["exec-b"]]
        assert sorted(m.model for m in result.leaderboard) == ["exec-a", "exec-b"]
        for s in result.skills:
            assert "0/0" not in render_markdown(result, s.skill, {})


def test_a_corpus_with_a_case_never_recorded_cannot_pass_on_the_cases_graded() -> None:
    """A grade run plans only what was recorded: 3 of 4 cases graded, all passing, is WARN, not PASS,
    in every reduce (rows kept or streamed), and says why beside the headline."""
    kept = [(CASE_SKILL, case_id, 0, Trajectory(skill=CASE_SKILL, case_id=case_id, model="m")) for case_id in (1, 2, 3)]
    plan = recorded_plan("20260101-000000-00000000", [bundle(CASE_SKILL)], kept, judges=["j"], sandbox=SandboxMode.NONE)
    outcomes = {s.shard_id: graded(s, [True, True]) for s in plan.shards}
    streamed = StreamReducer(plan)
    for o in outcomes.values():
        streamed.add(outcome_line_of(o))
    for result in (reduce_run(plan, outcomes), streamed.result()):
        (s,) = result.skills
        assert (s.cases, s.unplanned, s.headline, s.verdict) == (4, 1, "6/6 (100.0%)", "WARN")
        assert corpus_status(s, result) == "WARN (1 case of 4 not graded: no recording)"
    full = reduce_run(plan_for([bundle(CASE_SKILL)]), outcomes_for(plan_for([bundle(CASE_SKILL)]), {1: [True, True]}))
    assert full.skills[0].unplanned == 0  # a run plans every case: one not ended is no unrecorded case


CASE_SKILL = "s"
