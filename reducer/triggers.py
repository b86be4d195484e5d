"""Trigger figures: recall, false triggers, precision, F1, flaky queries, the confusion table and the
routing matrix, from which skills fired in each trigger shard. Pure. Decisions: docs/design/triggers.md.

A run counts once per (query, model, epoch) shard that ended with a record of what fired; in a sweep
over several harnesses the model is the shard's row, ``<harness> × <model>`` (:func:`schemas.shard.row_name`),
so each harness × model pair has its own figures, as every other figure of a sweep. A skill
*fired* in a run when the executor activated it at any point; the skill that fired *first* names
what won the routing, which is what the confusion table and the routing matrix show.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from reducer.stats import clustered_interval
from schemas.shard import CURRENT, RunPlan
from schemas.status import Verdict
from schemas.triggers import (
    NO_ACTIVATION,
    GateFailure,
    Proportion,
    QueryRate,
    TriggerFigures,
    TriggerReport,
    TriggerSettings,
)

NOT_MEASURED = "{} not measured (no {} query ran to an end)"
"""Why a gated figure fails when nothing measured it."""


@dataclass(frozen=True)
class TriggerRun:
    """One trigger shard: which query it asked and what fired (None: it did not end with a record)."""

    skill: str
    model: str
    case_id: int
    query: str
    should_trigger: bool
    fired: tuple[str, ...] | None
    epoch: int = 0
    harness: str | None = None
    """The executor the shard ran under in a sweep (``model`` is then its row); None: the run's one."""

    @property
    def hit(self) -> bool:
        """Whether the skill under test fired at all."""
        return self.fired is not None and self.skill in self.fired

    @property
    def first(self) -> str:
        """The skill that fired first, or ``(none)``."""
        return self.fired[0] if self.fired else NO_ACTIVATION


def proportion(per_query: Mapping[int, tuple[int, int]]) -> Proportion:
    """Hits over runs from each query's (hits, runs), with the interval over queries (one query is
    one draw of the set, however many epochs it ran): :func:`reducer.stats.clustered_interval`."""
    kept = [(h, n) for h, n in per_query.values() if n > 0]
    hits, total = sum(h for h, _ in kept), sum(n for _, n in kept)
    found = clustered_interval(kept)
    low, high = (found.low, found.high) if found is not None else (0.0, 1.0)
    rate = hits / total if total else None
    return Proportion(hits=hits, total=total, rate=rate, low=low, high=high, queries=len(kept))


def _per_query(runs: Iterable[TriggerRun], counted: Callable[[TriggerRun], bool]) -> dict[int, tuple[int, int]]:
    """Query -> (runs where ``counted``, runs) over these runs."""
    out: dict[int, tuple[int, int]] = {}
    for r in runs:
        h, n = out.get(r.case_id, (0, 0))
        out[r.case_id] = (h + counted(r), n + 1)
    return out


def f1_score(precision: float | None, recall: float | None) -> float | None:
    """Harmonic mean; None when either is undefined, 0 when both are 0."""
    if precision is None or recall is None:
        return None
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def query_rates(runs: Sequence[TriggerRun]) -> list[QueryRate]:
    """Per query, in id order: epochs the skill fired in, and what fired first when it did not."""
    by_case: dict[int, list[TriggerRun]] = defaultdict(list)
    for r in runs:
        by_case[r.case_id].append(r)
    out = []
    for case_id in sorted(by_case):
        ended = [r for r in by_case[case_id] if r.fired is not None]
        fired = sum(r.hit for r in ended)
        first = by_case[case_id][0]
        out.append(
            QueryRate(
                case_id=case_id,
                query=first.query,
                should_trigger=first.should_trigger,
                fired=fired,
                runs=len(ended),
                flaky=0 < fired < len(ended),
                instead=dict(sorted(Counter(r.first for r in ended if r.should_trigger and not r.hit).items())),
            )
        )
    return out


def skill_figures(skill: str, model: str, runs: Sequence[TriggerRun], executor: str = "agent") -> TriggerFigures:
    """The figures of one skill's trigger set under one model (``runs`` are that skill's and model's)."""
    ended = [r for r in runs if r.fired is not None]
    positives = [r for r in ended if r.should_trigger]
    negatives = [r for r in ended if not r.should_trigger]
    recall = proportion(_per_query(positives, lambda r: r.hit))
    false_trigger = proportion(_per_query(negatives, lambda r: r.hit))
    # Precision's runs are the ones that fired; a query's share is its positives among them.
    precision = proportion(_per_query([r for r in ended if r.hit], lambda r: r.should_trigger))
    return TriggerFigures(
        skill=skill,
        model=model,
        executor=executor,
        recall=recall,
        false_trigger=false_trigger,
        precision=precision,
        f1=f1_score(precision.rate, recall.rate),
        # F1 grows with both precision and recall, so the bounds' F1s bracket it: it covers the F1
        # whenever both intervals cover theirs (at least 90% of the time, not 95%).
        f1_low=f1_score(precision.low, recall.low) if precision.total and recall.total else None,
        f1_high=f1_score(precision.high, recall.high) if precision.total and recall.total else None,
        queries=query_rates(runs),
        confusion=dict(sorted(Counter(r.first for r in positives if not r.hit).items())),
        not_ended=len(runs) - len(ended),
    )


