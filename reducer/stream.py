"""Reduce a run from its outcome lines in one pass, holding counters instead of shards. Pure.

:func:`reducer.scoring.reduce_run` keeps every shard's full record (verdicts with their
evidence, judge answers) so that the reports can show each run; that is right for a run of
hundreds of shards and impossible for a million. This module folds compact
:class:`OutcomeLine` s into per-corpus, per-model and per-assertion counters and gives the
same :class:`RunResult` figures: rates and Wilson intervals, infra tallies, the
INCONCLUSIVE gates, composite means, the assertion matrix with pass@k and pass^k,
assertion quality, usage and the verdict. What it leaves out: the per-shard rows
(``SkillResult.runs`` stays empty; blocked shards are kept up to ``KEEP_BLOCKED``). A run
with a baseline arm also gets its paired comparisons, which pair shards one by one: for it
each shard leaves one small interned cell in memory.

Memory is counters per (corpus, case, assertion, model), and per shard only those cells of
a compared run; the caller keeps the set of shards already seen (newest line first).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from reducer.comparison import Cell, Key, cell_of, compare_all
from reducer.epoch_weights import counts_of_cells, planned_shards, weighted_rate
from reducer.epoch_weights import headline as weighted_headline
from reducer.gates import comparison_failures
from reducer.plugin_score import is_plugin_suite, scores_from_sums
from reducer.quality import is_constant
from reducer.scoring import (
    aggregate_gate,
    assertion_stat,
    decide_verdict,
    headline,
    inconclusive_headline,
    is_inconclusive,
    rank,
    rate,
)
from reducer.sensitivity import sensitivity_warnings
from reducer.stats import Z95
from reducer.threshold import threshold_of, with_verdicts
from schemas.comparison import AssertionQuality
from schemas.constants import MIN_FLAKY_EPOCHS
from schemas.outcome import CalibrationRecord, OutcomeLine
from schemas.report import UNFINISHED, AssertionStat, CaseRun, ModelSummary, RunResult, SkillResult
from schemas.shard import CURRENT, RunPlan, SkillBundle
from schemas.status import INFRA_FAILURES, SandboxMode, ShardState
from schemas.trajectory import Usage

KEEP_BLOCKED = 1000
"""Blocked shards listed per corpus and variant (the count is always exact)."""

ROWS_NOT_KEPT = (
    "Reduced from the run's outcome segments ({shards} shards): per-shard rows are not kept; every "
    "figure above counts all of them. The full records of each shard stay in the store."
)
"""What the reports say where a streamed result has no per-shard rows to show."""


@dataclass
class _Mean:
    """Running count, sum, mean and sum of squared deviations of composite scores in [0, 1].

    The spread is kept as Welford's sum of squared deviations (merged by Chan's rule), not as a
    sum of squares: ``squares - n * mean**2`` cancels catastrophically when every score is the
    same, leaving a spread of ~1e-17 where the full reduce computes exactly zero (an interval
    a few 1e-9 wide instead of a point). The mean reported is ``total / n``, as the full reduce's.
    """

    n: int = 0
    total: float = 0.0
    mean: float = 0.0
    deviations: float = 0.0

    def add(self, value: float) -> None:
        self.n += 1
        self.total += value
        delta = value - self.mean
        self.mean += delta / self.n
        self.deviations += delta * (value - self.mean)

    def merge(self, other: _Mean) -> None:
        if other.n == 0:
            return
        n = self.n + other.n
        delta = other.mean - self.mean
        self.deviations += other.deviations + delta * delta * self.n * other.n / n
        self.mean += delta * other.n / n
        self.n = n
        self.total += other.total

    def interval(self) -> tuple[float | None, tuple[float, float]]:
        """The same normal-approximation interval as :func:`reducer.stats.mean_interval`."""
        if self.n == 0:
            return None, (0.0, 1.0)
        mean = self.total / self.n
        if self.n < 2:
            return mean, (0.0, 1.0)
        var = max(0.0, self.deviations / (self.n - 1))
        half = Z95 * math.sqrt(var / self.n)
        return mean, (max(0.0, mean - half), min(1.0, mean + half))


@dataclass
class _Model:
    ended: int = 0
    graded: int = 0
    passed: int = 0
    judged: int = 0
    composite: _Mean = field(default_factory=_Mean)
    activated: list[int] = field(default_factory=lambda: [0, 0])
    """[shards whose harness loaded the skill, shards where that was recorded]."""

    def merge(self, other: _Model) -> None:
        self.ended += other.ended
        self.graded += other.graded
        self.passed += other.passed
        self.judged += other.judged
        self.composite.merge(other.composite)
        self.activated[0] += other.activated[0]
        self.activated[1] += other.activated[1]


@dataclass
class _Arm:
    """One corpus in one variant."""

    states: dict[ShardState, int] = field(default_factory=lambda: defaultdict(int))
    blocked: list[CaseRun] = field(default_factory=list)
    models: dict[str, _Model] = field(default_factory=lambda: defaultdict(_Model))
    cells: dict[tuple[int, int, str], list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    """(case, assertion index, model) -> [passed, observed]."""
    graded_cases: dict[int, set[str]] = field(default_factory=lambda: defaultdict(set))
    """Case -> models with a graded shard of it."""
    verified: list[int] = field(default_factory=lambda: [0, 0])
    agreement: list[float] = field(default_factory=lambda: [0.0, 0.0])
    unanimous: list[float] = field(default_factory=lambda: [0.0, 0.0])
    sandboxes: set[str] = field(default_factory=set)
    run_scores: dict[tuple[int, str], list[float]] = field(default_factory=lambda: defaultdict(lambda: [0.0, 0.0]))
    """(case, model) -> [sum of graded runs' composites, graded runs], for plugin eval's case scores."""
    spend: dict[str, _Spend] = field(default_factory=lambda: defaultdict(_Spend))
    """Usage per model (executor and judges) of this corpus and variant alone."""


def _clusters(arms: Sequence[_Arm], model: str | None = None) -> list[tuple[int, int]]:
    """(passed, verdicts) per case of these arms (each arm its own corpus), of one model or all."""
    totals: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0])
    for i, arm in enumerate(arms):
        for (case_id, _, name), (passed, observed) in arm.cells.items():
            if model is None or name == model:
                totals[(i, case_id)][0] += passed
                totals[(i, case_id)][1] += observed
    return [(c, n) for c, n in totals.values()]


def _composite(line: OutcomeLine) -> float:
    weights = line.weights or [1.0] * len(line.passed)
    total = sum(weights)
    return sum(w for w, p in zip(weights, line.passed, strict=True) if p) / total if total else 0.0


def _usage(u: tuple[int, int, int, float | None]) -> Usage:
    return Usage(prompt_tokens=u[0], completion_tokens=u[1], calls=u[2], cost_usd=u[3])


class _Spend:
    """Usage summed without a model object per line (what :meth:`Usage.add` does, in place)."""

    __slots__ = ("calls", "completion", "cost", "priced", "prompt")

    def __init__(self) -> None:
        self.prompt = self.completion = self.calls = 0
        self.cost = 0.0
        self.priced = False

    def add(self, u: tuple[int, int, int, float | None]) -> None:
        self.prompt += u[0]
        self.completion += u[1]
        self.calls += u[2]
        if u[3] is not None:
            self.cost += u[3]
            self.priced = True

    def usage(self) -> Usage:
        cost = self.cost if self.priced else None
        return Usage(prompt_tokens=self.prompt, completion_tokens=self.completion, calls=self.calls, cost_usd=cost)


class StreamReducer:
    """Fold outcome lines (each shard once, its latest attempt) into a :class:`RunResult`.

    ``plan`` needs its corpora, models, epochs and variants only: every (variant, corpus,
    case, model, epoch) is one planned shard, so the shard list itself is never needed.
    """

    def __init__(self, plan: RunPlan) -> None:
        self.plan = plan
        self.arms: dict[tuple[str, str], _Arm] = {(v, b.skill): _Arm() for v in plan.variants for b in plan.bundles}
        self.disagreed: dict[tuple[str, int, int], list[int]] = defaultdict(lambda: [0, 0])
        """(skill, case, assertion) -> [ensemble questions the judges disagreed on, ensemble questions]."""
        self.spend: dict[str, _Spend] = defaultdict(_Spend)
        self.templates: dict[str, set[str]] = defaultdict(set)
        self.lines = 0
        self.unplanned = 0
        self._order = {m: i for i, m in enumerate(plan.models)}
        self._models = {m: m for m in plan.models}  # one string object per model for every pair key
        self.pairs: dict[tuple[str, str], dict[Key, Cell]] | None = (
            {key: {} for key in self.arms} if len(plan.variants) > 1 else None
        )
        """With a baseline arm: each arm's shards as the paired comparison sees them (a small
        interned cell per shard, about 100 bytes: the one per-shard memory of a streamed reduce)."""
        self._cells: dict[Cell, Cell] = {}

    def add(self, line: OutcomeLine) -> None:
        arm = self.arms.get((line.variant, line.skill))
        if arm is None or line.model not in self._order:
            self.unplanned += 1  # a line of another plan (a corrupt segment, a renamed corpus): not counted
            return
        self.lines += 1
        arm.states[line.state] += 1
        model = arm.models[line.model]
        model.ended += 1
        if line.skill_activated is not None:
            model.activated[0] += line.skill_activated
            model.activated[1] += 1
        if line.sandbox:
            arm.sandboxes.add(line.sandbox)
        for spend in (self.spend, arm.spend):
            spend[line.model].add(line.usage)
            for judge, u in line.judge_usage.items():
                spend[judge].add(u)
        for name, digest in line.template_hashes.items():
            self.templates[name].add(digest)
        if line.state is ShardState.BLOCKED and len(arm.blocked) < KEEP_BLOCKED:
            arm.blocked.append(self._blocked_run(line))
        if self.pairs is not None:
            seen = cell_of(line.state, line.passed)
            key = (line.case_id, self._models[line.model], line.epoch)
            self.pairs[(line.variant, line.skill)][key] = self._cells.setdefault(seen, seen)
        if line.state is not ShardState.GRADED:
            return
        model.graded += 1
        model.passed += sum(line.passed)
        model.judged += len(line.passed)
        model.composite.add(_composite(line))
        run_score = arm.run_scores[(line.case_id, line.model)]
        run_score[0] += _composite(line)
        run_score[1] += 1
        arm.graded_cases[line.case_id].add(line.model)
        arm.verified[0] += line.verified[0]
        arm.verified[1] += line.verified[1]
        arm.agreement[0] += line.agreement[0]
        arm.agreement[1] += line.agreement[1]
        if line.unanimous is not None:
            arm.unanimous[0] += line.unanimous
            arm.unanimous[1] += 1
        cells, case_id, model_name = arm.cells, line.case_id, line.model
        for index, passed in enumerate(line.passed):
            cell = cells[(case_id, index, model_name)]
            cell[0] += passed
            cell[1] += 1
        for index, d in enumerate(line.disagreed):
            if d >= 0:
                counts = self.disagreed[(line.skill, case_id, index)]
                counts[0] += d
                counts[1] += 1

    @staticmethod
    def _blocked_run(line: OutcomeLine) -> CaseRun:
        return CaseRun(
            shard_id=line.shard_id,
            case_id=line.case_id,
            model=line.model,
            epoch=line.epoch,
            state=line.state,
            detail=line.detail,
            stops_run=line.stops_run,
            sandbox=SandboxMode(line.sandbox) if line.sandbox else None,
            end_reason=line.end_reason,
            usage=_usage(line.usage),
        )

    def _skill(self, bundle: SkillBundle, variant: str) -> SkillResult:
        arm = self.arms[(variant, bundle.skill)]
        cases = len(bundle.corpus.evals)
        per_model = planned_shards(self.plan, bundle)
        shards = per_model * len(self.plan.models)
        graded = arm.states.get(ShardState.GRADED, 0)
        not_graded = shards - graded
        unfinished = shards - sum(arm.states.values())
        infra = {s.value: arm.states.get(s, 0) for s in sorted(INFRA_FAILURES, key=lambda s: s.value)}
        if unfinished:
            infra[UNFINISHED] = unfinished
        passed = sum(m.passed for m in arm.models.values())
        judged = sum(m.judged for m in arm.models.values())
        # Unequal epochs (adaptive): each case weighs once, and the headline says so.
        behavioural, head_of = (
            (weighted_rate(counts_of_cells(arm.cells)), weighted_headline)
            if self.plan.adaptive
            else (rate(passed, judged, _clusters([arm])), headline)
        )
        inconclusive = is_inconclusive(not_graded, shards, cases)
        blocked = arm.states.get(ShardState.BLOCKED, 0)
        head = (
            inconclusive_headline(not_graded, shards, sum(infra.values()) - unfinished, blocked)
            if inconclusive
            else head_of(behavioural)
        )
        verified, pairs, unanimous = arm.verified, arm.agreement, arm.unanimous
        return SkillResult(
            skill=bundle.skill,
            variant=variant,
            bundle_key=bundle.bundle_key,
            corpus_file=bundle.corpus_file,
            cases=cases,
            behavioural=behavioural,
            infra=infra,
            blocked=sorted(arm.blocked, key=self._plan_order),
            blocked_total=blocked,
            inconclusive=inconclusive,
            not_graded=not_graded,
            unfinished=unfinished,
            shard_count=shards,
            headline=head,
            models=[
                self._summary(m, arm.models.get(m, _Model()), per_model, _clusters([arm], m)) for m in self.plan.models
            ],
            assertions=self._assertions(bundle, arm),
            runs=[],
            evidence_verified_share=verified[0] / verified[1] if verified[1] else None,
            sandbox_modes=sorted(arm.sandboxes),
            judge_agreement=pairs[0] / pairs[1] if pairs[1] else None,
            judge_unanimous=unanimous[0] / unanimous[1] if unanimous[1] else None,
            plugin_scores=scores_from_sums(
                [c.id for c in bundle.corpus.evals], sorted(self.plan.models), arm.run_scores
            )
            if is_plugin_suite(bundle.corpus_file)
            else [],
            # Every executor model is listed, as the full reduce lists the planned shards that never ended.
            usage={**{m: Usage() for m in self.plan.models}, **{n: spend.usage() for n, spend in arm.spend.items()}},
        )

    def _plan_order(self, r: CaseRun) -> tuple[int, int, int]:
        return (r.case_id, self._order.get(r.model, 0), r.epoch)

    @staticmethod
    def _summary(model: str, m: _Model, shards: int, clusters: Sequence[tuple[int, int]] = ()) -> ModelSummary:
        mean, (low, high) = m.composite.interval()
        return ModelSummary(
            model=model,
            behavioural=rate(m.passed, m.judged, clusters),
            composite_mean=mean,
            composite_low=low,
            composite_high=high,
            graded=m.graded,
            shards=shards,
            skill_activated=(m.activated[0], m.activated[1]) if m.activated[1] else None,
        )

    def _assertions(self, bundle: SkillBundle, arm: _Arm) -> list[AssertionStat]:
        stats = []
        for case in bundle.corpus.evals:
            models = sorted(arm.graded_cases.get(case.id, ()))
            for index, assertion in enumerate(case.assertions):
                counts = {}
                for model in models:
                    c, n = arm.cells.get((case.id, index, model), (0, 0))
                    counts[model] = (c, n)
                text = str(getattr(assertion, "text", assertion))
                stats.append(assertion_stat(case.id, index, text, counts, self.plan.epochs))
        return stats

    def _quality(self, texts: Mapping[tuple[str, int, int], str]) -> list[AssertionQuality]:
        """Assertion quality from the (case, assertion, model) cells: a group is one variant and model."""
        groups: dict[tuple[str, int, int], dict[str, list[int]]] = defaultdict(dict)
        for (variant, skill), arm in self.arms.items():
            for (case_id, index, model), (passes, n) in arm.cells.items():
                groups[(skill, case_id, index)][f"{variant}/{model}"] = [n, passes]
        rows = []
        for key in sorted(groups):
            by_group = groups[key]
            skill, case_id, index = key
            observations = sum(n for n, _ in by_group.values())
            passes = sum(c for _, c in by_group.values())
            constant = is_constant(observations, passes, len(by_group))
            repeated = [g for g, (n, _) in by_group.items() if n >= MIN_FLAKY_EPOCHS]
            flaky = sorted(g for g in repeated if 0 < by_group[g][1] < by_group[g][0])
            d = self.disagreed.get(key, [0, 0])
            rows.append(
                AssertionQuality(
                    skill=skill,
                    case_id=case_id,
                    index=index,
                    text=texts.get(key, ""),
                    observations=observations,
                    pass_rate=passes / observations,
                    non_discriminating=constant,
                    constant=("pass" if passes else "fail") if constant else "",
                    flaky_in=flaky,
                    flip_rate=len(flaky) / len(repeated) if repeated else None,
                    judge_disagreement=d[0] / d[1] if d[1] else None,
                )
            )
        return rows

    def result(
        self,
        *,
        fail_under: float | None = None,
        plugin_threshold: float | None = None,
        calibration: Mapping[str, CalibrationRecord] | None = None,
        skipped: Sequence[str] = (),
        regression_alpha: float | None = None,
        require_uplift: float | None = None,
    ) -> RunResult:
        """The run's result from everything added so far (shards never seen count as not graded)."""
        plan = self.plan
        threshold, source = threshold_of(fail_under)
        arms = [self._skill(b, v) for v in plan.variants for b in plan.bundles]
        skills = with_verdicts(arms, threshold, plugin_threshold)
        current = [s for s in skills if s.variant == CURRENT]
        aggregate, aggregate_headline = aggregate_gate(current)
        calibration = dict(calibration or {})
        comparisons = compare_all(skills, plan.run_id, self._planned_pairs()) if self.pairs is not None else []
        fails = comparison_failures(
            comparisons, skills, regression_alpha=regression_alpha, require_uplift=require_uplift
        )
        verdict, reasons = decide_verdict(
            current,
            skills,
            aggregate,
            calibration,
            fail_under,
            skipped,
            comparison_fails=fails,
            comparison_warns=sensitivity_warnings(comparisons),
            plugin_threshold=plugin_threshold,
        )
        texts = {
            (b.skill, case.id, i): str(getattr(a, "text", a))
            for b in plan.bundles
            for case in b.corpus.evals
            for i, a in enumerate(case.assertions)
        }
        return RunResult(
            run_id=plan.run_id,
            verdict=verdict,
            reasons=reasons,
            skills=skills,
            aggregate_inconclusive=aggregate,
            aggregate_headline=aggregate_headline,
            leaderboard=self._leaderboard(current),
            # Every executor model is listed, with zero usage when none of its shards ended (as the full reduce does).
            usage={**{m: Usage() for m in plan.models}, **{name: spend.usage() for name, spend in self.spend.items()}},
            judges=list(plan.judges),
            calibration={judge: record.describe() for judge, record in calibration.items()},
            template_hashes={name: ",".join(sorted(d)) for name, d in sorted(self.templates.items())},
            skipped=list(skipped),
            comparisons=comparisons,
            assertion_quality=self._quality(texts),
            regression_alpha=regression_alpha,
            require_uplift=require_uplift,
            threshold=threshold,
            threshold_source=source,
            plugin_threshold=plugin_threshold,
            adaptive=plan.adaptive,
        )

    def _planned_pairs(self) -> dict[tuple[str, str], dict[Key, Cell]]:
        """Every arm's index with the shards that never ended filled in as ``queued`` (as the full reduce does)."""
        assert self.pairs is not None
        queued = cell_of(ShardState.QUEUED, ())
        for (_, skill), seen in self.pairs.items():  # in place: a copy would double the largest thing held
            for case in self.plan.bundle(skill).corpus.evals:
                for model in self.plan.models:
                    for epoch in range(self.plan.epochs_of(skill, case.id)):
                        seen.setdefault((case.id, model, epoch), queued)
        return self.pairs

    def _leaderboard(self, current: Sequence[SkillResult]) -> list[ModelSummary]:
        merged: dict[str, _Model] = {m: _Model() for m in self.plan.models}
        shards: dict[str, int] = defaultdict(int)
        for s in current:
            arm = self.arms[(s.variant, s.skill)]
            for model in self.plan.models:
                if model in arm.models:
                    merged[model].merge(arm.models[model])
                shards[model] += planned_shards(self.plan, self.plan.bundle(s.skill))
        arms = [self.arms[(s.variant, s.skill)] for s in current]
        board = [self._summary(m, merged[m], shards[m], _clusters(arms, m)) for m in self.plan.models]
        return rank(board)
