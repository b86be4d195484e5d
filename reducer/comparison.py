"""Pair the current arm with a baseline arm and test the difference over cases. Pure.

Shards pair by (case, model, epoch). A pair where either side is not graded is dropped and
counted by the state of the side that failed: an infra failure or a blocked case is never
turned into a gain or a loss. Per (case, model) the kept epochs give each arm a pass rate;
the case's difference is the mean over models of ``current - baseline``; the test and the
interval run over cases (docs/design/statistics.md).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from fractions import Fraction

from reducer.noise import noise_floor
from reducer.paired import (
    holm,
    mcnemar_exact,
    paired_interval,
    seed_for,
    sign_flip_test,
)
from schemas.comparison import AssertionComparison, CaseDelta, PairedComparison, TestName
from schemas.report import SkillResult
from schemas.shard import GUTTED, NO_SKILL, SAME, RunPlan
from schemas.status import ShardState

Key = tuple[int, str, int]  # (case, model, epoch)
Cell = tuple[str, tuple[bool, ...]]
"""A shard as a comparison sees it: ``graded`` and its verdicts, or the state it ended in
(``no-verdicts`` for a graded shard without any) and no verdicts."""
ArmIndex = Mapping[Key, Cell]
"""One arm of one corpus: (case, model, epoch) -> cell, for every shard that ended."""

GRADED = "graded"


def cell_of(state: ShardState, passed: Sequence[bool]) -> Cell:
    """The comparison's view of a shard that ended in ``state`` with these verdicts."""
    if state is ShardState.GRADED:
        return (GRADED, tuple(passed)) if passed else ("no-verdicts", ())
    return (state.value, ())


Pairs = tuple[list[tuple[Key, tuple[bool, ...], tuple[bool, ...]]], dict[str, int]]
"""Kept (key, current verdicts, baseline verdicts) pairs in key order, and the dropped ones
counted by ``<arm>:<state>`` (and ``total``)."""


def pair_arms(new: ArmIndex, old: ArmIndex, baseline: str, model: str | None = None) -> Pairs:
    """The pairs of all models (``model`` None) or of one."""
    every, by_model = pair_all(new, old, baseline)
    return every if model is None else by_model.get(model, ([], {}))


def pair_all(new: ArmIndex, old: ArmIndex, baseline: str) -> tuple[Pairs, dict[str, Pairs]]:
    """The pairs of all models and of each, in one pass over the two arms."""
    every: Pairs = ([], defaultdict(int))
    by_model: dict[str, Pairs] = {}
    for key in sorted(new.keys() | old.keys()):
        one = by_model.get(key[1])
        if one is None:
            one = by_model[key[1]] = ([], defaultdict(int))
        a, b = new.get(key), old.get(key)
        if a is not None and b is not None and a[0] == GRADED and b[0] == GRADED:
            every[0].append((key, a[1], b[1]))
            one[0].append((key, a[1], b[1]))
            continue
        for dropped in (every[1], one[1]):
            dropped["total"] += 1
            for arm, cell in (("current", a), (baseline, b)):
                if cell is None:
                    dropped[f"{arm}:missing"] += 1
                elif cell[0] != GRADED:
                    dropped[f"{arm}:{cell[0]}"] += 1
    return (every[0], dict(every[1])), {m: (k, dict(d)) for m, (k, d) in by_model.items()}


def _share(verdicts: Sequence[tuple[bool, ...]]) -> Fraction:
    return Fraction(sum(sum(v) for v in verdicts), sum(len(v) for v in verdicts))


def case_differences(
    pairs: Sequence[tuple[Key, tuple[bool, ...], tuple[bool, ...]]],
) -> dict[int, tuple[Fraction, Fraction]]:
    """Case -> (current rate, baseline rate), each the mean over models of the kept epochs' pass rate."""
    by_unit: dict[tuple[int, str], list[tuple[tuple[bool, ...], tuple[bool, ...]]]] = defaultdict(list)
    for (case_id, model, _), a, b in pairs:
        by_unit[(case_id, model)].append((a, b))
    per_case: dict[int, list[tuple[Fraction, Fraction]]] = defaultdict(list)
    for (case_id, _), unit in sorted(by_unit.items()):
        per_case[case_id].append((_share([a for a, _ in unit]), _share([b for _, b in unit])))
    return {
        c: (sum((x for x, _ in v), Fraction(0)) / len(v), sum((y for _, y in v), Fraction(0)) / len(v))
        for c, v in sorted(per_case.items())
    }


