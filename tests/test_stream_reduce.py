"""The one reduce (reducer.stream): its figures from compact outcome lines, rows kept or not. Pure."""

from __future__ import annotations

import math
import random

import pytest

from reducer.rows import KEEP_BLOCKED
from reducer.stats import mean_interval
from reducer.stream import StreamReducer, reduce_run
from reducer.summary import render_complete_block
from schemas.outcome import CalibrationRecord, CalibrationStatus
from schemas.report import UNFINISHED
from schemas.shard import CURRENT, NO_SKILL, baseline_variant
from schemas.shard_outcome import ShardOutcome, outcome_line_of
from schemas.status import SandboxMode, ShardState, Verdict
from schemas.trajectory import Usage
from schemas.verdict import AssertionVerdict, JudgeAnswer, PairAgreement, ShardGrade
from tests.test_reducer import bundle, graded, plan_for

S = ShardState
ENDS = [S.GRADED, S.GRADED, S.GRADED, S.EXECUTOR_FAILED, S.GRADER_MALFORMED, S.BLOCKED, S.BUDGET_EXHAUSTED, None]


def _grade(rng: random.Random, shard_id: str, n: int, weighted: bool, ensemble: bool) -> ShardGrade:
    def verdicts() -> list[AssertionVerdict]:
        out = []
        for i in range(n):
            deterministic = weighted and i == n - 1
            out.append(
                AssertionVerdict(
                    text=f"a{i}",
                    passed=rng.random() < 0.6,
                    evidence="q",
                    evidence_verified=rng.choice([None, True, False]),
                    check="deterministic" if deterministic else "judge",
                    weight=3.0 if deterministic else 1.0,
                )
            )
        return out

    final = verdicts()
    judges = [
        JudgeAnswer(
            judge=j,
            state=rng.choice([S.GRADED, S.GRADED, S.GRADER_MALFORMED]),
            verdicts=verdicts(),
            usage=Usage(prompt_tokens=rng.randint(1, 900), completion_tokens=7, calls=1, cost_usd=0.001),
        )
        for j in (["j1", "j2", "j3"] if ensemble else ["j1"])
    ]
    return ShardGrade(
        shard_id=shard_id,
        state=S.GRADED,
        verdicts=final,
        judges=judges,
        template_hashes={"grader": rng.choice(["g1", "g2"])},
        agreement=[PairAgreement(judges=("j1", "j2"), share=rng.random())] if ensemble else [],
        unanimous_share=rng.random() if ensemble else None,
    )


def _outcomes(seed: int, plan, sizes, weighted: bool, ensemble: bool) -> dict[str, ShardOutcome]:  # type: ignore[no-untyped-def]
    rng = random.Random(seed)
    out = {}
    for shard in plan.shards:
        state = rng.choice(ENDS)
        if state is None:
            continue  # never ended
        usage = Usage(
            prompt_tokens=rng.randint(0, 5000), completion_tokens=rng.randint(0, 500), calls=rng.randint(0, 9)
        )
        if rng.random() < 0.5:
            usage = usage.model_copy(update={"cost_usd": rng.random() / 100})
        n = sizes[shard.case_id - 1] + (1 if weighted else 0)
        grade = _grade(rng, shard.shard_id, n, weighted, ensemble) if state is S.GRADED else None
        out[shard.shard_id] = ShardOutcome(
            shard,
            state,
            grade=grade,
            detail="" if state is S.GRADED else f"{state.value}: boom {rng.random()}",
            stops_run=state is S.BLOCKED and rng.random() < 0.3,
            sandbox=rng.choice([SandboxMode.BWRAP, SandboxMode.NONE, None]),
            end_reason=rng.choice(["completed", "max_turns", ""]),
            usage=usage,
            template_hashes={"executor": rng.choice(["e1", "e2"])},
            skill_activated=rng.choice([None, True, False]),
        )
    return out


def _close(a: object, b: object, path: str = "") -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), f"{path}: {a} != {b}"
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def _stream(plan, outcomes: dict[str, ShardOutcome], seed: int, **kw):  # type: ignore[no-untyped-def]
    lines = [outcome_line_of(o) for o in outcomes.values()]
    random.Random(seed).shuffle(lines)  # segments arrive in any order: the figures must not depend on it
    reducer = StreamReducer(plan.model_copy(update={"shards": ()}))
    for line in lines:
        reducer.add(line)
    return reducer.result(**kw)