def routing_matrix(runs: Iterable[TriggerRun]) -> dict[str, dict[str, int]]:
    """Skill under test -> the skill that fired first on its positive runs (or ``(none)``) -> runs."""
    matrix: dict[str, Counter[str]] = defaultdict(Counter)
    for r in runs:
        if r.fired is not None and r.should_trigger:
            matrix[r.skill][r.first] += 1
    return {skill: dict(sorted(row.items())) for skill, row in sorted(matrix.items())}


def gate_failures(f: TriggerFigures, settings: TriggerSettings) -> list[GateFailure]:
    """The gates one row misses: ``--min-recall`` (recall below it, or no positive measured) and
    ``--max-false-trigger`` (the false-trigger rate above it, or no negative measured)."""
    fails = []
    if settings.min_recall is not None:
        if f.recall.rate is None:
            fails.append(GateFailure(gate="--min-recall", reason=NOT_MEASURED.format("recall", "positive")))
        elif f.recall.rate < settings.min_recall:
            reason = f"recall {_headline(f.recall)} is below {settings.min_recall:.0%}"
            fails.append(GateFailure(gate="--min-recall", reason=reason))
    if settings.max_false_trigger is not None:
        if f.false_trigger.rate is None:
            reason = NOT_MEASURED.format("false-trigger rate", "negative")
            fails.append(GateFailure(gate="--max-false-trigger", reason=reason))
        elif f.false_trigger.rate > settings.max_false_trigger:
            reason = f"false-trigger rate {_headline(f.false_trigger)} is above {settings.max_false_trigger:.0%}"
            fails.append(GateFailure(gate="--max-false-trigger", reason=reason))
    return fails


def gated(
    figures: Sequence[TriggerFigures], settings: TriggerSettings, inconclusive: Collection[str] = ()
) -> list[TriggerFigures]:
    """Each skill and model (a sweep's row) with the gates it missed.

    A skill whose shards mostly did not end (INCONCLUSIVE, which WARNs) is not gated: its figures
    measured the infra, as an inconclusive corpus's pass rate is not held to ``--fail-under``.
    """
    return [
        f if f.skill in inconclusive else f.model_copy(update={"failed": gate_failures(f, settings)}) for f in figures
    ]


def _headline(p: Proportion) -> str:
    return f"{p.hits}/{p.total} ({100.0 * (p.rate or 0.0):.1f}%)"


def trigger_report(
    runs: Sequence[TriggerRun], settings: TriggerSettings, executor: str = "agent", inconclusive: Collection[str] = ()
) -> TriggerReport:
    """Figures per (skill, model) in first-seen order (a run's model is its row: one figure per
    harness × model pair in a sweep), the routing matrix and the gates' failures."""
    groups: dict[tuple[str, str], list[TriggerRun]] = defaultdict(list)
    for r in runs:
        groups[(r.skill, r.model)].append(r)
    figures = gated(
        [skill_figures(skill, model, group, group[0].harness or executor) for (skill, model), group in groups.items()],
        settings,
        inconclusive,
    )
    return TriggerReport(
        turns=settings.turns,
        figures=figures,
        routing=routing_matrix(runs),
        min_recall=settings.min_recall,
        max_false_trigger=settings.max_false_trigger,
        failures=[line for f in figures for line in f.failure_lines],
    )


def plan_runs(plan: RunPlan, fired: Mapping[str, tuple[str, ...] | None], variant: str = CURRENT) -> list[TriggerRun]:
    """One arm's shards of trigger bundles as runs, each under its row; ``fired``: shard id -> what
    fired, for shards that ended graded (absent or None otherwise)."""
    sets = {b.skill: b.triggers for b in plan.bundles if b.triggers is not None}
    runs = []
    for shard in plan.shards:
        trigger_set = sets.get(shard.skill)
        if trigger_set is None or shard.variant != variant:
            continue
        case = trigger_set.case(shard.case_id)
        got = fired.get(shard.shard_id)
        row, harness = shard.row, shard.harness
        runs.append(TriggerRun(shard.skill, row, case.id, case.query, case.should_trigger, got, shard.epoch, harness))
    return runs


NO_TRIGGER_GATE = "no trigger gate given: figures only (--min-recall, --max-false-trigger)"
"""Why a trigger run with no gate WARNs: it measured, and decided nothing (docs/design/triggers.md)."""


def trigger_verdict(report: TriggerReport, verdict: Verdict, reasons: list[str]) -> tuple[Verdict, list[str]]:
    """A trigger run's verdict from its reduce's: a PASS with a gate says the gates held; with none,
    nothing was decided, so a PASS becomes a WARN saying which flags gate (a WARN gets that reason too)."""
    gated = report.min_recall is not None or report.max_false_trigger is not None
    if verdict is Verdict.PASS:
        return (
            (Verdict.PASS, ["every trigger query ran; no trigger gate failed"])
            if gated
            else (Verdict.WARN, [NO_TRIGGER_GATE])
        )
    if verdict is Verdict.WARN and not gated:
        return verdict, [*reasons, NO_TRIGGER_GATE]
    return verdict, reasons