def compare_arms(
    current: SkillResult,
    baseline: SkillResult,
    run_id: str,
    model: str | None = None,
    *,
    arms: tuple[ArmIndex, ArmIndex],
    paired: Pairs | None = None,
) -> PairedComparison:
    """The paired comparison of ``current`` against ``baseline`` (one model, or all when None):
    ``arms`` are the two arms' indexes, ``paired`` their pairs for ``model`` when already made."""
    kind = {NO_SKILL: "no-skill", SAME: "same", GUTTED: "gutted"}.get(baseline.variant, "compare")
    new, old = arms
    pairs, dropped = paired if paired is not None else pair_arms(new, old, baseline.variant, model)
    dropped = dict(dropped)
    seed = seed_for(run_id, current.skill, baseline.variant, model or "*")
    rates = case_differences(pairs)
    diffs = [x - y for x, y in rates.values()]
    common = {
        "skill": current.skill,
        "baseline": baseline.variant,
        "kind": kind,
        "model": model,
        "cases": len(rates),
        "pairs": len(pairs),
        "dropped": dropped.pop("total", 0),
        "dropped_by": dropped,
        "seed": seed,
    }
    if not pairs:
        return _unpaired(new, old, model, common)
    binary = all(v in (0, 1) for pair in rates.values() for v in pair)
    better, worse = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
    test: TestName
    if binary:
        p = mcnemar_exact(better, worse)
        test = "mcnemar-exact"
    else:
        p = sign_flip_test(diffs, seed=seed)
        test = "sign-flip-exact" if p.exact else "sign-flip-monte-carlo"
    interval = paired_interval(diffs, p)
    n = len(rates)
    return PairedComparison(
        **common,  # type: ignore[arg-type]
        baseline_rate=float(sum((y for _, y in rates.values()), Fraction(0)) / n),
        current_rate=float(sum((x for x, _ in rates.values()), Fraction(0)) / n),
        difference=float(sum(diffs, Fraction(0)) / n),
        low=interval[0] if interval else None,
        high=interval[1] if interval else None,
        test=test,
        p_two_sided=p.two_sided,
        p_drop=p.drop,
        p_uplift=p.uplift,
        better=better,
        worse=worse,
        per_case=[CaseDelta(case_id=c, baseline_rate=float(y), current_rate=float(x)) for c, (x, y) in rates.items()],
        assertions=_assertions(current, pairs, p.drop) if model is None else [],
        noise=noise_floor(pairs) if kind == "same" and model is None else None,
    )


def _assertions(
    current: SkillResult, pairs: Sequence[tuple[Key, tuple[bool, ...], tuple[bool, ...]]], overall_drop: float
) -> list[AssertionComparison]:
    """Per assertion, McNemar over its (model, epoch) pairs; Holm over the overall test and every assertion."""
    texts = {(a.case_id, a.index): a.text for a in current.assertions}
    cells: dict[tuple[int, int], list[tuple[bool, bool]]] = defaultdict(list)
    for (case_id, _, _), a, b in pairs:
        for i, (va, vb) in enumerate(zip(a, b, strict=False)):
            cells[(case_id, i)].append((va, vb))
    rows = []
    for (case_id, index), obs in sorted(cells.items()):
        better = sum(x and not y for x, y in obs)
        worse = sum(y and not x for x, y in obs)
        p = mcnemar_exact(better, worse)
        rows.append(
            {
                "case_id": case_id,
                "index": index,
                "text": texts.get((case_id, index), ""),
                "baseline_rate": sum(y for _, y in obs) / len(obs),
                "current_rate": sum(x for x, _ in obs) / len(obs),
                "pairs": len(obs),
                "better": better,
                "worse": worse,
                "p_two_sided": p.two_sided,
                "p_drop": p.drop,
            }
        )
    adjusted = holm([overall_drop] + [r["p_drop"] for r in rows])[1:]  # type: ignore[misc]
    # (reducer.gates narrows the family to the assertions that can reach alpha before it decides.)
    return [AssertionComparison(**r, p_drop_holm=h) for r, h in zip(rows, adjusted, strict=True)]  # type: ignore[arg-type]


