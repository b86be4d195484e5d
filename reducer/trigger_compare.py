"""``run --triggers --compare REF``: the paired change of recall and false-trigger rate between a skill's
description now and at REF. Pure; the same paired machinery as behaviour (:mod:`reducer.paired`).

A pair is one query under one model (a sweep's harness × model row) and epoch that ended in both
arms. The unit is the query: each query's difference is the mean over its pairs of (fired now -
fired at REF), so repeated epochs of one query never count as independent evidence. Recall's
change is the mean over the positive queries, the false-trigger rate's over the negative ones.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from fractions import Fraction

from reducer.paired import paired_interval, seed_for, sign_flip_test
from reducer.triggers import TriggerRun, plan_runs, trigger_report
from schemas.shard import CURRENT, RunPlan
from schemas.triggers import PairedChange, TriggerChange, TriggerReport, TriggerSettings


def query_differences(current: Sequence[TriggerRun], baseline: Sequence[TriggerRun], positive: bool) -> list[Fraction]:
    """Per query (id order) with at least one pair: the mean paired difference of firing."""
    old = {(r.model, r.case_id, r.epoch): r for r in baseline if r.fired is not None}
    pairs: dict[int, list[int]] = defaultdict(list)
    for r in current:
        match = old.get((r.model, r.case_id, r.epoch))
        if r.fired is None or match is None or r.should_trigger is not positive:
            continue
        pairs[r.case_id].append(int(r.hit) - int(match.hit))
    return [Fraction(sum(d), len(d)) for _, d in sorted(pairs.items())]


def paired_change(diffs: Sequence[Fraction], seed: int) -> PairedChange:
    if not diffs:
        return PairedChange(difference=None)
    p = sign_flip_test(diffs, seed)
    interval = paired_interval(diffs, p)
    low, high = interval if interval is not None else (None, None)
    return PairedChange(
        difference=float(sum(diffs) / len(diffs)),
        low=low,
        high=high,
        p_two_sided=p.two_sided,
        queries=len(diffs),
    )


def trigger_change(
    run_id: str, skill: str, baseline: str, current: Sequence[TriggerRun], old: Sequence[TriggerRun]
) -> TriggerChange:
    """One skill's change against ``baseline`` (``current`` and ``old`` are that skill's runs in each arm)."""
    return TriggerChange(
        skill=skill,
        baseline=baseline,
        recall=paired_change(query_differences(current, old, True), seed_for(run_id, skill, baseline, "recall")),
        false_trigger=paired_change(
            query_differences(current, old, False), seed_for(run_id, skill, baseline, "false-trigger")
        ),
    )


def run_report(
    plan: RunPlan,
    fired: Mapping[str, tuple[str, ...] | None],
    settings: TriggerSettings,
    executor: str,
    inconclusive: Collection[str] = (),
) -> TriggerReport:
    """The current arm's report (``inconclusive`` skills not gated), with each baseline arm's own
    figures and paired changes (``--compare``)."""
    current = plan_runs(plan, fired)
    report = trigger_report(current, settings, executor, inconclusive)
    changes = []
    baselines = {}
    for variant in (v for v in plan.variants if v != CURRENT):
        old = plan_runs(plan, fired, variant)
        # The baseline arm's own figures, ungated: the stick the paired change is read against.
        baselines[variant] = trigger_report(old, TriggerSettings(turns=settings.turns), executor).figures
        for skill in dict.fromkeys(r.skill for r in current):
            mine = [r for r in current if r.skill == skill]
            theirs = [r for r in old if r.skill == skill]
            if theirs:
                changes.append(trigger_change(plan.run_id, skill, variant, mine, theirs))
    return report.model_copy(update={"changes": changes, "baselines": baselines})
