"""A sweep over several harnesses: the harness × assertion matrix and the harnesses paired. Pure.

In a sweep (``--executor`` given more than once) the fold keeps every figure per row, a
harness × model pair (:func:`schemas.shard.row_name`). Two figures are the harness's own:

- **The harness × assertion matrix.** Each assertion's pass rate per harness, its models'
  observations pooled: which instruction of the skill works in which agent.
- **Harnesses paired on the same cases.** Each two harnesses (in the order given) go through
  the one paired comparison of :mod:`reducer.comparison` (McNemar or the sign-flip test over
  cases, the score interval, per assertion McNemar with Holm). The unit is a model both
  harnesses run, so the difference is the harness's alone; two harnesses that share no model
  pair each of one's models with each of the other's, and the comparison says the difference
  is then the harness's and its model's together. They describe: no gate reads them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations

from reducer.comparison import ArmIndex, Cell, Key, compare_arms
from reducer.scoring import rate
from schemas.comparison import PairedComparison
from schemas.report import Rate, SkillResult
from schemas.shard import CURRENT, RunPlan, row_name

MIXED_NOTE = (
    "{a} and {b} run no model in common: each of one's models is paired with each of the other's, "
    "so the difference is the harness's and its model's together"
)


def harness_rates(plan: RunPlan, counts: Mapping[str, tuple[int, int]]) -> dict[str, Rate]:
    """One assertion's (passed, observed) per row pooled per harness (empty outside a sweep)."""
    out: dict[str, Rate] = {}
    for harness, models in plan.harnesses.items():
        seen = [counts[row_name(m, harness)] for m in models if row_name(m, harness) in counts]
        if seen:
            out[harness] = rate(sum(c for c, _ in seen), sum(n for _, n in seen))
    return out


def harness_comparisons(
    plan: RunPlan, skills: Sequence[SkillResult], arms: Mapping[tuple[str, str], ArmIndex]
) -> list[PairedComparison]:
    """Every two harnesses of the sweep on each corpus's current arm (``arms``: the fold's cells of
    every planned shard, keyed by (case, row, epoch))."""
    if len(plan.harnesses) < 2:
        return []
    out = []
    for skill in (s for s in skills if s.variant == CURRENT):
        index = arms.get((CURRENT, skill.skill), {})
        for a, b in combinations(plan.harnesses, 2):
            out.append(_pair(plan, skill, index, a, b))
    return out


def _pair(plan: RunPlan, skill: SkillResult, index: ArmIndex, a: str, b: str) -> PairedComparison:
    """``b`` against ``a`` on one corpus: a shared model is the unit, else every model pair is."""
    shared = [m for m in plan.harnesses[a] if m in plan.harnesses[b]]
    units = [(m, m) for m in shared] or [(ma, mb) for ma in plan.harnesses[a] for mb in plan.harnesses[b]]
    old: dict[Key, Cell] = {}
    new: dict[Key, Cell] = {}
    for ma, mb in units:
        unit = ma if ma == mb else f"{ma} | {mb}"
        for (case_id, row, epoch), cell in index.items():
            if row == row_name(ma, a):
                old[(case_id, unit, epoch)] = cell
            if row == row_name(mb, b):
                new[(case_id, unit, epoch)] = cell
    base = skill.model_copy(update={"variant": a})
    compared = compare_arms(skill, base, plan.run_id, arms=(new, old))
    dropped = {key.replace("current:", f"{b}:", 1): n for key, n in compared.dropped_by.items()}
    note = compared.note if shared else "; ".join(x for x in (MIXED_NOTE.format(a=a, b=b), compared.note) if x)
    return compared.model_copy(update={"kind": "harness", "harness": b, "dropped_by": dropped, "note": note})