def _unpaired(
    current: ArmIndex, baseline: ArmIndex, model: str | None, common: Mapping[str, object]
) -> PairedComparison:
    """No pair survived: the two-proportion figure is all that can be said, and it says so."""
    new = _arm_rate(current, model)
    old = _arm_rate(baseline, model)
    empty = {"better": 0, "worse": 0, "low": None, "high": None}
    if new is None or old is None:
        return PairedComparison(
            **common,  # type: ignore[arg-type]
            **empty,  # type: ignore[arg-type]
            baseline_rate=None if old is None else old[0] / old[1],
            current_rate=None if new is None else new[0] / new[1],
            difference=None,
            test="none",
            p_two_sided=None,
            p_drop=None,
            p_uplift=None,
            note="no graded shards on one side: nothing to compare",
        )
    (c1, n1), (c0, n0) = new, old
    two, drop, uplift = two_proportion(c1, n1, c0, n0)
    return PairedComparison(
        **common,  # type: ignore[arg-type]
        **empty,  # type: ignore[arg-type]
        baseline_rate=c0 / n0,
        current_rate=c1 / n1,
        difference=c1 / n1 - c0 / n0,
        test="two-proportion-z",
        p_two_sided=two,
        p_drop=drop,
        p_uplift=uplift,
        note="no (case, model, epoch) pair was graded on both sides: unpaired two-proportion figure "
        "over assertions, which treats repeated measures as independent",
    )


def _arm_rate(arm: ArmIndex, model: str | None) -> tuple[int, int] | None:
    cells = [v for (_, m, _), (label, v) in arm.items() if label == GRADED and (model is None or m == model)]
    total = sum(len(v) for v in cells)
    return (sum(sum(v) for v in cells), total) if total else None


def two_proportion(c1: int, n1: int, c0: int, n0: int) -> tuple[float, float, float]:
    """Pooled two-proportion z-test of ``c1/n1`` vs ``c0/n0``: (two-sided, drop, uplift) p-values."""
    pooled = (c1 + c0) / (n1 + n0)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n0))
    delta = c1 / n1 - c0 / n0
    if se == 0:
        return (1.0, 1.0, 1.0) if delta == 0 else (0.0, float(delta > 0), float(delta < 0))
    z = delta / se
    drop = 0.5 * math.erfc(-z / math.sqrt(2))  # P(Z <= z)
    return (math.erfc(abs(z) / math.sqrt(2)), drop, 1 - drop)


def with_unended(
    pairs: dict[tuple[str, str], dict[Key, Cell]] | None, plan: RunPlan
) -> dict[tuple[str, str], dict[Key, Cell]]:
    """Every arm's index (the fold's ``pairs``) with the planned shards that never ended filled in
    as ``queued``, in place: a copy would double the largest thing the fold holds."""
    assert pairs is not None
    queued = cell_of(ShardState.QUEUED, ())
    for s in plan.shards:
        pairs[(s.variant, s.skill)].setdefault((s.case_id, s.row, s.epoch), queued)
    if plan.shards:
        return pairs
    for (_, skill), seen in pairs.items():
        for case in plan.bundle(skill).corpus.evals:
            for row in plan.rows:
                for epoch in range(plan.epochs_of(skill, case.id)):
                    seen.setdefault((case.id, row, epoch), queued)
    return pairs


def compare_all(
    skills: Sequence[SkillResult], run_id: str, arms: Mapping[tuple[str, str], ArmIndex]
) -> list[PairedComparison]:
    """Every baseline arm of every skill against its current arm: all models, then one per model.

    ``arms`` maps (variant, skill) to its index (the reduce's cells, one per planned shard).
    """
    out = []
    for base in (s for s in skills if s.variant != "current"):
        current = next((s for s in skills if s.variant == "current" and s.skill == base.skill), None)
        if current is None:
            continue
        pair = (arms[(current.variant, current.skill)], arms[(base.variant, base.skill)])
        every, by_model = pair_all(pair[0], pair[1], base.variant)
        out.append(compare_arms(current, base, run_id, arms=pair, paired=every))
        models = sorted({m for _, m, _ in pair[0]} | {m for _, m, _ in pair[1]})
        if len(models) > 1:
            out += [compare_arms(current, base, run_id, m, arms=pair, paired=by_model.get(m, ([], {}))) for m in models]
    return out
