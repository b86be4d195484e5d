"""Run planning: expand skills x cases x models x epochs x variants into shards. Pure."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from reducer.paired import UPLIFT_TEST_ALPHA
from reducer.power import DEFAULT_ALPHA, DEFAULT_DIFFERENCE, power_note
from schemas.adaptive import AdaptivePlan
from schemas.comparison import NoiseRecord
from schemas.errors import ConfigError
from schemas.shard import (
    CURRENT,
    GUTTED,
    NO_SKILL,
    SAME,
    RunPlan,
    Shard,
    SkillBundle,
    baseline_variant,
)
from schemas.status import SandboxMode
from schemas.summary import CorpusPlan, HarnessPair, PlanSummary, PlanTotals, SkippedCorpus


def new_run_id(now: datetime | None = None, entropy: bytes | None = None) -> str:
    """``YYYYMMDD-HHMMSS-<8 hex>``: made once per run and reused for every file of it."""
    now = now or datetime.now(UTC)
    entropy = entropy if entropy is not None else os.urandom(4)
    return f"{now:%Y%m%d-%H%M%S}-{entropy.hex()}"


def plan_run(
    run_id: str,
    bundles: Sequence[SkillBundle],
    models: Sequence[str],
    *,
    judges: Sequence[str] = (),
    epochs: int = 1,
    variants: Sequence[str] = (CURRENT,),
    sandbox: SandboxMode = SandboxMode.BWRAP,
    adaptive: AdaptivePlan | None = None,
    harnesses: Mapping[str, Sequence[str]] | None = None,
) -> RunPlan:
    """Every shard of the run in a deterministic order (variant, skill, case, harness, model, epoch).

    ``adaptive`` (``--epochs auto``): only the first round's epochs are planned; later rounds add theirs.
    ``harnesses`` (a sweep over several executors): each executor -> the models it runs
    (:func:`producer.plan.harnesses.pair_harnesses`); None or empty: one executor runs every model,
    and the shards are what they were before the harness was a dimension.
    """
    epochs = adaptive.first_round if adaptive is not None else epochs
    if epochs < 1:
        raise ValueError("epochs must be at least 1")
    if not models:
        raise ValueError("at least one executor model is required")
    pairs: list[tuple[str | None, str]] = (
        [(h, m) for h, ms in harnesses.items() for m in ms] if harnesses else [(None, m) for m in models]
    )
    shards = [
        Shard.planned(run_id, variant, b.skill, case.id, model, epoch, harness)
        for variant in variants
        for b in bundles
        for case in b.corpus.evals
        for harness, model in pairs
        for epoch in range(epochs)
    ]
    refuse_repeated_shards(shards)
    return RunPlan(
        run_id=run_id,
        bundles=tuple(bundles),
        models=tuple(models),
        judges=tuple(judges),
        epochs=epochs,
        variants=tuple(variants),
        shards=tuple(shards),
        sandbox=sandbox,
        adaptive=adaptive,
        harnesses={h: tuple(ms) for h, ms in (harnesses or {}).items()},
    )


def refuse_repeated_shards(shards: Sequence[Shard]) -> None:
    """Raise ``ConfigError`` naming the first shard planned twice (a skill, arm, model or executor
    repeated): results are counted per shard id, so a run would wait forever for the second one."""
    seen: set[str] = set()
    for s in shards:
        if s.shard_id in seen:
            where = f"arm {s.variant}, skill {s.skill}, case {s.case_id}, model {s.model}, epoch {s.epoch}"
            under = f", executor {s.harness}" if s.harness is not None else ""
            raise ConfigError(
                f"the plan holds shard {s.shard_id} ({where}{under}) more than once: "
                "a skill, model or executor was given twice; nothing was enqueued"
            )
        seen.add(s.shard_id)


def arm_variants(compare: str | None = None, baseline: str | None = None) -> list[str]:
    """The arms of a run: ``current``, then ``baseline@<ref>`` (``--compare``), then ``no-skill`` or
    ``same`` or ``gutted`` (``--baseline``)."""
    variants = [CURRENT]
    if compare:
        variants.append(baseline_variant(compare))
    if baseline in (NO_SKILL, SAME, GUTTED):
        variants.append(baseline)
    return variants


def power_lines(
    plan: RunPlan,
    observed: Mapping[str, NoiseRecord] | None = None,
    regression_alpha: float | None = None,
    require_uplift: float | None = None,
) -> list[str]:
    """What a compare or baseline run can detect (empty for a run with one arm), per corpus size,
    with the gate's own one-sided test (``regression_alpha``: ``--regression-alpha``;
    ``require_uplift``: ``--require-uplift``, without which no gate reads the uplift test)."""
    if len(plan.variants) < 2 or not plan.bundles:
        return []
    return _power(plan, observed or {}, regression_alpha, require_uplift)


def gate_test(
    variants: Sequence[str], regression_alpha: float | None, require_uplift: float | None = None
) -> tuple[float, str]:
    """The one-sided level of the test a compared run is gated by, and whose test it is (a run
    against no-skill without ``--require-uplift`` has no gate: the uplift test is named as such)."""
    if any(v not in (CURRENT, NO_SKILL, SAME, GUTTED) for v in variants):  # baseline@REF
        if regression_alpha is not None:
            return regression_alpha, "the regression gate's (--regression-alpha)"
        return DEFAULT_ALPHA, "a regression"  # without --regression-alpha any drop fails
    if NO_SKILL in variants:
        return UPLIFT_TEST_ALPHA, "the uplift gate's (--require-uplift)" if require_uplift is not None else "an uplift"
    if GUTTED in variants:
        return UPLIFT_TEST_ALPHA, "the sensitivity check's"
    return DEFAULT_ALPHA, "a regression"


def _power(
    plan: RunPlan, observed: Mapping[str, NoiseRecord], regression_alpha: float | None, require_uplift: float | None
) -> list[str]:
    """The power note of the smallest corpus, with the discordance its last noise floor observed
    (``observed``: skill -> record) or, without one, the assumed default."""
    smallest = min(plan.bundles, key=lambda b: len(b.corpus.evals))
    alpha, gate = gate_test(plan.variants, regression_alpha, require_uplift)
    record = observed.get(smallest.skill)
    if record is None:
        return power_note(len(smallest.corpus.evals), plan.epochs, alpha=alpha, gate=gate).lines()
    # Identical arms flip both ways at the noise floor; a difference adds one-way discordant pairs on top.
    discordance = min(1.0, record.discordance + DEFAULT_DIFFERENCE)
    return power_note(
        len(smallest.corpus.evals),
        plan.epochs,
        discordance=discordance,
        observed_in=record.run_id,
        alpha=alpha,
        gate=gate,
    ).lines()


def plan_summary(
    plan: RunPlan,
    skipped: Sequence[SkippedCorpus] = (),
    observed: Mapping[str, NoiseRecord] | None = None,
    regression_alpha: float | None = None,
    require_uplift: float | None = None,
) -> PlanSummary:
    """The plan at a glance: per corpus cases and assertions, totals, shard count, corpora left out."""
    per_skill = Counter(s.skill for s in plan.shards)  # an arm a guard dropped for one skill counts no shards
    return PlanSummary(
        run_id=plan.run_id,
        corpora=[
            CorpusPlan(
                skill=b.skill,
                corpus=b.corpus_file,
                bundle_key=b.bundle_key,
                cases=len(b.corpus.evals),
                assertions=b.corpus.assertion_count,
                shards=per_skill[b.skill],
            )
            for b in plan.bundles
        ],
        models=list(plan.models),
        judges=list(plan.judges),
        epochs=plan.epochs,
        variants=list(plan.variants),
        totals=PlanTotals(
            corpora=len(plan.bundles),
            cases=plan.case_count,
            assertions=plan.assertion_count,
            shards=len(plan.shards),
        ),
        skipped=list(skipped),
        power=power_lines(plan, observed, regression_alpha, require_uplift),
        adaptive=plan.adaptive,
        max_shards=len(plan.shards) * plan.adaptive.max_epochs // plan.epochs if plan.adaptive else None,
        pairs=harness_pairs(plan),
    )


def harness_pairs(plan: RunPlan) -> list[HarnessPair]:
    """A sweep's harness × model pairs in plan order, each with its shards (none for one executor)."""
    counts = Counter((s.harness, s.model) for s in plan.shards if s.harness is not None)
    return [HarnessPair(harness=h, model=m, shards=counts[(h, m)]) for h, ms in plan.harnesses.items() for m in ms]
