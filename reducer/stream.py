"""The one reduce: fold a run's outcome lines into counters, then into its :class:`RunResult`. Pure.

Every figure of a result (rates and Wilson intervals, infra tallies, the INCONCLUSIVE gates, composite
means, the assertion matrix with pass@k and pass^k, assertion quality, usage, paired comparisons, trigger
figures and the verdict) is computed here, from the counters of :mod:`reducer.counters`, however they come.

Two modes, one fold. Streamed (``keep_rows=False``): compact :class:`OutcomeLine` s, a million shards
in the memory of the plan; ``SkillResult.runs`` stays empty and blocked shards are listed up to
``KEEP_BLOCKED``. Rows kept (``keep_rows=True``, :func:`reduce_run`): each shard's full records also
give its row (verdicts with their evidence, judge answers), so the reports can show every run; the
figures are the same fold's. A run with a baseline arm also gets its paired comparisons, which pair
shards one by one: for it each shard leaves one small interned cell in memory.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from reducer.comparison import Cell, Key, cell_of, compare_all, with_unended
from reducer.counters import Arm, ModelCounts, Spend, clusters_of
from reducer.epoch_weights import cells_rate, counts_of_cells, model_rate, planned_shards, unequal_epochs, weighted_rate
from reducer.gates import comparison_failures, comparison_warnings, pass_tail
from reducer.plugin_score import is_plugin_suite, scores_from_sums
from reducer.quality import assertion_texts, quality_rows
from reducer.rows import KEEP_BLOCKED, blocked_row, case_row
from reducer.scoring import (
    NO_RECORD,
    aggregate_gate,
    assertion_stat,
    composite,
    decide_verdict,
    headline,
    inconclusive_headline,
    is_inconclusive,
    rank,
    rate,
)
from reducer.sweep import harness_comparisons, harness_rates
from reducer.threshold import threshold_of, with_verdicts
from reducer.trigger_compare import run_report
from reducer.triggers import trigger_verdict
from schemas.comparison import PairedComparison
from schemas.outcome import CalibrationRecord, OutcomeLine
from schemas.report import UNFINISHED, AssertionStat, CarriedReport, CaseRun, ModelSummary, RunResult, SkillResult
from schemas.shard import CURRENT, RunPlan, SkillBundle, row_name
from schemas.shard_outcome import ShardOutcome, outcome_line_of, skill_loaded
from schemas.status import INFRA_FAILURES, ShardState
from schemas.triggers import TriggerReport, TriggerSettings


class StreamReducer:
    """Fold outcome lines (each shard once, its latest attempt) into a :class:`RunResult`.

    ``plan`` needs its corpora, models, epochs and variants only: every (variant, corpus, case,
    model, epoch) is one planned shard, so the shard list itself is never needed (a trigger run's
    figures, which follow each planned shard, are the exception). ``keep_rows``: also keep each
    shard's row, given to :meth:`add` (or made by :meth:`add_outcome`).

    The settings :meth:`result` takes: ``skipped``, the named errors of corpora left out before
    the run; ``already_reported``, the corpora ``--all-evals`` left out because their bundle key
    already has a report (each with its verdict); ``regression_alpha`` and ``require_uplift``, the gates
    (:mod:`reducer.gates`); ``plugin_threshold``, ``--threshold``, what a plugin eval suite's
    every case must score; ``triggers``, which makes it a trigger run's reduce (:mod:`reducer.triggers`),
    gated by its thresholds; ``compare_guards``, the comparisons asked for that could not run, each a WARN.
    """

    def __init__(self, plan: RunPlan, *, keep_rows: bool = False) -> None:
        self.plan = plan
        self.keep_rows = keep_rows
        self.arms: dict[tuple[str, str], Arm] = {(v, b.skill): Arm() for v in plan.variants for b in plan.bundles}
        self.disagreed: dict[tuple[str, int, int], list[int]] = defaultdict(lambda: [0, 0])
        """(skill, case, assertion) -> [ensemble questions the judges disagreed on, ensemble questions]."""
        self.spend: dict[str, Spend] = defaultdict(Spend)
        self.board: dict[str, ModelCounts] = {m: ModelCounts() for m in plan.rows}
        """The leaderboard: each model's counts over the current variant's corpora."""
        self.templates: dict[str, set[str]] = defaultdict(set)
        self.fired: dict[str, tuple[str, ...]] = {}
        """Trigger runs: graded shard -> the skills it activated."""
        self.lines = 0
        self.unplanned = 0
        # A row is a model, or a sweep's harness × model pair (schemas.shard.row_name): every figure
        # below is kept per row, so a sweep's reports show one row per pair.
        self._order = {m: i for i, m in enumerate(plan.rows)}
        self._planned = Counter((s.variant, s.skill, s.row) for s in plan.shards) if plan.shards else None
        """Planned shards per (variant, corpus, row) when the plan lists its shards."""
        self._cases = Counter((v, k) for v, k, _ in {(s.variant, s.skill, s.case_id) for s in plan.shards})
        self._models = {m: m for m in plan.rows}  # one string object per row for every pair key
        self._rows = {(h, m): row_name(m, h) for h, ms in plan.harnesses.items() for m in ms}
        # Every executor model is in the usage (zero when none of its shards ended), a corpus's the models
        # planned in it. With rows kept every planned shard is added, so each is listed where it first comes.
        if not keep_rows:
            self.spend.update({m: Spend() for m in plan.rows})
            for (v, skill), arm in self.arms.items():
                arm.spend.update({m: Spend() for m in plan.rows if not self._planned or self._planned[(v, skill, m)]})
        self.pairs: dict[tuple[str, str], dict[Key, Cell]] | None = (
            {key: {} for key in self.arms} if len(plan.variants) > 1 or len(plan.harnesses) > 1 else None
        )
        """With a baseline arm: each arm's shards as the paired comparison sees them (a small
        interned cell per shard, about 100 bytes: the one per-shard memory of a streamed reduce)."""
        self._cells: dict[Cell, Cell] = {}

    def add_outcome(self, o: ShardOutcome) -> None:
        """Fold in one planned shard from its full records; one that has not ended keeps its row only."""
        if o.state.terminal:
            line = outcome_line_of(o)
            self.add(line, case_row(o, line))
            return
        arm = self.arms[(o.shard.variant, o.shard.skill)]
        arm.rows.append(case_row(o, None))
        for spend in (self.spend, arm.spend):
            spend[o.shard.row].add((0, 0, 0, None))
        if self.pairs is not None:
            self.pairs[(o.shard.variant, o.shard.skill)][(o.shard.case_id, o.shard.row, o.shard.epoch)] = cell_of(
                o.state, ()
            )

    def add(self, line: OutcomeLine, row: CaseRun | None = None) -> None:
        """Fold in one ended shard's line (and, when keeping rows, its row)."""
        arm = self.arms.get((line.variant, line.skill))
        model = line.model if line.harness is None else self._rows.get((line.harness, line.model), "")
        if arm is None or model not in self._order:
            self.unplanned += 1  # a line of another plan (a corrupt segment, a renamed corpus): not counted
            return
        self.lines += 1
        arm.states[line.state] += 1
        if self.keep_rows and row is not None:
            arm.rows.append(row)
        elif line.state is ShardState.BLOCKED and len(arm.blocked) < KEEP_BLOCKED:
            arm.blocked.append(blocked_row(line))
        # The current variant's shards count on the leaderboard too.
        models = (arm.model(model), self.board[model]) if line.variant == CURRENT else (arm.model(model),)
        if (activated := skill_loaded(line.skill, line.skill_activated, line.skills_fired)) is not None:
            for counts in models:
                counts.activated[0] += activated
                counts.activated[1] += 1
        if line.sandbox:
            arm.sandboxes.add(line.sandbox)
        for spend in (self.spend, arm.spend):
            spend[model].add(line.usage)
            for judge, u in line.judge_usage.items():
                spend[judge].add(u)
        for name, digest in line.template_hashes.items():
            self.templates[name].add(digest)
        if self.pairs is not None:
            seen = cell_of(line.state, line.passed)
            key = (line.case_id, self._models[model], line.epoch)
            self.pairs[(line.variant, line.skill)][key] = self._cells.setdefault(seen, seen)
        if line.state is ShardState.GRADED:
            self._add_graded(line, model, arm, models)

    def _add_graded(self, line: OutcomeLine, model: str, arm: Arm, models: Sequence[ModelCounts]) -> None:
        score = composite(line.passed, line.weights)
        for counts in models:
            counts.add_graded(sum(line.passed), len(line.passed), score, (line.skill, line.case_id))
        arm.add_graded(line, model, score)
        if line.skills_fired is not None:
            self.fired[line.shard_id] = tuple(line.skills_fired)
        for index, d in enumerate(line.disagreed):
            if d >= 0:
                split = self.disagreed[(line.skill, line.case_id, index)]
                split[0] += d
                split[1] += 1

    def shards_per_model(self, bundle: SkillBundle, variant: str, model: str) -> int:
        """Planned shards of one model in one corpus and variant: counted from the plan's shard list
        when it has one (so a case may have more epochs than another), else every case times the epochs."""
        if self._planned is not None:
            return self._planned.get((variant, bundle.skill, model), 0)
        return planned_shards(self.plan, bundle)

    def _skill(self, bundle: SkillBundle, variant: str) -> SkillResult:
        arm = self.arms[(variant, bundle.skill)]
        cases = len(bundle.corpus.evals)
        planned = {m: self.shards_per_model(bundle, variant, m) for m in self.plan.rows}
        # A model with no shard in this corpus (a grade-only run plans only what was recorded) has no row.
        per_model = {m: n for m, n in planned.items() if n or m in arm.models}
        shards = sum(per_model.values())
        graded = arm.states.get(ShardState.GRADED, 0)
        not_graded = shards - graded
        unfinished = shards - sum(arm.states.values())
        infra = {s.value: arm.states.get(s, 0) for s in sorted(INFRA_FAILURES, key=lambda s: s.value)}
        if unfinished:
            infra[UNFINISHED] = unfinished
        passed = sum(m.passed for m in arm.models.values())
        judged = sum(m.judged for m in arm.models.values())
        # Unequal epochs (adaptive): each case weighs once, and the headline says so.
        behavioural = (
            weighted_rate(counts_of_cells(arm.cells))
            if unequal_epochs(self.plan, [bundle.skill])
            else rate(passed, judged, clusters_of([arm]))
        )
        inconclusive = is_inconclusive(not_graded, shards, cases)
        blocked = arm.states.get(ShardState.BLOCKED, 0)
        head = (
            inconclusive_headline(not_graded, shards, sum(infra.values()) - unfinished, blocked)
            if inconclusive
            else headline(behavioural)
        )
        verified, pairs, unanimous = arm.verified, arm.agreement, arm.unanimous
        listed = [r for r in arm.rows if r.state is ShardState.BLOCKED] if self.keep_rows else arm.blocked
        return SkillResult(
            skill=bundle.skill,
            variant=variant,
            bundle_key=bundle.bundle_key,
            corpus_file=bundle.corpus_file,
            cases=cases,
            behavioural=behavioural,
            infra=infra,
            blocked=sorted(listed, key=self._plan_order),
            blocked_total=blocked,
            inconclusive=inconclusive,
            not_graded=not_graded,
            unfinished=unfinished,
            unplanned=cases - self._cases[(variant, bundle.skill)] if self._cases else 0,  # a case not recorded
            shard_count=shards,
            headline=head,
            models=[
                self._weighted(arm.models.get(m, ModelCounts()).summary(m, per_model[m], clusters_of([arm], m)), [arm])
                for m in per_model
            ],
            assertions=self._assertions(bundle, arm),
            runs=arm.rows,
            evidence_verified_share=verified[0] / verified[1] if verified[1] else None,
            evidence_checked=verified[1],
            sandbox_modes=sorted(arm.sandboxes),
            judge_agreement=pairs[0] / pairs[1] if pairs[1] else None,
            judge_unanimous=unanimous[0] / unanimous[1] if unanimous[1] else None,
            plugin_scores=scores_from_sums([c.id for c in bundle.corpus.evals], sorted(per_model), arm.run_scores)
            if is_plugin_suite(bundle.corpus_file)
            else [],
            usage={name: spend.usage() for name, spend in arm.spend.items()},
            case_names={c.id: c.name for c in bundle.corpus.evals if c.name},
        )

    def _plan_order(self, r: CaseRun) -> tuple[int, int, int]:
        return (r.case_id, self._order.get(r.model, 0), r.epoch)

    def _assertions(self, bundle: SkillBundle, arm: Arm) -> list[AssertionStat]:
        stats = []
        for case in bundle.corpus.evals:
            models = sorted(arm.graded_cases.get(case.id, ()))
            for index, assertion in enumerate(case.assertions):
                counts = {m: (c, n) for m in models for c, n in [arm.cells.get((case.id, index, m), (0, 0))]}
                text = str(getattr(assertion, "text", assertion))
                stat = assertion_stat(case.id, index, text, counts, self.plan.epochs)
                if self.plan.harnesses:
                    stat = stat.model_copy(update={"by_harness": harness_rates(self.plan, counts)})
                stats.append(stat)
        return stats

    def result(
        self,
        *,
        fail_under: float | None = None,
        plugin_threshold: float | None = None,
        calibration: Mapping[str, CalibrationRecord] | None = None,
        skipped: Sequence[str] = (),
        already_reported: Sequence[CarriedReport] = (),
        regression_alpha: float | None = None,
        require_uplift: float | None = None,
        triggers: TriggerSettings | None = None,
        executor: str = "agent",
        compare_guards: Sequence[str] = (),
    ) -> RunResult:
        """The run's result from everything added so far (shards never seen count as not graded);
        the arguments are the run's settings, named in the class's docstring."""
        plan = self.plan
        threshold, source = threshold_of(fail_under)
        skills = with_verdicts(
            [self._skill(b, v) for v in plan.variants for b in plan.bundles], threshold, plugin_threshold
        )
        current = [s for s in skills if s.variant == CURRENT]
        trusted = [self.arms[(CURRENT, s.skill)].cells for s in current if not s.inconclusive]
        aggregate, aggregate_headline = aggregate_gate(current, triggers is None, cells_rate(trusted))
        calibration = dict(calibration or {})
        comparisons, trigger, fails = self._compared(skills, triggers, executor, regression_alpha, require_uplift)
        # A sweep's harnesses paired on the same cases: described, never gated (a trigger run has none to pair).
        paired = self.pairs is not None and triggers is None
        harnesses = harness_comparisons(plan, skills, with_unended(self.pairs, plan)) if paired else []
        verdict, reasons = decide_verdict(
            current,
            skills,
            aggregate,
            calibration,
            fail_under,
            skipped,
            already_reported,
            comparison_fails=fails,
            comparison_warns=comparison_warnings(comparisons, skills, regression_alpha, compare_guards),
            plugin_threshold=plugin_threshold,
            pass_tail=pass_tail(comparisons, regression_alpha, require_uplift),
        )
        if trigger is not None:
            verdict, reasons = trigger_verdict(trigger, verdict, reasons)
        return RunResult(
            run_id=plan.run_id,
            verdict=verdict,
            reasons=reasons,
            skills=skills,
            aggregate_inconclusive=aggregate,
            aggregate_headline=aggregate_headline,
            leaderboard=self._board(current),
            usage={name: spend.usage() for name, spend in self.spend.items()},
            judges=list(plan.judges),
            calibration={judge: record.describe() for judge, record in calibration.items()},
            template_hashes={name: ",".join(sorted(d)) for name, d in sorted(self.templates.items())},
            skipped=list(skipped),
            carried=list(already_reported),
            comparisons=comparisons,
            harness_comparisons=harnesses,
            assertion_quality=quality_rows(self.arms, self.disagreed, assertion_texts(plan.bundles)),
            regression_alpha=regression_alpha,
            require_uplift=require_uplift,
            triggers=trigger,
            threshold=threshold,
            threshold_source=source,
            plugin_threshold=plugin_threshold,
            adaptive=plan.adaptive,
            harnesses=list(plan.harnesses),
        )

    def _compared(
        self,
        skills: Sequence[SkillResult],
        triggers: TriggerSettings | None,
        executor: str,
        regression_alpha: float | None,
        require_uplift: float | None,
    ) -> tuple[list[PairedComparison], TriggerReport | None, list[str]]:
        """The paired comparisons, the trigger report (a trigger run's arms hold no assertions: its
        comparison is the trigger one), and the reasons they fail the run."""
        paired = self.pairs is not None and triggers is None
        comparisons = compare_all(skills, self.plan.run_id, with_unended(self.pairs, self.plan)) if paired else []
        unsure = {s.skill for s in skills if s.variant == CURRENT and s.inconclusive}
        trigger = run_report(self.plan, self.fired, triggers, executor, unsure) if triggers is not None else None
        fails = comparison_failures(
            comparisons, skills, regression_alpha=regression_alpha, require_uplift=require_uplift
        )
        return comparisons, trigger, fails + (trigger.failures if trigger else [])

    def _board(self, current: Sequence[SkillResult]) -> list[ModelSummary]:
        """Every executor model over the current corpora, best composite first."""
        arms = [self.arms[(s.variant, s.skill)] for s in current]
        return rank(
            [
                self._weighted(
                    self.board[m].summary(m, sum(self._shards_of(s, m) for s in current), clusters_of(arms, m)), arms
                )
                for m in self.plan.rows
            ]
        )

    def _weighted(self, row: ModelSummary, arms: Sequence[Arm]) -> ModelSummary:
        """A model's row with each case weighted equally when its cases got unequal epochs, as the corpus's rate is."""
        skills = [skill for (_, skill), arm in self.arms.items() if any(arm is a for a in arms)]
        if not unequal_epochs(self.plan, skills):
            return row
        return row.model_copy(update={"behavioural": model_rate([a.cells for a in arms], row.model)})

    def _shards_of(self, s: SkillResult, model: str) -> int:
        return self.shards_per_model(self.plan.bundle(s.skill), s.variant, model)


def reduce_run(plan: RunPlan, outcomes: Mapping[str, ShardOutcome], **options: Any) -> RunResult:
    """The result of every planned shard's full records, rows kept, folded in plan order (a shard
    with no outcome counts as not finished); ``options`` are :meth:`StreamReducer.result`'s."""
    fold = StreamReducer(plan, keep_rows=True)
    for shard in plan.shards:
        fold.add_outcome(outcomes.get(shard.shard_id) or ShardOutcome(shard, ShardState.QUEUED, detail=NO_RECORD))
    return fold.result(**options)
