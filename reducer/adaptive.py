"""Adaptive epochs: after each round, which cases get more epochs and whether the gate is decided. Pure.

A look takes every graded shard's verdicts so far and, per corpus, the interval of its gated
figure at the level ``1 - alpha / looks`` (Bonferroni over the looks the rule can take at most,
so the chance that any look decides wrongly stays under ``alpha``; docs/design/statistics.md).

The gated figure is the corpus's own: its behavioural pass rate against the threshold (each
case weighted by its assertions, never by its epochs, and each case's rate the estimate that
this very rule leaves unbiased, :mod:`reducer.first_round`), or, with a gating baseline
(``--compare``, or ``no-skill`` with ``--require-uplift``), the paired difference current minus
baseline, averaged the same way. Its interval is the stratified one: the cases are the strata,
fixed (the gate judges this corpus, not a population of cases), and the only chance is in the
epochs, so the variance is ``sum(w_c^2 * s_c^2 / n_c)`` over cases (``s_c^2`` the variance of
the case's per-shard rate over its ``n_c`` graded shards). More epochs on a case shrink exactly
its term: that is what lets the rule spend them where the outcome is uncertain.

The gate is decided when the interval lies wholly on one side of its target. A case then stops
(``decided``); else it gets ``step`` more epochs while its verdicts vary between epochs in some
arm (a case whose every epoch gave the same verdicts in every arm has nothing another epoch
could change: ``stable``; the stable cases' terms are bounded together, see :func:`variances`),
until ``max_epochs``.

In a sweep over several harnesses each harness × model pair (its row, :func:`schemas.shard.row_name`)
is looked at on its own: its gated figure from its own shards, and whether a case varies in it.
A case goes on while it is uncertain in some pair (varying there, that pair's gate undecided),
and its new epochs go to every pair, so the harnesses stay paired on the same epochs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

from reducer.first_round import estimated_passes
from schemas.adaptive import FIRST_ROUND, AdaptivePlan, CaseEpochs, GateLook, StopReason

Verdicts = tuple[bool, ...]
ShardKey = tuple[str, str, int, str, int]
"""(skill, variant, case id, row, epoch): one graded shard (its row is its model outside a sweep)."""


@dataclass(frozen=True)
class Gate:
    """What decides one corpus: its pass rate against ``target``, or (``baseline`` set) the paired
    difference of current minus that baseline arm against the margin ``target``."""

    target: float
    baseline: str | None = None


@dataclass(frozen=True)
class CaseDraws:
    """One case of one arm: its per-shard pass rates, its assertions (its weight) and its rate as the
    first round would have it (:mod:`reducer.first_round`; None: the plain mean)."""

    rates: tuple[float, ...]
    assertions: int
    unbiased: float | None = None

    @property
    def estimate(self) -> float:
        """The case's rate in the gated figure: unbiased under the adaptive rule."""
        return self.mean if self.unbiased is None else self.unbiased

    @property
    def mean(self) -> float:
        return math.fsum(self.rates) / len(self.rates)

    @property
    def variance_of_mean(self) -> float:
        """The sample variance of its shard rates over their count (0 while they never varied)."""
        n = len(self.rates)
        if n < 2:
            return 0.0
        mean = self.mean
        return math.fsum((r - mean) ** 2 for r in self.rates) / (n - 1) / n


PSEUDO_RATE = 0.5
"""The pass chance of the one imagined varying case every arm is credited with (see :func:`variances`)."""


def variances(cases: Mapping[int, CaseDraws]) -> dict[int, float]:
    """Each case's variance term for the weighted mean.

    A varying case brings its own :attr:`CaseDraws.variance_of_mean`. A case that never varied
    is not thereby known: a case passing with chance p gives n identical verdicts with chance
    ``m = p^n + (1-p)^n`` (a coin, three times alike one time in four), and then its mean is off
    by ``1 - p`` or ``p``. The varying cases tell how many such look-alikes to expect among the
    stable ones (each varying case stands for ``m / (1 - m)`` of them, empirical Bayes), plus one
    imagined case of chance one half, so a corpus where nothing varied is not taken as certain.
    Each stable case gets the expected squared error of a look-alike, times the chance it is one.
    """
    out = {c: d.variance_of_mean for c, d in cases.items() if len(set(d.rates)) > 1}
    stable = [c for c in cases if c not in out]
    if not stable:
        return out
    n = max(len(cases[c].rates) for c in stable)
    looks_alike, squared = 0.0, 0.0
    for p in [cases[c].mean for c in out] + [PSEUDO_RATE]:
        alike = p**n + (1 - p) ** n
        share = alike / (1 - alike) if alike < 1 else 0.0
        error = (p**n * (1 - p) ** 2 + (1 - p) ** n * p**2) / alike if alike > 0 else 0.0
        looks_alike += share
        squared += share * error
    chance = min(1.0, looks_alike / len(stable))
    term = chance * (squared / looks_alike if looks_alike > 0 else 0.0)
    out.update(dict.fromkeys(stable, term))
    return out