# Each row: seed, assertions per case, models, epochs, corpora, weighted, ensemble, fail_under, variants, gates.
CONFIGS = [
    (1, [1, 2], 1, 1, 1, False, False, None, (CURRENT,), (None, None)),
    (2, [2, 3, 1], 2, 3, 2, True, True, 0.5, (CURRENT,), (None, None)),
    (3, [1, 1, 1, 1, 1], 3, 2, 1, False, True, None, (CURRENT, NO_SKILL), (None, 0.1)),
    (4, [3, 2], 2, 4, 3, True, False, 0.5, (CURRENT, baseline_variant("v1"), NO_SKILL), (0.05, None)),
    (5, [2, 2, 2, 2], 1, 4, 2, True, True, None, (CURRENT, NO_SKILL), (0.05, None)),
    (6, [1, 3], 3, 1, 3, False, True, 0.5, (CURRENT, baseline_variant("v1")), (None, None)),
]


@pytest.mark.parametrize("config", CONFIGS, ids=[f"seed{c[0]}" for c in CONFIGS])
def test_lines_in_any_order_without_rows_give_the_figures_of_the_reduce_that_keeps_rows(config: tuple) -> None:  # type: ignore[type-arg]
    """The one reduce, two ways of feeding it: every planned shard's full records in plan order,
    rows kept; or the shards' outcome lines shuffled, rows not kept. Ensembles that disagree,
    weights, deterministic checks, every terminal state and shards that never ended: every
    figure agrees, except the per-shard rows the streamed result leaves out (floats to 1e-9:
    summed in another order)."""
    seed, sizes, models, epochs, skills, weighted, ensemble, fail_under, variants, gates = config
    bundles = [bundle(f"s{i}", sizes, weighted=weighted) for i in range(skills)]
    plan = plan_for(bundles, models=[f"m{i}" for i in range(models)], epochs=epochs, variants=variants)
    outcomes = _outcomes(seed, plan, sizes, weighted, ensemble)
    calibration = {"j": CalibrationRecord(judge="j", status=CalibrationStatus.OK)}
    kw = {
        "fail_under": fail_under,
        "calibration": calibration,
        "regression_alpha": gates[0],
        "require_uplift": gates[1],
    }
    full = reduce_run(plan, outcomes, **kw)
    streamed = _stream(plan, outcomes, seed, **kw)
    expected = full.model_dump(mode="json")
    for s in expected["skills"]:
        s["runs"] = []
        for b in s["blocked"]:  # the line keeps what the reports show of a blocked shard
            b.update(judges=[], judge_usage=Usage().model_dump(mode="json"), skill_activated=None)
    _close(streamed.model_dump(mode="json"), expected)


def _ensemble_grade(shard_id: str, final: list[bool], j2: list[bool], share: float) -> ShardGrade:
    """Two judges: j1 answers ``final``, j2 answers ``j2``; the first verdict's evidence is checked."""

    def answer(passes: list[bool], verified: bool | None = None) -> list[AssertionVerdict]:
        return [
            AssertionVerdict(text=f"a{i}", passed=p, evidence="q", evidence_verified=verified if i == 0 else None)
            for i, p in enumerate(passes)
        ]

    return ShardGrade(
        shard_id=shard_id,
        state=S.GRADED,
        verdicts=answer(final, verified=share == 1.0),
        judges=[
            JudgeAnswer(
                judge="j1", state=S.GRADED, verdicts=answer(final), usage=Usage(prompt_tokens=10, cost_usd=0.001)
            ),
            JudgeAnswer(judge="j2", state=S.GRADED, verdicts=answer(j2), usage=Usage(prompt_tokens=20)),
        ],
        template_hashes={"grader": "g1"},
        agreement=[PairAgreement(judges=("j1", "j2"), share=share)],
        unanimous_share=share,
    )


