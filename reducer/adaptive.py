"""Adaptive epochs: after each round, which cases get more epochs and whether the gate is decided. Pure.

A look takes every graded shard's verdicts so far and, per corpus, the interval of its gated
figure at the level ``1 - alpha / looks`` (Bonferroni over the looks the rule can take at most,
so the chance that any look decides wrongly stays under ``alpha``; docs/design/statistics.md):

- the behavioural pass rate against the threshold, with the case-clustered interval over each
  case's epoch-averaged counts (a case with more epochs is still one case, weighed by its
  assertions, never by its epochs);
- with a gating baseline (``--compare``, or ``no-skill`` with ``--require-uplift``), the paired
  difference: the mean over cases of (current's epoch-averaged rate - the baseline's), with a
  t interval on the cases.

The gate is decided when the interval lies wholly on one side of its target. A case then stops
(``decided``); else it gets ``step`` more epochs while its verdicts vary between epochs in some
arm (a case whose every epoch gave the same verdicts in every arm has nothing another epoch
could change: ``stable``), until ``max_epochs``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from reducer.stats import clustered_interval, t_quantile, wilson
from schemas.adaptive import AdaptivePlan, CaseEpochs, GateLook, StopReason
from schemas.report import CaseRun, ClusteredRate, Rate, SkillResult
from schemas.shard import RunPlan, SkillBundle
from schemas.status import ShardState

Verdicts = tuple[bool, ...]
ShardKey = tuple[str, str, int, str, int]
"""(skill, variant, case id, model, epoch): one graded shard."""


@dataclass(frozen=True)
class Gate:
    """What decides one corpus: its pass rate against ``target``, or (``baseline`` set) the paired
    difference of current minus that baseline arm against the margin ``target``."""

    target: float
    baseline: str | None = None


def case_counts(observed: Mapping[ShardKey, Verdicts], skill: str, variant: str) -> dict[int, tuple[int, int, int]]:
    """Case -> (passed verdicts, verdicts, graded shards) of one corpus arm."""
    out: dict[int, list[int]] = {}
    for (s, v, case_id, _, _), verdicts in observed.items():
        if s == skill and v == variant and verdicts:
            row = out.setdefault(case_id, [0, 0, 0])
            row[0] += sum(verdicts)
            row[1] += len(verdicts)
            row[2] += 1
    return {c: (row[0], row[1], row[2]) for c, row in out.items()}


def weighted_clusters(counts: Sequence[tuple[float, float, float]]) -> list[tuple[float, float]]:
    """Each case's (passed, trials) averaged over its graded shards: one shard's worth per case."""
    return [(p / n, m / n) for p, m, n in counts if n > 0 and m > 0]


def weighted_rate(counts: Sequence[tuple[int, int, int]]) -> Rate:
    """The pass rate of cases with unequal epochs: each case's (passed, verdicts, shards), weighed as
    one shard of it (so by its assertions, not by how many epochs it got).

    ``passed`` and ``total`` stay the raw verdict counts; the rate and its intervals are the
    weighted ones (Wilson on the weighted counts, and the case-clustered interval beside it).
    """
    passed, total = sum(c[0] for c in counts), sum(c[1] for c in counts)
    clusters = weighted_clusters(counts)
    w_passed, w_total = sum(p for p, _ in clusters), sum(m for _, m in clusters)
    low, high = wilson(w_passed, w_total)
    found = clustered_interval(clusters)
    clustered = (
        ClusteredRate(clusters=found.clusters, low=found.low, high=found.high, design_effect=found.design_effect)
        if found is not None
        else None
    )
    return Rate(
        passed=passed,
        total=total,
        rate=w_passed / w_total if w_total else None,
        low=low,
        high=high,
        clustered=clustered,
    )


def pass_rate_look(counts: Sequence[tuple[int, int, int]], gate: Gate, level: float, skill: str) -> GateLook:
    """The pass rate's interval at ``level`` against the threshold."""
    clusters = weighted_clusters(counts)
    found = clustered_interval(clusters, level)
    if found is None:
        return GateLook(skill=skill, figure="pass-rate", target=gate.target, level=level)
    return GateLook(
        skill=skill,
        figure="pass-rate",
        target=gate.target,
        estimate=found.rate,
        low=found.low,
        high=found.high,
        level=level,
        decided=_side(found.low, found.high, gate.target, strict_above=False),
    )


def paired_look(
    current: Mapping[int, tuple[int, int, int]],
    baseline: Mapping[int, tuple[int, int, int]],
    gate: Gate,
    level: float,
    skill: str,
) -> GateLook:
    """The paired difference's t interval over the cases both arms graded, at ``level``."""
    diffs = [current[c][0] / current[c][1] - baseline[c][0] / baseline[c][1] for c in current if c in baseline]
    look = GateLook(skill=skill, figure="paired-difference", target=gate.target, low=-1.0, high=1.0, level=level)
    if len(diffs) < 2:
        return look
    k = len(diffs)
    mean = math.fsum(diffs) / k
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in diffs) / (k - 1))
    half = t_quantile(1 - (1 - level) / 2, k - 1) * sd / math.sqrt(k)
    low, high = max(-1.0, mean - half), min(1.0, mean + half)
    if sd == 0:
        # Every case moved by the same amount: no spread to estimate. Trust the point only where
        # an exact sign test over these cases could (every case on one side by chance: 2^-k).
        low, high = (mean, mean) if 0.5**k < (1 - level) / 2 else (-1.0, 1.0)
    decided = _side(low, high, gate.target, strict_above=True)
    return look.model_copy(update={"estimate": mean, "low": low, "high": high, "decided": decided})