def case_draws(
    observed: Mapping[ShardKey, Verdicts],
    skill: str,
    variant: str,
    row: str | None = None,
    first_round: int = FIRST_ROUND,
) -> dict[int, CaseDraws]:
    """Case -> its graded shards' pass rates in one corpus arm (every model's and epoch's, or one row's)."""
    rates: dict[int, list[float]] = {}
    sizes: dict[int, int] = {}
    series: dict[int, dict[tuple[str, int], list[int]]] = {}
    for (s, v, case_id, r, _), verdicts in sorted(observed.items()):
        if s == skill and v == variant and verdicts and row in (None, r):
            rates.setdefault(case_id, []).append(sum(verdicts) / len(verdicts))
            sizes[case_id] = max(sizes.get(case_id, 0), len(verdicts))
            for index, passed in enumerate(verdicts):
                cell = series.setdefault(case_id, {}).setdefault((r, index), [0, 0])
                cell[0] += passed
                cell[1] += 1
    out = {}
    for c, shard_rates in rates.items():
        judged = sum(n for _, n in series[c].values())
        passes = estimated_passes([(p, n) for p, n in series[c].values()], first_round)
        out[c] = CaseDraws(tuple(shard_rates), sizes[c], passes / judged)
    return out


def stratified(terms: Sequence[tuple[float, float, float]], level: float) -> tuple[float, float, float] | None:
    """(estimate, low, high) of ``sum(w * mean) / sum(w)`` over (weight, mean, variance of mean)
    terms, a normal interval at ``level``; None without any term."""
    total = math.fsum(w for w, _, _ in terms)
    if total <= 0:
        return None
    estimate = math.fsum(w * m for w, m, _ in terms) / total
    se = math.sqrt(math.fsum(w * w * v for w, _, v in terms)) / total
    half = NormalDist().inv_cdf(1 - (1 - level) / 2) * se
    return estimate, estimate - half, estimate + half


def pass_rate_look(cases: Mapping[int, CaseDraws], gate: Gate, level: float, skill: str) -> GateLook:
    """The pass rate's stratified interval at ``level`` against the threshold."""
    shares = variances(cases)
    found = stratified([(d.assertions, d.estimate, shares[c]) for c, d in cases.items()], level)
    look = GateLook(skill=skill, figure="pass-rate", target=gate.target, level=level)
    if found is None:
        return look
    estimate, low, high = found[0], max(0.0, found[1]), min(1.0, found[2])
    decided = _side(low, high, gate.target, strict_above=False)
    return look.model_copy(update={"estimate": estimate, "low": low, "high": high, "decided": decided})


def paired_look(
    current: Mapping[int, CaseDraws], baseline: Mapping[int, CaseDraws], gate: Gate, level: float, skill: str
) -> GateLook:
    """The paired difference's stratified interval over the cases both arms graded, at ``level``."""
    both = [c for c in current if c in baseline]
    cur_var = variances({c: current[c] for c in both})
    base_var = variances({c: baseline[c] for c in both})
    terms = [
        (current[c].assertions, current[c].estimate - baseline[c].estimate, cur_var[c] + base_var[c]) for c in both
    ]
    found = stratified(terms, level)
    look = GateLook(skill=skill, figure="paired-difference", target=gate.target, low=-1.0, high=1.0, level=level)
    if found is None:
        return look
    estimate, low, high = found[0], max(-1.0, found[1]), min(1.0, found[2])
    decided = _side(low, high, gate.target, strict_above=True)
    return look.model_copy(update={"estimate": estimate, "low": low, "high": high, "decided": decided})


def _side(low: float, high: float, target: float, *, strict_above: bool) -> Literal["", "above", "below"]:
    # The pass-rate gate passes at rate >= threshold; the paired gate needs the margin exceeded.
    above = low > target if strict_above else low >= target
    return "above" if above else "below" if high < target else ""