@pytest.mark.parametrize("keep_rows", [True, False], ids=["rows kept", "streamed"])
def test_the_reduce_sums_usage_templates_evidence_and_judge_figures(keep_rows: bool) -> None:
    plan = plan_for([bundle("s", (2, 2, 2, 2))], models=["m"])
    one, two, three, _ = plan.shards  # the fourth never ends
    outcomes = {
        one.shard_id: ShardOutcome(
            one,
            S.GRADED,
            grade=_ensemble_grade(one.shard_id, [True, True], [True, True], 1.0),
            sandbox=SandboxMode.BWRAP,
            usage=Usage(prompt_tokens=100),
            template_hashes={"executor": "e1"},
            skill_activated=True,
        ),
        two.shard_id: ShardOutcome(
            two,
            S.GRADED,
            grade=_ensemble_grade(two.shard_id, [True, False], [True, True], 0.5),
            usage=Usage(prompt_tokens=50, cost_usd=0.002),
            template_hashes={"executor": "e2"},
            skill_activated=False,
        ),
        three.shard_id: ShardOutcome(three, S.EXECUTOR_FAILED, detail="executor-failed: x", usage=Usage(calls=1)),
    }
    result = reduce_run(plan, outcomes) if keep_rows else _stream(plan, outcomes, 0)
    s = result.skills[0]
    assert (s.behavioural.passed, s.behavioural.total) == (3, 4)
    assert (s.infra["executor-failed"], s.infra[UNFINISHED], s.not_graded, s.shard_count) == (1, 1, 2, 4)
    assert s.headline == "INCONCLUSIVE (2/4 shards not graded — 1 infra, 1 not finished)"
    assert s.evidence_verified_share == 0.5  # of the passed verdicts whose evidence was checked
    assert s.judge_agreement == s.judge_unanimous == 0.75
    assert s.sandbox_modes == ["bwrap"]
    [m] = s.models
    assert (m.graded, m.shards, m.skill_activated, m.composite_mean) == (2, 4, (1, 2), 0.75)
    assert (m.composite_low, m.composite_high) == pytest.approx(mean_interval([1.0, 0.5])[1], abs=1e-12)
    usage = {k: (u.prompt_tokens, u.calls, u.cost_usd) for k, u in result.usage.items()}
    assert usage == {"m": (150, 1, 0.002), "j1": (20, 0, 0.002), "j2": (40, 0, None)}
    assert {k: (u.prompt_tokens, u.calls, u.cost_usd) for k, u in s.usage.items()} == usage
    assert result.template_hashes == {"executor": "e1,e2", "grader": "g1"}
    quality = {(q.case_id, q.index): q.judge_disagreement for q in result.assertion_quality}
    assert quality == {(1, 0): 0.0, (1, 1): 0.0, (2, 0): 0.0, (2, 1): 1.0}
    assert [(a.case_id, a.index, a.pass_at_k) for a in s.assertions if a.pass_at_k is not None] == [
        (1, 0, 1.0),
        (1, 1, 1.0),
        (2, 0, 1.0),
        (2, 1, 0.0),
    ]
    assert len(s.runs) == (4 if keep_rows else 0)


def test_a_streamed_reduce_counts_shards_that_never_ended_as_not_graded() -> None:
    plan = plan_for([bundle("s", (1, 1, 1, 1, 1))], models=["m"], epochs=4)
    outcomes = _outcomes(1, plan, (1, 1, 1, 1, 1), False, False)
    ended = {k: v for i, (k, v) in enumerate(outcomes.items()) if i % 2}
    s = _stream(plan, ended, 1).skills[0]
    assert s.shard_count == 20
    assert s.not_graded == 20 - sum(o.state is S.GRADED for o in ended.values())


def test_a_streamed_reduce_lists_a_bounded_number_of_blocked_shards_but_counts_them_all() -> None:
    plan = plan_for([bundle("s", (1,) * 60)], models=["m"], epochs=20)
    outcomes = {s.shard_id: ShardOutcome(s, S.BLOCKED, detail="BLOCKED_BAD_FIXTURE: x") for s in plan.shards}
    result = _stream(plan, outcomes, 0)
    assert len(result.skills[0].blocked) == KEEP_BLOCKED < len(plan.shards)
    assert result.skills[0].not_graded == len(plan.shards)
    # The tally and the headline count every blocked shard, listed or not, and agree.
    assert result.skills[0].blocked_count == len(plan.shards) == 1200
    assert result.skills[0].headline == "INCONCLUSIVE (1200/1200 shards not graded — 1200 blocked)"
    assert "  not graded (infra): none; blocked: 1200" in render_complete_block(result, [])