def _side(low: float, high: float, target: float, *, strict_above: bool) -> Literal["", "above", "below"]:
    # The pass-rate gate passes at rate >= threshold; the paired gate needs the margin exceeded.
    above = low > target if strict_above else low >= target
    return "above" if above else "below" if high < target else ""


def varies(observed: Mapping[ShardKey, Verdicts], skill: str, case_id: int) -> bool | None:
    """Whether the case's verdicts differ between two epochs of one arm and model; None when no
    shard of it was graded."""
    seen: dict[tuple[str, str], set[Verdicts]] = {}
    for (s, variant, c, model, _), verdicts in observed.items():
        if s == skill and c == case_id:
            seen.setdefault((variant, model), set()).add(verdicts)
    if not seen:
        return None
    return any(len(kinds) > 1 for kinds in seen.values())


def look_at(
    plan: AdaptivePlan, gates: Mapping[str, Gate], observed: Mapping[ShardKey, Verdicts], variants: Sequence[str]
) -> list[GateLook]:
    """Every corpus's gated figure at this look's level."""
    looks = []
    for skill, gate in gates.items():
        current = case_counts(observed, skill, variants[0])
        if gate.baseline is None:
            looks.append(pass_rate_look(list(current.values()), gate, plan.level, skill))
        else:
            base = case_counts(observed, skill, gate.baseline)
            looks.append(paired_look(current, base, gate, plan.level, skill))
    return looks


def next_round(
    plan: AdaptivePlan,
    cases: Sequence[tuple[str, int]],
    gates: Mapping[str, Gate],
    observed: Mapping[ShardKey, Verdicts],
    variants: Sequence[str],
    *,
    out_of_budget: bool = False,
) -> AdaptivePlan:
    """The plan after one more look: each case's epochs for the next round, or why it stopped.

    ``cases``: every (corpus, case id) of the run; ``variants``: the arms, current first;
    ``out_of_budget``: the cost or token cap refused a call, so no case gets more.
    """
    looks = look_at(plan, gates, observed, variants)
    decided = {g.skill for g in looks if g.decided}
    out = []
    for skill, case_id in cases:
        epochs = plan.epochs_of(skill, case_id)
        before = next((c for c in plan.cases if (c.skill, c.case_id) == (skill, case_id)), None)
        if before is not None and before.stopped:
            out.append(before)
            continue
        stop = _stop(skill in decided, varies(observed, skill, case_id), epochs, plan.max_epochs, out_of_budget)
        more = 0 if stop else min(plan.step, plan.max_epochs - epochs)
        out.append(CaseEpochs(skill=skill, case_id=case_id, epochs=epochs + more, stopped=stop))
    return plan.model_copy(update={"looks_done": plan.looks_done + 1, "cases": tuple(out), "gates": tuple(looks)})


def _stop(decided: bool, vary: bool | None, epochs: int, max_epochs: int, out_of_budget: bool) -> StopReason:
    if decided:
        return "decided"
    if vary is None:
        return "not-graded"
    if not vary:
        return "stable"
    if epochs >= max_epochs:
        return "max-epochs"
    return "max-cost" if out_of_budget else ""


def finished(plan: AdaptivePlan) -> bool:
    """Whether no case gets another epoch."""
    return bool(plan.cases) and all(c.stopped for c in plan.cases)


def stop_counts(plan: AdaptivePlan) -> dict[str, int]:
    """Cases per stop reason, in a fixed order."""
    order = ("decided", "stable", "max-epochs", "max-cost", "not-graded", "")
    return {r or "running": n for r in order if (n := sum(1 for c in plan.cases if c.stopped == r))}


def counts_of_runs(runs: Iterable[CaseRun]) -> list[tuple[int, int, int]]:
    """Per case of graded runs: (passed verdicts, verdicts, graded shards)."""
    out: dict[int, list[int]] = {}
    for r in runs:
        if r.state is ShardState.GRADED and r.verdicts:
            row = out.setdefault(r.case_id, [0, 0, 0])
            row[0] += sum(v.passed for v in r.verdicts)
            row[1] += len(r.verdicts)
            row[2] += 1
    return [(a, b, c) for a, b, c in out.values()]


def counts_of_cells(cells: Mapping[tuple[int, int, str], Sequence[int]]) -> list[tuple[int, int, int]]:
    """The same from a streamed reduce's (case, assertion index, model) -> [passed, observed]: every
    graded shard of a case observed its first assertion once."""
    out: dict[int, list[int]] = {}
    for (case_id, index, _), (passed, observed) in cells.items():
        row = out.setdefault(case_id, [0, 0, 0])
        row[0] += passed
        row[1] += observed
        if index == 0:
            row[2] += observed
    return [(a, b, c) for a, b, c in out.values() if c > 0]


def reweighed(skill: SkillResult) -> SkillResult:
    """A corpus arm of a run with adaptive epochs: its pass rate with each case weighed once."""
    behavioural = weighted_rate(counts_of_runs(skill.runs))
    head = skill.headline if skill.inconclusive else headline(behavioural)
    return skill.model_copy(update={"behavioural": behavioural, "headline": head})


def planned_shards(plan: RunPlan, bundle: SkillBundle) -> int:
    """Shards one corpus arm plans per executor model: every case's own epochs."""
    return sum(plan.epochs_of(bundle.skill, case.id) for case in bundle.corpus.evals)


def headline(r: Rate) -> str:
    """``passed/graded (percent)`` with the case-weighted percent."""
    pct = 100.0 * r.rate if r.rate is not None else 0.0
    return f"{r.passed}/{r.total} ({pct:.1f}%)"