def varies(observed: Mapping[ShardKey, Verdicts], skill: str, case_id: int, row: str | None = None) -> bool | None:
    """Whether the case's verdicts differ between two epochs of one arm and model (of ``row`` when
    given); None when no shard of it was graded."""
    seen: dict[tuple[str, str], set[Verdicts]] = {}
    for (s, variant, c, r, _), verdicts in observed.items():
        if s == skill and c == case_id and row in (None, r):
            seen.setdefault((variant, r), set()).add(verdicts)
    if not seen:
        return None
    return any(len(kinds) > 1 for kinds in seen.values())


def look_at(
    plan: AdaptivePlan,
    gates: Mapping[str, Gate],
    observed: Mapping[ShardKey, Verdicts],
    variants: Sequence[str],
    rows: Sequence[str] = (),
) -> list[GateLook]:
    """Every corpus's gated figure at this look's level; with ``rows`` (a sweep), one per corpus and row."""
    looks = []
    looked: Sequence[str | None] = rows or [None]
    for skill, gate in gates.items():
        for row in looked:
            current = case_draws(observed, skill, variants[0], row, plan.first_round)
            if gate.baseline is None:
                look = pass_rate_look(current, gate, plan.level, skill)
            else:
                base = case_draws(observed, skill, gate.baseline, row, plan.first_round)
                look = paired_look(current, base, gate, plan.level, skill)
            looks.append(look if row is None else look.model_copy(update={"row": row}))
    return looks


def next_round(
    plan: AdaptivePlan,
    cases: Sequence[tuple[str, int]],
    gates: Mapping[str, Gate],
    observed: Mapping[ShardKey, Verdicts],
    variants: Sequence[str],
    *,
    out_of_budget: bool = False,
    rows: Sequence[str] = (),
) -> AdaptivePlan:
    """The plan after one more look: each case's epochs for the next round, or why it stopped.

    ``cases``: every (corpus, case id) of the run; ``variants``: the arms, current first;
    ``out_of_budget``: the cost or token cap refused a call, so no case gets more; ``rows``: a
    sweep's harness × model rows, each looked at on its own (empty: the models pooled).
    """
    looks = look_at(plan, gates, observed, variants, rows)
    looked: Sequence[str | None] = rows or [None]
    decided = {(g.skill, g.row) for g in looks if g.decided}
    out = []
    for skill, case_id in cases:
        epochs = plan.epochs_of(skill, case_id)
        before = next((c for c in plan.cases if (c.skill, c.case_id) == (skill, case_id)), None)
        if before is not None and before.stopped:
            out.append(before)
            continue
        vary = {row: varies(observed, skill, case_id, row) for row in looked}
        stop = _first_stop(
            _stop((skill, row) in decided, vary[row], epochs, plan.max_epochs, out_of_budget) for row in looked
        )
        more = 0 if stop else min(plan.step, plan.max_epochs - epochs)
        out.append(CaseEpochs(skill=skill, case_id=case_id, epochs=epochs + more, stopped=stop))
    return plan.model_copy(update={"looks_done": plan.looks_done + 1, "cases": tuple(out), "gates": tuple(looks)})


def _stop(decided: bool, vary: bool | None, epochs: int, max_epochs: int, out_of_budget: bool) -> StopReason:
    # A case's own reason first: a stable case would have stopped whatever the gate said.
    if vary is None:
        return "not-graded"
    if not vary:
        return "stable"
    if decided:
        return "decided"
    if epochs >= max_epochs:
        return "max-epochs"
    return "max-cost" if out_of_budget else ""


STOP_ORDER: tuple[StopReason, ...] = ("max-cost", "max-epochs", "decided", "stable", "not-graded")
"""Which row's reason a case of a sweep is said to have stopped for: a row where it varied says
more than one where it was stable, and one where it was graded more than one where it was not."""


def _first_stop(reasons: Iterable[StopReason]) -> StopReason:
    """A case's stop over its rows: none while some row may still use an epoch."""
    found = set(reasons)
    if "" in found:
        return ""
    return next(r for r in STOP_ORDER if r in found)


def finished(plan: AdaptivePlan) -> bool:
    """Whether no case gets another epoch."""
    return bool(plan.cases) and all(c.stopped for c in plan.cases)


def stop_counts(plan: AdaptivePlan) -> dict[str, int]:
    """Cases per stop reason, in a fixed order."""
    order = ("decided", "stable", "max-epochs", "max-cost", "not-graded", "")
    return {r or "running": n for r in order if (n := sum(1 for c in plan.cases if c.stopped == r))}
