"""Reduce shard outcomes into rates, infra tallies, gates, composite scores and a verdict. Pure.

The behavioural pass rate counts graded shards only; infra failures are tallied apart by
kind; blocked shards are listed apart; a corpus is INCONCLUSIVE when more than 25% of its
shards are not graded, or any is not graded in a corpus of fewer than 4 cases; several
corpora are INCONCLUSIVE together when more than 10% of them are. A conclusive corpus passes
only when its behavioural pass rate reaches the run's threshold: 1.0 (every assertion) unless
``--fail-under`` lowers it.

The gate counts shards, not cases: with several models or epochs one case is run (and may
fail to be graded) once per model and epoch, and each of those runs is one shard, so a
corpus of 4 cases x 2 models x 3 epochs has 24 shards and turns INCONCLUSIVE past 6 of them
not graded. The headline says "shards" for that reason.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from reducer.comparison import compare_all
from reducer.epoch_weights import reweighed
from reducer.gates import comparison_failures
from reducer.plugin_score import below_threshold, is_plugin_suite, suite_scores
from reducer.quality import assess_assertions
from reducer.sensitivity import sensitivity_warnings
from reducer.stats import clustered_interval, mean_interval, pass_at_k, pass_hat_k, wilson
from reducer.threshold import case_threshold_label, corpus_verdict, threshold_of, with_verdicts
from reducer.trigger_compare import run_report
from reducer.triggers import trigger_pass_reason
from schemas.constants import AGGREGATE_INCONCLUSIVE_SHARE, INCONCLUSIVE_CASE_SHARE, SMALL_CORPUS_CASES
from schemas.outcome import CalibrationRecord, CalibrationStatus
from schemas.report import UNFINISHED, AssertionStat, CaseRun, ClusteredRate, ModelSummary, Rate, RunResult, SkillResult
from schemas.shard import CURRENT, RunPlan, Shard, SkillBundle
from schemas.status import INFRA_FAILURES, SandboxMode, ShardState, Verdict
from schemas.trajectory import Usage
from schemas.triggers import TriggerSettings
from schemas.verdict import AssertionVerdict, ShardGrade


@dataclass(frozen=True)
class ShardOutcome:
    """What the reducer needs to know about one shard."""

    shard: Shard
    state: ShardState
    grade: ShardGrade | None = None
    detail: str = ""
    sandbox: SandboxMode | None = None
    end_reason: str = ""
    usage: Usage = field(default_factory=Usage)
    template_hashes: Mapping[str, str] = field(default_factory=dict)
    """Prompt template hashes the executor used for this shard (the grade carries the judge's)."""
    stops_run: bool = False
    """Blocked by a status that stops the run (the error's ``stops_run``)."""
    skill_activated: bool | None = None
    """Harness executors: whether the harness loaded the skill (None: not recorded)."""
    rejected_calls: tuple[str, ...] = ()
    """Tool calls the harness's stream claimed that no proxied model response held."""
    mock_findings: tuple[str, ...] = ()
    """Mocked MCP calls whose input failed an ``expect`` guard (docs/design/mocks.md)."""
    skills_fired: tuple[str, ...] | None = None
    """Trigger runs: the skills the executor activated, in order (None: not a trigger run)."""
    proposed_calls: tuple[str, ...] = ()
    """Tool calls the model proposed that the harness never ran (listed, never counted)."""
    refused_requests: tuple[str, ...] = ()
    """Model requests the harness's proxy refused for what they asked (the agent's doing)."""


NO_RECORD = f"no terminal record in the store: {UNFINISHED}"
"""The detail of a shard the reduce found no outcome for."""


def partial(s: SkillResult) -> str:
    """Why a corpus with shards not yet ended (or lost) cannot pass: the report holds only what ended."""
    return f"{s.unfinished}/{s.shard_count} shards not graded, {UNFINISHED} (a partial result)"


def rate(passed: int, total: int, clusters: Sequence[tuple[int, int]] = ()) -> Rate:
    """``passed/total`` with its Wilson interval, and, when ``clusters`` (passed, trials per case)
    show several trials in one case, the interval with the case as the unit."""
    low, high = wilson(passed, total)
    clustered = None
    if any(m > 1 for _, m in clusters):
        found = clustered_interval(clusters)
        if found is not None:
            clustered = ClusteredRate(
                clusters=found.clusters, low=found.low, high=found.high, design_effect=found.design_effect
            )
    return Rate(
        passed=passed, total=total, rate=(passed / total if total else None), low=low, high=high, clustered=clustered
    )


def case_clusters(
    runs: Iterable[CaseRun], key: Callable[[CaseRun], object] = lambda r: r.case_id
) -> list[tuple[int, int]]:
    """(passed, verdicts) per case over graded runs: the units of a clustered interval."""
    totals: dict[object, list[int]] = defaultdict(lambda: [0, 0])
    for r in runs:
        if r.state is ShardState.GRADED:
            totals[key(r)][0] += sum(v.passed for v in r.verdicts)
            totals[key(r)][1] += len(r.verdicts)
    return [(c, n) for c, n in totals.values()]


def headline(r: Rate) -> str:
    """``passed/graded (percent)``, e.g. ``4/7 (57.1%)``."""
    pct = 100.0 * r.rate if r.rate is not None else 0.0
    return f"{r.passed}/{r.total} ({pct:.1f}%)"


def inconclusive_headline(not_graded: int, shards: int, infra: int, blocked: int) -> str:
    """The contract's ``INCONCLUSIVE (<n>/<shards> shards not graded — infra)`` when every shard not
    graded was an infra failure; otherwise the kinds, adding up to ``n`` (``— 2 blocked``,
    ``— 1 infra, 1 blocked, 1 not finished``), so the headline agrees with the tallies beside it."""
    kinds = [(infra, "infra"), (blocked, "blocked"), (not_graded - infra - blocked, "not finished")]
    said = "infra" if infra == not_graded else ", ".join(f"{n} {kind}" for n, kind in kinds if n > 0)
    return f"INCONCLUSIVE ({not_graded}/{shards} shards not graded — {said})"


def is_inconclusive(not_graded: int, shards: int, cases: int) -> bool:
    """The trustworthiness gate of one corpus: ``not_graded`` of its ``shards`` (case x model x
    epoch runs), and its number of distinct ``cases`` for the small-corpus rule."""
    if shards == 0 or not_graded == 0:
        return False
    return not_graded / shards > INCONCLUSIVE_CASE_SHARE or cases < SMALL_CORPUS_CASES


def composite(verdicts: Sequence[AssertionVerdict]) -> float:
    """Weighted share of assertions passed, judged and deterministic alike (weight 1 unless given)."""
    total = sum(v.weight for v in verdicts)
    return sum(v.weight for v in verdicts if v.passed) / total if total else 0.0


def _case_run(o: ShardOutcome, judge_usage: Usage) -> CaseRun:
    graded = o.state is ShardState.GRADED and o.grade is not None
    verdicts = o.grade.verdicts if graded and o.grade else []
    return CaseRun(
        shard_id=o.shard.shard_id,
        case_id=o.shard.case_id,
        model=o.shard.model,
        epoch=o.shard.epoch,
        state=o.state,
        verdicts=verdicts,
        judges=o.grade.judges if o.grade else [],
        composite=composite(verdicts) if graded else None,
        detail=o.detail or (o.grade.error if o.grade else ""),
        stops_run=o.stops_run,
        sandbox=o.sandbox,
        end_reason=o.end_reason,
        usage=o.usage,
        judge_usage=judge_usage,
        skill_activated=o.skill_activated,
        rejected_calls=list(o.rejected_calls),
        mock_findings=list(o.mock_findings),
        proposed_calls=list(o.proposed_calls),
        refused_requests=list(o.refused_requests),
    )


def _judge_usage(grade: ShardGrade | None) -> Usage:
    total = Usage()
    for j in grade.judges if grade else []:
        total = total.add(j.usage)
    return total


def reduce_skill(bundle: SkillBundle, variant: str, outcomes: Sequence[ShardOutcome], epochs: int) -> SkillResult:
    """One corpus in one variant."""
    runs = [_case_run(o, _judge_usage(o.grade)) for o in outcomes]
    graded = [r for r in runs if r.state is ShardState.GRADED]
    infra = {s.value: sum(r.state is s for r in runs) for s in sorted(INFRA_FAILURES, key=lambda s: s.value)}
    unfinished = sum(not r.state.terminal for r in runs)
    if unfinished:
        infra[UNFINISHED] = unfinished
    blocked = [r for r in runs if r.state is ShardState.BLOCKED]
    not_graded = len(runs) - len(graded)
    passed = sum(v.passed for r in graded for v in r.verdicts)
    judged = sum(len(r.verdicts) for r in graded)
    behavioural = rate(passed, judged, case_clusters(graded))
    inconclusive = is_inconclusive(not_graded, len(runs), len(bundle.corpus.evals))
    head = (
        inconclusive_headline(not_graded, len(runs), sum(infra.values()) - unfinished, len(blocked))
        if inconclusive
        else headline(behavioural)
    )
    models = _model_summaries(runs)
    verified = [v.evidence_verified for r in graded for v in r.verdicts if v.passed and v.evidence_verified is not None]
    grades = [o.grade for o in outcomes if o.state is ShardState.GRADED and o.grade is not None]
    pair_shares = [p.share for g in grades for p in g.agreement]
    unanimous = [g.unanimous_share for g in grades if g.unanimous_share is not None]
    return SkillResult(
        skill=bundle.skill,
        variant=variant,
        bundle_key=bundle.bundle_key,
        corpus_file=bundle.corpus_file,
        cases=len(bundle.corpus.evals),
        behavioural=behavioural,
        infra=infra,
        blocked=blocked,
        blocked_total=len(blocked),
        inconclusive=inconclusive,
        not_graded=not_graded,
        unfinished=unfinished,
        shard_count=len(runs),
        headline=head,
        models=models,
        assertions=_assertion_stats(bundle, graded, epochs),
        runs=runs,
        evidence_verified_share=(sum(verified) / len(verified)) if verified else None,
        sandbox_modes=sorted({r.sandbox.value for r in runs if r.sandbox}),
        judge_agreement=(sum(pair_shares) / len(pair_shares)) if pair_shares else None,
        judge_unanimous=(sum(unanimous) / len(unanimous)) if unanimous else None,
        plugin_scores=suite_scores([c.id for c in bundle.corpus.evals], runs)
        if is_plugin_suite(bundle.corpus_file)
        else [],
        usage=usage_of(runs),
    )


def usage_of(runs: Iterable[CaseRun]) -> dict[str, Usage]:
    """Usage per model, executors and judges, summed over ``runs``."""
    usage: dict[str, Usage] = defaultdict(Usage)
    for r in runs:
        usage[r.model] = usage[r.model].add(r.usage)
        for j in r.judges:
            usage[j.judge] = usage[j.judge].add(j.usage)
    return dict(usage)


def _model_summaries(runs: Sequence[CaseRun], corpus: Mapping[str, str] | None = None) -> list[ModelSummary]:
    """One summary per model; ``corpus`` (shard id -> skill) names each run's corpus when runs of
    several are mixed (the leaderboard), so that case 1 of one and case 1 of another are two clusters."""
    corpus = corpus or {}
    by_model: dict[str, list[CaseRun]] = defaultdict(list)
    for r in runs:
        by_model[r.model].append(r)
    out = []
    for model, items in by_model.items():
        graded = [r for r in items if r.state is ShardState.GRADED]
        mean, (low, high) = mean_interval([r.composite for r in graded if r.composite is not None])
        clusters = case_clusters(graded, lambda r: (corpus.get(r.shard_id, ""), r.case_id))
        out.append(
            ModelSummary(
                model=model,
                behavioural=rate(
                    sum(v.passed for r in graded for v in r.verdicts), sum(len(r.verdicts) for r in graded), clusters
                ),
                composite_mean=mean,
                composite_low=low,
                composite_high=high,
                graded=len(graded),
                shards=len(items),
                skill_activated=_activation(items),
            )
        )
    return out


def _activation(runs: Sequence[CaseRun]) -> tuple[int, int] | None:
    recorded = [r.skill_activated for r in runs if r.skill_activated is not None]
    return (sum(recorded), len(recorded)) if recorded else None


def _assertion_stats(bundle: SkillBundle, graded: Sequence[CaseRun], epochs: int) -> list[AssertionStat]:
    stats = []
    for case in bundle.corpus.evals:
        runs = [r for r in graded if r.case_id == case.id]
        models = sorted({r.model for r in runs})
        for index, assertion in enumerate(case.assertions):
            counts = {}
            for model in models:
                results = [r.verdicts[index].passed for r in runs if r.model == model and len(r.verdicts) > index]
                counts[model] = (sum(results), len(results))
            stats.append(assertion_stat(case.id, index, str(getattr(assertion, "text", assertion)), counts, epochs))
    return stats


def assertion_stat(
    case_id: int, index: int, text: str, counts: Mapping[str, tuple[int, int]], epochs: int
) -> AssertionStat:
    """One assertion's row of the matrix from (passed, observed) per model; pass@k and pass^k with
    k = the epochs (or fewer observations), averaged over the models that have any."""
    at_k: list[float] = []
    hat_k: list[float] = []
    for c, n in counts.values():
        if n:
            k = min(epochs, n)
            at_k.append(pass_at_k(n, c, k))
            hat_k.append(pass_hat_k(n, c, k))
    return AssertionStat(
        case_id=case_id,
        index=index,
        text=text,
        by_model={model: rate(c, n) for model, (c, n) in counts.items()},
        pass_at_k=sum(at_k) / len(at_k) if at_k else None,
        pass_hat_k=sum(hat_k) / len(hat_k) if hat_k else None,
    )


def aggregate_gate(current: Sequence[SkillResult]) -> tuple[bool, str]:
    """Whether several corpora are INCONCLUSIVE together, and the AGGREGATE line (empty for one corpus)."""
    inconclusive = [s for s in current if s.inconclusive]
    aggregate = len(current) > 1 and len(inconclusive) / len(current) > AGGREGATE_INCONCLUSIVE_SHARE
    if len(current) < 2:
        return aggregate, ""
    if aggregate:
        return aggregate, f"AGGREGATE: INCONCLUSIVE ({len(inconclusive)}/{len(current)} corpora not trustworthy)"
    # The suite rate sums trustworthy corpora only: an INCONCLUSIVE corpus's few graded cases are noise.
    trusted = [s for s in current if not s.inconclusive]
    suite = rate(sum(s.behavioural.passed for s in trusted), sum(s.behavioural.total for s in trusted))
    left_out = f" ({len(inconclusive)} INCONCLUSIVE corpus left out)" if inconclusive else ""
    return aggregate, f"AGGREGATE: {headline(suite)}{left_out}"


def reduce_run(
    plan: RunPlan,
    outcomes: Mapping[str, ShardOutcome],
    *,
    fail_under: float | None = None,
    plugin_threshold: float | None = None,
    calibration: Mapping[str, CalibrationRecord] | None = None,
    skipped: Sequence[str] = (),
    template_hashes: Mapping[str, str] | None = None,
    already_reported: Sequence[str] = (),
    regression_alpha: float | None = None,
    require_uplift: float | None = None,
    triggers: TriggerSettings | None = None,
    executor: str = "agent",
) -> RunResult:
    """The whole run: per corpus and variant, leaderboard, usage, paired comparisons, assertion
    quality, and the verdict with its reasons.

    ``skipped`` are the named errors of corpora left out before the run; ``already_reported``
    the corpora ``--all-evals`` left out because their bundle key already has a report;
    ``regression_alpha`` and ``require_uplift`` are the comparison gates (:mod:`reducer.gates`);
    ``plugin_threshold`` is ``--threshold``, what a plugin eval suite's every case must score;
    ``triggers`` makes it a trigger run's reduce (:mod:`reducer.triggers`), gated by its thresholds.
    """
    skills: list[SkillResult] = []
    for variant in plan.variants:
        for bundle in plan.bundles:
            shard_outcomes = [
                outcomes.get(s.shard_id) or ShardOutcome(s, ShardState.QUEUED, detail=NO_RECORD)
                for s in plan.shards
                if s.variant == variant and s.skill == bundle.skill
            ]
            skills.append(reduce_skill(bundle, variant, shard_outcomes, plan.epochs))
    if plan.adaptive is not None:  # cases got unequal epochs: each still weighs as one case
        skills = [reweighed(s) for s in skills]
    threshold, source = threshold_of(fail_under)
    skills = with_verdicts(skills, threshold, plugin_threshold)
    current = [s for s in skills if s.variant == CURRENT]
    aggregate, aggregate_headline = aggregate_gate(current)
    calibration = dict(calibration or {})
    # A trigger run's arms hold no assertions: its comparison is the trigger one (reducer.trigger_compare).
    comparisons = compare_all(skills, plan.run_id) if triggers is None else []
    fired = {k: o.skills_fired for k, o in outcomes.items() if o.state is ShardState.GRADED}
    unsure = {s.skill for s in current if s.inconclusive}
    trigger = run_report(plan, fired, triggers, executor, unsure) if triggers is not None else None
    verdict, reasons = decide_verdict(
        current,
        skills,
        aggregate,
        calibration,
        fail_under,
        skipped,
        already_reported,
        comparison_fails=comparison_failures(
            comparisons, skills, regression_alpha=regression_alpha, require_uplift=require_uplift
        )
        + (trigger.failures if trigger else []),
        comparison_warns=sensitivity_warnings(comparisons),
        plugin_threshold=plugin_threshold,
    )
    if trigger is not None and verdict is Verdict.PASS:
        reasons = [trigger_pass_reason(trigger)]
    return RunResult(
        run_id=plan.run_id,
        verdict=verdict,
        reasons=reasons,
        skills=skills,
        aggregate_inconclusive=aggregate,
        aggregate_headline=aggregate_headline,
        leaderboard=_leaderboard(current),
        usage=usage_of([r for s in skills for r in s.runs]),
        judges=list(plan.judges),
        calibration={judge: record.describe() for judge, record in calibration.items()},
        template_hashes=dict(template_hashes) if template_hashes is not None else used_templates(outcomes.values()),
        skipped=list(skipped),
        comparisons=comparisons,
        assertion_quality=assess_assertions(skills),
        regression_alpha=regression_alpha,
        require_uplift=require_uplift,
        triggers=trigger,
        threshold=threshold,
        threshold_source=source,
        plugin_threshold=plugin_threshold,
        adaptive=plan.adaptive,
    )


def used_templates(outcomes: Iterable[ShardOutcome]) -> dict[str, str]:
    """Template name -> hash(es) actually used by the run's executors and judges (comma-joined if several)."""
    seen: dict[str, set[str]] = defaultdict(set)
    for o in outcomes:
        for name, digest in [*o.template_hashes.items(), *(o.grade.template_hashes.items() if o.grade else [])]:
            seen[name].add(digest)
    return {name: ",".join(sorted(digests)) for name, digests in sorted(seen.items())}


def _leaderboard(current: Sequence[SkillResult]) -> list[ModelSummary]:
    runs = [r for s in current for r in s.runs]
    board = _model_summaries(runs, {r.shard_id: s.skill for s in current for r in s.runs})
    return rank(board)


def rank(board: Sequence[ModelSummary]) -> list[ModelSummary]:
    """Best composite first, ties by name; means equal to 12 places are ties (summation order
    must not decide a rank)."""
    return sorted(board, key=lambda m: (m.composite_mean is None, -round(m.composite_mean or 0.0, 12), m.model))


def _threshold_failures(
    current: Sequence[SkillResult], threshold: float, source: str, plugin_threshold: float | None
) -> list[str]:
    """One reason per corpus below its threshold; a plugin eval suite's, one per case below it."""
    label = case_threshold_label(threshold, source, plugin_threshold)
    bar = threshold if plugin_threshold is None else plugin_threshold
    fails = []
    for s in current:
        if corpus_verdict(s, threshold, plugin_threshold) != "FAIL":
            continue
        rate_line = f"behavioural pass rate {headline(s.behavioural)} is below the threshold {threshold} ({source})"
        fails += below_threshold(s, bar, label) if s.plugin_scores else [f"{s.skill}: {rate_line}"]
    return fails


def decide_verdict(
    current: Sequence[SkillResult],
    all_skills: Sequence[SkillResult],
    aggregate_inconclusive: bool,
    calibration: Mapping[str, CalibrationRecord],
    fail_under: float | None,
    skipped: Sequence[str],
    already_reported: Sequence[str] = (),
    comparison_fails: Sequence[str] = (),
    comparison_warns: Sequence[str] = (),
    plugin_threshold: float | None = None,
) -> tuple[Verdict, list[str]]:
    """BLOCKED > FAIL > WARN > PASS, with every reason that applies.

    A conclusive corpus whose behavioural pass rate is below the threshold (``fail_under``, or
    the default 1.0 when None) fails the run; a plugin eval suite fails it when a case scores
    below ``plugin_threshold`` (``--threshold``), or below that threshold when None.

    A run with nothing to do because every valid corpus already has a report is not
    BLOCKED: those corpora were evaluated before; only the skipped ones (if any) warn.
    """
    # Run-stopping case statuses (NO_ISOLATION -> BLOCKED; a base fixture without git
    # halts the skill; a worker refusing an unsandboxed shard). Only the current version counts:
    # a baseline that cannot be isolated degrades the comparison, it does not stop the run.
    blocked = [f"{s.skill} case {r.case_id}: {r.detail}" for s in current for r in s.blocked if r.stops_run]
    if blocked or (skipped and not current and not already_reported):
        return Verdict.BLOCKED, blocked or ["every corpus was skipped"]
    unavailable = {s.skill for s in all_skills if s.variant != CURRENT and s.blocked and s.behavioural.total == 0}
    threshold, source = threshold_of(fail_under)
    fails = _threshold_failures(current, threshold, source, plugin_threshold)
    # Regressions and uplift are decided on the paired figures (reducer.gates).
    fails += comparison_fails
    if fails:
        return Verdict.FAIL, fails
    warns = [f"{s.skill} ({s.variant}): {s.headline}" for s in all_skills if s.inconclusive]
    warns += [f"{s.skill} ({s.variant}): {partial(s)}" for s in all_skills if s.unfinished]
    if aggregate_inconclusive:
        warns.append("more than 10% of corpora are INCONCLUSIVE")
    warns += [
        f"judge {j} failed calibration: {'; '.join(c.details)}"
        for j, c in calibration.items()
        if c.status is CalibrationStatus.FAILED
    ]
    warns += [
        f"judge {j} was not calibrated: no calibration result was recorded"
        for j, c in calibration.items()
        if c.status is CalibrationStatus.MISSING
    ]
    warns += [f"skipped {s}" for s in skipped]
    warns += [f"{s.skill} ({s.variant}) case {r.case_id} blocked: {r.detail}" for s in all_skills for r in s.blocked]
    warns += [f"{skill}: baseline unavailable, no comparison" for skill in sorted(unavailable)]
    warns += comparison_warns
    if warns:
        return Verdict.WARN, warns
    if not current and already_reported:
        return Verdict.PASS, [f"nothing to run: {len(already_reported)} corpora already reported (--force re-runs)"]
    passed = f"the threshold {threshold} ({source})"
    if plugin_threshold is not None and any(s.plugin_scores for s in current):
        passed += f", plugin eval cases at or above --threshold {plugin_threshold:g}"
    return Verdict.PASS, [f"all corpora graded and at or above {passed}; no regression"]