def test_a_line_of_another_plan_is_not_counted() -> None:
    plan = plan_for([bundle("s")], models=["m"])
    other = plan_for([bundle("t")], models=["m"])
    reducer = StreamReducer(plan)
    for o in _outcomes(3, other, (2, 2, 2, 2), False, False).values():
        reducer.add(outcome_line_of(o))
    assert reducer.lines == 0 and reducer.unplanned > 0
    assert reducer.result().skills[0].not_graded == len(plan.shards)


def test_a_compared_run_streams_its_paired_tests_too() -> None:
    plan = plan_for([bundle("s", (2, 2, 2, 2))], models=["m1", "m2"], epochs=3, variants=[CURRENT, NO_SKILL])
    outcomes = _outcomes(11, plan, (2, 2, 2, 2), False, False)
    full = reduce_run(plan, outcomes)
    streamed = _stream(plan, outcomes, 11)
    assert len(streamed.comparisons) == 3  # all models, then each
    assert [c.model_dump() for c in streamed.comparisons] == [c.model_dump() for c in full.comparisons]


def test_the_reports_of_a_streamed_result_say_rows_are_not_kept_and_still_show_activation() -> None:
    from reducer.render import render_markdown
    from reducer.render_html import render_html

    plan = plan_for([bundle("s", (1, 1, 1, 1))], models=["m1", "m2"], epochs=2)
    outcomes = _outcomes(4, plan, (1, 1, 1, 1), False, False)
    streamed = _stream(plan, outcomes, 4)
    md = render_markdown(streamed, "s", {})
    assert "per-shard rows are not kept" in md and "16 shards" in md
    assert "#### m1" not in md  # no empty per-model tables
    full = reduce_run(plan, outcomes)
    assert [m.skill_activated for m in streamed.skills[0].models] == [m.skill_activated for m in full.skills[0].models]
    assert any(m.skill_activated for m in streamed.skills[0].models)
    assert 'id="activation"' in render_html(streamed)


def test_the_spread_of_equal_scores_is_exactly_zero() -> None:
    """Every case scoring the same: the t interval over cases is a point, not a few 1e-9 wide, so
    the interval is the case-clustered Wilson floor exactly."""
    from reducer.counters import Mean
    from reducer.stats import clustered_interval

    running = Mean()
    for i in range(27):
        running.add(2 / 3, i % 9)
    mean, (low, high) = running.interval()
    floor = clustered_interval([(2 / 3, 1.0)] * 9)
    assert running.n == 9 and floor is not None and (low, high) == pytest.approx((floor.low, floor.high), abs=1e-15)
    assert mean is not None and math.isclose(mean, 2 / 3, rel_tol=1e-15)


def test_a_plan_listing_its_shards_may_give_a_case_more_epochs_than_another() -> None:
    plan = plan_for([bundle("s", (2, 2, 2, 2))], models=["m"], epochs=2, variants=[CURRENT, NO_SKILL])
    # The first case ran once in each arm, the others twice: 14 shards, not 4 x 2 x 2.
    plan = plan.model_copy(update={"shards": tuple(s for s in plan.shards if not (s.case_id == 1 and s.epoch == 1))})
    outcomes = {s.shard_id: graded(s, [True, True]) for s in plan.shards}
    result = reduce_run(plan, outcomes)
    for s in result.skills:
        assert (s.shard_count, s.not_graded, s.unfinished, s.inconclusive) == (7, 0, 0, False)
        assert s.models[0].shards == 7 and s.behavioural.total == 14
    assert result.leaderboard[0].shards == 7
    assert result.verdict is Verdict.PASS
    assert [c.pairs for c in result.comparisons] == [7]  # no pair for the epoch the first case never had
